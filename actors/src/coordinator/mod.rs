//! The lock coordinator and its cheap cloneable handle: each Lock / NestedLock is planned purely,
//! its resource actors are resolved (and created) in the shared registry, then the acquisition
//! runs in the caller's task, asking for each lock in plan order and awaiting its grant before
//! asking for the next. The coordinator actor stops the coordinator and answers inspection; the
//! shared [`Core`] holds the registry, the counters and the in-flight phases. Also: shutdown (a
//! write on root) and retirement bookkeeping.
//!
//! Files: this one holds the core, the actor and its messages; `phase.rs` the acquisition future,
//! `guard.rs` the outcome and its release, `handle.rs` the callers' handle.

mod guard;
mod handle;
mod phase;

pub use guard::{LockGuard, Locked, ShutdownGuard};
pub use handle::CoordinatorHandle;

use crate::error::LockError;
use crate::fast_hash::FxHashMap;
use crate::index::Store;
use crate::inspect::{CoordinatorSnapshot, TransactionSnapshot, WaitSnapshot};
use crate::lock_queue::{DEFAULT_AGE_STEP, Priority};
use crate::plan::{
    self, EntryAction, LockContext, LockMode, LockStep, LockedEntry, Plan, PlanEntry,
};
use crate::query::{Op, Query};
use crate::resource_actor::{InspectResource, ResourceRef, Retired};
use crate::schema::{ROOT, ROOT_ID};
use actix::ArbiterHandle;
use actix::prelude::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// Tunables of a coordinator.
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    /// A waiter's effective priority rises one level per `age_step` of waiting.
    pub age_step: Duration,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            age_step: DEFAULT_AGE_STEP,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PhaseKind {
    Lock,
    Nested,
    Shutdown,
}

impl PhaseKind {
    fn name(self) -> &'static str {
        match self {
            PhaseKind::Lock => "lock",
            PhaseKind::Nested => "nested_lock",
            PhaseKind::Shutdown => "shutdown",
        }
    }
}

#[derive(Debug)]
pub(crate) struct PhaseStatus {
    phase: u64,
    txn: u64,
    what: PhaseKind,
    priority: Priority,
    started: Instant,
    /// Every lock of the phase, in acquisition order (shared with the acquisition future).
    steps: Arc<[LockStep]>,
    /// How many of `steps` are held.
    held: usize,
    /// The step waited on (an index into `steps`) and since when.
    waiting: Option<(usize, Instant)>,
}

pub(crate) type SharedStatus = Arc<Mutex<PhaseStatus>>;

/// A granted lock: the value at grant time and the actor that granted it.
pub(crate) type GrantedLock = (Option<Arc<Value>>, ResourceRef);

pub(crate) fn with_status<R>(s: &SharedStatus, f: impl FnOnce(&mut PhaseStatus) -> R) -> R {
    let mut g = s.lock().unwrap_or_else(|e| e.into_inner());
    f(&mut g)
}

/// What the coordinator actor shares with its handles and its resource actors: the store, the
/// registry of resource actors, the transaction and phase counters and the in-flight phases (for
/// inspection). Lock and NestedLock run in the caller's task on this (planning is pure; the
/// registry is a short mutex), so a lock costs no round trip through the coordinator's mailbox.
pub(crate) struct Core {
    pub(crate) store: Arc<Store>,
    age_step: Duration,
    registry: Mutex<Registry>,
    next_txn: AtomicU64,
    next_phase: AtomicU64,
    phases: Mutex<BTreeMap<u64, SharedStatus>>,
    /// The arbiter the coordinator runs on (resource actors are started there) and its thread.
    pub(crate) arbiter: ArbiterHandle,
    pub(crate) thread: ThreadId,
    stopped: AtomicBool,
    me: Weak<Core>,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Registry {
    /// kind -> id -> actor (looked up by `&str`, without building a key per lock).
    actors: FxHashMap<String, FxHashMap<String, ResourceRef>>,
    kind_names: FxHashMap<String, Arc<str>>,
    next_generation: u64,
}

impl Core {
    /// A core for a coordinator started on the current arbiter.
    pub(crate) fn new(store: Arc<Store>, config: &CoordinatorConfig) -> Arc<Core> {
        Arc::new_cyclic(|me| Core {
            store,
            age_step: config.age_step,
            registry: Mutex::new(Registry::default()),
            next_txn: AtomicU64::new(0),
            next_phase: AtomicU64::new(0),
            phases: Mutex::new(BTreeMap::new()),
            arbiter: Arbiter::current(),
            thread: std::thread::current().id(),
            stopped: AtomicBool::new(false),
            me: me.clone(),
        })
    }

    fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn phases(&self) -> MutexGuard<'_, BTreeMap<u64, SharedStatus>> {
        self.phases.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the coordinator was stopped (every later Lock answers `shutting_down`).
    pub(crate) fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// The actor of (kind, id), started when it has none (or only a retired one).
    pub(crate) fn resolve(&self, kind: &str, id: &str) -> ResourceRef {
        let mut reg = self.registry();
        self.resolve_in(&mut reg, kind, id)
    }

    /// The actors of every step, under one registry lock.
    fn resolve_all(&self, steps: &[LockStep]) -> Vec<ResourceRef> {
        let mut reg = self.registry();
        steps
            .iter()
            .map(|s| self.resolve_in(&mut reg, &s.kind, &s.id))
            .collect()
    }

    fn resolve_in(&self, reg: &mut Registry, kind: &str, id: &str) -> ResourceRef {
        if let Some(r) = reg.actors.get(kind).and_then(|ids| ids.get(id))
            && r.connected()
        {
            return r.clone();
        }
        reg.next_generation += 1;
        let generation = reg.next_generation;
        let index = self.store.kind(kind).cloned();
        let kind_name = match reg.kind_names.get(kind) {
            Some(k) => k.clone(),
            None => {
                let k: Arc<str> = Arc::from(kind);
                reg.kind_names.insert(kind.to_string(), k.clone());
                k
            }
        };
        // On the coordinator's thread the actor starts on the current arbiter directly; from
        // another thread it is started on the coordinator's arbiter.
        let arbiter = (std::thread::current().id() != self.thread).then_some(&self.arbiter);
        let r = ResourceRef::start(
            kind_name,
            id,
            index,
            self.age_step,
            generation,
            self.me.clone(),
            arbiter,
        );
        match reg.actors.get_mut(kind) {
            Some(ids) => {
                ids.insert(id.to_string(), r.clone());
            }
            None => {
                let mut ids = FxHashMap::default();
                ids.insert(id.to_string(), r.clone());
                reg.actors.insert(kind.to_string(), ids);
            }
        }
        r
    }

    /// An actor retired: forget it unless a newer generation is registered.
    pub(crate) fn retired(&self, kind: &str, id: &str, generation: u64) {
        let mut reg = self.registry();
        if let Some(ids) = reg.actors.get_mut(kind)
            && ids.get(id).is_some_and(|r| r.generation == generation)
        {
            ids.remove(id);
        }
    }

    /// A phase released its locks (or failed): it is no longer in flight.
    pub(crate) fn phase_done(&self, phase: u64) {
        self.phases().remove(&phase);
    }

    /// Plans and carries out one Lock / NestedLock / shutdown in the caller's task.
    pub(crate) async fn begin(
        self: &Arc<Self>,
        queries: &[Query],
        context: Option<&LockContext>,
        priority: Priority,
        what: PhaseKind,
    ) -> Result<Locked, LockError> {
        if self.stopped() {
            return Err(LockError::ShuttingDown);
        }
        let planned = match what {
            PhaseKind::Shutdown => Ok(shutdown_plan()),
            _ => plan::plan(self.store.schema(), &*self.store, queries, context),
        };
        let plan = match planned {
            Ok(p) => p,
            Err(e) => {
                tracing::debug!(code = e.code(), error = %e, "lock refused");
                return Err(e);
            }
        };
        let txn = match context {
            Some(c) => c.txn,
            None => self.next_txn.fetch_add(1, Ordering::Relaxed) + 1,
        };
        let phase = self.next_phase.fetch_add(1, Ordering::Relaxed) + 1;
        let steps: Arc<[LockStep]> = plan
            .key_locks
            .iter()
            .chain(&plan.acquire)
            .cloned()
            .collect();
        let refs = self.resolve_all(&steps);
        let status = Arc::new(Mutex::new(PhaseStatus {
            phase,
            txn,
            what,
            priority,
            started: Instant::now(),
            steps: steps.clone(),
            held: 0,
            waiting: None,
        }));
        self.phases().insert(phase, status.clone());
        let run = phase::Phase {
            core: self.clone(),
            plan,
            steps,
            refs,
            txn,
            phase,
            priority,
            status,
        };
        run.run().await
    }
}

/// The coordinator actor (stop, inspection). Use it through [`CoordinatorHandle`].
pub struct Coordinator {
    core: Arc<Core>,
}

impl Actor for Coordinator {
    type Context = Context<Self>;

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        self.core.stopped.store(true, Ordering::Release);
    }
}

