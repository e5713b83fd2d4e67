//! The HPA and VPA members end to end: `spec.autoscaling` gives the API Deployment's
//! autoscaling/v2 HPA (created, updated, deleted when unset); a Cinder asking for VPAs through
//! spec.verticalAutoscaling gets one per workload Deployment, and VPANotInstalled when the CRD is absent.

use cinder_e2e::group_helpers::*;
use cinder_e2e::*;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hpa_follows_spec_autoscaling() {
    let h = Harness::start().await.unwrap();
    group_cinder(
        &h.client,
        "scaled",
        serde_json::json!({"autoscaling": {"minReplicas": 2, "maxReplicas": 5}}),
    )
    .await
    .unwrap();

    wait_cinder_condition(&h.client, "scaled", "HPAReady", "True", "HPAReady")
        .await
        .unwrap();
    let api = h.api::<HorizontalPodAutoscaler>();
    let hpa = api.get("scaled-api").await.unwrap();
    assert_eq!(hpa.spec.scale_target_ref.name, "scaled-api");
    assert_eq!(hpa.spec.scale_target_ref.kind, "Deployment");
    assert_eq!(hpa.spec.min_replicas, Some(2));
    assert_eq!(hpa.spec.max_replicas, 5);
    let metric = &hpa.spec.metrics.clone().unwrap()[0];
    let target = &metric.resource.as_ref().unwrap().target;
    assert_eq!(target.average_utilization, Some(80));

    merge_patch_cinder(
        &h.client,
        "scaled",
        serde_json::json!({"spec": {"autoscaling": {"maxReplicas": 7, "targetCPUUtilization": 60}}}),
    )
    .await
    .unwrap();
    eventually("the HPA updated", || {
        let api = api.clone();
        async move {
            let hpa = api.get_opt("scaled-api").await.ok().flatten()?;
            let util = hpa.spec.metrics.clone()?[0]
                .resource
                .as_ref()?
                .target
                .average_utilization;
            (hpa.spec.max_replicas == 7 && util == Some(60)).then_some(())
        }
    })
    .await
    .unwrap();

    merge_patch_cinder(
        &h.client,
        "scaled",
        serde_json::json!({"spec": {"autoscaling": null}}),
    )
    .await
    .unwrap();
    wait_cinder_condition(&h.client, "scaled", "HPAReady", "True", "HPANotRequired")
        .await
        .unwrap();
    assert!(api.get_opt("scaled-api").await.unwrap().is_none());

    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vpa_not_installed_without_the_crd() {
    let h = Harness::start_with(config_with_fixtures(without_vpa()))
        .await
        .unwrap();
    group_cinder(&h.client, "novpa", serde_json::json!({}))
        .await
        .unwrap();
    merge_patch_cinder(
        &h.client,
        "novpa",
        serde_json::json!({"spec": {"verticalAutoscaling": {}}}),
    )
    .await
    .unwrap();
    let c = wait_cinder_condition(&h.client, "novpa", "VPAReady", "False", "VPANotInstalled")
        .await
        .unwrap();
    assert!(c.message.contains("autoscaling.k8s.io"), "{}", c.message);

    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vpas_for_every_workload_when_asked_and_gone_when_not() {
    let h = Harness::start().await.unwrap();
    group_cinder(&h.client, "vpad", serde_json::json!({}))
        .await
        .unwrap();
    wait_cinder_condition(&h.client, "vpad", "VPAReady", "True", "VPANotRequired")
        .await
        .unwrap();
    assert!(vpa_names(&h.client).await.is_empty());

    merge_patch_cinder(
        &h.client,
        "vpad",
        serde_json::json!({"spec": {"verticalAutoscaling": {}}}),
    )
    .await
    .unwrap();
    wait_cinder_condition(&h.client, "vpad", "VPAReady", "True", "VPAReady")
        .await
        .unwrap();
    let names = eventually(
        "VPAs of the API, scheduler and volume Deployments",
        || async {
            let names = vpa_names(&h.client).await;
            ["vpad-api", "vpad-scheduler", "vpad-volume-vpad-nfs"]
                .iter()
                .all(|n| names.iter().any(|x| x == n))
                .then_some(names)
        },
    )
    .await
    .unwrap();
    assert!(!names.iter().any(|n| n == "vpad-backup"), "{names:?}");

    merge_patch_cinder(
        &h.client,
        "vpad",
        serde_json::json!({"spec": {"verticalAutoscaling": null}}),
    )
    .await
    .unwrap();
    wait_cinder_condition(&h.client, "vpad", "VPAReady", "True", "VPANotRequired")
        .await
        .unwrap();
    eventually("the VPAs deleted", || async {
        vpa_names(&h.client).await.is_empty().then_some(())
    })
    .await
    .unwrap();

    h.stop().await.unwrap();
}
