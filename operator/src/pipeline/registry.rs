//! The registry of pipeline actors: creates one per Cinder on first use, forwards reconcile
//! requests to it, retires it (and drops the Cinder's metric series) on deletion, and keeps the
//! view the admin endpoint's `/pipelines` shows (each Cinder's current step and last outcome).

use super::cinder_actor::{PipelineActor, RunPass};
use super::pass::{PassEnd, PassReport};
use super::step::TargetCluster;
use super::table::PipelineTable;
use crate::crd::Cinder;
use crate::metrics::Metrics;
use actix::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;

/// `(namespace, name)` of a Cinder.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CinderKey {
    pub namespace: String,
    pub name: String,
}

impl CinderKey {
    pub fn of(cinder: &Cinder) -> Self {
        CinderKey {
            namespace: cinder.metadata.namespace.clone().unwrap_or_default(),
            name: cinder.metadata.name.clone().unwrap_or_default(),
        }
    }
}

/// What `/pipelines` shows for one Cinder.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PipelineView {
    pub namespace: String,
    pub name: String,
    /// The step running now (the group's members are reported as they start).
    pub current_step: Option<String>,
    /// A one-line summary of the last finished pass.
    pub last_outcome: Option<String>,
    pub passes: u64,
}

/// One line for the admin view: how the pass ended and what it asked for.
pub fn summarize(report: &PassReport) -> String {
    let end = match &report.end {
        PassEnd::Completed => "completed".to_string(),
        PassEnd::ShortCircuited { step } => format!("stopped at {step}"),
        PassEnd::InvalidSpec => "invalid spec".to_string(),
    };
    let requeue = report
        .requeue
        .map(|d| format!(", requeue after {}s", d.as_secs_f64()))
        .unwrap_or_default();
    let errors = if report.errors.is_empty() {
        String::new()
    } else {
        format!(
            ", errors in {}",
            report
                .errors
                .iter()
                .map(|e| e.step)
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!("{end}{requeue}{errors}")
}

/// A pass could not be run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PipelineError {
    #[error("the pipeline actor of {0}/{1} is gone")]
    ActorGone(String, String),
}

/// Runs a pass of this Cinder snapshot through its pipeline actor, projecting its children onto
/// the resolved target cluster when there is one (`None`: the management cluster).
#[derive(Message)]
#[rtype(result = "Result<PassReport, PipelineError>")]
pub struct Reconcile(pub Arc<Cinder>, pub Option<TargetCluster>);

/// Retires a deleted Cinder's actor and drops its per-CR metric series.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Forget(pub CinderKey);

/// The view of every known pipeline, sorted by namespace and name.
#[derive(Message)]
#[rtype(result = "Vec<PipelineView>")]
pub struct Inspect;

/// Sent by a pipeline actor when a step starts.
#[derive(Message)]
#[rtype(result = "()")]
pub struct StepStarted {
    pub key: CinderKey,
    pub step: &'static str,
}

/// Sent by a pipeline actor when a pass ends.
#[derive(Message)]
#[rtype(result = "()")]
pub struct PassFinished {
    pub key: CinderKey,
    pub summary: String,
}

struct Entry {
    addr: Addr<PipelineActor>,
    view: PipelineView,
}

/// The registry actor.
pub struct Pipelines {
    table: Arc<PipelineTable>,
    metrics: Metrics,
    entries: BTreeMap<CinderKey, Entry>,
}

impl Pipelines {
    pub fn new(table: PipelineTable, metrics: Metrics) -> Self {
        Pipelines {
            table: Arc::new(table),
            metrics,
            entries: BTreeMap::new(),
        }
    }
}

impl Actor for Pipelines {
    type Context = Context<Self>;
}

impl Handler<Reconcile> for Pipelines {
    type Result = ResponseFuture<Result<PassReport, PipelineError>>;

    fn handle(&mut self, msg: Reconcile, ctx: &mut Self::Context) -> Self::Result {
        let key = CinderKey::of(&msg.0);
        let entry = self.entries.entry(key.clone()).or_insert_with(|| {
            let me = ctx.address();
            let actor = PipelineActor::new(key.clone(), self.table.clone(), self.metrics.clone())
                .with_observers(me.clone().recipient(), me.recipient());
            Entry {
                addr: actor.start(),
                view: PipelineView {
                    namespace: key.namespace.clone(),
                    name: key.name.clone(),
                    ..Default::default()
                },
            }
        });
        let addr = entry.addr.clone();
        Box::pin(async move {
            addr.send(RunPass(msg.0, msg.1))
                .await
                .map_err(|_| PipelineError::ActorGone(key.namespace, key.name))
        })
    }
}

impl Handler<Forget> for Pipelines {
    type Result = ();

    fn handle(&mut self, msg: Forget, _ctx: &mut Self::Context) {
        // Dropping the last address stops the actor once its mailbox is empty.
        self.entries.remove(&msg.0);
        self.metrics.forget_cinder(&msg.0.namespace, &msg.0.name);
    }
}

impl Handler<Inspect> for Pipelines {
    type Result = MessageResult<Inspect>;

    fn handle(&mut self, _msg: Inspect, _ctx: &mut Self::Context) -> Self::Result {
        MessageResult(self.entries.values().map(|e| e.view.clone()).collect())
    }
}

impl Handler<StepStarted> for Pipelines {
    type Result = ();

    fn handle(&mut self, msg: StepStarted, _ctx: &mut Self::Context) {
        if let Some(e) = self.entries.get_mut(&msg.key) {
            e.view.current_step = Some(msg.step.to_string());
        }
    }
}

impl Handler<PassFinished> for Pipelines {
    type Result = ();

    fn handle(&mut self, msg: PassFinished, _ctx: &mut Self::Context) {
        if let Some(e) = self.entries.get_mut(&msg.key) {
            e.view.current_step = None;
            e.view.last_outcome = Some(msg.summary);
            e.view.passes += 1;
        }
    }
}
