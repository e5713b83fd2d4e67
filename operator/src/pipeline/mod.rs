//! The pipeline engine (seed 001, "Pipeline"): a pipeline actor per Cinder serializes that
//! Cinder's passes, one actor per step kind runs the steps, and each pass walks the twelve-step
//! lane (ending at the first requeue or error) and then the five-member parallel group.
//!
//! Real steps implement [`Step`] and are put into a [`PipelineTable::product`]; the `run`
//! command sends [`Reconcile`] to a [`Pipelines`] registry and writes
//! [`PassReport::status_write`] when it is `Some`, requeueing after
//! [`PassReport::requeue_jittered`].

pub mod artefacts;
pub mod cinder_actor;
pub mod pass;
pub mod registry;
pub mod step;
pub mod table;

pub use artefacts::{Artefacts, ProjectedBackend};
pub use cinder_actor::{PipelineActor, RunPass};
pub use pass::{PassEnd, PassObserver, PassReport, StepFailure, run_pass};
pub use registry::{CinderKey, Forget, Inspect, PipelineError, PipelineView, Pipelines, Reconcile};
pub use step::{Clusters, Outcome, Step, StepContext, StepReport, TargetCluster};
pub use table::{GROUP, LANE, PipelineTable, RunStep, StepActor, StepHandle, StepName, TableError};
