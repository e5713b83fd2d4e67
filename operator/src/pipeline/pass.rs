//! One reconcile pass of one Cinder: the spec check, the lane (ends at the first requeue or
//! error), the parallel group (all members, each on its own copy, one condition each, the
//! shortest requeue wins), the aggregate Ready, and the decision whether the status changed.

use super::artefacts::Artefacts;
use super::step::{
    EngineContext, Outcome, RunStep, StepContext, StepError, StepReport, StepResult, TargetCluster,
};
use super::table::{PipelineTable, StepHandle};
use super::view::StepRecord;
use crate::conditions::{self, Cond, kind, reason};
use crate::crd::validation::validate_cinder;
use crate::crd::{Cinder, CinderStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A step that ended with an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepFailure {
    pub step: &'static str,
    pub condition_type: &'static str,
    pub message: String,
}

/// How a pass ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PassEnd {
    /// Every lane step continued and the group ran.
    Completed,
    /// The lane ended early at this step (requeue or error); the group did not run.
    ShortCircuited { step: &'static str },
    /// The spec failed the operator's own validation; no step ran.
    InvalidSpec,
}

/// The result of one pass: always carries the status and the requeue.
#[derive(Clone, Debug)]
pub struct PassReport {
    /// The status after the pass.
    pub status: CinderStatus,
    /// True when `status` differs from the CR's status: only then is a write needed.
    pub status_changed: bool,
    /// The nominal requeue delay (shortest requested), if any step asked for one.
    pub requeue: Option<Duration>,
    pub end: PassEnd,
    /// Steps that returned an error (lane: at most one; group: any number).
    pub errors: Vec<StepFailure>,
    /// The artefacts at the end of the lane.
    pub artefacts: Artefacts,
    /// The steps that ran (lane first, then the group), each with its duration and condition.
    pub steps: Vec<StepRecord>,
}

impl PassReport {
    /// The status to write, only when it changed.
    pub fn status_write(&self) -> Option<&CinderStatus> {
        self.status_changed.then_some(&self.status)
    }

    /// When to reconcile again (nominal, before the jitter): the shortest requeue a step asked
    /// for, else on a change; `None` too after a step error, whose retry is the controller's
    /// per-Cinder backoff.
    pub fn requeue_after(&self) -> Option<Duration> {
        if self.errors.is_empty() {
            self.requeue
        } else {
            None
        }
    }

    /// One line for the admin view: how the pass ended and what it asked for.
    pub fn summary(&self) -> String {
        let end = match &self.end {
            PassEnd::Completed => "completed".to_string(),
            PassEnd::ShortCircuited { step } => format!("stopped at {step}"),
            PassEnd::InvalidSpec => "invalid spec".to_string(),
        };
        let requeue = self
            .requeue
            .map(|d| format!(", requeue after {}s", d.as_secs_f64()))
            .unwrap_or_default();
        let errors = if self.errors.is_empty() {
            String::new()
        } else {
            let steps: Vec<&str> = self.errors.iter().map(|e| e.step).collect();
            format!(
                ", errors in {} (retried after the per-Cinder backoff)",
                steps.join(", ")
            )
        };
        format!("{end}{requeue}{errors}")
    }
}

/// Observes a pass while it runs (the admin view of each Cinder's current step).
pub trait PassObserver: Send {
    fn step_started(&mut self, step: &'static str);

    /// Whether this replica may still write for the Cinder (it holds its shard); asked before
    /// every step, and the pass stops at the first `false`.
    fn still_owned(&self) -> bool {
        true
    }
}

impl PassObserver for () {
    fn step_started(&mut self, _step: &'static str) {}
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

fn shorter(a: Option<Duration>, b: Duration) -> Option<Duration> {
    Some(a.map_or(b, |a| a.min(b)))
}

/// Sends one step the operator's context and its own, and times the run; a lost actor reply is
/// an error outcome.
async fn run_step<C: EngineContext>(
    handle: &StepHandle<C>,
    op: &Arc<C>,
    ctx: StepContext,
) -> (StepReport, Duration) {
    let fallback = ctx.clone();
    let started = Instant::now();
    let span = crate::telemetry::step_span(handle.name.as_str());
    let report = match handle
        .addr
        .send(RunStep(op.clone(), ctx, span.clone()))
        .await
    {
        Ok(report) => report,
        Err(e) => fallback.into_report(Err(StepError::Failed(format!(
            "step actor unavailable: {e}"
        )))),
    };
    let elapsed = started.elapsed();
    op.metrics().observe_step(handle.name.as_str(), elapsed);
    span.in_scope(|| crate::telemetry::step_ran(&report.result, elapsed));
    (report, elapsed)
}

/// The condition of `handle`'s own type a step run left in `conditions`.
fn own_condition<'a, C: EngineContext>(
    handle: &StepHandle<C>,
    conditions: &'a [Cond],
) -> Option<&'a Cond> {
    conditions
        .iter()
        .find(|c| c.type_ == handle.name.condition_type())
}

/// The condition a failed step leaves when it reported none for its own type.
fn error_condition<C: EngineContext>(handle: &StepHandle<C>, error: &StepError) -> Cond {
    Cond::false_(
        handle.name.condition_type(),
        error.reason(),
        error.to_string(),
    )
}

/// Ends a status the way every pass and every gate ahead of it does: the aggregate Ready
/// recomputed from the sub-conditions and observedGeneration stamped.
pub fn finish_status(status: &mut CinderStatus, generation: Option<i64>, stamp: &Time) {
    let ready = super::ready::aggregate_ready(&status.conditions);
    conditions::set_condition(&mut status.conditions, &ready, generation, stamp);
    status.observed_generation = generation;
}

/// The working state of one pass: what the steps produced so far.
struct Pass<'a, C> {
    op: &'a Arc<C>,
    cinder: Arc<Cinder>,
    target: Option<TargetCluster>,
    generation: Option<i64>,
    stamp: Time,
    status: CinderStatus,
    artefacts: Artefacts,
    requeue: Option<Duration>,
    errors: Vec<StepFailure>,
    steps: Vec<StepRecord>,
}

impl<C: EngineContext> Pass<'_, C> {
    /// The context a step runs with: a copy of what the pass holds now.
    fn context(&self) -> StepContext {
        StepContext {
            artefacts: self.artefacts.clone(),
            status: self.status.clone(),
            ..StepContext::new(
                self.cinder.clone(),
                self.target.clone(),
                self.op.reads().clone(),
            )
        }
    }

    fn set(&mut self, condition: &Cond) {
        conditions::set_condition(
            &mut self.status.conditions,
            condition,
            self.generation,
            &self.stamp,
        );
    }

    /// Takes in how one step ended, with `own`, the condition of its type it reported: an error
    /// is counted and leaves `own` or, without one, the engine's error condition; a requeue
    /// shortens the pass's. Returns whether the step continued.
    fn settle(
        &mut self,
        handle: &StepHandle<C>,
        result: StepResult,
        own: Option<Cond>,
        elapsed: Duration,
    ) -> bool {
        let (name, condition_type) = (handle.name.as_str(), handle.name.condition_type());
        let (own, continued) = match result {
            Ok(Outcome::Continue) => (own, true),
            Ok(Outcome::ContinueDespite(_)) => {
                self.op.metrics().count_step_error(name, condition_type);
                (own, true)
            }
            Ok(Outcome::RequeueAfter(d)) => {
                self.requeue = shorter(self.requeue, d);
                (own, false)
            }
            Err(error) => {
                self.op.metrics().count_step_error(name, condition_type);
                let c = own.unwrap_or_else(|| error_condition(handle, &error));
                self.errors.push(StepFailure {
                    step: name,
                    condition_type,
                    message: error.to_string(),
                });
                (Some(c), false)
            }
        };
        self.steps
            .push(StepRecord::new(name, elapsed, own.as_ref()));
        if let Some(c) = own {
            self.set(&c);
        }
        continued
    }

    /// The report of the pass that ended as `end`, with the aggregate Ready unless the spec was
    /// refused.
    fn finish(mut self, before: CinderStatus, end: PassEnd) -> PassReport {
        if end == PassEnd::InvalidSpec {
            self.status.observed_generation = self.generation;
        } else {
            finish_status(&mut self.status, self.generation, &self.stamp);
        }
        let status_changed = self.status != before;
        PassReport {
            status: self.status,
            status_changed,
            requeue: self.requeue,
            end,
            errors: self.errors,
            artefacts: self.artefacts,
            steps: self.steps,
        }
    }
}

