//! Simulated autoscaler status: a HorizontalPodAutoscaler reports its target Deployment's
//! replica count clamped to [minReplicas, maxReplicas] as current and desired replicas; a
//! VerticalPodAutoscaler reports a fixed recommendation for each container of its target.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::dynamic::{api_for, run as run_dynamic, spec_str, status_of};
use super::kinds;
use super::runtime::{ReconcileError, Shared, drain, patch_status, retry};
use super::status::{Wanted, already_applied, conditions};

/// The CPU the simulated VPA recommends.
pub const RECOMMENDED_CPU: &str = "100m";
/// The memory the simulated VPA recommends.
pub const RECOMMENDED_MEMORY: &str = "128Mi";

/// Runs the HPA and VPA status controllers until aborted.
pub async fn run(shared: Arc<Shared>) {
    let hpa_api: Api<HorizontalPodAutoscaler> = Api::all(shared.client.clone());
    let hpas = Controller::new(hpa_api, watcher::Config::default())
        .reconcile_all_on(shared.triggers())
        .run(reconcile_hpa, retry, Arc::clone(&shared));
    futures::join!(
        drain(&shared, "hpa", hpas),
        run_dynamic(
            "vpa",
            Arc::clone(&shared),
            kinds::VERTICAL_POD_AUTOSCALER,
            Arc::clone(&shared),
            reconcile_vpa
        ),
    );
}

async fn target_deployment(
    shared: &Shared,
    namespace: &str,
    kind: Option<&str>,
    name: Option<&str>,
) -> Result<Option<Deployment>, ReconcileError> {
    match (kind, name) {
        (Some("Deployment"), Some(name)) => {
            let api: Api<Deployment> = Api::namespaced(shared.client.clone(), namespace);
            Ok(api.get_opt(name).await?)
        }
        _ => Ok(None),
    }
}

/// The HPA status for a target currently running `current` replicas.
pub fn hpa_status(current: i32, min: i32, max: i32, previous: Option<&Value>) -> Value {
    let desired = current.clamp(min, max.max(min));
    json!({
        "currentReplicas": current,
        "desiredReplicas": desired,
        "conditions": conditions(
            previous.and_then(|s| s.get("conditions")),
            &[
                Wanted::new("AbleToScale", true, "ReadyForNewScale", "recommended size matches current size"),
                Wanted::new("ScalingActive", true, "ValidMetricFound", "the HPA was able to successfully calculate a replica count"),
                Wanted::new("ScalingLimited", false, "DesiredWithinRange", "the desired count is within the acceptable range"),
            ],
            None,
        ),
    })
}

async fn reconcile_hpa(
    hpa: Arc<HorizontalPodAutoscaler>,
    shared: Arc<Shared>,
) -> Result<Action, ReconcileError> {
    // Beside a real control plane its kube-controller-manager's HPA controller writes status.
    let off = shared.read(|c| !c.autoscalers.enabled || c.real_control_plane);
    if off || hpa.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let namespace = hpa
        .namespace()
        .ok_or(ReconcileError::Missing("namespace"))?;
    let spec = &hpa.spec;
    let min = spec.min_replicas.unwrap_or(1);
    let target = target_deployment(
        &shared,
        &namespace,
        Some(spec.scale_target_ref.kind.as_str()),
        Some(spec.scale_target_ref.name.as_str()),
    )
    .await?;
    let current = target.and_then(|d| d.spec.replicas).unwrap_or(min);
    let previous = hpa.status.as_ref().map(serde_json::to_value).transpose()?;
    let status = hpa_status(current, min, spec.max_replicas, previous.as_ref());
    if !already_applied(&status, previous.as_ref()) {
        let api: Api<HorizontalPodAutoscaler> = Api::namespaced(shared.client.clone(), &namespace);
        patch_status(&api, &hpa.name_any(), status).await?;
    }
    Ok(Action::await_change())
}

/// The VPA status recommending the fixed resources for `containers`.
pub fn vpa_status(containers: &[String], previous: Option<&Value>) -> Value {
    let resources = json!({"cpu": RECOMMENDED_CPU, "memory": RECOMMENDED_MEMORY});
    let recommendations: Vec<Value> = containers
        .iter()
        .map(|name| {
            json!({
                "containerName": name,
                "target": resources,
                "lowerBound": resources,
                "upperBound": resources,
                "uncappedTarget": resources,
            })
        })
        .collect();
    let provided = !recommendations.is_empty();
    let wanted = if provided {
        Wanted::new(
            "RecommendationProvided",
            true,
            "RecommendationProvided",
            "recommendation computed",
        )
    } else {
        Wanted::new(
            "RecommendationProvided",
            false,
            "NoTarget",
            "the target has no containers",
        )
    };
    json!({
        "recommendation": {"containerRecommendations": recommendations},
        "conditions": conditions(previous.and_then(|s| s.get("conditions")), &[wanted], None),
    })
}

async fn reconcile_vpa(
    vpa: Arc<DynamicObject>,
    shared: Arc<Shared>,
) -> Result<Action, ReconcileError> {
    if !shared.read(|c| c.autoscalers.enabled) || vpa.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let namespace = vpa
        .namespace()
        .ok_or(ReconcileError::Missing("namespace"))?;
    let target = target_deployment(
        &shared,
        &namespace,
        spec_str(&vpa, &["targetRef", "kind"]),
        spec_str(&vpa, &["targetRef", "name"]),
    )
    .await?;
    let containers: Vec<String> = target
        .and_then(|d| d.spec.template.spec)
        .map(|p| p.containers)
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.name)
        .collect();
    let previous = status_of(&vpa);
    let status = vpa_status(&containers, previous);
    if !already_applied(&status, previous) {
        let api = api_for(&shared, kinds::VERTICAL_POD_AUTOSCALER, Some(&namespace));
        patch_status(&api, &vpa.name_any(), status).await?;
    }
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::status::condition_status;

    #[test]
    fn hpa_desired_is_clamped() {
        let status = hpa_status(7, 2, 5, None);
        assert_eq!(status["currentReplicas"], 7);
        assert_eq!(status["desiredReplicas"], 5);
        assert_eq!(hpa_status(1, 2, 5, None)["desiredReplicas"], 2);
        assert_eq!(
            condition_status(status.get("conditions"), "ScalingActive"),
            Some("True")
        );
    }

    #[test]
    fn vpa_recommends_per_container() {
        let status = vpa_status(&["api".into(), "proxy".into()], None);
        let recs = status["recommendation"]["containerRecommendations"]
            .as_array()
            .unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[1]["containerName"], "proxy");
        assert_eq!(recs[0]["target"]["cpu"], RECOMMENDED_CPU);
        let none = vpa_status(&[], None);
        assert_eq!(
            condition_status(none.get("conditions"), "RecommendationProvided"),
            Some("False")
        );
    }
}
