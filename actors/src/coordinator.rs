//! The lock-coordinator actor and its cheap cloneable handle: plans each Lock / NestedLock purely,
//! resolves (and creates) the resource actors, then runs the acquisition as a future outside the
//! coordinator's mailbox, asking for each lock in plan order and awaiting its grant before asking
//! for the next. Also: shutdown (a write on root), retirement bookkeeping and inspection.

use crate::error::LockError;
use crate::index::Store;
use crate::inspect::{CoordinatorSnapshot, TransactionSnapshot, WaitSnapshot};
use crate::lock_queue::{DEFAULT_AGE_STEP, Priority};
use crate::plan::{
    self, EntryAction, LockContext, LockMode, LockStep, LockedEntry, Plan, PlanEntry,
};
use crate::query::{Op, Query};
use crate::resource_actor::{Acquire, InspectResource, Release, ResourceRef, Retired};
use crate::results::{CommitTarget, Listed, QueryResult, ResourceResult};
use crate::schema::{ROOT, ROOT_ID, Schema};
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
enum PhaseKind {
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
struct PhaseStatus {
    phase: u64,
    txn: u64,
    what: PhaseKind,
    priority: Priority,
    started: Instant,
    held: Vec<LockStep>,
    waiting: Option<(LockStep, Instant)>,
}

type SharedStatus = Arc<Mutex<PhaseStatus>>;

/// A granted lock: the value at grant time and the actor that granted it.
type GrantedLock = (Option<Arc<Value>>, ResourceRef);

fn with_status<R>(s: &SharedStatus, f: impl FnOnce(&mut PhaseStatus) -> R) -> R {
    let mut g = s.lock().unwrap_or_else(|e| e.into_inner());
    f(&mut g)
}

/// The coordinator actor. Use it through [`CoordinatorHandle`].
pub struct Coordinator {
    store: Arc<Store>,
    age_step: Duration,
    registry: HashMap<(String, String), ResourceRef>,
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
    fn resolve(&mut self, kind: &str, id: &str, ctx: &mut Context<Self>) -> ResourceRef {
        let key = (kind.to_string(), id.to_string());
        if let Some(r) = self.registry.get(&key)
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
        self.registry.insert(key, r.clone());
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
        let key = (msg.kind, msg.id);
        if self
            .registry
            .get(&key)
            .is_some_and(|r| r.generation == msg.generation)
        {
            self.registry.remove(&key);
        }
    }
}

#[derive(Message)]
#[rtype(result = "()")]
struct PhaseDone {
    phase: u64,
}

impl Handler<PhaseDone> for Coordinator {
    type Result = ();
    fn handle(&mut self, msg: PhaseDone, _ctx: &mut Context<Self>) {
        self.phases.remove(&msg.phase);
    }
}

#[derive(Message)]
#[rtype(result = "Result<Locked, LockError>")]
struct BeginLock {
    queries: Vec<Query>,
    context: Option<LockContext>,
    priority: Priority,
    what: PhaseKind,
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
        let steps = plan.acquisitions();
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
            held: Vec::new(),
            waiting: None,
        }));
        self.phases.insert(phase, status.clone());
        let run = Phase {
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

#[derive(Message)]
#[rtype(result = "CoordinatorSnapshot")]
struct Inspect;

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
                    held: p.held.clone(),
                    waiting_on: p.waiting.as_ref().map(|(l, since)| WaitSnapshot {
                        lock: l.clone(),
                        waited_ms: now.saturating_duration_since(*since).as_millis() as u64,
                    }),
                })
            })
            .collect();
        let refs: Vec<ResourceRef> = self
            .registry
            .values()
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

/// One Lock / NestedLock / shutdown being carried out.
struct Phase {
    coordinator: Addr<Coordinator>,
    store: Arc<Store>,
    plan: Plan,
    steps: Vec<LockStep>,
    refs: Vec<ResourceRef>,
    txn: u64,
    phase: u64,
    priority: Priority,
    status: SharedStatus,
}

async fn acquire_one(
    coordinator: &Addr<Coordinator>,
    mut r: ResourceRef,
    step: &LockStep,
    txn: u64,
    priority: Priority,
) -> Result<(Option<Arc<Value>>, ResourceRef), LockError> {
    for attempt in 0u32..10_000 {
        if let Ok(rx) = r
            .send(Acquire {
                txn,
                mode: step.mode,
                priority,
            })
            .await
            && let Ok(grant) = rx.await
        {
            return Ok((grant, r));
        }
        // The actor retired (or is retiring) before granting: resolve it again.
        tracing::trace!(kind = %step.kind, id = %step.id, attempt, "re-resolving a retired resource actor");
        if attempt > 8 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        } else {
            tokio::task::yield_now().await;
        }
        r = coordinator
            .send(Resolve {
                kind: step.kind.clone(),
                id: step.id.clone(),
            })
            .await
            .map_err(|_| LockError::ShuttingDown)?;
    }
    Err(LockError::ShuttingDown)
}

