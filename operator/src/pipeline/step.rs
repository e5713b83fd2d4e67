//! The contract between the engine and one pipeline step: what a step works on
//! ([`StepContext`], the per-pass state, beside the long-lived context `C` of [`EngineContext`]), how its
//! body ends ([`StepResult`]: an [`Outcome`] or a [`StepError`], with [`Doing`] saying what
//! failed), the [`Step`] trait the engine runs (as trait objects; [`StepFn`] makes one of a
//! [`StepName`] and an async body), and the actor that runs one step kind for every Cinder
//! ([`StepActor`], message [`RunStep`]) and owns what that step remembers between runs
//! ([`Memory`], reached through the run's [`StepContext`]).

use super::artefacts::Artefacts;
use super::key::CinderKey;
use super::memory::{
    FirstTime, Memory, MemoryAddr, NoteRefused, Recall, Remember, StepMemory, TakeRefused, Unsee,
};
use super::step_name::StepName;
use crate::conditions::Cond;
use crate::crd::{Cinder, CinderStatus};
use crate::kube_ext::reader::ClusterStores;
use crate::metrics::Metrics;
use actix::prelude::*;
use futures::FutureExt;
use futures::future::BoxFuture;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How a step run that did not fail ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Go on with the next step.
    Continue,
    /// End the lane; reconcile again after this (nominal) delay.
    RequeueAfter(Duration),
    /// Counted as an error (the message never contains a secret value), yet the lane goes on:
    /// the step reported its own condition and handed on last-good artefacts (a refused
    /// spec.extraConfig keeps the running config).
    ContinueDespite(String),
}

/// Why a step run failed. The engine counts it, sets the step's condition False with this
/// error's reason (ReconcileError unless the step named its own) and message (unless the step
/// reported its own condition of that type), and ends the lane. Never carries a secret value.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error("kubernetes API error: {0}")]
    Kube(#[from] kube::Error),
    #[error("{0}")]
    Failed(String),
    /// What the step was doing when `source` happened ("writing Secret x: ...").
    #[error("{doing}: {source}")]
    While {
        doing: String,
        source: Box<StepError>,
    },
    /// `source`, reported under the step's own reason for it (e.g. VPAError).
    #[error("{source}")]
    Reason {
        reason: &'static str,
        source: Box<StepError>,
    },
}

impl StepError {
    /// The reason of the condition this error leaves.
    pub fn reason(&self) -> &'static str {
        match self {
            StepError::Reason { reason, .. } => reason,
            StepError::While { source, .. } => source.reason(),
            StepError::Kube(_) | StepError::Failed(_) => crate::conditions::reason::RECONCILE_ERROR,
        }
    }
}

impl From<String> for StepError {
    fn from(message: String) -> Self {
        StepError::Failed(message)
    }
}

impl From<&str> for StepError {
    fn from(message: &str) -> Self {
        StepError::Failed(message.to_string())
    }
}

