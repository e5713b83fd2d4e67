//! The detach of a deleted CinderBackend end to end: the backend reports Ready=False/Detaching;
//! the volume Deployment is gone before the service-remove Job exists (checked continuously
//! while the detach runs, and against the Job run record); after success the finalizer is
//! released and ServiceRemoved emitted; a failing Job gives ServiceRemoveJobFailed naming the
//! Job and keeps the finalizer, and deleting that Job retries. With pods that take seconds to
//! terminate, the Job starts only once no pod of the volume Deployment is left.

use cinder_e2e::database_helpers::*;
use cinder_e2e::workload_helpers::*;
use cinder_e2e::*;
use cinder_operator::crd::CinderBackend;
use cinder_sim::controllers::config::PodOutcome;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use kube::Api;
use kube::api::{DeleteParams, PropagationPolicy};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Watches (by polling) that the Job `job` never exists while Deployment `deployment` does.
fn watch_order(
    client: kube::Client,
    deployment: String,
    job: String,
) -> (
    Arc<AtomicBool>,
    Arc<AtomicBool>,
    tokio::task::JoinHandle<()>,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let both = Arc::new(AtomicBool::new(false));
    let (s, b) = (stop.clone(), both.clone());
    let task = tokio::spawn(async move {
        let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
        let deployments: Api<Deployment> = Api::namespaced(client, NS);
        while !s.load(Ordering::SeqCst) {
            let job_exists = matches!(jobs.get_opt(&job).await, Ok(Some(_)));
            if job_exists && matches!(deployments.get_opt(&deployment).await, Ok(Some(_))) {
                b.store(true, Ordering::SeqCst);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    (stop, both, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detach_deletes_the_deployment_then_removes_the_service_and_releases() {
    let h = Harness::start().await.unwrap();
    cinder_with_nfs(&h.client, "dt", "nfs1", serde_json::json!({}))
        .await
        .unwrap();
    wait_cinder_condition(
        &h.client,
        "dt",
        "VolumeServicesReady",
        "True",
        "AllVolumeServicesReady",
    )
    .await
    .unwrap();
    assert!(deployment(&h.client, "dt-volume-nfs1").await.is_some());
    service_remove_rule(&h.cluster, PodOutcome::success(), Duration::from_secs(3)).unwrap();
    let (stop, both, task) = watch_order(
        h.client.clone(),
        "dt-volume-nfs1".into(),
        "dt-nfs1-service-remove".into(),
    );

    delete_backend(&h.client, "nfs1").await.unwrap();
    wait_satellite_condition::<CinderBackend>(&h.client, "nfs1", "Ready", "False", "Detaching")
        .await
        .unwrap();
    wait_backend_gone(&h.client, "nfs1").await.unwrap();
    stop.store(true, Ordering::SeqCst);
    task.await.unwrap();
    assert!(
        !both.load(Ordering::SeqCst),
        "the service-remove Job existed while the volume Deployment did"
    );
    assert!(deployment(&h.client, "dt-volume-nfs1").await.is_none());

    // The run record: the Job ran once and succeeded.
    let runs: Vec<_> = h
        .cluster
        .controllers()
        .unwrap()
        .job_runs()
        .into_iter()
        .filter(|r| r.name == "dt-nfs1-service-remove")
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let command = h
        .api::<Job>()
        .get("dt-nfs1-service-remove")
        .await
        .unwrap()
        .spec
        .unwrap()
        .template
        .spec
        .unwrap()
        .containers[0]
        .command
        .clone()
        .unwrap()
        .join(" ");
    assert!(
        command == "cinder-manage service remove cinder-volume dt@nfs1",
        "{command}"
    );

    let events = eventually("a ServiceRemoved event", || async {
        let e = cinder_events(&h.client, "dt", "ServiceRemoved").await;
        (!e.is_empty()).then_some(e)
    })
    .await
    .unwrap();
    assert!(
        events[0]
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("nfs1")
    );
    wait_status(&h.client, "dt", "no volume services", |s| {
        s.volume_services.is_empty()
    })
    .await
    .unwrap();
    wait_cinder_condition(
        &h.client,
        "dt",
        "VolumeServicesReady",
        "False",
        "NoBackends",
    )
    .await
    .unwrap();
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_service_remove_keeps_the_finalizer_until_the_job_is_deleted() {
    let h = Harness::start().await.unwrap();
    cinder_with_nfs(&h.client, "df", "nfs1", serde_json::json!({}))
        .await
        .unwrap();
    wait_cinder_condition(
        &h.client,
        "df",
        "VolumeServicesReady",
        "True",
        "AllVolumeServicesReady",
    )
    .await
    .unwrap();
    service_remove_rule(
        &h.cluster,
        PodOutcome::exit(1, ""),
        Duration::from_millis(200),
    )
    .unwrap();

    delete_backend(&h.client, "nfs1").await.unwrap();
    let failed = wait_cinder_condition(
        &h.client,
        "df",
        "VolumeServicesReady",
        "False",
        "ServiceRemoveJobFailed",
    )
    .await
    .unwrap();
    assert!(
        failed.message.contains("df-nfs1-service-remove"),
        "{}",
        failed.message
    );
    assert_eq!(backend_finalized(&h.client, "nfs1").await, Some(true));
    assert!(
        cinder_events(&h.client, "df", "ServiceRemoved")
            .await
            .is_empty()
    );

    // The cause understood: the next run succeeds once the failed Job is deleted.
    service_remove_rule(
        &h.cluster,
        PodOutcome::success(),
        Duration::from_millis(200),
    )
    .unwrap();
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..Default::default()
    };
    h.api::<Job>()
        .delete("df-nfs1-service-remove", &params)
        .await
        .unwrap();
    wait_backend_gone(&h.client, "nfs1").await.unwrap();
    let events = eventually("a ServiceRemoved event", || async {
        let e = cinder_events(&h.client, "df", "ServiceRemoved").await;
        (!e.is_empty()).then_some(e)
    })
    .await
    .unwrap();
    assert_eq!(events.len(), 1);
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_remove_waits_for_the_last_volume_pod() {
    // One second of grace lasts 200 ms: a pod's default 30 s grace takes 6 s, well past the
    // 10 s detach poll's first look after the Deployment is gone.
    let mut config = HarnessConfig::default();
    config.cluster.controllers.grace_second = Duration::from_millis(200);
    let h = Harness::start_with(config).await.unwrap();
    cinder_with_nfs(&h.client, "dp", "nfs1", serde_json::json!({}))
        .await
        .unwrap();
    wait_cinder_condition(
        &h.client,
        "dp",
        "VolumeServicesReady",
        "True",
        "AllVolumeServicesReady",
    )
    .await
    .unwrap();
    let pods: Api<k8s_openapi::api::core::v1::Pod> = h.api();
    let volume_pods = kube::api::ListParams::default()
        .labels(
        "app.kubernetes.io/instance=dp,app.kubernetes.io/component=volume,cinder.openstack.c5c3.io/backend=nfs1",
    );
    eventually("a volume pod runs", || async {
        (!pods.list(&volume_pods).await.ok()?.items.is_empty()).then_some(())
    })
    .await
    .unwrap();
    let jobs: Api<Job> = h.api();
    delete_backend(&h.client, "nfs1").await.unwrap();
    // At the first sight of the Job, no volume pod may be left (pods never come back).
    let left = eventually("the service-remove Job", || async {
        jobs.get_opt("dp-nfs1-service-remove").await.ok()??;
        Some(pods.list(&volume_pods).await.ok()?.items.len())
    })
    .await
    .unwrap();
    assert_eq!(
        left, 0,
        "the service-remove Job started while a volume pod was left"
    );
    wait_backend_gone(&h.client, "nfs1").await.unwrap();
    h.stop().await.unwrap();
}
