//! The two actors of the engine: the registry ([`Pipelines`]) and one pipeline actor per Cinder
//! ([`PipelineActor`]).
//!
//! The registry finds (or starts) the Cinder's pipeline actor for each message about that Cinder
//! and forwards it, retires the actor when the Cinder is deleted (dropping the Cinder's metric
//! series and what the step actors remember of it), and gathers the `/pipelines` view from the
//! pipeline actors. It is the one place that decides when a Cinder's pass runs ([`Admit`],
//! answered with a [`Turn`]), in this order:
//! - a Cinder whose last reconcile failed waits for its retry ([`Backoffs`]) unless its
//!   generation changed or it is being deleted; [`PassFailed`] and [`PassSucceeded`] keep the
//!   count;
//! - passes of one Cinder start at least [`MIN_PASS_GAP`] apart, which also debounces the watch
//!   events of the pass's own status write and of its children;
//! - at most `--max-concurrent-reconciles` run at once; the others are queued, oldest Cinder
//!   first, and woken when a slot is granted to them ([`Admission`]).
//!
//! A pipeline actor runs its Cinder's passes one at a time (a pass that arrives while one runs
//! waits in the actor's queue), while the actors of different Cinders run concurrently; and it
//! owns the Cinder's record in the `/pipelines` view ([`PipelineRecord`]), which it answers from
//! even while a pass runs (the pass is a future of the actor, not a blocked mailbox). With
//! `--shards`, a running pass asks before each step whether this replica still holds the
//! Cinder's shard, and stops when it does not.

use super::backoff_actor::Failed;
use super::key::CinderKey;
use super::pass::{PassObserver, PassReport, run_pass};
use super::schedule::{Admission, Asked, Backoffs, GRANT_LIFETIME};
use super::step::{EngineContext, ForgetCinder, TargetCluster};
use super::table::PipelineTable;
use super::view::{PassSummary, PipelineRecord};
use crate::crd::Cinder;
use crate::metrics::Metrics;
use crate::shards::ShardView;
use actix::prelude::*;
use futures::channel::{mpsc, oneshot};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The least time between the starts of two passes of one Cinder ([`Admit`] answers
/// [`Turn::Wait`] inside it). A burst of watch events (a roll-out's Deployment and pod updates,
/// the pass's own status write, a watch re-listed after a drop) then costs one pass per gap, so
/// no Cinder gets more than five status writes a second, whatever its children do; a pass that
/// follows a quiet spell starts at once.
pub const MIN_PASS_GAP: Duration = Duration::from_millis(200);

/// A pass could not be run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PipelineError {
    #[error("the pipeline actor of {0}/{1} is gone")]
    ActorGone(String, String),
}

/// One pass to run: the operator context, a snapshot of the Cinder, the resolved target
/// cluster its children are projected onto (`None`: the management cluster), and the span the
/// pass runs inside (the reconcile's pass span: the pass runs on the actor, outside the
/// caller's task).
pub struct PassRequest<C: 'static> {
    pub op: Arc<C>,
    pub cinder: Arc<Cinder>,
    pub target: Option<TargetCluster>,
    pub span: tracing::Span,
}

/// Runs a pass of a Cinder through its pipeline actor.
#[derive(Message)]
#[rtype(result = "Result<PassReport, PipelineError>")]
pub struct Reconcile<C: 'static>(pub PassRequest<C>);

/// Retires a deleted Cinder's actor, drops its per-CR metric series and what the step actors
/// remember of it.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Forget(pub CinderKey);

/// The record of every known pipeline, sorted by namespace and name.
#[derive(Message)]
#[rtype(result = "Vec<PipelineRecord>")]
pub struct Inspect;

/// Asks whether the Cinder's reconcile may run now ([`Turn`]). Queued Cinders are granted
/// slots oldest first ([`AdmissionRank`]).
#[derive(Message)]
#[rtype(result = "Turn")]
pub struct Admit {
    pub key: CinderKey,
    pub rank: AdmissionRank,
    /// The generation the reconcile sees (a spec edit ends a back-off wait).
    pub generation: Option<i64>,
    /// The Cinder is being deleted: its finalizer work does not wait for a back-off.
    pub deleting: bool,
}

