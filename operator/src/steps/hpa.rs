//! The HPA member of the parallel group (HPAReady): with `spec.autoscaling` set, the
//! autoscaling/v2 HorizontalPodAutoscaler `{name}-api` of the API Deployment (min, max, a CPU
//! utilization target) is applied server-side (created or updated); unset, it is deleted
//! (HPANotRequired). API errors propagate (Outcome::Error).

use super::StepEnv;
use super::children::child_meta;
use super::http_route::FIELD_MANAGER;
use crate::conditions::{Cond, kind, reason};
use crate::crd::Cinder;
use crate::crd::cinder::AutoscalingSpec;
use crate::names;
use crate::pipeline::{Step, StepContext, StepReport};
use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec, MetricSpec,
    MetricTarget, ResourceMetricSource,
};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client};

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

fn api_error(e: &kube::Error) -> Cond {
    Cond::false_(
        kind::HPA_READY,
        reason::RECONCILE_ERROR,
        format!("kubernetes API error: {e}"),
    )
}

async fn run(client: Client, ctx: StepContext) -> StepReport {
    let ns = ctx.namespace().to_string();
    let name = ctx.name().to_string();
    let hpa_name = names::api_hpa(&name);
    let api: Api<HorizontalPodAutoscaler> = Api::namespaced(client, &ns);
    let Some(autoscaling) = ctx.cinder.spec.autoscaling.clone() else {
        return match api.delete(&hpa_name, &DeleteParams::default()).await {
            Ok(_) => ctx.proceed(Cond::true_(
                kind::HPA_READY,
                reason::HPA_NOT_REQUIRED,
                format!("spec.autoscaling is unset; HPA {hpa_name} deleted"),
            )),
            Err(kube::Error::Api(s)) if s.code == 404 => ctx.proceed(Cond::true_(
                kind::HPA_READY,
                reason::HPA_NOT_REQUIRED,
                "spec.autoscaling is unset",
            )),
            Err(e) => {
                let msg = format!("deleting HPA {hpa_name}: {e}");
                ctx.fail(api_error(&e), msg)
            }
        };
    };
    let desired = desired_hpa(&ctx.cinder, &autoscaling);
    match api
        .patch(
            &hpa_name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&desired),
        )
        .await
    {
        Ok(_) => ctx.proceed(Cond::true_(
            kind::HPA_READY,
            reason::HPA_READY,
            format!(
                "HPA {hpa_name}: {}..{} replicas at {}% CPU",
                autoscaling.min_replicas,
                autoscaling.max_replicas,
                autoscaling.target_cpu_utilization
            ),
        )),
        Err(e) => {
            let msg = format!("applying HPA {hpa_name}: {e}");
            ctx.fail(api_error(&e), msg)
        }
    }
}

/// The HPA member.
pub struct HpaStep {
    env: StepEnv,
}

impl HpaStep {
    pub fn new(env: StepEnv) -> Self {
        HpaStep { env }
    }
}

impl Step for HpaStep {
    fn name(&self) -> &'static str {
        "HPA"
    }
    fn condition_type(&self) -> &'static str {
        kind::HPA_READY
    }
    fn run(&self, ctx: StepContext) -> BoxFuture<'static, StepReport> {
        run(ctx.children(&self.env.client), ctx).boxed()
    }
}
