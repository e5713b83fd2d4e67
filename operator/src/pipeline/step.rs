//! The contract between the engine and one pipeline step: what a step receives
//! ([`StepContext`]), what it returns ([`StepReport`] with an [`Outcome`]), the [`Step`]
//! trait real steps implement (async, as trait objects; [`StepFn`] makes one of a name and a
//! function), and the actor that runs one step kind for every Cinder ([`StepActor`], message
//! [`RunStep`]) and owns what that step remembers between runs ([`Memory`]).

use super::artefacts::Artefacts;
use super::key::CinderKey;
use super::memory::{FirstTime, Memory, Recall, Remember, StepMemory, Unsee};
use super::step_name::StepName;
use crate::conditions::Cond;
use crate::crd::{Cinder, CinderStatus};
use actix::prelude::*;
use futures::FutureExt;
use futures::future::BoxFuture;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a step run ends with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Go on with the next step.
    Continue,
    /// End the lane; reconcile again after this (nominal) delay.
    RequeueAfter(Duration),
    /// End the lane; the message is counted and reported, never containing a secret value.
    Error(String),
    /// Counted as an error (the message never contains a secret value), yet the lane goes on:
    /// the step reported its own condition and handed on last-good artefacts (a refused
    /// spec.extraConfig keeps the running config).
    ContinueDespite(String),
}

/// Why a step run failed. The engine counts it, sets the step's condition False with reason
/// ReconcileError and the message (unless the step reported its own condition of that type),
/// and ends the lane. Never carries a secret value.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error("kubernetes API error: {0}")]
    Kube(#[from] kube::Error),
    #[error("{0}")]
    Failed(String),
}

impl From<String> for StepError {
    fn from(message: String) -> Self {
        StepError::Failed(message)
    }
}

/// The registered target cluster a pass projects the Cinder's children onto (resolved by the
/// controller's gate ahead of the pass; docs/target-clusters.md).
#[derive(Clone)]
pub struct TargetCluster {
    /// `spec.targetClusterRef.name`.
    pub name: String,
    /// A client of the target, built from its registered kubeconfig.
    pub client: kube::Client,
    /// The reflector stores of the target's watches (empty while none run).
    pub stores: crate::controller::reader::ClusterStores,
}

impl std::fmt::Debug for TargetCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The client carries credentials: only the name is shown.
        f.debug_struct("TargetCluster")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The management cluster (the Cinder, its satellites, credential Secrets, MariaDB objects,
/// events) and the cluster holding the Cinder's children (the same one unless it names a target).
#[derive(Clone)]
pub struct Clusters {
    pub management: kube::Client,
    pub children: kube::Client,
}

/// The inputs of one step run: the CR snapshot, where its children live, the artefacts of
/// earlier steps and the working copy of the status (steps may set `endpoint`,
/// `installedRelease`, `targetRelease`, `upgradePhase`, `volumeServices`; conditions are
/// reported through [`StepReport::conditions`]).
#[derive(Clone, Debug)]
pub struct StepContext {
    pub cinder: Arc<Cinder>,
    /// `Some` when the Cinder names a target cluster: its children (workloads, Services,
    /// derived Secrets, ConfigMaps, Jobs, ...) live there; `None`: on the management cluster.
    pub target: Option<TargetCluster>,
    pub artefacts: Artefacts,
    pub status: CinderStatus,
    /// What the step's actor remembers of this Cinder (set by the actor that runs the step).
    pub memory: StepMemory,
}

impl StepContext {
    /// The client of the cluster that holds the Cinder's children: the target's, or
    /// `management` (the Cinder, its satellites, credential Secrets and MariaDB objects always
    /// live on the management cluster).
    pub fn children(&self, management: &kube::Client) -> kube::Client {
        match &self.target {
            Some(t) => t.client.clone(),
            None => management.clone(),
        }
    }

    /// Both clusters a step may talk to, for helpers that touch the Cinder and its children.
    pub fn clusters(&self, management: &kube::Client) -> Clusters {
        Clusters {
            management: management.clone(),
            children: self.children(management),
        }
    }

    /// The Cinder's name.
    pub fn name(&self) -> &str {
        self.cinder.metadata.name.as_deref().unwrap_or_default()
    }
    /// The Cinder's namespace.
    pub fn namespace(&self) -> &str {
        self.cinder
            .metadata
            .namespace
            .as_deref()
            .unwrap_or_default()
    }

    /// A report that keeps this context's artefacts and status and ends with `outcome`.
    pub fn report(self, conditions: Vec<Cond>, outcome: Outcome) -> StepReport {
        StepReport {
            conditions,
            artefacts: self.artefacts,
            status: self.status,
            outcome,
        }
    }
    /// One condition, then [`Outcome::Continue`].
    pub fn proceed(self, condition: Cond) -> StepReport {
        self.report(vec![condition], Outcome::Continue)
    }
    /// One condition, then [`Outcome::RequeueAfter`].
    pub fn requeue(self, condition: Cond, after: Duration) -> StepReport {
        self.report(vec![condition], Outcome::RequeueAfter(after))
    }
    /// One condition, then [`Outcome::Error`].
    pub fn fail(self, condition: Cond, error: impl Into<String>) -> StepReport {
        self.report(vec![condition], Outcome::Error(error.into()))
    }
    /// The step failed while `doing` (e.g. "writing Secret x"): [`Outcome::Error`] with the
    /// message `"{doing}: {error}"`, which the engine writes into the step's condition.
    pub fn error(self, doing: impl std::fmt::Display, error: impl Into<StepError>) -> StepReport {
        let message = format!("{doing}: {}", error.into());
        self.report(Vec::new(), Outcome::Error(message))
    }
}

/// What one step run returns.
#[derive(Clone, Debug)]
pub struct StepReport {
    /// Conditions to set (stamped by the engine with time and generation).
    pub conditions: Vec<Cond>,
    /// The artefacts, with whatever this step added, for the steps after it.
    pub artefacts: Artefacts,
    /// The working status copy, with whatever fields this step set (conditions ignored).
    pub status: CinderStatus,
    pub outcome: Outcome,
}

/// One pipeline step. Implementations are shared by every Cinder (one actor per step kind) and
/// must be cheap to call concurrently; `run` owns what its future needs (clone a client in).
pub trait Step: Send + Sync + 'static {
    /// The `sub_reconciler` label: one of [`StepName`] in the product table.
    fn name(&self) -> &'static str;
    /// The condition this step reports through (the `condition_type` label of its errors).
    fn condition_type(&self) -> &'static str;
    /// Runs the step once for one Cinder.
    fn run(&self, ctx: StepContext) -> BoxFuture<'static, StepReport>;
}

