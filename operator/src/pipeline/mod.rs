//! The pipeline engine: a pipeline actor per Cinder ([`PipelineActor`]) runs that Cinder's
//! passes one at a time and owns its `/pipelines` record; one actor per step kind
//! ([`StepActor`]) runs the step for every Cinder and owns what the step remembers; each pass
//! ([`run_pass`]) walks the twelve-step lane (ending at the first requeue or error) and then the
//! five-member parallel group, exchanging [`RunStep`] with the step actors.
//!
//! Real steps implement [`Step`], run with a long-lived context (the operator's one context in
//! the product, sent with each pass; the engine asks it only for [`EngineContext`]) and their
//! [`StepContext`], and are
//! put into a [`PipelineTable::product`]; the Cinder controller asks the [`Pipelines`] registry whether its
//! pass may run ([`Admit`]: the back-off, the gap between passes and the reconcile slots, decided
//! in one handler), then sends it [`Reconcile`], which it forwards to the Cinder's actor, then
//! writes [`PassReport::status_write`] when it is `Some` and requeues after
//! [`PassReport::requeue_after`] through the ±10 % jitter.

pub mod actors;
pub mod artefacts;
pub mod backoff_actor;
pub mod key;
pub mod memory;
pub mod pass;
pub mod ready;
pub mod schedule;
pub mod step;
pub mod step_name;
pub mod table;
pub mod view;

pub use actors::{
    AdmissionRank, Admit, Forget, GateStopped, Inspect, InspectPipeline, MIN_PASS_GAP, PassFailed,
    PassNotWritten, PassRequest, PassSucceeded, PipelineActor, PipelineError, Pipelines, Reconcile,
    RunPass, Slot, Turn, WakeOnGrant, snapshot,
};
pub use artefacts::{Artefacts, ProjectedBackend};
pub use key::CinderKey;
pub use memory::StepMemory;
pub use pass::{PassEnd, PassObserver, PassReport, StepFailure, run_pass};
pub use ready::aggregate_ready;
pub use step::{
    Clusters, Doing, EngineContext, ForgetCinder, Outcome, RunStep, Step, StepActor, StepBody,
    StepContext, StepError, StepFn, StepReport, StepResult, TargetCluster,
};
pub use step_name::{GROUP, LANE, SUB_CONDITIONS, StepName};
pub use table::{PipelineTable, StepHandle, TableError};
pub use view::{PassRecord, PipelineRecord, StepRecord};
