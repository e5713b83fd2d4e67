//! The lock-coordinator actor and its cheap cloneable handle: plans each Lock / NestedLock purely,
//! resolves (and creates) the resource actors, then runs the acquisition as a future outside the
//! coordinator's mailbox, asking for each lock in plan order and awaiting its grant before asking
//! for the next. Also: shutdown (a write on root), retirement bookkeeping and inspection.
//!
//! Files: this one holds the actor and its messages; `phase.rs` the acquisition future,
//! `guard.rs` the outcome and its release, `handle.rs` the callers' handle.

mod guard;
mod handle;
mod phase;

pub use guard::{LockGuard, Locked, ShutdownGuard};
pub use handle::CoordinatorHandle;

use crate::error::LockError;
use crate::index::Store;
use crate::inspect::{CoordinatorSnapshot, TransactionSnapshot, WaitSnapshot};
use crate::lock_queue::{DEFAULT_AGE_STEP, Priority};
use crate::plan::{
    self, EntryAction, LockContext, LockMode, LockStep, LockedEntry, Plan, PlanEntry,
};
use crate::query::{Op, Query};
use crate::resource_actor::{InspectResource, ResourceRef, Retired};
use crate::schema::{ROOT, ROOT_ID};
use actix::prelude::*;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
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

/// The coordinator actor. Use it through [`CoordinatorHandle`].
pub struct Coordinator {
    store: Arc<Store>,
    age_step: Duration,
    /// kind -> id -> actor (looked up by `&str`, without building a key per lock).
    registry: HashMap<String, HashMap<String, ResourceRef>>,
    kind_names: HashMap<String, Arc<str>>,
    next_generation: u64,
    next_txn: u64,
    next_phase: u64,
    phases: BTreeMap<u64, SharedStatus>,
}

impl Actor for Coordinator {
    type Context = Context<Self>;
}

impl Coordinator {
    pub(crate) fn new(store: Arc<Store>, config: CoordinatorConfig) -> Coordinator {
        Coordinator {
            store,
            age_step: config.age_step,
            registry: HashMap::new(),
            kind_names: HashMap::new(),
            next_generation: 0,
            next_txn: 0,
            next_phase: 0,
            phases: BTreeMap::new(),
        }
    }

    fn resolve(&mut self, kind: &str, id: &str, ctx: &mut Context<Self>) -> ResourceRef {
        if let Some(r) = self.registry.get(kind).and_then(|ids| ids.get(id))
            && r.connected()
        {
            return r.clone();
        }
        self.next_generation += 1;
        let index = self.store.kind(kind).cloned();
        let kind_name = match self.kind_names.get(kind) {
            Some(k) => k.clone(),
            None => {
                let k: Arc<str> = Arc::from(kind);
                self.kind_names.insert(kind.to_string(), k.clone());
                k
            }
        };
        let r = ResourceRef::start(
            kind_name,
            id,
            index,
            self.age_step,
            self.next_generation,
            ctx.address(),
        );
        self.registry
            .entry(kind.to_string())
            .or_default()
            .insert(id.to_string(), r.clone());
        r
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
    fn handle(&mut self, msg: Resolve, ctx: &mut Context<Self>) -> Self::Result {
        MessageResult(self.resolve(&msg.kind, &msg.id, ctx))
    }
}

impl Handler<Retired> for Coordinator {
    type Result = ();
    fn handle(&mut self, msg: Retired, _ctx: &mut Context<Self>) {
        if let Some(ids) = self.registry.get_mut(&msg.kind)
            && ids
                .get(&msg.id)
                .is_some_and(|r| r.generation == msg.generation)
        {
            ids.remove(&msg.id);
        }
    }
}

#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct PhaseDone {
    pub(crate) phase: u64,
}

impl Handler<PhaseDone> for Coordinator {
    type Result = ();
    fn handle(&mut self, msg: PhaseDone, _ctx: &mut Context<Self>) {
        self.phases.remove(&msg.phase);
    }
}

#[derive(Message)]
#[rtype(result = "Result<Locked, LockError>")]
pub(crate) struct BeginLock {
    pub(crate) queries: Vec<Query>,
    pub(crate) context: Option<LockContext>,
    pub(crate) priority: Priority,
    pub(crate) what: PhaseKind,
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

impl Handler<BeginLock> for Coordinator {
    type Result = ResponseFuture<Result<Locked, LockError>>;
    fn handle(&mut self, msg: BeginLock, ctx: &mut Context<Self>) -> Self::Result {
        let planned = match msg.what {
            PhaseKind::Shutdown => Ok(shutdown_plan()),
            _ => plan::plan(
                self.store.schema(),
                &*self.store,
                &msg.queries,
                msg.context.as_ref(),
            ),
        };
        let plan = match planned {
            Ok(p) => p,
            Err(e) => {
                tracing::debug!(code = e.code(), error = %e, "lock refused");
                return Box::pin(async move { Err(e) });
            }
        };
        let txn = match &msg.context {
            Some(c) => c.txn,
            None => {
                self.next_txn += 1;
                self.next_txn
            }
        };
        self.next_phase += 1;
        let phase = self.next_phase;
        let steps: Arc<[LockStep]> = plan.acquisitions().into();
        let refs: Vec<ResourceRef> = steps
            .iter()
            .map(|s| self.resolve(&s.kind, &s.id, ctx))
            .collect();
        let status = Arc::new(Mutex::new(PhaseStatus {
            phase,
            txn,
            what: msg.what,
            priority: msg.priority,
            started: Instant::now(),
            steps: steps.clone(),
            held: 0,
            waiting: None,
        }));
        self.phases.insert(phase, status.clone());
        let run = phase::Phase {
            coordinator: ctx.address(),
            store: self.store.clone(),
            plan,
            steps,
            refs,
            txn,
            phase,
            priority: msg.priority,
            status,
        };
        Box::pin(run.run())
    }
}

/// Stop the coordinator actor.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Stop;

impl Handler<Stop> for Coordinator {
    type Result = ();
    fn handle(&mut self, _msg: Stop, ctx: &mut Context<Self>) {
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
        let transactions: Vec<TransactionSnapshot> = self
            .phases
            .values()
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
            .registry
            .values()
            .flat_map(HashMap::values)
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
