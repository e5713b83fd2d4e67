//! The Cinder reconcile: deletion (finalizer release after retiring the Cinder's pipeline), the
//! target-cluster gate, the first-pass finalizer add, then one pass through the Cinder's pipeline
//! actor ([`Reconcile`] to the registry). The status is written on every exit path, only when
//! it changed, and every requeue goes through the project's jitter. A reconcile that ends before
//! the steps is recorded in the Cinder's `/pipelines` record with [`GateStopped`].

use super::deletion;
use super::status::{StatusWrite, gate_status, skeleton_status, write_if_changed};
use crate::conditions::{Cond, event_reason, kind, reason};
use crate::context::OperatorContext;
use crate::crd::Cinder;
use crate::kube_ext::finalizer;
use crate::kube_ext::ownership::{OWNER_LABEL, owner_value};
use crate::metrics::ErrorPhase;
use crate::names::CINDER_FINALIZER;
use crate::pipeline::schedule::Retry;
use crate::pipeline::{
    AdmissionRank, Admit, CinderKey, Forget, GateStopped, PassEnd, PassFailed, PassNotWritten,
    PassRequest, PassSucceeded, Reconcile, Turn,
};
use crate::requeue::{Requeue, jittered};
use crate::target_cluster;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource, ResourceExt};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// When a Cinder queued for a reconcile slot is reconciled again if its grant's wake-up was
/// lost (it is woken as soon as a slot is granted to it; this is only the backstop).
const QUEUED_RECHECK: Duration = Duration::from_secs(60);

