//! One reconcile pass of one Cinder: the spec check, the lane (ends at the first requeue or
//! error), the parallel group (all members, each on its own copy, one condition each, the
//! shortest requeue wins), the aggregate Ready, and the decision whether the status changed.

use super::artefacts::Artefacts;
use super::step::{Outcome, StepContext, StepReport, TargetCluster};
use super::table::{PipelineTable, RunStep, StepHandle};
use crate::conditions::{self, Cond, kind, reason};
use crate::crd::validation::validate_cinder;
use crate::crd::{Cinder, CinderStatus};
use crate::metrics::Metrics;
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
}

impl PassReport {
    /// The status to write, only when it changed.
    pub fn status_write(&self) -> Option<&CinderStatus> {
        self.status_changed.then_some(&self.status)
    }
    /// The requeue through the project's jitter (seed 002: every periodic requeue).
    pub fn requeue_jittered(&self) -> Option<Duration> {
        self.requeue.map(crate::requeue::jittered)
    }
}

/// Observes a pass while it runs (the admin view of each Cinder's current step).
pub trait PassObserver: Send {
    fn step_started(&mut self, step: &'static str);
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

/// Sends one step its context and times the run; a lost actor reply is an error outcome.
async fn run_step(handle: &StepHandle, ctx: StepContext, metrics: &Metrics) -> StepReport {
    let fallback = ctx.clone();
    let started = Instant::now();
    let span = crate::telemetry::step_span(&ctx.cinder, handle.name);
    let report = match handle.addr.send(RunStep(ctx, span.clone())).await {
        Ok(report) => report,
        Err(e) => fallback.report(
            Vec::new(),
            Outcome::Error(format!("step actor unavailable: {e}")),
        ),
    };
    let elapsed = started.elapsed();
    metrics.observe_step(handle.name, elapsed);
    span.in_scope(|| crate::telemetry::step_ran(&report.outcome, elapsed));
    report
}

/// The condition a failed step leaves when it reported none for its own type.
fn error_condition(handle: &StepHandle, message: &str) -> Cond {
    Cond::false_(
        handle.condition_type,
        reason::RECONCILE_ERROR,
        message.to_string(),
    )
}

/// Runs one pass of `cinder` through `table`.
pub async fn run_pass(
    table: &PipelineTable,
    metrics: &Metrics,
    cinder: Arc<Cinder>,
    target: Option<TargetCluster>,
    observer: &mut dyn PassObserver,
) -> PassReport {
    let before = cinder.status.clone().unwrap_or_default();
    let generation = cinder.metadata.generation;
    let stamp = now();
    let mut status = before.clone();
    let mut artefacts = Artefacts::default();
    let mut requeue = None;
    let mut errors = Vec::new();
    let mut end = PassEnd::Completed;

    let name = cinder.metadata.name.clone().unwrap_or_default();
    if let Err(e) = validate_cinder(&name, &cinder.spec) {
        conditions::set_condition(
            &mut status.conditions,
            &Cond::false_(kind::READY, reason::INVALID_SPEC, e.to_string()),
            generation,
            &stamp,
        );
        status.observed_generation = generation;
        return finish(
            before,
            status,
            None,
            PassEnd::InvalidSpec,
            errors,
            artefacts,
        );
    }

    for handle in &table.lane {
        observer.step_started(handle.name);
        let ctx = StepContext {
            cinder: cinder.clone(),
            target: target.clone(),
            artefacts: artefacts.clone(),
            status: status.clone(),
        };
        let report = run_step(handle, ctx, metrics).await;
        let conds = std::mem::take(&mut status.conditions);
        status = report.status;
        status.conditions = conds;
        artefacts = report.artefacts;
        for c in &report.conditions {
            conditions::set_condition(&mut status.conditions, c, generation, &stamp);
        }
        match report.outcome {
            Outcome::Continue => continue,
            Outcome::RequeueAfter(d) => {
                requeue = shorter(requeue, d);
            }
            Outcome::Error(message) => {
                metrics.count_step_error(handle.name, handle.condition_type);
                if !report
                    .conditions
                    .iter()
                    .any(|c| c.type_ == handle.condition_type)
                {
                    conditions::set_condition(
                        &mut status.conditions,
                        &error_condition(handle, &message),
                        generation,
                        &stamp,
                    );
                }
                errors.push(StepFailure {
                    step: handle.name,
                    condition_type: handle.condition_type,
                    message,
                });
            }
        }
        end = PassEnd::ShortCircuited { step: handle.name };
        break;
    }

    if end == PassEnd::Completed && !table.group.is_empty() {
        for handle in &table.group {
            observer.step_started(handle.name);
        }
        let runs = table.group.iter().map(|handle| {
            let ctx = StepContext {
                cinder: cinder.clone(),
                target: target.clone(),
                artefacts: artefacts.clone(),
                status: status.clone(),
            };
            async move { (handle, run_step(handle, ctx, metrics).await) }
        });
        for (handle, report) in futures::future::join_all(runs).await {
            let own = report
                .conditions
                .iter()
                .find(|c| c.type_ == handle.condition_type)
                .cloned();
            match report.outcome {
                Outcome::Continue => {}
                Outcome::RequeueAfter(d) => requeue = shorter(requeue, d),
                Outcome::Error(message) => {
                    metrics.count_step_error(handle.name, handle.condition_type);
                    let c = own
                        .clone()
                        .unwrap_or_else(|| error_condition(handle, &message));
                    conditions::set_condition(&mut status.conditions, &c, generation, &stamp);
                    errors.push(StepFailure {
                        step: handle.name,
                        condition_type: handle.condition_type,
                        message,
                    });
                    continue;
                }
            }
            if let Some(c) = own {
                conditions::set_condition(&mut status.conditions, &c, generation, &stamp);
            }
        }
    }

    let ready = conditions::aggregate_ready(&status.conditions);
    conditions::set_condition(&mut status.conditions, &ready, generation, &stamp);
    status.observed_generation = generation;
    finish(before, status, requeue, end, errors, artefacts)
}

fn finish(
    before: CinderStatus,
    status: CinderStatus,
    requeue: Option<Duration>,
    end: PassEnd,
    errors: Vec<StepFailure>,
    artefacts: Artefacts,
) -> PassReport {
    let status_changed = status != before;
    PassReport {
        status,
        status_changed,
        requeue,
        end,
        errors,
        artefacts,
    }
}
