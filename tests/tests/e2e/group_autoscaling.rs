//! The HPA and VPA members end to end: `spec.autoscaling` gives the API Deployment's
//! autoscaling/v2 HPA (created, updated, deleted when unset); a Cinder asking for VPAs through
//! spec.verticalAutoscaling gets one per workload Deployment, and VPANotInstalled when the CRD is absent.
//! An HPA that cannot scale (no metrics: ScalingActive False) leaves HPAReady and Ready True, says
//! so in the message and in one HPAScalingInactive Warning Event.

use cinder_e2e::database_helpers::cinder_events;
use cinder_e2e::group_helpers::*;
use cinder_e2e::*;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::api::{Patch, PatchParams};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hpa_without_metrics_does_not_depool_the_cinder() {
    // No simulated HPA controller: the test writes the HPA's status as a cluster without
    // metrics-server does.
    let mut config = HarnessConfig::default();
    config.cluster.controllers.autoscalers = cinder_sim::controllers::config::Switch::off();
    let h = Harness::start_with(config).await.unwrap();
    group_cinder(
        &h.client,
        "nometrics",
        serde_json::json!({"autoscaling": {"minReplicas": 2, "maxReplicas": 4}}),
    )
    .await
    .unwrap();
    wait_cinder_condition(&h.client, "nometrics", "Ready", "True", "AllReady")
        .await
        .unwrap();
    let api = h.api::<HorizontalPodAutoscaler>();
    let status = serde_json::json!({"status": {
        "currentReplicas": 2,
        "desiredReplicas": 2,
        "conditions": [
            {"type": "AbleToScale", "status": "True", "reason": "SucceededGetScale",
             "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "ScalingActive", "status": "False", "reason": "FailedGetResourceMetric",
             "message": "the HPA was unable to compute the replica count: no metrics returned from resource metrics API",
             "lastTransitionTime": "2026-01-01T00:00:00Z"}
        ]
    }});
    api.patch_status(
        "nometrics-api",
        &PatchParams::default(),
        &Patch::Merge(&status),
    )
    .await
    .unwrap();
    let c = eventually("HPAReady says the HPA is not scaling", || async {
        let cs = cinder_conditions(&h.client, "nometrics").await;
        condition(&cs, "HPAReady")
            .filter(|c| c.message.contains("not scaling"))
            .cloned()
    })
    .await
    .unwrap();
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", "HPAReady"));
    assert!(
        c.message.contains("FailedGetResourceMetric"),
        "{}",
        c.message
    );
    let ready = assert_ready_consistent(&cinder_conditions(&h.client, "nometrics").await);
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "AllReady")
    );
    let events = eventually("one HPAScalingInactive Warning", || async {
        let e = cinder_events(&h.client, "nometrics", "HPAScalingInactive").await;
        (!e.is_empty()).then_some(e)
    })
    .await
    .unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    assert!(
        events[0]
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("ScalingActive"),
        "{:?}",
        events[0].note
    );
    h.stop().await.unwrap();
}