/// The answer to [`Admit`].
#[must_use = "a slot is given back when dropped"]
pub enum Turn {
    /// Reconcile now; the slot is given back when the [`Slot`] is dropped.
    Run(Slot),
    /// Every slot is taken: the Cinder is queued and woken through the channel of
    /// [`WakeOnGrant`] once a slot is granted to it.
    Queued,
    /// Not before this long: the Cinder waits for its back-off retry or for the gap since its
    /// last pass started.
    Wait(Duration),
}

/// A reconcile of the Cinder at this generation failed (an error, or a pass with a failed
/// step): answers when it is retried.
pub type PassFailed = Failed<CinderKey>;

/// A reconcile of the Cinder ended cleanly: its failure count is reset.
#[derive(Message)]
#[rtype(result = "()")]
pub struct PassSucceeded(pub CinderKey);

/// Where a queued Cinder stands: its creation time (seconds since the epoch; a Cinder without
/// one ranks first).
pub type AdmissionRank = i64;

/// Where the registry sends the Cinders it granted a slot to (the Cinder controller reconciles
/// each at once).
#[derive(Message)]
#[rtype(result = "()")]
pub struct WakeOnGrant(pub mpsc::UnboundedSender<CinderKey>);

/// The registry actor.
pub struct Pipelines<C: EngineContext> {
    table: Arc<PipelineTable<C>>,
    metrics: Metrics,
    actors: BTreeMap<CinderKey, Addr<PipelineActor<C>>>,
    shards: ShardView,
    admission: Admission<CinderKey, AdmissionRank>,
    wake: Option<mpsc::UnboundedSender<CinderKey>>,
    backoffs: Backoffs<CinderKey>,
    /// When each Cinder's last pass started.
    last_start: HashMap<CinderKey, Instant>,
}

/// A reconcile gave its slot back (it ended, or it was dropped).
#[derive(Message)]
#[rtype(result = "()")]
struct SlotFreed;

/// A reconcile slot: given back when dropped, whatever ends the reconcile.
#[must_use = "the slot is given back when dropped"]
pub struct Slot(Recipient<SlotFreed>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.do_send(SlotFreed);
    }
}

impl<C: EngineContext> Pipelines<C> {
    pub fn new(table: PipelineTable<C>, metrics: Metrics) -> Self {
        Pipelines {
            table: Arc::new(table),
            metrics,
            actors: BTreeMap::new(),
            shards: ShardView::all(),
            admission: Admission::new(0, GRANT_LIFETIME),
            wake: None,
            backoffs: Backoffs::default(),
            last_start: HashMap::new(),
        }
    }

    /// At most `limit` reconciles at once (0: no limit), queued Cinders granted oldest first.
    pub fn with_concurrency(mut self, limit: usize) -> Self {
        self.admission = Admission::new(limit, GRANT_LIFETIME);
        self
    }

    /// Passes stop before their next step once this replica no longer holds their shard.
    pub fn with_shards(mut self, shards: ShardView) -> Self {
        self.shards = shards;
        self
    }

    /// Wakes the Cinders granted a slot, in the order they were granted (without a channel they
    /// are reconciled on their next event or requeue, and take their grant then). A Cinder of a
    /// shard this replica no longer holds leaves the queue instead, and its slot goes to the next.
    fn wake(&mut self, granted: Vec<CinderKey>) {
        let mut granted = VecDeque::from(granted);
        while let Some(key) = granted.pop_front() {
            if !self.shards.owns(&key.namespace, &key.name) {
                granted.extend(self.admission.forget(&key, Instant::now()));
            } else if let Some(wake) = &self.wake {
                let _ = wake.unbounded_send(key);
            }
        }
        self.publish_admission();
    }