async fn publish(
    ctx: &OperatorContext,
    cinder: &Cinder,
    type_: EventType,
    reason: &str,
    note: String,
) {
    let event = Event {
        type_,
        reason: reason.to_string(),
        note: Some(note),
        action: "Finalize".to_string(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &cinder.object_ref(&())).await {
        tracing::warn!(cinder = %cinder.name_any(), reason, error = %e, "publishing an event failed");
    }
}

/// When a reconcile started, to record one that ends before the steps.
struct Started {
    key: CinderKey,
    at: chrono::DateTime<chrono::Utc>,
    clock: Instant,
}

impl Started {
    fn now(cinder: &Cinder) -> Self {
        Started {
            key: CinderKey::of(cinder),
            at: chrono::Utc::now(),
            clock: Instant::now(),
        }
    }

    /// Records the reconcile as ended with `outcome` and `requeue` (nominal).
    fn stopped(
        self,
        ctx: &OperatorContext,
        outcome: impl Into<String>,
        requeue: Option<std::time::Duration>,
    ) {
        ctx.pipelines.do_send(GateStopped {
            key: self.key,
            started_at: self.at,
            duration: self.clock.elapsed(),
            outcome: outcome.into(),
            requeue,
        });
    }
}

/// The deletion under the Cinder finalizer: children on a resolvable target cluster are deleted
/// by the ownership label; a target deregistered meanwhile releases against no cleanup with a
/// RemoteChildrenAbandoned Warning; otherwise Delete goes to the MariaDB Database/User/Grant and
/// the finalizer stays (FinalizingDatabase, requeue 30 s) while any is live. On release the
/// pipeline and the Cinder's metric series are dropped and the probe cache is evicted.
async fn finalize(
    cinder: &Arc<Cinder>,
    ctx: &OperatorContext,
    api: &Api<Cinder>,
) -> Result<Action, ReconcileError> {
    let namespace = cinder.namespace().unwrap_or_default();
    let name = cinder.name_any();
    let started = Started::now(cinder);
    let mut abandoned = false;
    if let Some(target) = &cinder.spec.target_cluster_ref {
        let owner = owner_value(&namespace, &name);
        match ctx
            .targets
            .resolve(&namespace, &target.name)
            .await
            .map_err(ReconcileError::at(ErrorPhase::Finalize))?
        {
            Ok(remote) => {
                let deleted = target_cluster::delete_children(&remote, &namespace, &owner)
                    .await
                    .map_err(ReconcileError::at(ErrorPhase::Finalize))?;
                if !deleted.is_empty() {
                    tracing::info!(cinder = %name, namespace = %namespace, target = %target.name, children = deleted.len(), "deleting the children on the target cluster");
                }
            }
            Err(why) => {
                abandoned = true;
                publish(
                    ctx,
                    cinder,
                    EventType::Warning,
                    event_reason::REMOTE_CHILDREN_ABANDONED,
                    format!(
                        "{why}; the children labelled {}={owner} stay behind on it (and the MariaDB Database/User/Grant {name} are not cleaned up)",
                        OWNER_LABEL
                    ),
                )
                .await;
            }
        }
    }
    if !abandoned {
        let live = deletion::delete_database_objects(&ctx.client, &ctx.reads, cinder)
            .await
            .map_err(ReconcileError::at(ErrorPhase::Finalize))?;
        if !live.is_empty() {
            publish(
                ctx,
                cinder,
                EventType::Normal,
                event_reason::FINALIZING_DATABASE,
                format!("waiting for the deletion of {}", live.join(", ")),
            )
            .await;
            let requeue = Requeue::RequeueDatabaseWait;
            started.stopped(
                ctx,
                format!("finalizing: {} still live", live.join(", ")),
                Some(requeue.interval()),
            );
            return Ok(Action::requeue(requeue.jittered()));
        }
    }
    ctx.pipelines
        .send(Forget(started.key))
        .await
        .map_err(ReconcileError::pipeline)?;
    finalizer::remove(api, cinder.as_ref(), CINDER_FINALIZER)
        .await
        .map_err(ReconcileError::at(ErrorPhase::Finalize))?;
    if !abandoned {
        publish(
            ctx,
            cinder,
            EventType::Normal,
            event_reason::DATABASE_FINALIZED,
            "the MariaDB Database, User and Grant are gone; finalizer released".to_string(),
        )
        .await;
    }
    tracing::info!(cinder = %name, namespace = %namespace, abandoned, "finalizer released");
    Ok(Action::await_change())
}

/// Forgets each Cinder that left the cluster (the index's Cinder departures) until `shutdown`:
/// its pipeline actor and `/pipelines` record, its metric series and what the step actors
/// remember of it ([`Forget`], which the finalizer's release sends too; a Cinder that goes
/// without that release, deleted before its finalizer was added or with the finalizer removed
/// by hand, is forgotten only here), with its failure count.
pub(crate) async fn forget_departed(
    mut departures: futures::channel::mpsc::UnboundedReceiver<(String, String)>,
    ctx: Arc<OperatorContext>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    use futures::StreamExt as _;
    loop {
        let (namespace, name) = tokio::select! {
            _ = shutdown.wait_for(|s| *s) => return,
            next = departures.next() => match next {
                Some(key) => key,
                None => return,
            },
        };
        // The registry goes only with the operator; nothing is left to forget then.
        let _ = ctx
            .pipelines
            .send(Forget(CinderKey { namespace, name }))
            .await;
    }
}

/// A reconcile that failed, with the retry the registry gave it (`error_policy` requeues after
/// it).
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub(crate) struct Failed {
    #[source]
    pub error: ReconcileError,
    pub retry: Retry,
}

/// A pass that could not finish, and where.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReconcileError {
    #[error("{phase}: kubernetes API: {source}")]
    Kube {
        phase: ErrorPhase,
        #[source]
        source: kube::Error,
    },
    #[error("{phase}: {message}")]
    Pipeline { phase: ErrorPhase, message: String },
}

impl ReconcileError {
    /// Where the reconcile failed.
    pub(crate) fn phase(&self) -> ErrorPhase {
        match self {
            ReconcileError::Kube { phase, .. } | ReconcileError::Pipeline { phase, .. } => *phase,
        }
    }

    /// Wraps an API error of `phase` (for `map_err`).
    fn at(phase: ErrorPhase) -> impl FnOnce(kube::Error) -> ReconcileError {
        move |source| ReconcileError::Kube { phase, source }
    }

