//! The Scheduler step: ensures the `{name}-scheduler` Deployment (no Service, no PDB, no
//! autoscaling: the scheduler takes its work off the bus) and requeues every 10 s
//! (RequeueDeploymentPolling) until its rollout converged; SchedulerReady / WaitingForScheduler.

use super::env::StepEnv;
use super::workloads::{WorkloadSpec, converge, desired_deployment, pod_annotations};
use crate::conditions::{Cond, kind, reason};
use crate::names::{self, Component};
use crate::pipeline::{StepContext, StepReport};
use crate::requeue::REQUEUE_DEPLOYMENT_POLLING;
use std::collections::BTreeMap;

fn waiting(message: impl Into<String>) -> Cond {
    Cond::false_(
        kind::SCHEDULER_READY,
        reason::WAITING_FOR_SCHEDULER,
        message,
    )
}

/// Runs the step once for one Cinder.
pub async fn run(env: StepEnv, ctx: StepContext) -> StepReport {
    let name = ctx.name().to_string();
    let Some(config_map) = ctx.artefacts.config_map_name.clone() else {
        return ctx.requeue(
            waiting("waiting for the rendered config"),
            REQUEUE_DEPLOYMENT_POLLING,
        );
    };
    let deployment_name = names::scheduler_deployment(&name);
    let spec = WorkloadSpec {
        component: Component::Scheduler,
        name: deployment_name.clone(),
        replicas: ctx.cinder.spec.scheduler.replicas,
        recreate: false,
        command: vec!["cinder-scheduler".to_string()],
        extra_env: Vec::new(),
        extra_volumes: Vec::new(),
        extra_labels: Vec::new(),
        object_annotations: BTreeMap::new(),
        pod_annotations: pod_annotations(
            Component::Scheduler,
            &ctx.artefacts,
            ctx.status.installed_release.as_deref(),
        ),
        config_map,
        container_port: None,
    };
    let desired = desired_deployment(&ctx.cinder, &spec);
    let ready = Cond::true_(
        kind::SCHEDULER_READY,
        reason::SCHEDULER_READY,
        format!("Deployment {deployment_name} is ready"),
    );
    let children = ctx.children(&env.client);
    converge(ctx, &children, &desired, waiting, ready).await
}
