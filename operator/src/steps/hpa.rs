//! The HPA member of the parallel group (HPAReady): with `spec.autoscaling` set, the
//! autoscaling/v2 HorizontalPodAutoscaler `{name}-api` of the API Deployment (min, max, a CPU
//! utilization target) is applied server-side (created or updated); unset, it is deleted
//! (HPANotRequired). HPAReady is True (HPAReady) once the HPA is applied, and False only when an
//! API error propagates. An HPA that cannot scale (its AbleToScale or ScalingActive False, e.g.
//! no metrics-server) does not depool the Cinder, whose API serves at its current replica
//! count: the message says what the HPA reports, and a Warning Event (HPAScalingInactive) is
//! published once per distinct trouble.
use crate::children::child_meta;
use crate::children::{NotRequired, remove_unwanted};
use crate::conditions::{Cond, event_reason, kind, reason};
use crate::context::OperatorContext;
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
use kube::runtime::events::Recorder;
use std::sync::Arc;

/// The desired HPA of `cinder`.
pub(crate) fn desired_hpa(
    cinder: &Cinder,
    autoscaling: &AutoscalingSpec,
) -> HorizontalPodAutoscaler {
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

/// What one run publishes the HPA's troubles through: the operator's event recorder and the step
/// actor's memory of the troubles already published.
#[derive(Clone)]
pub(crate) struct HpaEvents {
    recorder: Recorder,
    memory: crate::pipeline::StepMemory,
}

impl HpaEvents {
    /// The operator's recorder and the memory of `ctx`'s step.
    pub(crate) fn new(op: &OperatorContext, ctx: &StepContext) -> Self {
        HpaEvents {
            recorder: op.recorder.clone(),
            memory: ctx.memory(),
        }
    }
}

/// Runs the step once for one Cinder.
pub(crate) async fn run(op: Arc<OperatorContext>, ctx: &mut StepContext) -> StepResult {
    let events = HpaEvents::new(&op, ctx);
    let hpa_name = names::api_hpa(ctx.name());
    let api: Api<HorizontalPodAutoscaler> = ctx.children_api(&op.client);
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
    let trouble = scaling_trouble(&applied);
    if let Some(trouble) = &trouble
        && events
            .memory
            .first_time(&format!("hpa-trouble/{}", trouble.key))
            .await
    {
        let note = format!("HPA {hpa_name} cannot scale the API: {}", trouble.text);
        let reason = event_reason::HPA_SCALING_INACTIVE;
        crate::events::warning(&events.recorder, &ctx.cinder, reason, "Autoscale", note).await;
    }
    ctx.proceed(hpa_condition(&summary, trouble.as_ref()))
}

/// What keeps an HPA from scaling: its AbleToScale / ScalingActive conditions that are False.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ScalingTrouble {
    /// The conditions' types and reasons (what an Event is published once for).
    pub key: String,
    /// The conditions with their reasons and messages, for the condition message and the Event.
    pub text: String,
}

/// The HPA's AbleToScale / ScalingActive conditions that are False (`None`: none, also before
/// the HPA controller first reported).
pub(crate) fn scaling_trouble(hpa: &HorizontalPodAutoscaler) -> Option<ScalingTrouble> {
    let failing: Vec<_> = hpa
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|c| (c.type_ == "AbleToScale" || c.type_ == "ScalingActive") && c.status == "False")
        .collect();
    if failing.is_empty() {
        return None;
    }
    let reason = |c: &&k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerCondition| {
        c.reason.clone().unwrap_or_else(|| "no reason".to_string())
    };
    Some(ScalingTrouble {
        key: failing
            .iter()
            .map(|c| format!("{}={}", c.type_, reason(c)))
            .collect::<Vec<_>>()
            .join(","),
        text: failing
            .iter()
            .map(|c| {
                format!(
                    "{} is False ({}: {})",
                    c.type_,
                    reason(c),
                    c.message.as_deref().unwrap_or("")
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
    })
}

/// HPAReady for an applied HPA: True (HPAReady), its message also saying what keeps the HPA
/// from scaling when something does (the API keeps serving at its current count, so that is
/// no reason to depool the Cinder).
pub(crate) fn hpa_condition(summary: &str, trouble: Option<&ScalingTrouble>) -> Cond {
    let message = match trouble {
        None => summary.to_string(),
        Some(t) => format!("{summary}; not scaling: {}", t.text),
    };
    Cond::true_(kind::HPA_READY, reason::HPA_READY, message)
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
    fn an_hpa_that_cannot_scale_stays_ready_and_says_why() {
        assert_eq!(scaling_trouble(&HorizontalPodAutoscaler::default()), None);
        assert_eq!(
            scaling_trouble(&with(&[("AbleToScale", "True"), ("ScalingActive", "True")])),
            None
        );
        // ScalingLimited is informational.
        assert_eq!(scaling_trouble(&with(&[("ScalingLimited", "False")])), None);
        let trouble = scaling_trouble(&with(&[
            ("AbleToScale", "True"),
            ("ScalingActive", "False"),
        ]))
        .unwrap();
        assert_eq!(trouble.key, "ScalingActive=FailedGetResourceMetric");
        let c = hpa_condition("s", Some(&trouble));
        assert_eq!((c.status, c.reason), (true, "HPAReady"));
        assert!(
            c.message
                .contains("not scaling: ScalingActive is False (FailedGetResourceMetric"),
            "{}",
            c.message
        );
        let both = scaling_trouble(&with(&[
            ("AbleToScale", "False"),
            ("ScalingActive", "False"),
        ]))
        .unwrap();
        assert_eq!(
            both.key,
            "AbleToScale=FailedGetResourceMetric,ScalingActive=FailedGetResourceMetric"
        );
        let healthy = hpa_condition("s", None);
        assert_eq!((healthy.status, healthy.reason), (true, "HPAReady"));
        assert_eq!(healthy.message, "s");
    }
}
