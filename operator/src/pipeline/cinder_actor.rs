//! The pipeline actor of one Cinder: its mailbox serializes the passes of that Cinder (a pass
//! holds the actor until it ends), while the actors of different Cinders run concurrently.

use super::pass::{PassObserver, PassReport, run_pass};
use super::registry::{CinderKey, PassFinished, StepStarted};
use super::table::PipelineTable;
use crate::crd::Cinder;
use crate::metrics::Metrics;
use actix::prelude::*;
use std::sync::Arc;

/// Runs one pass of the Cinder (a fresh snapshot of the CR).
#[derive(Message)]
#[rtype(result = "PassReport")]
pub struct RunPass(pub Arc<Cinder>, pub Option<super::step::TargetCluster>);

/// The per-Cinder pipeline actor.
pub struct PipelineActor {
    key: CinderKey,
    table: Arc<PipelineTable>,
    metrics: Metrics,
    progress: Option<Recipient<StepStarted>>,
    finished: Option<Recipient<PassFinished>>,
}

impl PipelineActor {
    pub fn new(key: CinderKey, table: Arc<PipelineTable>, metrics: Metrics) -> Self {
        PipelineActor {
            key,
            table,
            metrics,
            progress: None,
            finished: None,
        }
    }

    /// Reports each step start and each pass end to these recipients (the registry's view).
    pub fn with_observers(
        mut self,
        progress: Recipient<StepStarted>,
        finished: Recipient<PassFinished>,
    ) -> Self {
        self.progress = Some(progress);
        self.finished = Some(finished);
        self
    }
}

impl Actor for PipelineActor {
    type Context = Context<Self>;
}

struct ForwardProgress {
    key: CinderKey,
    to: Option<Recipient<StepStarted>>,
}

impl PassObserver for ForwardProgress {
    fn step_started(&mut self, step: &'static str) {
        if let Some(to) = &self.to {
            to.do_send(StepStarted {
                key: self.key.clone(),
                step,
            });
        }
    }
}

impl Handler<RunPass> for PipelineActor {
    type Result = AtomicResponse<Self, PassReport>;

    fn handle(&mut self, msg: RunPass, _ctx: &mut Self::Context) -> Self::Result {
        let table = self.table.clone();
        let metrics = self.metrics.clone();
        let mut observer = ForwardProgress {
            key: self.key.clone(),
            to: self.progress.clone(),
        };
        let finished = self.finished.clone();
        let key = self.key.clone();
        AtomicResponse::new(Box::pin(
            async move {
                let report = run_pass(&table, &metrics, msg.0, msg.1, &mut observer).await;
                if let Some(to) = finished {
                    to.do_send(PassFinished {
                        key,
                        summary: super::registry::summarize(&report),
                    });
                }
                report
            }
            .into_actor(self),
        ))
    }
}
