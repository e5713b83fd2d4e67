//! The Scheduler step: ensures the `{name}-scheduler` Deployment (no Service, no PDB, no
//! autoscaling: the scheduler takes its work off the bus) and requeues every 10 s
//! (RequeueDeploymentPolling) until its rollout converged; SchedulerReady / WaitingForScheduler.

use super::StepEnv;
use super::workloads::{WorkloadSpec, desired_deployment, ensure_converged, pod_annotations};
use crate::conditions::{Cond, kind, reason};
use crate::names::{self, Component};
use crate::pipeline::{Step, StepContext, StepReport};
use crate::requeue::REQUEUE_DEPLOYMENT_POLLING;
use futures::FutureExt;
use futures::future::BoxFuture;
use std::collections::BTreeMap;

/// The Scheduler step.
pub struct SchedulerStep {
    env: StepEnv,
}

impl SchedulerStep {
    pub fn new(env: StepEnv) -> Self {
        SchedulerStep { env }
    }
}

fn waiting(message: impl Into<String>) -> Cond {
    Cond::false_(
        kind::SCHEDULER_READY,
        reason::WAITING_FOR_SCHEDULER,
        message,
    )
}

async fn run(env: StepEnv, ctx: StepContext) -> StepReport {
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
    match ensure_converged(&ctx.children(&env.client), &desired).await {
        Err(e) => ctx.fail(
            waiting(format!("kubernetes API error: {e}")),
            format!("writing Deployment {deployment_name}: {e}"),
        ),
        Ok(false) => ctx.requeue(
            waiting(format!("Deployment {deployment_name} is rolling out")),
            REQUEUE_DEPLOYMENT_POLLING,
        ),
        Ok(true) => ctx.proceed(Cond::true_(
            kind::SCHEDULER_READY,
            reason::SCHEDULER_READY,
            format!("Deployment {deployment_name} is ready"),
        )),
    }
}

impl Step for SchedulerStep {
    fn name(&self) -> &'static str {
        "Scheduler"
    }
    fn condition_type(&self) -> &'static str {
        kind::SCHEDULER_READY
    }
    fn run(&self, ctx: StepContext) -> BoxFuture<'static, StepReport> {
        run(self.env.clone(), ctx).boxed()
    }
}
