//! The Scheduler step: ensures the `{name}-scheduler` Deployment, started with cinder.conf and
//! scheduler.conf (no Service, no PDB, no autoscaling: the scheduler takes its work off the
//! bus) and requeues every 10 s
//! (RequeueDeploymentPolling) until its rollout converged; SchedulerReady / WaitingForScheduler.

use crate::names::{self, Component};
use crate::pipeline::StepEnv;
use crate::pipeline::{StepContext, StepResult};
use crate::planning::config::CONFIG_DIR;
use crate::workloads::{WorkloadCondition, WorkloadSpec, converge, desired_deployment};

/// Runs the step once for one Cinder.
pub async fn run(env: StepEnv, ctx: &mut StepContext) -> StepResult {
    let name = ctx.name().to_string();
    let Some(config_map) = ctx.artefacts.config_map_name.clone() else {
        return WorkloadCondition::SCHEDULER.await_config(ctx);
    };
    let deployment_name = names::scheduler_deployment(&name);
    let spec = WorkloadSpec::new(
        Component::Scheduler,
        &deployment_name,
        ctx.cinder.spec.scheduler.replicas,
        &[
            "cinder-scheduler",
            "--config-file",
            &format!("{CONFIG_DIR}/cinder.conf"),
            "--config-file",
            &format!("{CONFIG_DIR}/scheduler.conf"),
        ],
        config_map,
        &ctx.artefacts,
        ctx.status.installed_release.as_deref(),
    );
    let desired = desired_deployment(&ctx.cinder, &spec);
    let ready = format!("Deployment {deployment_name} is ready");
    let children = ctx.children(&env.client);
    converge(
        ctx,
        &children,
        &desired,
        &WorkloadCondition::SCHEDULER,
        ready,
    )
    .await
}