impl Phase {
    async fn run(self) -> Result<Locked, LockError> {
        let Phase {
            coordinator,
            store,
            plan,
            steps,
            refs,
            txn,
            phase,
            priority,
            status,
        } = self;
        let mut guard = LockGuard {
            txn,
            phase,
            held: Vec::new(),
            coordinator: coordinator.clone(),
            released: false,
        };
        let mut grants: HashMap<(String, String), GrantedLock> = HashMap::new();
        for (step, r) in steps.into_iter().zip(refs) {
            with_status(&status, |s| {
                s.waiting = Some((step.clone(), Instant::now()))
            });
            let (grant, r) = acquire_one(&coordinator, r, &step, txn, priority).await?;
            guard.held.push((step.clone(), r.clone()));
            with_status(&status, |s| {
                s.waiting = None;
                s.held.push(step.clone());
            });
            grants.insert((step.kind, step.id), (grant, r));
        }

        let mut results: Vec<QueryResult> =
            (0..plan.queries).map(|_| QueryResult::default()).collect();
        for (e, action) in plan.entries.iter().zip(&plan.actions) {
            let Some(q) = e.query else { continue };
            if e.synthetic {
                continue;
            }
            let Some(result) = results.get_mut(q) else {
                continue;
            };
            let (value, resource) = match action {
                EntryAction::List => {
                    let listed = store
                        .kind(&e.kind)
                        .map(|k| k.list(e.filter.as_ref()))
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(id, value)| Listed { id, value })
                        .collect();
                    result.lists.insert(e.kind.clone(), listed);
                    continue;
                }
                EntryAction::InconsistentRead => {
                    let v = store.kind(&e.kind).and_then(|k| k.get(&e.id));
                    result.resources.insert(
                        e.kind.clone(),
                        ResourceResult::new(
                            &e.kind,
                            &e.id,
                            e.op,
                            v.map(|v| Value::clone(&v)),
                            None,
                        ),
                    );
                    continue;
                }
                EntryAction::Acquire(_) | EntryAction::Covered => {
                    match grants.get(&(e.kind.clone(), e.id.clone())) {
                        Some((g, r)) => (g.clone(), Some(r.clone())),
                        None => (None, None),
                    }
                }
                EntryAction::Held => (store.kind(&e.kind).and_then(|k| k.get(&e.id)), None),
            };
            let target = CommitTarget {
                coordinator: coordinator.clone(),
                txn,
                resource,
            };
            result.resources.insert(
                e.kind.clone(),
                ResourceResult::new(
                    &e.kind,
                    &e.id,
                    e.op,
                    value.map(|v| Value::clone(&v)),
                    Some(target),
                ),
            );
        }
        let mut context = plan.context_after.clone();
        context.txn = txn;
        Ok(Locked {
            context,
            results,
            guard,
            plan,
        })
    }
}

/// The outcome of a Lock / NestedLock: the lock context, one result per query, the guard that
/// releases this phase's locks (in reverse order, on `unlock().await` or on drop), and the plan.
#[derive(Debug)]
pub struct Locked {
    /// What the transaction holds after this phase (for a NestedLock).
    pub context: LockContext,
    /// One result per query, in query order.
    pub results: Vec<QueryResult>,
    /// Releases this phase's locks.
    pub guard: LockGuard,
    /// The plan that was carried out.
    pub plan: Plan,
}

impl Locked {
    /// Releases this phase's locks in reverse acquisition order; returns them in release order.
    pub async fn unlock(self) -> Vec<LockStep> {
        self.guard.unlock().await
    }
}

/// The locks taken by one phase. Dropping it releases them (in reverse order) too.
pub struct LockGuard {
    txn: u64,
    phase: u64,
    held: Vec<(LockStep, ResourceRef)>,
    coordinator: Addr<Coordinator>,
    released: bool,
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("txn", &self.txn)
            .field("phase", &self.phase)
            .field(
                "held",
                &self.held.iter().map(|(s, _)| s).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl LockGuard {
    /// The locks held, in acquisition order.
    pub fn held(&self) -> Vec<LockStep> {
        self.held.iter().map(|(s, _)| s.clone()).collect()
    }

    /// Releases the locks in reverse acquisition order, awaiting each; returns them in that order.
    pub async fn unlock(mut self) -> Vec<LockStep> {
        self.released = true;
        let held = std::mem::take(&mut self.held);
        let mut order = Vec::with_capacity(held.len());
        for (step, r) in held.into_iter().rev() {
            // A gone actor has nothing left to release.
            let _ = r.send(Release { txn: self.txn }).await;
            order.push(step);
        }
        self.coordinator.do_send(PhaseDone { phase: self.phase });
        order
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        for (_, r) in self.held.iter().rev() {
            r.do_send(Release { txn: self.txn });
        }
        self.coordinator.do_send(PhaseDone { phase: self.phase });
    }
}

/// Holds the root write lock: while it lives, new consistent locks wait; lists and inconsistent
/// reads proceed. Release it with [`ShutdownGuard::release`] or by dropping it.
#[derive(Debug)]
pub struct ShutdownGuard {
    guard: LockGuard,
}

impl ShutdownGuard {
    /// Releases the root write lock.
    pub async fn release(self) {
        self.guard.unlock().await;
    }
}

/// The cheap cloneable handle callers use.
#[derive(Clone)]
pub struct CoordinatorHandle {
    addr: Addr<Coordinator>,
    store: Arc<Store>,
}

impl std::fmt::Debug for CoordinatorHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoordinatorHandle").finish_non_exhaustive()
    }
}