/// Runs one pass of `cinder` through `table`, each step with `op`.
pub async fn run_pass<C: EngineContext>(
    table: &PipelineTable<C>,
    op: &Arc<C>,
    cinder: Arc<Cinder>,
    target: Option<TargetCluster>,
    observer: &mut dyn PassObserver,
) -> PassReport {
    let before = cinder.status.clone().unwrap_or_default();
    let mut pass = Pass {
        op,
        generation: cinder.metadata.generation,
        cinder,
        target,
        stamp: now(),
        status: before.clone(),
        artefacts: Artefacts::default(),
        requeue: None,
        errors: Vec::new(),
        steps: Vec::new(),
    };

    let name = pass.cinder.metadata.name.clone().unwrap_or_default();
    if let Err(e) = validate_cinder(&name, &pass.cinder.spec) {
        pass.set(&Cond::false_(
            kind::READY,
            reason::INVALID_SPEC,
            e.to_string(),
        ));
        return pass.finish(before, PassEnd::InvalidSpec);
    }

    // The lane: each step borrows the pass's state (its status and artefacts carry on).
    for handle in &table.lane {
        if !observer.still_owned() {
            return pass.finish(
                before,
                PassEnd::ShortCircuited {
                    step: handle.name.as_str(),
                },
            );
        }
        observer.step_started(handle.name.as_str());
        let (report, elapsed) = run_step(handle, op, pass.context()).await;
        let conds = std::mem::take(&mut pass.status.conditions);
        pass.status = report.status;
        pass.status.conditions = conds;
        pass.artefacts = report.artefacts;
        for c in &report.conditions {
            pass.set(c);
        }
        let own = own_condition(handle, &report.conditions).cloned();
        if !pass.settle(handle, report.result, own, elapsed) {
            let step = handle.name.as_str();
            return pass.finish(before, PassEnd::ShortCircuited { step });
        }
    }

    // The group: every member on its own copy; only its own condition is taken.
    if let Some(first) = table.group.first()
        && !observer.still_owned()
    {
        return pass.finish(
            before,
            PassEnd::ShortCircuited {
                step: first.name.as_str(),
            },
        );
    }
    for handle in &table.group {
        observer.step_started(handle.name.as_str());
    }
    let runs = table.group.iter().map(|handle| {
        let ctx = pass.context();
        async move { (handle, run_step(handle, op, ctx).await) }
    });
    for (handle, (report, elapsed)) in futures::future::join_all(runs).await {
        let own = own_condition(handle, &report.conditions).cloned();
        pass.settle(handle, report.result, own, elapsed);
    }
    pass.finish(before, PassEnd::Completed)
}
