//! The Cinder reconcile: deletion (finalizer release after dropping the Cinder's metric series),
//! the target-cluster gate, the first-pass finalizer add, then one pipeline pass through the
//! Cinder's pipeline actor. The status is written on every exit path, only when it changed, and
//! every requeue goes through the project's jitter.

use super::finalizer;
use super::status::{gate_status, write_if_changed};
use super::target_cluster;
use crate::conditions::{Cond, kind, reason};
use crate::context::OperatorContext;
use crate::crd::Cinder;
use crate::names::CINDER_FINALIZER;
use crate::pipeline::{CinderKey, Forget, PassEnd, Pipelines, Reconcile};
use crate::requeue::{Requeue, jittered};
use actix::Addr;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use std::sync::Arc;

/// What the Cinder reconcile needs.
pub struct CinderReconciler {
    pub op: Arc<OperatorContext>,
    pub engine: Addr<Pipelines>,
}

/// A pass that could not finish (the controller retries it through `error_policy`).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("pipeline: {0}")]
    Pipeline(String),
}

/// The retry after a failed pass.
pub fn error_policy(
    _cinder: Arc<Cinder>,
    _error: &ReconcileError,
    _ctx: Arc<CinderReconciler>,
) -> Action {
    Action::requeue(Requeue::RequeueDeploymentPolling.jittered())
}

/// One reconcile of one Cinder.
pub async fn reconcile(
    cinder: Arc<Cinder>,
    ctx: Arc<CinderReconciler>,
) -> Result<Action, ReconcileError> {
    let namespace = cinder.namespace().unwrap_or_default();
    let name = cinder.name_any();
    let api: Api<Cinder> = Api::namespaced(ctx.op.client.clone(), &namespace);
    let directory = &ctx.op.pipelines;

    if cinder.metadata.deletion_timestamp.is_some() {
        if finalizer::has(cinder.as_ref(), CINDER_FINALIZER) {
            // MariaDB cleanup is a later issue; everything else is garbage-collected through
            // the controller owner references.
            ctx.engine
                .send(Forget(CinderKey {
                    namespace: namespace.clone(),
                    name: name.clone(),
                }))
                .await
                .map_err(|e| ReconcileError::Pipeline(e.to_string()))?;
            ctx.op.metrics.forget_cinder(&namespace, &name);
            directory.forget(&namespace, &name);
            finalizer::remove(&api, cinder.as_ref(), CINDER_FINALIZER).await?;
            tracing::info!(cinder = %name, namespace = %namespace, "finalizer released");
        }
        return Ok(Action::await_change());
    }

    directory.pass_started(&namespace, &name, "TargetCluster");
    if let Some(target) = &cinder.spec.target_cluster_ref {
        let registered = target_cluster::is_registered(
            &ctx.op.client,
            &[namespace.as_str(), ctx.op.options.lease_namespace.as_str()],
            &target.name,
        )
        .await?;
        if !registered {
            let gate = Cond::false_(
                kind::SECRETS_READY,
                reason::TARGET_CLUSTER_UNAVAILABLE,
                format!(
                    "spec.targetClusterRef: target cluster {:?} is not registered",
                    target.name
                ),
            );
            write_if_changed(&api, &cinder, &gate_status(&cinder, &gate)).await?;
            let requeue = Requeue::RequeueSecretPolling;
            directory.pass_finished(
                &namespace,
                &name,
                "stopped at TargetCluster (TargetClusterUnavailable)",
                Some(requeue.interval()),
            );
            return Ok(Action::requeue(requeue.jittered()));
        }
    }

    if !finalizer::has(cinder.as_ref(), CINDER_FINALIZER) {
        finalizer::add(&api, cinder.as_ref(), CINDER_FINALIZER).await?;
        let requeue = Requeue::RequeueNextPass;
        directory.pass_finished(
            &namespace,
            &name,
            "finalizer added",
            Some(requeue.interval()),
        );
        return Ok(Action::requeue(requeue.jittered()));
    }

    directory.step_started(&namespace, &name, "pipeline");
    let report = match ctx.engine.send(Reconcile(cinder.clone())).await {
        Ok(Ok(report)) => report,
        Ok(Err(e)) => {
            directory.pass_finished(
                &namespace,
                &name,
                format!("pipeline unavailable: {e}"),
                None,
            );
            return Err(ReconcileError::Pipeline(e.to_string()));
        }
        Err(e) => {
            directory.pass_finished(&namespace, &name, "pipeline unavailable", None);
            return Err(ReconcileError::Pipeline(e.to_string()));
        }
    };
    if let Some(status) = report.status_write() {
        write_if_changed(&api, &cinder, status).await?;
    }
    let requeue = match (report.requeue, report.errors.is_empty()) {
        (Some(d), _) => Some(d),
        (None, false) => Some(Requeue::RequeueDeploymentPolling.interval()),
        (None, true) => None,
    };
    directory.pass_finished(
        &namespace,
        &name,
        crate::pipeline::registry::summarize(&report),
        requeue,
    );
    for e in &report.errors {
        tracing::warn!(cinder = %name, namespace = %namespace, step = e.step, error = %e.message, "step failed");
    }
    Ok(match (requeue, &report.end) {
        (_, PassEnd::InvalidSpec) => Action::await_change(),
        (Some(d), _) => Action::requeue(jittered(d)),
        (None, _) => Action::await_change(),
    })
}
