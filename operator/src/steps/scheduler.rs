//! The Scheduler step: ensures the `{name}-scheduler` Deployment, started with cinder.conf and
//! scheduler.conf (no Service, no PDB, no autoscaling: the scheduler takes its work off the
//! bus) and requeues every 10 s
//! (RequeueDeploymentPolling) until its rollout converged; SchedulerReady / WaitingForScheduler.

use crate::context::OperatorContext;
use crate::crd::Cinder;
use crate::names::{self, Component};
use crate::pipeline::{Artefacts, StepContext, StepResult};
use crate::planning::config::CONFIG_DIR;
use crate::workloads::{WorkloadCondition, WorkloadSpec, converge, desired_deployment};
use k8s_openapi::api::apps::v1::Deployment;
use std::sync::Arc;

/// The scheduler Deployment of `cinder` mounting the config ConfigMap `config_map`, its pods
/// annotated from `artefacts` and `installed_release`.
pub(crate) fn scheduler_deployment(
    cinder: &Cinder,
    config_map: String,
    artefacts: &Artefacts,
    installed_release: Option<&str>,
) -> Deployment {
    let name = cinder.metadata.name.as_deref().unwrap_or_default();
    let deployment_name = names::scheduler_deployment(name);
    let spec = WorkloadSpec::new(
        Component::Scheduler,
        &deployment_name,
        cinder.spec.scheduler.replicas,
        &[
            "cinder-scheduler",
            "--config-file",
            &format!("{CONFIG_DIR}/cinder.conf"),
            "--config-file",
            &format!("{CONFIG_DIR}/scheduler.conf"),
        ],
        config_map,
        artefacts,
        installed_release,
    );
    desired_deployment(cinder, &spec)
}

/// Runs the step once for one Cinder.
pub(crate) async fn run(op: Arc<OperatorContext>, ctx: &mut StepContext) -> StepResult {
    let Some(config_map) = ctx.artefacts.config_map_name.clone() else {
        return WorkloadCondition::SCHEDULER.await_config(ctx);
    };
    let desired = scheduler_deployment(
        &ctx.cinder,
        config_map,
        &ctx.artefacts,
        ctx.status.installed_release.as_deref(),
    );
    let deployment_name = names::scheduler_deployment(ctx.name());
    let ready = format!("Deployment {deployment_name} is ready");
    let children = ctx.children(&op.client);
    converge(
        ctx,
        &children,
        &desired,
        &WorkloadCondition::SCHEDULER,
        ready,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conditions::{kind, reason};

    #[test]
    fn the_scheduler_runs_on_cinder_conf_and_scheduler_conf() {
        let mut c = crate::test_fixtures::cinder();
        c.spec.scheduler.replicas = 3;
        let artefacts = Artefacts {
            transport_url_hash: Some("t1".into()),
            ..Default::default()
        };
        let d = scheduler_deployment(&c, "c-config-89ab".into(), &artefacts, Some("2026.1"));
        assert_eq!(d.metadata.name.as_deref(), Some("c-scheduler"));
        assert_eq!(d.metadata.owner_references.unwrap()[0].uid, "u");
        let spec = d.spec;
        assert_eq!(spec.replicas, Some(3));
        let template = spec.template;
        assert_eq!(
            template.metadata.unwrap().annotations.unwrap()[names::TRANSPORT_URL_HASH_ANNOTATION],
            "t1",
            "a new transport URL rolls the scheduler"
        );
        let pod = template.spec.unwrap();
        let container = &pod.containers[0];
        assert_eq!(
            container.command.as_deref().unwrap(),
            [
                "cinder-scheduler",
                "--config-file",
                "/etc/cinder/cinder.conf",
                "--config-file",
                "/etc/cinder/scheduler.conf"
            ]
        );
        assert_eq!(container.ports, None, "the scheduler serves no port");
        let config = &pod.volumes.unwrap()[0];
        assert_eq!(
            config.config_map.as_ref().unwrap().name,
            "c-config-89ab",
            "the ConfigMap the Config step rendered"
        );
    }

    #[test]
    fn the_scheduler_waits_under_its_own_condition() {
        let c = WorkloadCondition::SCHEDULER.waiting("x");
        assert_eq!(
            (c.type_, c.status, c.reason),
            (kind::SCHEDULER_READY, false, reason::WAITING_FOR_SCHEDULER)
        );
        let r = WorkloadCondition::SCHEDULER.ready("y");
        assert_eq!((r.status, r.reason), (true, reason::SCHEDULER_READY));
    }
}