/// Names what a fallible call was doing, so that the step's error (and the condition the engine
/// writes from it) says what failed: `api.create(..).await.doing("writing Secret x")?`.
pub trait Doing<T> {
    fn doing(self, what: impl std::fmt::Display) -> Result<T, StepError>;
    /// The error under the step's own `reason` rather than ReconcileError.
    fn with_reason(self, reason: &'static str) -> Result<T, StepError>;
}

impl<T, E: Into<StepError>> Doing<T> for Result<T, E> {
    fn doing(self, what: impl std::fmt::Display) -> Result<T, StepError> {
        self.map_err(|e| StepError::While {
            doing: what.to_string(),
            source: Box::new(e.into()),
        })
    }
    fn with_reason(self, reason: &'static str) -> Result<T, StepError> {
        self.map_err(|e| StepError::Reason {
            reason,
            source: Box::new(e.into()),
        })
    }
}

/// What a step body returns: how it ended, or why it failed.
pub type StepResult = Result<Outcome, StepError>;

/// The registered target cluster a pass projects the Cinder's children onto (resolved by the
/// controller's gate ahead of the pass; docs/target-clusters.md).
#[derive(Clone)]
pub struct TargetCluster {
    /// `spec.targetClusterRef.name`.
    pub name: String,
    /// A client of the target, built from its registered kubeconfig.
    pub client: kube::Client,
    /// The reflector stores of the target's watches (empty while none run).
    pub stores: ClusterStores,
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
/// events) and the cluster holding the Cinder's children (the same one unless it names a target),
/// with the watch stores reads of the children's cluster answer from.
#[derive(Clone)]
pub struct Clusters {
    pub management: kube::Client,
    pub children: kube::Client,
    pub children_reads: ClusterStores,
}

/// The per-pass state of one step run and what it hands on: the CR snapshot, where its children
/// live and the watch stores its reads answer from, the artefacts of earlier steps and the
/// working copy of the status (steps may set `endpoint`, `installedRelease`, `targetRelease`,
/// `upgradePhase`, `volumeServices`), the conditions the run reports (through
/// [`StepContext::set`]; stamped by the engine), and the way to what the step's actor remembers
/// of this Cinder ([`StepContext::memory`]). A lane step works on the pass's context, a group
/// member on its own copy.
#[derive(Clone)]
pub struct StepContext {
    pub cinder: Arc<Cinder>,
    /// `Some` when the Cinder names a target cluster: its children (workloads, Services,
    /// derived Secrets, ConfigMaps, Jobs, ...) live there; `None`: on the management cluster.
    pub target: Option<TargetCluster>,
    /// The management cluster's watch stores ([`EngineContext::reads`]; empty ones send every
    /// read to the API server).
    pub reads: ClusterStores,
    pub artefacts: Artefacts,
    pub status: CinderStatus,
    /// The conditions this run reports.
    pub conditions: Vec<Cond>,
    /// The address of the running step's actor (set by it), where what it remembers of this
    /// Cinder is. `None` (a step called directly) remembers nothing.
    pub(crate) memory: Option<MemoryAddr>,
}

impl std::fmt::Debug for StepContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepContext")
            .field("cinder", &self.cinder.metadata.name)
            .field("target", &self.target)
            .field("artefacts", &self.artefacts)
            .field("status", &self.status)
            .field("conditions", &self.conditions)
            .field("memory", &self.memory.is_some())
            .finish_non_exhaustive()
    }
}

impl StepContext {
    /// The context of a run on `cinder` (its children on `target` when `Some`), reading from
    /// `reads`, with an empty status, no artefacts and no step memory.
    pub fn new(cinder: Arc<Cinder>, target: Option<TargetCluster>, reads: ClusterStores) -> Self {
        StepContext {
            cinder,
            target,
            reads,
            artefacts: Artefacts::default(),
            status: CinderStatus::default(),
            conditions: Vec::new(),
            memory: None,
        }
    }

    /// What the running step's actor remembers of this Cinder (nothing outside an actor).
    pub fn memory(&self) -> StepMemory {
        match &self.memory {
            Some(actor) => StepMemory::at(actor.clone(), CinderKey::of(&self.cinder)),
            None => StepMemory::default(),
        }
    }

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
            children_reads: self.children_reads().clone(),
        }
    }

    /// The watch stores of the management cluster: reads of the Cinder, its satellites,
    /// credential Secrets and MariaDB objects.
    pub fn management_reads(&self) -> &ClusterStores {
        &self.reads
    }

    /// The watch stores of the cluster holding the Cinder's children: the target's when the
    /// Cinder names one.
    pub fn children_reads(&self) -> &ClusterStores {
        match &self.target {
            Some(t) => &t.stores,
            None => &self.reads,
        }
    }

    /// The API of kind `K` in the Cinder's namespace on the cluster holding its children.
    pub fn children_api<K>(&self, management: &kube::Client) -> kube::Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        kube::Api::namespaced(self.children(management), self.namespace())
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

    /// Reports `condition`.
    pub fn set(&mut self, condition: Cond) {
        self.conditions.push(condition);
    }
    /// Reports `condition`, then [`Outcome::Continue`].
    pub fn proceed(&mut self, condition: Cond) -> StepResult {
        self.set(condition);
        Ok(Outcome::Continue)
    }
    /// Reports `condition`, then [`Outcome::RequeueAfter`].
    pub fn requeue(&mut self, condition: Cond, after: Duration) -> StepResult {
        self.set(condition);
        Ok(Outcome::RequeueAfter(after))
    }

    /// The report of a run that ended with `result`, keeping what the run set here.
    pub fn into_report(self, result: StepResult) -> StepReport {
        StepReport {
            conditions: self.conditions,
            artefacts: self.artefacts,
            status: self.status,
            result,
        }
    }
}