/// A step made of its name (its condition follows from it) and the function that runs it.
pub struct StepFn<F> {
    pub name: StepName,
    pub run: F,
}

impl<F, Fut> Step for StepFn<F>
where
    F: Fn(StepContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = StepReport> + Send + 'static,
{
    fn name(&self) -> &'static str {
        self.name.as_str()
    }
    fn condition_type(&self) -> &'static str {
        self.name.condition_type()
    }
    fn run(&self, ctx: StepContext) -> BoxFuture<'static, StepReport> {
        (self.run)(ctx).boxed()
    }
}

/// Runs one step for one Cinder, inside the given span (the step's span under its pass: the
/// step's future runs on the actor, outside the caller's task).
#[derive(Message)]
#[rtype(result = "StepReport")]
pub struct RunStep(pub StepContext, pub tracing::Span);

/// The Cinder is gone: the step actors drop what they remember of it.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ForgetCinder(pub CinderKey);

/// The actor of one step kind, shared by every Cinder. Runs are not serialized here (the
/// per-Cinder pipeline actor does that); each run is its own future, which reaches the actor's
/// [`Memory`] through the [`StepMemory`] in its context.
pub struct StepActor {
    step: Arc<dyn Step>,
    memory: Memory,
}

impl StepActor {
    pub fn new(step: Arc<dyn Step>) -> Self {
        StepActor {
            step,
            memory: Memory::default(),
        }
    }
}

impl Actor for StepActor {
    type Context = Context<Self>;
}

impl Handler<RunStep> for StepActor {
    type Result = ResponseFuture<StepReport>;

    fn handle(&mut self, msg: RunStep, ctx: &mut Self::Context) -> Self::Result {
        let RunStep(mut step_ctx, span) = msg;
        step_ctx.memory = StepMemory::of(&ctx.address(), CinderKey::of(&step_ctx.cinder));
        Box::pin(tracing::Instrument::instrument(
            self.step.run(step_ctx),
            span,
        ))
    }
}

impl Handler<ForgetCinder> for StepActor {
    type Result = ();

    fn handle(&mut self, msg: ForgetCinder, _ctx: &mut Self::Context) {
        self.memory.forget(&msg.0);
    }
}

impl Handler<FirstTime> for StepActor {
    type Result = bool;

    fn handle(&mut self, msg: FirstTime, _ctx: &mut Self::Context) -> bool {
        self.memory.first_time(&msg.cinder, &msg.key)
    }
}

impl Handler<Unsee> for StepActor {
    type Result = ();

    fn handle(&mut self, msg: Unsee, _ctx: &mut Self::Context) {
        self.memory.unsee(&msg.cinder, &msg.key);
    }
}

impl Handler<Recall> for StepActor {
    type Result = Option<Cond>;

    fn handle(&mut self, msg: Recall, _ctx: &mut Self::Context) -> Option<Cond> {
        self.memory.recall(&msg.cinder, &msg.key, Instant::now())
    }
}

impl Handler<Remember> for StepActor {
    type Result = ();

    fn handle(&mut self, msg: Remember, _ctx: &mut Self::Context) {
        let now = Instant::now();
        self.memory
            .remember(&msg.cinder, &msg.key, msg.condition, msg.ttl, now);
    }
}