    /// Sets the running and queued reconcile gauges from the admission.
    fn publish_admission(&self) {
        let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.metrics
            .reconciles_running
            .set(gauge(self.admission.running()));
        self.metrics
            .reconciles_queued
            .set(gauge(self.admission.waiting()));
    }

    /// The pipeline actor of `key`, started on first use.
    fn actor(&mut self, key: &CinderKey) -> Addr<PipelineActor<C>> {
        self.actors
            .entry(key.clone())
            .or_insert_with(|| {
                let mut actor = PipelineActor::new(key.clone(), self.table.clone());
                actor.shards = self.shards.clone();
                actor.start()
            })
            .clone()
    }
}

impl<C: EngineContext> Actor for Pipelines<C> {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        if self.admission.limited() {
            // Grants lapse within a second of their lifetime.
            ctx.run_interval(Duration::from_secs(1), |act, _ctx| {
                let granted = act.admission.expire(Instant::now());
                act.wake(granted);
            });
        }
    }
}

impl<C: EngineContext> Handler<Admit> for Pipelines<C> {
    type Result = MessageResult<Admit>;

    fn handle(&mut self, msg: Admit, ctx: &mut Self::Context) -> Self::Result {
        let now = Instant::now();
        let backing_off = if msg.deleting {
            None
        } else {
            self.backoffs.holding(&msg.key, msg.generation, now)
        };
        let gap = self
            .last_start
            .get(&msg.key)
            .map(|at| MIN_PASS_GAP.saturating_sub(now.saturating_duration_since(*at)))
            .filter(|left| !left.is_zero());
        if let Some(wait) = backing_off.max(gap) {
            return MessageResult(Turn::Wait(wait));
        }
        let asked = self.admission.ask(&msg.key, msg.rank);
        self.publish_admission();
        MessageResult(match asked {
            Asked::Run => Turn::Run(Slot(ctx.address().recipient())),
            Asked::Wait => Turn::Queued,
        })
    }
}

impl<C: EngineContext> Handler<PassFailed> for Pipelines<C> {
    type Result = MessageResult<PassFailed>;

    fn handle(&mut self, msg: PassFailed, _ctx: &mut Self::Context) -> Self::Result {
        MessageResult(
            self.backoffs
                .failed(msg.key, msg.generation, Instant::now()),
        )
    }
}

impl<C: EngineContext> Handler<PassSucceeded> for Pipelines<C> {
    type Result = ();

    fn handle(&mut self, msg: PassSucceeded, _ctx: &mut Self::Context) {
        self.backoffs.succeeded(&msg.0);
    }
}

impl<C: EngineContext> Handler<WakeOnGrant> for Pipelines<C> {
    type Result = ();

    fn handle(&mut self, msg: WakeOnGrant, _ctx: &mut Self::Context) {
        self.wake = Some(msg.0);
    }
}

impl<C: EngineContext> Handler<Reconcile<C>> for Pipelines<C> {
    type Result = ResponseFuture<Result<PassReport, PipelineError>>;

    fn handle(&mut self, msg: Reconcile<C>, _ctx: &mut Self::Context) -> Self::Result {
        let Reconcile(pass) = msg;
        let key = CinderKey::of(&pass.cinder);
        let addr = self.actor(&key);
        self.last_start.insert(key.clone(), Instant::now());
        Box::pin(async move {
            match addr.send(RunPass(pass)).await {
                Ok(Some(report)) => Ok(report),
                _ => Err(PipelineError::ActorGone(key.namespace, key.name)),
            }
        })
    }
}

impl<C: EngineContext> Handler<SlotFreed> for Pipelines<C> {
    type Result = ();

    fn handle(&mut self, _msg: SlotFreed, _ctx: &mut Self::Context) {
        let granted = self.admission.release(Instant::now());
        self.wake(granted);
    }
}

impl<C: EngineContext> Handler<GateStopped> for Pipelines<C> {
    type Result = ();

    fn handle(&mut self, msg: GateStopped, _ctx: &mut Self::Context) {
        self.actor(&msg.key).do_send(msg);
    }
}