/// What one step run returns to the engine.
#[derive(Debug)]
pub struct StepReport {
    /// Conditions to set (stamped by the engine with time and generation).
    pub conditions: Vec<Cond>,
    /// The artefacts, with whatever this step added, for the steps after it.
    pub artefacts: Artefacts,
    /// The working status copy, with whatever fields this step set (conditions ignored).
    pub status: CinderStatus,
    pub result: StepResult,
}

/// What the engine itself takes from the long-lived context `C` its steps run with (the
/// operator's one context in the product, a small one in the engine's tests): the registry the
/// step metrics go to, and the management cluster's watch stores a run reads from.
pub trait EngineContext: Send + Sync + 'static {
    fn metrics(&self) -> &Metrics;
    fn reads(&self) -> &ClusterStores;
}

/// One pipeline step, run with the long-lived context `C`. Implementations are shared by every
/// Cinder (one actor per step kind) and must be cheap to call concurrently; `run` owns what its
/// future needs.
pub trait Step<C>: Send + Sync + 'static {
    /// Which step this is (its `sub_reconciler` label and its condition follow from it).
    fn name(&self) -> StepName;
    /// Runs the step once for one Cinder, with the long-lived context.
    fn run(&self, op: Arc<C>, ctx: StepContext) -> BoxFuture<'static, StepReport>;
}

/// A step body: an async function of the long-lived context and the run's,
/// `async fn run(op: Arc<C>, ctx: &mut StepContext) -> StepResult`.
pub trait StepBody<'a, C>: Fn(Arc<C>, &'a mut StepContext) -> Self::Run {
    type Run: Future<Output = StepResult> + Send + 'a;
}

impl<'a, C, F, Fut> StepBody<'a, C> for F
where
    F: Fn(Arc<C>, &'a mut StepContext) -> Fut,
    Fut: Future<Output = StepResult> + Send + 'a,
{
    type Run = Fut;
}

/// A step made of its name and its body.
pub struct StepFn<B> {
    pub name: StepName,
    pub body: B,
}

impl<B, C> Step<C> for StepFn<B>
where
    B: for<'a> StepBody<'a, C> + Clone + Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    fn name(&self) -> StepName {
        self.name
    }
    fn run(&self, op: Arc<C>, mut ctx: StepContext) -> BoxFuture<'static, StepReport> {
        let body = self.body.clone();
        async move {
            let result = body(op, &mut ctx).await;
            ctx.into_report(result)
        }
        .boxed()
    }
}

/// Runs one step for one Cinder with the long-lived context, inside the given span (the step's
/// span under its pass: the step's future runs on the actor, outside the caller's task).
#[derive(Message)]
#[rtype(result = "StepReport")]
pub struct RunStep<C: 'static>(pub Arc<C>, pub StepContext, pub tracing::Span);

/// The Cinder is gone: the step actors drop what they remember of it.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ForgetCinder(pub CinderKey);

/// The actor of one step kind, shared by every Cinder. Runs are not serialized here (the
/// per-Cinder pipeline actor does that); each run is its own future, which reaches the actor's
/// [`Memory`] through its [`StepContext`].
pub struct StepActor<C> {
    step: Arc<dyn Step<C>>,
    memory: Memory,
}