    /// The pipelines registry or the Cinder's pipeline actor did not answer.
    fn pipeline(message: impl std::fmt::Display) -> ReconcileError {
        ReconcileError::Pipeline {
            phase: ErrorPhase::PipelineUnavailable,
            message: message.to_string(),
        }
    }
}

/// From this many failures in a row a Cinder's failing reconcile is also a Warning Event
/// (ReconcileFailed) on the Cinder: one failure is usually a passing API hiccup, three in a row
/// (about 7 s of backoff) are something the user should see without reading the logs.
pub(crate) const PERSISTENT_FAILURES: u32 = 3;

/// The retry after a failed pass: exponential per Cinder, with a ceiling
/// ([`crate::requeue::backoff`]), as the registry gave it. Every failure is counted in
/// `cinder_operator_controller_errors_total{phase}` and logged at WARN with the Cinder's name;
/// from [`PERSISTENT_FAILURES`] in a row on, each one is also a ReconcileFailed Warning Event on
/// the Cinder (one event series, counted).
pub(crate) fn error_policy(
    cinder: Arc<Cinder>,
    failed: &Failed,
    ctx: Arc<OperatorContext>,
) -> Action {
    let error = &failed.error;
    let phase = error.phase();
    ctx.metrics.count_controller_error(phase);
    let Retry {
        after: retry,
        failures,
    } = failed.retry;
    tracing::warn!(
        cinder = %cinder.name_any(),
        namespace = cinder.metadata.namespace.as_deref().unwrap_or_default(),
        phase = %phase,
        failures,
        retry_in_ms = u64::try_from(retry.as_millis()).unwrap_or(u64::MAX),
        error = %error,
        "reconcile failed; retrying"
    );
    if failures >= PERSISTENT_FAILURES {
        let note = format!(
            "{failures} reconciles in a row failed; retrying in {} s: {error}",
            retry.as_secs().max(1)
        );
        let reconciler = ctx.clone();
        tokio::spawn(async move {
            let event = Event {
                type_: EventType::Warning,
                reason: event_reason::RECONCILE_FAILED.to_string(),
                note: Some(note),
                action: format!("Reconcile/{phase}"),
                secondary: None,
            };
            if let Err(e) = reconciler
                .recorder
                .publish(&event, &cinder.object_ref(&()))
                .await
            {
                tracing::warn!(cinder = %cinder.name_any(), error = %e, "publishing ReconcileFailed failed");
            }
        });
    }
    Action::requeue(retry)
}

/// How a reconcile that returned ended: clean, or with failed steps (its status is written and
/// the retry follows the per-Cinder backoff, as after an error).
enum Ended {
    Clean(Action),
    StepsFailed,
}

/// One reconcile of one Cinder, in its pass span (the Cinder and the trace id on every line).
/// A Cinder of a shard this replica does not hold is left alone (`--shards`): the replica that
/// holds it reconciles it, and this one is woken when it gains the shard. A Cinder that finds
/// every reconcile slot taken (`--max-concurrent-reconciles`) returns at once, queued in the
/// pipelines registry, which wakes it when a slot is granted to it. After a failed
/// reconcile (an error, or a pass with a failed step) an event that comes before the retry
/// time waits for it ([`crate::requeue::backoff`]), unless the spec changed or the Cinder is
/// deleted; and a pass starts no sooner than [`crate::pipeline::MIN_PASS_GAP`] after the last
/// one (the registry's [`Admit`] decides all three).
pub(crate) async fn reconcile(
    cinder: Arc<Cinder>,
    ctx: Arc<OperatorContext>,
) -> Result<Action, Failed> {
    if !owns(&ctx, &cinder) {
        return Ok(Action::await_change());
    }
    let key = CinderKey::of(&cinder);
    let generation = cinder.metadata.generation;
    let failed = |error: ReconcileError| async {
        Failed {
            error,
            retry: retry_after_failure(&ctx, &key, generation).await,
        }
    };
    let admitted = ctx
        .pipelines
        .send(Admit {
            key: key.clone(),
            rank: admission_rank(&cinder),
            generation,
            deleting: cinder.metadata.deletion_timestamp.is_some(),
        })
        .await;
    let _slot = match admitted {
        Ok(Turn::Run(slot)) => slot,
        Ok(Turn::Queued) => return Ok(Action::requeue(jittered(QUEUED_RECHECK))),
        Ok(Turn::Wait(wait)) => return Ok(Action::requeue(wait)),
        Err(e) => return Err(failed(ReconcileError::pipeline(e)).await),
    };
    let pass = crate::telemetry::pass_span(
        cinder.metadata.namespace.as_deref().unwrap_or_default(),
        cinder.metadata.name.as_deref().unwrap_or_default(),
    );
    let span = pass.span.clone();
    let result =
        tracing::Instrument::instrument(reconcile_in_span(cinder, ctx.clone()), span).await;
    match result {
        Ok(Ended::Clean(action)) => {
            ctx.pipelines.do_send(PassSucceeded(key.clone()));
            Ok(action)
        }
        Ok(Ended::StepsFailed) => Ok(Action::requeue(
            retry_after_failure(&ctx, &key, generation).await.after,
        )),
        Err(error) => Err(failed(error).await),
    }
}

