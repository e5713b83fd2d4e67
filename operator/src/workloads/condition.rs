//! How a workload step ends on its Deployment: the condition it reports
//! ([`WorkloadCondition`]: ready once the rollout converged, waiting for the rendered config or
//! the rollout) and [`converge`], which writes the Deployment and ends the step with it.

use super::deployment::{ensure_converged, rolled_out_unready};
use super::readiness::not_ready_detail;
use crate::conditions::{Cond, kind, reason};
use crate::pipeline::{Doing, StepContext, StepResult};
use crate::requeue::REQUEUE_DEPLOYMENT_POLLING;
use k8s_openapi::api::apps::v1::Deployment;
use kube::{Api, Client};

/// The condition a workload step reports: its type, its reason once the rollout converged and
/// its reason while waiting (for the rendered config or the rollout).
pub(crate) struct WorkloadCondition {
    kind: &'static str,
    ready: &'static str,
    waiting: &'static str,
}

/// Declares each workload step's [`WorkloadCondition`] as one row: `NAME = TYPE: READY / WAITING`
/// (a condition type and two reasons of [`kind`] and [`reason`]).
macro_rules! workload_conditions {
    ($($name:ident = $kind:ident: $ready:ident / $waiting:ident;)*) => {
        impl WorkloadCondition {
            $(
                #[doc = concat!(
                    "`kind::", stringify!($kind), "`: `reason::", stringify!($ready),
                    "` / `reason::", stringify!($waiting), "`."
                )]
                pub(crate) const $name: Self = WorkloadCondition {
                    kind: kind::$kind,
                    ready: reason::$ready,
                    waiting: reason::$waiting,
                };
            )*
        }
    };
}

workload_conditions! {
    SCHEDULER = SCHEDULER_READY: SCHEDULER_READY / WAITING_FOR_SCHEDULER;
    BACKUP_SERVICE = BACKUP_SERVICE_READY: BACKUP_SERVICE_READY / WAITING_FOR_BACKUP_SERVICE;
    API = DEPLOYMENT_READY: DEPLOYMENT_READY / WAITING_FOR_DEPLOYMENT;
    VOLUME_SERVICES = VOLUME_SERVICES_READY: ALL_VOLUME_SERVICES_READY / WAITING_FOR_VOLUME_SERVICES;
}

impl WorkloadCondition {
    /// True with the ready reason.
    pub(crate) fn ready(&self, message: impl Into<String>) -> Cond {
        Cond::true_(self.kind, self.ready, message)
    }

    /// False with the waiting reason.
    pub(crate) fn waiting(&self, message: impl Into<String>) -> Cond {
        Cond::false_(self.kind, self.waiting, message)
    }

    /// Ends the step waiting for the rendered config (polled every
    /// [`REQUEUE_DEPLOYMENT_POLLING`]).
    pub(crate) fn await_config(&self, ctx: &mut StepContext) -> StepResult {
        ctx.requeue(
            self.waiting("waiting for the rendered config"),
            REQUEUE_DEPLOYMENT_POLLING,
        )
    }
}

/// Ensures `desired` on `client` and ends the step with it: ready with `ready_message` once
/// converged; otherwise False with the waiting reason. While the rollout runs (or a container
/// cannot run) the step requeues (polled every [`REQUEUE_DEPLOYMENT_POLLING`]), so the steps
/// after it wait. A Deployment whose rollout is done but whose pods' readiness check fails (for
/// an RPC service: Cinder records it as down or disabled, [`not_ready_detail`]) is not rolling
/// out: the condition says what the check said and the pass continues, so a service that is down
/// holds no other step; its pods turning ready change the Deployment, whose watch brings the next
/// pass. An API error fails the step.
pub(crate) async fn converge(
    ctx: &mut StepContext,
    client: &Client,
    desired: &Deployment,
    condition: &WorkloadCondition,
    ready_message: String,
) -> StepResult {
    let name = desired.metadata.name.clone().unwrap_or_default();
    if ensure_converged(client, ctx.children_reads(), desired)
        .await
        .doing(format_args!("writing Deployment {name}"))?
    {
        return ctx.proceed(condition.ready(ready_message));
    }
    let Some(detail) = not_ready_detail(client, desired).await else {
        return ctx.requeue(
            condition.waiting(format!("Deployment {name} is rolling out")),
            REQUEUE_DEPLOYMENT_POLLING,
        );
    };
    let message = format!("Deployment {name} is not ready: {}", detail.text);
    let ns = desired.metadata.namespace.clone().unwrap_or_default();
    let api: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let done = ctx
        .children_reads()
        .get_opt(&api, &name)
        .await
        .doing(format_args!("reading Deployment {name}"))?
        .is_some_and(|live| rolled_out_unready(&live, desired));
    if done && detail.checks_only {
        ctx.proceed(condition.waiting(message))
    } else {
        ctx.requeue(condition.waiting(message), REQUEUE_DEPLOYMENT_POLLING)
    }
}