impl<C: EngineContext> StepActor<C> {
    pub fn new(step: Arc<dyn Step<C>>) -> Self {
        StepActor {
            step,
            memory: Memory::default(),
        }
    }
}

impl<C: EngineContext> Actor for StepActor<C> {
    type Context = Context<Self>;
}

impl<C: EngineContext> Handler<RunStep<C>> for StepActor<C> {
    type Result = ResponseFuture<StepReport>;

    fn handle(&mut self, msg: RunStep<C>, ctx: &mut Self::Context) -> Self::Result {
        let RunStep(op, mut step_ctx, span) = msg;
        step_ctx.memory = Some(MemoryAddr::of(&ctx.address()));
        Box::pin(tracing::Instrument::instrument(
            self.step.run(op, step_ctx),
            span,
        ))
    }
}

impl<C: EngineContext> Handler<ForgetCinder> for StepActor<C> {
    type Result = ();

    fn handle(&mut self, msg: ForgetCinder, _ctx: &mut Self::Context) {
        self.memory.forget(&msg.0);
    }
}

impl<C: EngineContext> Handler<FirstTime> for StepActor<C> {
    type Result = bool;

    fn handle(&mut self, FirstTime(at): FirstTime, _ctx: &mut Self::Context) -> bool {
        self.memory.first_time(&at.cinder, &at.key, Instant::now())
    }
}

impl<C: EngineContext> Handler<Unsee> for StepActor<C> {
    type Result = ();

    fn handle(&mut self, Unsee(at): Unsee, _ctx: &mut Self::Context) {
        self.memory.unsee(&at.cinder, &at.key, Instant::now());
    }
}

impl<C: EngineContext> Handler<Recall> for StepActor<C> {
    type Result = Option<Cond>;

    fn handle(&mut self, Recall(at): Recall, _ctx: &mut Self::Context) -> Option<Cond> {
        self.memory.recall(&at.cinder, &at.key, Instant::now())
    }
}

impl<C: EngineContext> Handler<NoteRefused> for StepActor<C> {
    type Result = ();

    fn handle(&mut self, msg: NoteRefused, _ctx: &mut Self::Context) {
        let until = Instant::now() + msg.ttl;
        self.memory.note_refused(&msg.at.cinder, &msg.at.key, until);
    }
}

impl<C: EngineContext> Handler<TakeRefused> for StepActor<C> {
    type Result = bool;

    fn handle(&mut self, TakeRefused(at): TakeRefused, _ctx: &mut Self::Context) -> bool {
        self.memory
            .take_refused(&at.cinder, &at.key, Instant::now())
    }
}

impl<C: EngineContext> Handler<Remember> for StepActor<C> {
    type Result = ();

    fn handle(&mut self, msg: Remember, _ctx: &mut Self::Context) {
        let now = Instant::now();
        self.memory
            .remember(&msg.at.cinder, &msg.at.key, msg.condition, msg.ttl, now);
    }
}

/// Fixtures for tests that reach a step actor's memory.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// A step that does nothing.
    struct Idle(StepName);

    impl<C: EngineContext> Step<C> for Idle {
        fn name(&self) -> StepName {
            self.0
        }
        fn run(&self, _op: Arc<C>, ctx: StepContext) -> BoxFuture<'static, StepReport> {
            Box::pin(async move { ctx.into_report(Ok(Outcome::Continue)) })
        }
    }

    /// What a fresh actor of the step `name` (a step that does nothing) remembers of the Cinder
    /// `ns/c`; call it inside an actix System.
    pub(crate) fn idle_step_memory<C: EngineContext>(name: StepName) -> StepMemory {
        let addr = StepActor::<C>::new(Arc::new(Idle(name))).start();
        let cinder = CinderKey {
            namespace: "ns".into(),
            name: "c".into(),
        };
        StepMemory::at(MemoryAddr::of(&addr), cinder)
    }
}