impl<C: EngineContext> Handler<PassNotWritten> for Pipelines<C> {
    type Result = ();

    fn handle(&mut self, msg: PassNotWritten, _ctx: &mut Self::Context) {
        if let Some(addr) = self.actors.get(&msg.key) {
            addr.do_send(msg);
        }
    }
}

impl<C: EngineContext> Handler<Forget> for Pipelines<C> {
    type Result = ();

    fn handle(&mut self, msg: Forget, _ctx: &mut Self::Context) {
        let granted = self.admission.forget(&msg.0, Instant::now());
        self.wake(granted);
        // Dropping the last address stops the actor once its mailbox is empty.
        self.actors.remove(&msg.0);
        self.backoffs.succeeded(&msg.0);
        self.last_start.remove(&msg.0);
        self.metrics.forget_cinder(&msg.0.namespace, &msg.0.name);
        for step in self.table.handles() {
            step.addr.do_send(ForgetCinder(msg.0.clone()));
        }
    }
}

impl<C: EngineContext> Handler<Inspect> for Pipelines<C> {
    type Result = ResponseFuture<Vec<PipelineRecord>>;

    fn handle(&mut self, _msg: Inspect, _ctx: &mut Self::Context) -> Self::Result {
        let asks: Vec<_> = self
            .actors
            .values()
            .map(|addr| addr.send(InspectPipeline))
            .collect();
        Box::pin(async move {
            futures::future::join_all(asks)
                .await
                .into_iter()
                .filter_map(Result::ok)
                .collect()
        })
    }
}

/// The JSON the admin view shows: `{"pipelines": [PipelineRecord…]}` (empty when the registry
/// is gone).
pub async fn snapshot<C: EngineContext>(pipelines: &Addr<Pipelines<C>>) -> serde_json::Value {
    let records = pipelines.send(Inspect).await.unwrap_or_default();
    serde_json::json!({ "pipelines": records })
}

/// Runs one pass of the Cinder on its pipeline actor; answers when the pass ends (`None`: the
/// actor stopped before running it).
#[derive(Message)]
#[rtype(result = "Option<PassReport>")]
pub struct RunPass<C: 'static>(pub PassRequest<C>);

/// A reconcile of the Cinder ended before any step ran (a gate stopped it, or the finalizer
/// work ran instead): recorded as a pass without steps.
#[derive(Message)]
#[rtype(result = "()")]
pub struct GateStopped {
    pub key: CinderKey,
    pub started_at: chrono::DateTime<chrono::Utc>,
    pub duration: Duration,
    pub outcome: String,
    pub requeue: Option<Duration>,
}

/// The status of the last pass was not written after all (the Cinder changed meanwhile): its
/// recorded outcome becomes `outcome`.
#[derive(Message)]
#[rtype(result = "()")]
pub struct PassNotWritten {
    pub key: CinderKey,
    pub outcome: String,
    pub requeue: Option<Duration>,
}

/// The Cinder's record.
#[derive(Message)]
#[rtype(result = "PipelineRecord")]
pub struct InspectPipeline;

/// A step of pass `pass` started (sent by the running pass to its own actor).
#[derive(Message)]
#[rtype(result = "()")]
struct StepStarted {
    pass: u64,
    step: &'static str,
}

/// A pass waiting for its turn.
struct Waiting<C: 'static> {
    run: RunPass<C>,
    reply: oneshot::Sender<PassReport>,
}

/// The per-Cinder pipeline actor.
pub struct PipelineActor<C: EngineContext> {
    table: Arc<PipelineTable<C>>,
    record: PipelineRecord,
    queue: VecDeque<Waiting<C>>,
    /// The number of the pass running now, if one runs.
    running: Option<u64>,
    started: u64,
    /// The shards this replica holds (a pass stops before a step of a shard it lost).
    shards: ShardView,
}