impl Coordinator {
    pub(crate) fn new(core: Arc<Core>) -> Coordinator {
        Coordinator { core }
    }
}

/// Look up (creating when needed) the actor of (kind, id).
#[derive(Message, Debug)]
#[rtype(result = "ResourceRef")]
pub struct Resolve {
    /// The kind.
    pub kind: String,
    /// The id.
    pub id: String,
}

impl Handler<Resolve> for Coordinator {
    type Result = MessageResult<Resolve>;
    fn handle(&mut self, msg: Resolve, _ctx: &mut Context<Self>) -> Self::Result {
        MessageResult(self.core.resolve(&msg.kind, &msg.id))
    }
}

impl Handler<Retired> for Coordinator {
    type Result = ();
    fn handle(&mut self, msg: Retired, _ctx: &mut Context<Self>) {
        self.core.retired(&msg.kind, &msg.id, msg.generation);
    }
}

fn shutdown_plan() -> Plan {
    let entry = PlanEntry {
        op: Op::Upsert,
        kind: ROOT.to_string(),
        id: ROOT_ID.to_string(),
        query: None,
        synthetic: true,
        filter: None,
    };
    Plan {
        queries: 0,
        entries: vec![entry],
        actions: vec![EntryAction::Acquire(0)],
        key_locks: Vec::new(),
        acquire: vec![LockStep {
            mode: LockMode::Write,
            kind: ROOT.to_string(),
            id: ROOT_ID.to_string(),
        }],
        context_after: LockContext {
            txn: 0,
            held: BTreeMap::new(),
            last_lock_held: Some(LockedEntry {
                op: Op::Upsert,
                kind: ROOT.to_string(),
                id: ROOT_ID.to_string(),
            }),
            holds_root: true,
        },
    }
}

/// Stop the coordinator actor.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Stop;

impl Handler<Stop> for Coordinator {
    type Result = ();
    fn handle(&mut self, _msg: Stop, ctx: &mut Context<Self>) {
        self.core.stopped.store(true, Ordering::Release);
        ctx.stop();
    }
}

#[derive(Message)]
#[rtype(result = "CoordinatorSnapshot")]
pub(crate) struct Inspect;

impl Handler<Inspect> for Coordinator {
    type Result = ResponseFuture<CoordinatorSnapshot>;
    fn handle(&mut self, _msg: Inspect, _ctx: &mut Context<Self>) -> Self::Result {
        let now = Instant::now();
        let phases: Vec<SharedStatus> = self.core.phases().values().cloned().collect();
        let transactions: Vec<TransactionSnapshot> = phases
            .iter()
            .map(|s| {
                with_status(s, |p| TransactionSnapshot {
                    phase: p.phase,
                    txn: p.txn,
                    what: p.what.name(),
                    priority: p.priority,
                    age_ms: now.saturating_duration_since(p.started).as_millis() as u64,
                    held: p.steps.iter().take(p.held).cloned().collect(),
                    waiting_on: p.waiting.and_then(|(i, since)| {
                        p.steps.get(i).map(|l| WaitSnapshot {
                            lock: l.clone(),
                            waited_ms: now.saturating_duration_since(since).as_millis() as u64,
                        })
                    }),
                })
            })
            .collect();
        let refs: Vec<ResourceRef> = self
            .core
            .registry()
            .actors
            .values()
            .flat_map(FxHashMap::values)
            .filter(|r| r.connected())
            .cloned()
            .collect();
        Box::pin(async move {
            let snaps =
                futures::future::join_all(refs.iter().map(|r| r.send(InspectResource))).await;
            let mut resources: Vec<_> = snaps.into_iter().filter_map(Result::ok).collect();
            resources.sort_by(|a, b| (&a.kind, &a.id).cmp(&(&b.kind, &b.id)));
            CoordinatorSnapshot {
                transactions,
                resources,
            }
        })
    }
}
