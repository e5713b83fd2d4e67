//! [`PipelineTable`]: the step actors a pipeline uses, the lane in order and the group; the
//! product table checks each step against [`StepName`].

use super::step::{EngineContext, Step, StepActor};
use super::step_name::StepName;
use actix::prelude::*;
use std::sync::Arc;

/// One entry of the table: a step's name and the address of its actor.
pub struct StepHandle<C: EngineContext> {
    pub name: StepName,
    pub addr: Addr<StepActor<C>>,
}

impl<C: EngineContext> Clone for StepHandle<C> {
    fn clone(&self) -> Self {
        StepHandle {
            name: self.name,
            addr: self.addr.clone(),
        }
    }
}

impl<C: EngineContext> StepHandle<C> {
    /// Starts the actor of `step` (inside a running actix system).
    pub fn start(step: Arc<dyn Step<C>>) -> Self {
        StepHandle {
            name: step.name(),
            addr: StepActor::new(step).start(),
        }
    }
}

/// A step the product table cannot hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    #[error("step {0} was given twice")]
    Duplicate(&'static str),
}

/// The lane and the group a pipeline runs, its steps run with the long-lived context `C`.
pub struct PipelineTable<C: EngineContext> {
    pub lane: Vec<StepHandle<C>>,
    pub group: Vec<StepHandle<C>>,
}

impl<C: EngineContext> Clone for PipelineTable<C> {
    fn clone(&self) -> Self {
        PipelineTable {
            lane: self.lane.clone(),
            group: self.group.clone(),
        }
    }
}

impl<C: EngineContext> Default for PipelineTable<C> {
    fn default() -> Self {
        PipelineTable {
            lane: Vec::new(),
            group: Vec::new(),
        }
    }
}

impl<C: EngineContext> PipelineTable<C> {
    /// Any lane and group, in the given order (tests and experiments).
    pub fn custom(lane: Vec<Arc<dyn Step<C>>>, group: Vec<Arc<dyn Step<C>>>) -> Self {
        PipelineTable {
            lane: lane.into_iter().map(StepHandle::start).collect(),
            group: group.into_iter().map(StepHandle::start).collect(),
        }
    }

    /// The product table from the real steps that exist, each step at most once; lane steps are
    /// ordered as [`LANE`], group members as [`GROUP`].
    pub fn product(steps: Vec<Arc<dyn Step<C>>>) -> Result<Self, TableError> {
        let mut named: Vec<(StepName, Arc<dyn Step<C>>)> = Vec::new();
        for step in steps {
            let name = step.name();
            if named.iter().any(|(n, _)| *n == name) {
                return Err(TableError::Duplicate(name.as_str()));
            }
            named.push((name, step));
        }
        named.sort_by_key(|(n, _)| *n);
        let (group, lane): (Vec<_>, Vec<_>) = named.into_iter().partition(|(n, _)| n.in_group());
        Ok(PipelineTable::custom(
            lane.into_iter().map(|(_, s)| s).collect(),
            group.into_iter().map(|(_, s)| s).collect(),
        ))
    }

    /// Every step, lane first.
    pub fn handles(&self) -> impl Iterator<Item = &StepHandle<C>> {
        self.lane.iter().chain(self.group.iter())
    }

    /// The step names, lane first.
    pub fn names(&self) -> Vec<&'static str> {
        self.lane
            .iter()
            .chain(self.group.iter())
            .map(|h| h.name.as_str())
            .collect()
    }
}