impl<C: EngineContext> PipelineActor<C> {
    pub fn new(key: CinderKey, table: Arc<PipelineTable<C>>) -> Self {
        PipelineActor {
            table,
            record: PipelineRecord::new(&key.namespace, &key.name),
            queue: VecDeque::new(),
            running: None,
            started: 0,
            shards: ShardView::all(),
        }
    }

    /// Starts the next waiting pass unless one runs.
    fn start_next(&mut self, ctx: &mut Context<Self>) {
        if self.running.is_some() {
            return;
        }
        let Some(Waiting { run, reply }) = self.queue.pop_front() else {
            return;
        };
        self.started += 1;
        let pass = self.started;
        self.running = Some(pass);
        self.record.pass_started();
        let table = self.table.clone();
        let mut observer = ReportSteps {
            pass,
            to: ctx.address().recipient(),
            shards: self.shards.clone(),
            namespace: self.record.namespace.clone(),
            name: self.record.name.clone(),
        };
        let started_at = chrono::Utc::now();
        let started = Instant::now();
        let RunPass(PassRequest {
            op,
            cinder,
            target,
            span,
        }) = run;
        let pass_future = tracing::Instrument::instrument(
            async move { run_pass(&table, &op, cinder, target, &mut observer).await },
            span,
        );
        ctx.spawn(pass_future.into_actor(self).map(move |report, act, ctx| {
            let summary = PassSummary {
                outcome: report.summary(),
                requeue: report.requeue_after(),
                steps: report.steps.clone(),
            };
            act.record
                .pass_finished(started_at, started.elapsed(), summary);
            let _ = reply.send(report);
            act.running = None;
            act.start_next(ctx);
        }));
    }
}

impl<C: EngineContext> Actor for PipelineActor<C> {
    type Context = Context<Self>;
}

/// Tells the actor which step its running pass is at.
struct ReportSteps {
    pass: u64,
    to: Recipient<StepStarted>,
    shards: ShardView,
    namespace: String,
    name: String,
}

impl PassObserver for ReportSteps {
    fn step_started(&mut self, step: &'static str) {
        self.to.do_send(StepStarted {
            pass: self.pass,
            step,
        });
    }

    fn still_owned(&self) -> bool {
        self.shards.owns(&self.namespace, &self.name)
    }
}

impl<C: EngineContext> Handler<RunPass<C>> for PipelineActor<C> {
    type Result = ResponseFuture<Option<PassReport>>;

    fn handle(&mut self, msg: RunPass<C>, ctx: &mut Self::Context) -> Self::Result {
        let (reply, answer) = oneshot::channel();
        self.queue.push_back(Waiting { run: msg, reply });
        self.start_next(ctx);
        Box::pin(async move { answer.await.ok() })
    }
}

impl<C: EngineContext> Handler<StepStarted> for PipelineActor<C> {
    type Result = ();

    fn handle(&mut self, msg: StepStarted, _ctx: &mut Self::Context) {
        // A step of a pass that already ended arrives late: not the current step.
        if self.running == Some(msg.pass) {
            self.record.step_started(msg.step);
        }
    }
}

impl<C: EngineContext> Handler<GateStopped> for PipelineActor<C> {
    type Result = ();

    fn handle(&mut self, msg: GateStopped, _ctx: &mut Self::Context) {
        let summary = PassSummary {
            outcome: msg.outcome,
            requeue: msg.requeue,
            steps: Vec::new(),
        };
        self.record
            .pass_finished(msg.started_at, msg.duration, summary);
    }
}

impl<C: EngineContext> Handler<PassNotWritten> for PipelineActor<C> {
    type Result = ();

    fn handle(&mut self, msg: PassNotWritten, _ctx: &mut Self::Context) {
        self.record.last_pass_amended(&msg.outcome, msg.requeue);
    }
}

impl<C: EngineContext> Handler<InspectPipeline> for PipelineActor<C> {
    type Result = MessageResult<InspectPipeline>;

    fn handle(&mut self, _msg: InspectPipeline, _ctx: &mut Self::Context) -> Self::Result {
        MessageResult(self.record.clone())
    }
}
