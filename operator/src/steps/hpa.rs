//! The HPA member of the parallel group (HPAReady): with `spec.autoscaling` set, the
//! autoscaling/v2 HorizontalPodAutoscaler `{name}-api` of the API Deployment (min, max, a CPU
//! utilization target) is applied server-side (created or updated); unset, it is deleted
//! (HPANotRequired). HPAReady reflects the applied HPA's AbleToScale and ScalingActive
//! conditions (HPANotScaling while either is False). API errors fail the step.

use super::children::child_meta;
use super::children::{NotRequired, remove_unwanted};
use super::env::StepEnv;
use crate::conditions::{Cond, kind, reason};
use crate::crd::Cinder;
use crate::crd::cinder::AutoscalingSpec;
use crate::kube_ext::apply;
use crate::names;
use crate::pipeline::{Doing, StepContext, StepResult};
use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec, MetricSpec,
    MetricTarget, ResourceMetricSource,
};
use kube::Api;

/// The desired HPA of `cinder`.
pub fn desired_hpa(cinder: &Cinder, autoscaling: &AutoscalingSpec) -> HorizontalPodAutoscaler {
    let name = cinder.metadata.name.clone().unwrap_or_default();
    HorizontalPodAutoscaler {
        metadata: child_meta(cinder, &names::api_hpa(&name), &[]),
        spec: HorizontalPodAutoscalerSpec {
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some("apps/v1".to_string()),
                kind: "Deployment".to_string(),
                name: names::api_deployment(&name),
            },
            min_replicas: Some(autoscaling.min_replicas),
            max_replicas: autoscaling.max_replicas,
            metrics: Some(vec![MetricSpec {
                type_: "Resource".to_string(),
                resource: Some(ResourceMetricSource {
                    name: "cpu".to_string(),
                    target: MetricTarget {
                        type_: "Utilization".to_string(),
                        average_utilization: Some(autoscaling.target_cpu_utilization),
                        ..Default::default()
                    },
                }),
                ..Default::default()
            }]),
            behavior: None,
        },
        status: None,
    }
}

/// The HPA while `spec.autoscaling` is unset.
const UNWANTED: NotRequired = NotRequired::new(
    "HPA",
    kind::HPA_READY,
    reason::HPA_NOT_REQUIRED,
    "spec.autoscaling",
);

/// Runs the step once for one Cinder.
pub async fn run(env: StepEnv, ctx: &mut StepContext) -> StepResult {
    let hpa_name = names::api_hpa(ctx.name());
    let api: Api<HorizontalPodAutoscaler> = ctx.children_api(&env.client);
    let Some(autoscaling) = ctx.cinder.spec.autoscaling.clone() else {
        return remove_unwanted(ctx, &api, &hpa_name, UNWANTED).await;
    };
    let desired = desired_hpa(&ctx.cinder, &autoscaling);
    let applied = apply(&api, &hpa_name, &desired)
        .await
        .doing(format_args!("applying HPA {hpa_name}"))?;
    let summary = format!(
        "HPA {hpa_name}: {}..{} replicas at {}% CPU",
        autoscaling.min_replicas, autoscaling.max_replicas, autoscaling.target_cpu_utilization
    );
    ctx.proceed(hpa_condition(&summary, &applied))
}

/// HPAReady from the HPA's own conditions: False (HPANotScaling) while AbleToScale or
/// ScalingActive is False (no metrics, no scale subresource, …), True otherwise (also before
/// the HPA controller first reported).
pub fn hpa_condition(summary: &str, hpa: &HorizontalPodAutoscaler) -> Cond {
    let conditions = hpa
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let failing: Vec<String> = conditions
        .iter()
        .filter(|c| (c.type_ == "AbleToScale" || c.type_ == "ScalingActive") && c.status == "False")
        .map(|c| {
            format!(
                "{} is False ({}: {})",
                c.type_,
                c.reason.as_deref().unwrap_or("no reason"),
                c.message.as_deref().unwrap_or("")
            )
        })
        .collect();
    if failing.is_empty() {
        Cond::true_(kind::HPA_READY, reason::HPA_READY, summary.to_string())
    } else {
        Cond::false_(
            kind::HPA_READY,
            reason::HPA_NOT_SCALING,
            format!("{summary}; {}", failing.join("; ")),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::autoscaling::v2::{
        HorizontalPodAutoscalerCondition, HorizontalPodAutoscalerStatus,
    };

    fn with(conditions: &[(&str, &str)]) -> HorizontalPodAutoscaler {
        HorizontalPodAutoscaler {
            status: Some(HorizontalPodAutoscalerStatus {
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(t, s)| HorizontalPodAutoscalerCondition {
                            type_: t.to_string(),
                            status: s.to_string(),
                            reason: Some("FailedGetResourceMetric".into()),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn hpa_ready_follows_able_to_scale_and_scaling_active() {
        assert!(hpa_condition("s", &HorizontalPodAutoscaler::default()).status);
        assert!(
            hpa_condition(
                "s",
                &with(&[("AbleToScale", "True"), ("ScalingActive", "True")])
            )
            .status
        );
        let c = hpa_condition(
            "s",
            &with(&[("AbleToScale", "True"), ("ScalingActive", "False")]),
        );
        assert_eq!((c.status, c.reason), (false, "HPANotScaling"));
        assert!(
            c.message
                .contains("ScalingActive is False (FailedGetResourceMetric")
        );
        assert!(!hpa_condition("s", &with(&[("AbleToScale", "False")])).status);
        // ScalingLimited is informational.
        assert!(hpa_condition("s", &with(&[("ScalingLimited", "False")])).status);
    }
}