impl CoordinatorHandle {
    /// Starts a coordinator for `schema` on the current actix arbiter.
    pub fn start(schema: Arc<Schema>, config: CoordinatorConfig) -> CoordinatorHandle {
        let store = Arc::new(Store::new(schema));
        // The root resource always exists, so its actor is never retired and re-created.
        if let Some(root) = store.kind(ROOT) {
            let _ = root.set(
                ROOT_ID,
                Some(Arc::new(Value::Object(serde_json::Map::new()))),
            );
        }
        let actor = Coordinator {
            store: store.clone(),
            age_step: config.age_step,
            registry: HashMap::new(),
            kind_names: HashMap::new(),
            next_generation: 0,
            next_txn: 0,
            next_phase: 0,
            phases: BTreeMap::new(),
        };
        CoordinatorHandle {
            addr: actor.start(),
            store,
        }
    }

    /// Starts a coordinator for the standard schema with the default configuration.
    pub fn start_standard() -> CoordinatorHandle {
        CoordinatorHandle::start(Schema::standard(), CoordinatorConfig::default())
    }

    /// The schema.
    pub fn schema(&self) -> &Arc<Schema> {
        self.store.schema()
    }

    /// Seeds the cache with a value without taking any lock (for bootstrapping, e.g. loading
    /// persisted state at start); it bypasses the locks of transactions holding the resource.
    pub fn load(&self, kind: &str, id: &str, value: Value) -> Result<(), LockError> {
        let index = self
            .store
            .kind(kind)
            .ok_or_else(|| LockError::UnknownKind {
                kind: kind.to_string(),
            })?;
        index
            .set(id, Some(Arc::new(value)))
            .map_err(|c| LockError::KeyExists {
                kind: kind.to_string(),
                key: c.key,
                owner: c.owner,
                id: id.to_string(),
            })
    }

    /// Plans `queries` against the live cache without taking anything (explain).
    pub fn plan(
        &self,
        queries: &[Query],
        context: Option<&LockContext>,
    ) -> Result<Plan, LockError> {
        plan::plan(self.store.schema(), &*self.store, queries, context)
    }

    async fn begin(
        &self,
        queries: Vec<Query>,
        context: Option<LockContext>,
        priority: Priority,
        what: PhaseKind,
    ) -> Result<Locked, LockError> {
        self.addr
            .send(BeginLock {
                queries,
                context,
                priority,
                what,
            })
            .await
            .map_err(|_| LockError::ShuttingDown)?
    }

    /// Lock with the default priority.
    pub async fn lock(&self, queries: Vec<Query>) -> Result<Locked, LockError> {
        self.lock_with(queries, Priority::Default).await
    }

    /// Lock with a priority.
    pub async fn lock_with(
        &self,
        queries: Vec<Query>,
        priority: Priority,
    ) -> Result<Locked, LockError> {
        self.begin(queries, None, priority, PhaseKind::Lock).await
    }

    /// NestedLock with the default priority: extends `context` (the context of a live phase).
    pub async fn nested_lock(
        &self,
        context: &LockContext,
        queries: Vec<Query>,
    ) -> Result<Locked, LockError> {
        self.nested_lock_with(context, queries, Priority::Default)
            .await
    }

    /// NestedLock with a priority.
    pub async fn nested_lock_with(
        &self,
        context: &LockContext,
        queries: Vec<Query>,
        priority: Priority,
    ) -> Result<Locked, LockError> {
        self.begin(queries, Some(context.clone()), priority, PhaseKind::Nested)
            .await
    }

    /// Takes the root write lock (High priority): waits for in-flight consistent locks and blocks
    /// new ones until the guard is released.
    pub async fn shutdown(&self) -> Result<ShutdownGuard, LockError> {
        let locked = self
            .begin(Vec::new(), None, Priority::High, PhaseKind::Shutdown)
            .await?;
        Ok(ShutdownGuard {
            guard: locked.guard,
        })
    }

    /// Every in-flight phase and every live resource actor.
    pub async fn inspect(&self) -> Result<CoordinatorSnapshot, LockError> {
        self.addr
            .send(Inspect)
            .await
            .map_err(|_| LockError::ShuttingDown)
    }

    /// An inconsistent copy of one value (no lock, no message).
    pub fn peek(&self, kind: &str, id: &str) -> Option<Arc<Value>> {
        self.store.kind(kind).and_then(|k| k.get(id))
    }
}