/// Counts a failed reconcile of `key` in the registry and answers when it is retried (the
/// ceiling when the registry is gone: the operator is stopping).
async fn retry_after_failure(
    ctx: &OperatorContext,
    key: &CinderKey,
    generation: Option<i64>,
) -> Retry {
    ctx.pipelines
        .send(PassFailed {
            key: key.clone(),
            generation,
        })
        .await
        .unwrap_or(Retry {
            after: jittered(crate::requeue::BACKOFF_CEILING),
            failures: 1,
        })
}

/// Where the Cinder queues for a reconcile slot: by creation time, oldest first.
fn admission_rank(cinder: &Cinder) -> AdmissionRank {
    cinder
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(i64::MIN, |t| t.0.as_second())
}

/// Whether this replica holds the Cinder's shard now.
fn owns(ctx: &OperatorContext, cinder: &Cinder) -> bool {
    ctx.shards.owns(
        cinder.metadata.namespace.as_deref().unwrap_or_default(),
        cinder.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// Stops the pass at the target-cluster gate: SecretsReady False (TargetClusterUnavailable)
/// written to the status, polled again like a missing Secret.
async fn target_unavailable(
    cinder: &Cinder,
    ctx: &OperatorContext,
    api: &Api<Cinder>,
    started: Started,
    why: impl std::fmt::Display,
) -> Result<Action, ReconcileError> {
    let gate = Cond::false_(
        kind::SECRETS_READY,
        reason::TARGET_CLUSTER_UNAVAILABLE,
        format!("spec.targetClusterRef: {why}"),
    );
    let status = gate_status(cinder, &gate);
    let written = write_if_changed(api, cinder, &status)
        .await
        .map_err(ReconcileError::at(ErrorPhase::StatusWrite))?;
    if written == StatusWrite::Written {
        crate::events::status_changed(&ctx.recorder, cinder, &status).await;
    }
    let requeue = Requeue::RequeueSecretPolling;
    started.stopped(
        ctx,
        "stopped at TargetCluster (TargetClusterUnavailable)",
        Some(requeue.interval()),
    );
    Ok(Action::requeue(requeue.jittered()))
}

async fn reconcile_in_span(
    cinder: Arc<Cinder>,
    ctx: Arc<OperatorContext>,
) -> Result<Ended, ReconcileError> {
    let namespace = cinder.namespace().unwrap_or_default();
    let name = cinder.name_any();
    let api: Api<Cinder> = Api::namespaced(ctx.client.clone(), &namespace);

    if cinder.metadata.deletion_timestamp.is_some() {
        if finalizer::has(cinder.as_ref(), CINDER_FINALIZER) {
            let finalized = finalize(&cinder, &ctx, &api).await;
            if let Err(e) = &finalized {
                // The retry is the controller's; the user learns why the Cinder stays Terminating
                // (a missing permission, an API server that refuses) without reading the logs.
                publish(
                    &ctx,
                    &cinder,
                    EventType::Warning,
                    event_reason::FINALIZATION_FAILED,
                    format!("the finalizer stays and the cleanup is retried: {e}"),
                )
                .await;
            }
            return finalized.map(Ended::Clean);
        }
        return Ok(Ended::Clean(Action::await_change()));
    }

    let started = Started::now(&cinder);
    let resolved = ctx
        .targets
        .resolve_for(&cinder)
        .await
        .map_err(ReconcileError::at(ErrorPhase::TargetResolution))?;
    let target = match resolved {
        Ok(target) => target,
        Err(why) => {
            return target_unavailable(&cinder, &ctx, &api, started, why)
                .await
                .map(Ended::Clean);
        }
    };

    if !finalizer::has(cinder.as_ref(), CINDER_FINALIZER) {
        let added = finalizer::added(&api, cinder.as_ref(), CINDER_FINALIZER)
            .await
            .map_err(ReconcileError::at(ErrorPhase::FinalizerAdd))?;
        // Every exit path writes the status: this one its skeleton (observedGeneration, Ready).
        if let Some(added) = added {
            let status = skeleton_status(&added);
            let written = write_if_changed(&api, &added, &status)
                .await
                .map_err(ReconcileError::at(ErrorPhase::StatusWrite))?;
            if written == StatusWrite::Written {
                crate::events::status_changed(&ctx.recorder, &added, &status).await;
            }
        }
        let requeue = Requeue::RequeueNextPass;
        started.stopped(&ctx, "finalizer added", Some(requeue.interval()));
        return Ok(Ended::Clean(Action::requeue(requeue.jittered())));
    }

    let report = match ctx
        .pipelines
        .send(Reconcile(PassRequest {
            op: ctx.clone(),
            cinder: cinder.clone(),
            target,
            span: tracing::Span::current(),
        }))
        .await
    {
        Ok(Ok(report)) => report,
        Ok(Err(e)) => {
            started.stopped(&ctx, format!("pipeline unavailable: {e}"), None);
            return Err(ReconcileError::pipeline(e));
        }
        Err(e) => {
            started.stopped(&ctx, "pipeline unavailable", None);
            return Err(ReconcileError::pipeline(e));
        }
    };
    if !owns(&ctx, &cinder) {
        // The shard went to another replica during the pass: it writes the status from now on.
        ctx.pipelines.do_send(PassNotWritten {
            key: started.key,
            outcome: "not written: this replica lost the Cinder's shard during the pass"
                .to_string(),
            requeue: None,
        });
        return Ok(Ended::Clean(Action::await_change()));
    }
    let written = match report.status_write() {
        Some(status) => write_if_changed(&api, &cinder, status)
            .await
            .map_err(ReconcileError::at(ErrorPhase::StatusWrite))?,
        None => StatusWrite::Unchanged,
    };
    if written == StatusWrite::Written {
        crate::events::status_changed(&ctx.recorder, &cinder, &report.status).await;
    }
    ctx.metrics
        .observe_cinder(&namespace, &name, &report.status);
    if written == StatusWrite::Stale {
        // The Cinder changed while the pass ran: its result is not written; a pass on the newer
        // version decides (the change's own watch event usually brings it first).
        ctx.pipelines.do_send(PassNotWritten {
            key: started.key,
            outcome: "not written: the Cinder changed during the pass".to_string(),
            requeue: Some(Requeue::RequeueNextPass.interval()),
        });
        return Ok(Ended::Clean(Action::requeue(
            Requeue::RequeueNextPass.jittered(),
        )));
    }
    for e in &report.errors {
        tracing::warn!(cinder = %name, namespace = %namespace, step = e.step, error = %e.message, "step failed");
    }
    if !report.errors.is_empty() {
        return Ok(Ended::StepsFailed);
    }
    Ok(Ended::Clean(match (report.requeue_after(), &report.end) {
        (_, PassEnd::InvalidSpec) => Action::await_change(),
        (Some(d), _) => Action::requeue(jittered(d)),
        (None, _) => Action::await_change(),
    }))
}
