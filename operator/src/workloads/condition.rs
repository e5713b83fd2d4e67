//! How a workload step ends on its Deployment: the condition it reports
//! ([`WorkloadCondition`]: ready once the rollout converged, waiting for the rendered config or
//! the rollout) and [`converge`], which writes the Deployment and ends the step with it.

use super::deployment::ensure_converged;
use crate::conditions::{Cond, kind, reason};
use crate::pipeline::{Doing, StepContext, StepResult};
use crate::requeue::REQUEUE_DEPLOYMENT_POLLING;
use k8s_openapi::api::apps::v1::Deployment;
use kube::Client;

/// The condition a workload step reports: its type, its reason once the rollout converged and
/// its reason while waiting (for the rendered config or the rollout).
pub(crate) struct WorkloadCondition {
    kind: &'static str,
    ready: &'static str,
    waiting: &'static str,
}

impl WorkloadCondition {
    /// SchedulerReady: SchedulerReady / WaitingForScheduler.
    pub(crate) const SCHEDULER: Self = Self::new(
        kind::SCHEDULER_READY,
        reason::SCHEDULER_READY,
        reason::WAITING_FOR_SCHEDULER,
    );

    /// BackupServiceReady: BackupServiceReady / WaitingForBackupService.
    pub(crate) const BACKUP_SERVICE: Self = Self::new(
        kind::BACKUP_SERVICE_READY,
        reason::BACKUP_SERVICE_READY,
        reason::WAITING_FOR_BACKUP_SERVICE,
    );

    /// DeploymentReady: DeploymentReady / WaitingForDeployment.
    pub(crate) const API: Self = Self::new(
        kind::DEPLOYMENT_READY,
        reason::DEPLOYMENT_READY,
        reason::WAITING_FOR_DEPLOYMENT,
    );

    /// VolumeServicesReady: AllVolumeServicesReady / WaitingForVolumeServices.
    pub(crate) const VOLUME_SERVICES: Self = Self::new(
        kind::VOLUME_SERVICES_READY,
        reason::ALL_VOLUME_SERVICES_READY,
        reason::WAITING_FOR_VOLUME_SERVICES,
    );

    pub(crate) const fn new(
        kind: &'static str,
        ready: &'static str,
        waiting: &'static str,
    ) -> Self {
        WorkloadCondition {
            kind,
            ready,
            waiting,
        }
    }

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

/// Ensures `desired` on `client` and ends the step with it: waiting while the rollout runs
/// (polled every [`REQUEUE_DEPLOYMENT_POLLING`]), ready with `ready_message` once converged; an
/// API error fails the step.
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
        ctx.proceed(condition.ready(ready_message))
    } else {
        ctx.requeue(
            condition.waiting(format!("Deployment {name} is rolling out")),
            REQUEUE_DEPLOYMENT_POLLING,
        )
    }
}
