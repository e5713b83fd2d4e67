//! A backend that is only not projected for a while keeps its running volume service: its key
//! Secret is deleted and recreated, BackendsReady goes False (WaitingForBackends) and back, and
//! the simulator's write record shows no delete of its Deployment, and its Ceph egress stays in
//! the NetworkPolicy. Only a backend that left loses it; a backend recreated under the name of
//! a detached one is detached again.

use cinder_e2e::database_helpers::*;
use cinder_e2e::workload_helpers::*;
use cinder_e2e::*;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::DeleteParams;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_whose_key_secret_disappears_keeps_its_volume_service() {
    let mut config = HarnessConfig::default();
    config.cluster.record_writes = true;
    let h = Harness::start_with(config).await.unwrap();
    database_environment(&h.client, "hiccup").await.unwrap();
    create_cinder(
        &h.client,
        "hiccup",
        serde_json::json!({"networkPolicy": {"ingress": [{"ports": [{"port": 8776, "protocol": "TCP"}]}]}}),
    )
    .await
    .unwrap();
    put_secret(&h.client, "hiccup-key", &[("key", "AQBfirstkey==")])
        .await
        .unwrap();
    create_rbd_backend(&h.client, "pool1", "hiccup", "hiccup-key")
        .await
        .unwrap();
    wait_cinder_condition(
        &h.client,
        "hiccup",
        "VolumeServicesReady",
        "True",
        "AllVolumeServicesReady",
    )
    .await
    .unwrap();
    let before = deployment(&h.client, "hiccup-volume-pool1").await.unwrap();

    h.api::<Secret>()
        .delete("hiccup-key", &DeleteParams::default())
        .await
        .unwrap();
    let waiting = wait_cinder_condition(
        &h.client,
        "hiccup",
        "BackendsReady",
        "False",
        "WaitingForBackends",
    )
    .await
    .unwrap();
    assert!(waiting.message.contains("pool1"), "{}", waiting.message);
    // Several passes run while the key is missing (each requeues within seconds).
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    let during = deployment(&h.client, "hiccup-volume-pool1").await;
    assert_eq!(
        during.and_then(|d| d.metadata.uid),
        before.metadata.uid,
        "the volume Deployment was replaced or deleted while its key was missing"
    );
    // Its egress to the Ceph monitors stays in the NetworkPolicy meanwhile.
    let policy = h.api::<NetworkPolicy>().get("hiccup").await.unwrap();
    let egress = policy.spec.and_then(|s| s.egress).unwrap_or_default();
    assert!(
        egress.iter().any(|r| r
            .ports
            .iter()
            .flatten()
            .any(|p| p.port == Some(IntOrString::Int(6789)))),
        "the Ceph egress left the policy while the key was missing: {egress:?}"
    );
    let status = cinder_status(&h.client, "hiccup").await;
    assert!(
        status.volume_services.iter().any(|v| v.backend == "pool1"),
        "{:?}",
        status.volume_services
    );

    put_secret(&h.client, "hiccup-key", &[("key", "AQBfirstkey==")])
        .await
        .unwrap();
    wait_cinder_condition(
        &h.client,
        "hiccup",
        "BackendsReady",
        "True",
        "AllBackendsProjected",
    )
    .await
    .unwrap();
    wait_cinder_condition(
        &h.client,
        "hiccup",
        "VolumeServicesReady",
        "True",
        "AllVolumeServicesReady",
    )
    .await
    .unwrap();
    let after = deployment(&h.client, "hiccup-volume-pool1").await.unwrap();
    assert_eq!(after.metadata.uid, before.metadata.uid);
    let deletes: Vec<_> = h
        .cluster
        .writes()
        .into_iter()
        .filter(|w| w.verb == "delete" && w.resource == "deployments")
        .filter(|w| w.name == "hiccup-volume-pool1")
        .collect();
    assert!(deletes.is_empty(), "{deletes:?}");
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_recreated_under_the_same_name_is_detached_again() {
    let h = Harness::start().await.unwrap();
    quick_schema_jobs(&h.cluster).unwrap();
    service_remove_rule(
        &h.cluster,
        cinder_sim::controllers::config::PodOutcome::success(),
        std::time::Duration::from_millis(200),
    )
    .unwrap();
    cinder_with_nfs(&h.client, "reuse", "nfs1", serde_json::json!({}))
        .await
        .unwrap();
    for round in 1..=2 {
        wait_cinder_condition(
            &h.client,
            "reuse",
            "VolumeServicesReady",
            "True",
            "AllVolumeServicesReady",
        )
        .await
        .unwrap();
        delete_backend(&h.client, "nfs1").await.unwrap();
        wait_backend_gone(&h.client, "nfs1").await.unwrap();
        let runs = h
            .cluster
            .controllers()
            .unwrap()
            .job_runs()
            .into_iter()
            .filter(|r| r.name == "reuse-nfs1-service-remove")
            .count();
        assert_eq!(runs, round, "service-remove runs after detach {round}");
        if round == 1 {
            create_nfs_backend(&h.client, "nfs1", "reuse")
                .await
                .unwrap();
        }
    }
    h.stop().await.unwrap();
}
