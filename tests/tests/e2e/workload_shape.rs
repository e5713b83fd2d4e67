//! What the workload containers carry and who owns the API's count: every container of the
//! API, scheduler, volume and backup Deployments has readiness and liveness probes fitting its
//! service and CPU / memory requests (the spec's when given); an HPA-owned API Deployment keeps
//! the HPA's replica count through a roll-out; under an HPA the API's VPA controls memory only.

use cinder_e2e::group_helpers::*;
use cinder_e2e::workload_helpers::*;
use cinder_e2e::*;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{DynamicObject, Patch, PatchParams};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_workload_container_has_probes_and_requests() {
    let h = Harness::start().await.unwrap();
    group_cinder(
        &h.client,
        "shape",
        serde_json::json!({"scheduler": {"resources": {"requests": {"cpu": "300m", "memory": "300Mi"}}}}),
    )
    .await
    .unwrap();
    wait_cinder_condition(
        &h.client,
        "shape",
        "VolumeServicesReady",
        "True",
        "AllVolumeServicesReady",
    )
    .await
    .unwrap();
    wait_cinder_condition(
        &h.client,
        "shape",
        "DeploymentReady",
        "True",
        "DeploymentReady",
    )
    .await
    .unwrap();
    for name in ["shape-api", "shape-scheduler", "shape-volume-shape-nfs"] {
        let d = deployment(&h.client, name).await.unwrap();
        let pod = d.spec.template.spec.unwrap();
        for c in &pod.containers {
            assert!(c.readiness_probe.is_some(), "{name}/{}: readiness", c.name);
            assert!(c.liveness_probe.is_some(), "{name}/{}: liveness", c.name);
            let requests = c
                .resources
                .as_ref()
                .and_then(|r| r.requests.clone())
                .unwrap_or_default();
            assert!(
                requests.contains_key("cpu") && requests.contains_key("memory"),
                "{name}/{}: requests {requests:?}",
                c.name
            );
        }
    }
    let api = deployment(&h.client, "shape-api").await.unwrap();
    let container = &api.spec.template.spec.unwrap().containers[0];
    let get = container
        .readiness_probe
        .as_ref()
        .and_then(|p| p.http_get.clone())
        .unwrap();
    assert_eq!(get.path.as_deref(), Some("/healthcheck"));
    let scheduler = deployment(&h.client, "shape-scheduler").await.unwrap();
    let container = &scheduler.spec.template.spec.unwrap().containers[0];
    let requests = container.resources.clone().unwrap().requests.unwrap();
    assert_eq!(requests["cpu"].0, "300m");
    let probe = container.liveness_probe.as_ref().unwrap();
    let command = probe
        .exec
        .as_ref()
        .unwrap()
        .command
        .clone()
        .unwrap()
        .join(" ");
    assert!(command.contains("cinder-scheduler"), "{command}");
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hpa_owned_deployment_keeps_the_hpa_count_through_a_roll_out() {
    let h = Harness::start().await.unwrap();
    group_cinder(
        &h.client,
        "owned",
        serde_json::json!({
            "autoscaling": {"minReplicas": 2, "maxReplicas": 10},
            "verticalAutoscaling": {}
        }),
    )
    .await
    .unwrap();
    wait_cinder_condition(
        &h.client,
        "owned",
        "DeploymentReady",
        "True",
        "DeploymentReady",
    )
    .await
    .unwrap();

    // The HPA's decision, written as the HPA controller writes it.
    let deployments = h.api::<Deployment>();
    deployments
        .patch(
            "owned-api",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"replicas": 7}})),
        )
        .await
        .unwrap();
    let before = template_annotations(&h.client, "owned-api").await;

    // A roll-out: the service-user password rotates, the API's pod template changes.
    rotate_service_user_password(&h.client, "rotated-for-the-roll-out")
        .await
        .unwrap();
    eventually("the API rolled out", || async {
        let now = template_annotations(&h.client, "owned-api").await;
        (now != before).then_some(())
    })
    .await
    .unwrap();
    wait_cinder_condition(
        &h.client,
        "owned",
        "DeploymentReady",
        "True",
        "DeploymentReady",
    )
    .await
    .unwrap();
    let replicas = deployment(&h.client, "owned-api")
        .await
        .and_then(|d| d.spec.replicas);
    assert_eq!(replicas, Some(7), "the roll-out overwrote the HPA's count");

    // The VPA of the API leaves CPU to the HPA.
    wait_cinder_condition(&h.client, "owned", "VPAReady", "True", "VPAReady")
        .await
        .unwrap();
    let vpas: kube::Api<DynamicObject> =
        kube::Api::namespaced_with(h.client.clone(), NS, &vpa_kind());
    let api_vpa = vpas.get("owned-api").await.unwrap();
    assert_eq!(
        api_vpa.data["spec"]["resourcePolicy"]["containerPolicies"][0]["controlledResources"],
        serde_json::json!(["memory"])
    );
    h.stop().await.unwrap();
}
