//! The lock-coordinator actor: its state (registry, catalog, transaction table, arbiters), the
//! planning of a phase (`Begin`) and the handlers of every message it receives.

use super::messages::{CheckNewKeys, Collect, Collected, Explain, Peek, PhaseDone, Resolve, Stop};
use super::pending_chain::{Links, PendingChain};
use crate::catalog::Catalog;
use crate::error::LockError;
use crate::fast_hash::FxHashMap;
use crate::lock_queue::{DEFAULT_AGE_STEP, Priority};
use crate::plan::{
    self, CacheView, EntryAction, LockContext, LockMode, LockStep, LockedEntry, Plan, PlanEntry,
};
use crate::query::{Op, Query};
use crate::resource_actor::{
    ClaimKey, Committed, CoordinatorLink, ResourceRef, ResourceSpec, Retired, UnclaimKey,
};
use crate::schema::{ROOT, ROOT_ID, Schema};
use actix::prelude::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Tunables of a coordinator.
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    /// A waiter's effective priority rises one level per `age_step` of waiting.
    pub age_step: Duration,
    /// How many arbiters (one thread each) the resource actors are spread over, by a hash of
    /// (kind, id). 0 or 1: every resource actor runs on the coordinator's own arbiter (one thread
    /// for the whole lock core). From 2 on, the coordinator starts that many arbiters of its own
    /// and stops them when it stops.
    pub arbiters: usize,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            age_step: DEFAULT_AGE_STEP,
            arbiters: 1,
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
    pub(super) fn name(self) -> &'static str {
        match self {
            PhaseKind::Lock => "lock",
            PhaseKind::Nested => "nested_lock",
            PhaseKind::Shutdown => "shutdown",
        }
    }
}

/// One phase of the transaction table.
#[derive(Debug)]
pub(super) struct PhaseRecord {
    pub(super) txn: u64,
    pub(super) what: PhaseKind,
    pub(super) priority: Priority,
    pub(super) started: Instant,
    /// Every lock of the phase, in acquisition order (key locks first).
    pub(super) steps: Arc<[LockStep]>,
    /// The renames of the phase: (kind, new key, id), checked again once the key locks are held.
    new_keys: Vec<(String, String, String)>,
    /// The phase whose context this NestedLock extended.
    parent: Option<u64>,
    /// The live NestedLock phase that extends this one's context: while it lives, only its
    /// context may extend the transaction (`stale_context`).
    child: Option<u64>,
}

/// The lock-coordinator actor. Use it through [`CoordinatorHandle`].
pub struct Coordinator {
    catalog: Catalog,
    age_step: Duration,
    /// kind -> id -> actor.
    pub(super) registry: FxHashMap<String, FxHashMap<String, ResourceRef>>,
    kind_names: FxHashMap<String, Arc<str>>,
    next_generation: u64,
    next_txn: u64,
    next_phase: u64,
    pub(super) phases: BTreeMap<u64, PhaseRecord>,
    /// The arbiters resource actors are spread over (empty: the coordinator's own).
    arbiters: Vec<Arbiter>,
    /// The key of the seal of issued lock contexts (random per coordinator).
    seal_key: u64,
}

impl Coordinator {
    pub(crate) fn new(schema: Arc<Schema>, config: &CoordinatorConfig) -> Coordinator {
        let mut catalog = Catalog::new(schema);
        // The root resource always exists, so its actor is never retired and re-created.
        catalog.apply(
            ROOT,
            ROOT_ID,
            Some(Arc::new(Value::Object(Default::default()))),
        );
        let arbiters = if config.arbiters >= 2 {
            (0..config.arbiters).map(|_| Arbiter::new()).collect()
        } else {
            Vec::new()
        };
        Coordinator {
            catalog,
            age_step: config.age_step,
            registry: FxHashMap::default(),
            kind_names: FxHashMap::default(),
            next_generation: 0,
            next_txn: 0,
            next_phase: 0,
            phases: BTreeMap::new(),
            arbiters,
            seal_key: std::collections::hash_map::RandomState::new().hash_one(0u64),
        }
    }

    /// The seal of a context: a hash keyed by a random per-coordinator key of everything it says
    /// (transaction, phase, held locks, last lock held, root), so a context altered or built
    /// outside this coordinator does not match. It guards against misuse of the API, not against
    /// an adversary in the process (who could read the key), so the hash is the fast Fx hash.
    fn seal(&self, c: &LockContext) -> u64 {
        let mut h = crate::fast_hash::FxHasher::default();
        h.write_u64(self.seal_key);
        (c.txn, c.phase, c.holds_root).hash(&mut h);
        c.held.hash(&mut h);
        c.last_lock_held
            .as_ref()
            .map(|l| (l.op.as_str(), l.kind.as_str(), l.id.as_str()))
            .hash(&mut h);
        // Never 0, the seal of a context no coordinator issued.
        h.finish() | 1
    }

    /// The actor of (kind, id), started when it has none (or only `stale`, a generation that
    /// stopped).
    fn resolve(
        &mut self,
        kind: &str,
        id: &str,
        stale: Option<u64>,
        queries: &[Query],
        ctx: &mut Context<Self>,
    ) -> ResourceRef {
        if let Some(r) = self.registry.get(kind).and_then(|ids| ids.get(id))
            && Some(r.generation) != stale
            && r.connected()
        {
            return r.clone();
        }
        self.next_generation += 1;
        let kind_name = match self.kind_names.get(kind) {
            Some(k) => k.clone(),
            None => {
                let k: Arc<str> = Arc::from(kind);
                self.kind_names.insert(kind.to_string(), k.clone());
                k
            }
        };
        let spec = ResourceSpec {
            kind: kind_name,
            id: id.to_string(),
            info: self.catalog.info(kind).cloned(),
            value: self.catalog.get(kind, id),
            age_step: self.age_step,
            generation: self.next_generation,
            coordinator: Box::new(ctx.address()),
        };
        let arbiter = self.placement(kind, id, queries);
        let r = ResourceRef::start(spec, arbiter.as_ref());
        self.registry
            .entry(kind.to_string())
            .or_default()
            .insert(id.to_string(), r.clone());
        r
    }

    /// The arbiter a new actor of (kind, id) runs on (`None`: the coordinator's own). With
    /// arbiters of their own: the root's actor on the coordinator's arbiter (every consistent
    /// Lock starts its chain there, right after the Begin); a resource with parents on the arbiter
    /// of its tree (a volume with its backend, a snapshot or publication with its volume's
    /// backend), so a transaction's chain crosses fewer threads; the tree's top is found through
    /// the first parent of each kind, from the cached value or, for a resource not cached yet,
    /// from the parent ids of `queries`; the others by a hash of (kind, id).
    fn placement(&self, kind: &str, id: &str, queries: &[Query]) -> Option<ArbiterHandle> {
        if self.arbiters.is_empty() || kind == ROOT {
            return None;
        }
        let schema = self.catalog.schema();
        let (mut top_kind, mut top_id) = (kind.to_string(), id.to_string());
        // At most one step per kind of the schema (its ranks make the walk finite anyway).
        for _ in 0..schema.kinds().len() {
            let Some(info) = schema.kind(&top_kind) else {
                break;
            };
            let Some((parent, _)) = info.parents.first() else {
                break;
            };
            let parent_id = self
                .catalog
                .get(&top_kind, &top_id)
                .and_then(|v| info.owner_id(&v, parent))
                .or_else(|| {
                    queries
                        .iter()
                        .flat_map(|q| &q.0)
                        .filter(|s| s.kind == top_kind && s.id == top_id)
                        .find_map(|s| s.owner(parent).map(str::to_string))
                });
            match parent_id {
                Some(pid) if !pid.is_empty() => {
                    top_kind = parent.clone();
                    top_id = pid;
                }
                _ => break,
            }
        }
        let mut h = crate::fast_hash::FxHasher::default();
        top_kind.hash(&mut h);
        top_id.hash(&mut h);
        Some(self.arbiters[(h.finish() % self.arbiters.len() as u64) as usize].handle())
    }

    /// Checks a presented lock context: sealed by this coordinator, unchanged, issued by a phase
    /// that still holds its locks, and the newest context of its transaction (no live NestedLock
    /// extends it: its `lastLockHeld` is the transaction's last lock).
    fn check_context(&self, presented: &LockContext) -> Result<(), LockError> {
        let txn = presented.txn;
        if presented.seal != self.seal(presented) {
            return Err(LockError::ForeignContext { txn });
        }
        match self.phases.get(&presented.phase) {
            Some(record) if record.txn != txn => Err(LockError::ForeignContext { txn }),
            Some(record) if record.child.is_some() => Err(LockError::StaleContext { txn }),
            Some(_) => Ok(()),
            None => Err(LockError::ReleasedContext { txn }),
        }
    }

    /// A top-level Lock from code that presents the context of the transaction it holds: refused
    /// while any phase of that transaction holds its locks (the context's own phase or a newer
    /// one); a context whose phases were all released holds nothing.
    fn check_not_held(&self, held: &LockContext) -> Result<(), LockError> {
        let txn = held.txn;
        if held.seal != self.seal(held) {
            return Err(LockError::ForeignContext { txn });
        }
        if self.phases.get(&held.phase).is_some_and(|r| r.txn != txn) {
            return Err(LockError::ForeignContext { txn });
        }
        // A phase of the transaction, the context's own or another still holding its locks (the
        // scan is only for callers that present a context).
        if self.phases.values().any(|r| r.txn == txn) {
            return Err(LockError::LockWhileHeld { txn });
        }
        Ok(())
    }

    /// Ends `phase` in the transaction table. A NestedLock phase that still extends it ends with
    /// it, its locks released here (the newest first), so no context of the transaction claims
    /// a lock the transaction no longer holds.
    fn end_phase(&mut self, phase: u64) {
        let Some(record) = self.phases.remove(&phase) else {
            return;
        };
        if let Some(parent) = record.parent
            && let Some(p) = self.phases.get_mut(&parent)
            && p.child == Some(phase)
        {
            p.child = None;
        }
        let mut next = record.child;
        let mut ended = Vec::new();
        while let Some(c) = next {
            let Some(nested) = self.phases.remove(&c) else {
                break;
            };
            next = nested.child;
            ended.push(nested);
        }
        for nested in ended.iter().rev() {
            for step in nested.steps.iter().rev() {
                if let Some(r) = self
                    .registry
                    .get(&step.kind)
                    .and_then(|ids| ids.get(&step.id))
                {
                    r.release(nested.txn);
                }
            }
        }
    }

    fn begin(&mut self, msg: &Begin, ctx: &mut Context<Self>) -> Result<Planned, LockError> {
        if let Some(c) = &msg.context {
            self.check_context(c)?;
        }
        if let Some(held) = &msg.held {
            self.check_not_held(held)?;
        }
        let recorded = msg.context.as_ref();
        let parent = recorded.map(|c| c.phase);
        let mut plan = match msg.what {
            PhaseKind::Shutdown => shutdown_plan(),
            _ => plan::plan(self.catalog.schema(), &self.catalog, &msg.queries, recorded)?,
        };
        let txn = match recorded {
            Some(c) => c.txn,
            None => {
                self.next_txn += 1;
                self.next_txn
            }
        };
        self.next_phase += 1;
        let phase = self.next_phase;
        let steps: Arc<[LockStep]> = plan
            .key_locks
            .iter()
            .chain(&plan.acquire)
            .cloned()
            .collect();
        let links: Links = steps
            .iter()
            .map(|s| {
                (
                    self.resolve(&s.kind, &s.id, None, &msg.queries, ctx),
                    s.mode,
                )
            })
            .collect();
        let new_keys = self.new_keys(&msg.queries);
        let check_keys = !new_keys.is_empty();
        // The first chain: every lock, or the key locks alone when the new keys are checked again
        // once those are held.
        let key_locks = plan.key_locks.len();
        let first_end = if check_keys && key_locks > 0 {
            key_locks
        } else {
            links.len()
        };
        let first = (!links.is_empty())
            .then(|| PendingChain::start(&links, txn, msg.priority, 0, first_end));
        // The context moves to the caller's `Locked::context`; the plan keeps the default.
        let mut context = std::mem::take(&mut plan.context_after);
        context.txn = txn;
        context.phase = phase;
        context.seal = self.seal(&context);
        let collect = plan.actions.iter().zip(&plan.entries).any(|(a, e)| {
            e.query.is_some()
                && !e.synthetic
                && matches!(
                    a,
                    EntryAction::List | EntryAction::InconsistentRead | EntryAction::Held
                )
        });
        self.phases.insert(
            phase,
            PhaseRecord {
                txn,
                what: msg.what,
                priority: msg.priority,
                started: Instant::now(),
                steps: steps.clone(),
                new_keys,
                parent,
                child: None,
            },
        );
        if let Some(p) = parent.and_then(|p| self.phases.get_mut(&p)) {
            p.child = Some(phase);
        }
        Ok(Planned {
            first,
            ticket: PhaseTicket {
                coordinator: ctx.address(),
                phase,
                armed: true,
            },
            plan,
            context,
            steps,
            unasked: Unasked {
                links: links.clone(),
                from: first_end,
                txn,
            },
            links,
            txn,
            check_keys,
            collect,
        })
    }

    /// The renames of `queries`: (kind, new key, id).
    fn new_keys(&self, queries: &[Query]) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        for s in queries.iter().flat_map(|q| &q.0) {
            let Some(new_key) = &s.new_key else { continue };
            let id = if s.id.is_empty() {
                s.key
                    .as_ref()
                    .and_then(|k| self.catalog.id_by_key(&s.kind, k))
                    .unwrap_or_default()
            } else {
                s.id.clone()
            };
            out.push((s.kind.clone(), new_key.clone(), id));
        }
        out
    }
}

impl Actor for Coordinator {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(crate::resource_actor::MAILBOX_CAPACITY);
    }

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        for a in &self.arbiters {
            a.stop();
        }
    }
}

/// What a Begin hands to the caller: the plan, the actors of its locks, the chain of grants the
/// coordinator started, and the phase's ticket (whose drop ends the phase in the transaction
/// table).
pub(crate) struct Planned {
    /// The chain over the phase's first locks (all of them, or the key locks of a rename),
    /// started by the coordinator itself (saves the caller a round trip). Declared before the
    /// ticket: dropped unanswered, its locks are given back before the phase ends.
    pub(crate) first: Option<PendingChain>,
    pub(crate) ticket: PhaseTicket,
    pub(crate) plan: Plan,
    pub(crate) context: LockContext,
    pub(crate) steps: Arc<[LockStep]>,
    /// The actors of `steps`, with the mode of each lock.
    pub(crate) links: Links,
    /// The steps no chain was started for yet.
    pub(crate) unasked: Unasked,
    pub(crate) txn: u64,
    /// The plan renames: check the new keys again once the key locks are held.
    pub(crate) check_keys: bool,
    /// The results need lists, inconsistent reads or held values from the catalog.
    pub(crate) collect: bool,
}

/// The steps of a phase, from `from` on, that no chain was started for yet. The actors were
/// started (or found) by the Begin; those never asked because the phase ended early (cancelled,
/// refused once its key locks were held, abandoned before its answer was read) are told so when
/// this is dropped (a `Withdraw`), so an actor of an absent resource that nobody else uses
/// retires instead of living on unasked.
pub(crate) struct Unasked {
    links: Links,
    pub(crate) from: usize,
    txn: u64,
}

impl Drop for Unasked {
    fn drop(&mut self) {
        for (r, _) in self.links.get(self.from..).unwrap_or(&[]) {
            r.withdraw(self.txn);
        }
    }
}

/// A phase of the transaction table, ended (a [`PhaseDone`] message) when this is dropped.
pub(crate) struct PhaseTicket {
    pub(crate) coordinator: Addr<Coordinator>,
    pub(crate) phase: u64,
    armed: bool,
}

impl Drop for PhaseTicket {
    fn drop(&mut self) {
        if self.armed {
            self.armed = false;
            self.coordinator.do_send(PhaseDone { phase: self.phase });
        }
    }
}

/// Plan and record a Lock / NestedLock / shutdown phase; the answer goes to `reply` (a phase whose
/// caller went away is ended at once).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Begin {
    pub(crate) queries: Vec<Query>,
    pub(crate) context: Option<LockContext>,
    /// For a top-level Lock: the context of the transaction its caller holds, if it said so.
    pub(crate) held: Option<LockContext>,
    pub(crate) priority: Priority,
    pub(crate) what: PhaseKind,
    pub(crate) reply: oneshot::Sender<Result<Planned, LockError>>,
}

impl Handler<Begin> for Coordinator {
    type Result = ();
    fn handle(&mut self, msg: Begin, ctx: &mut Context<Self>) {
        let answer = self.begin(&msg, ctx);
        if let Err(e) = &answer {
            tracing::debug!(code = e.code(), error = %e, "lock refused");
        }
        // A caller that went away drops the answer, and with it the ticket that ends the phase.
        let _ = msg.reply.send(answer);
    }
}

impl Handler<PhaseDone> for Coordinator {
    type Result = ();
    fn handle(&mut self, msg: PhaseDone, _ctx: &mut Context<Self>) {
        self.end_phase(msg.phase);
    }
}

impl Handler<Resolve> for Coordinator {
    type Result = MessageResult<Resolve>;
    fn handle(&mut self, msg: Resolve, ctx: &mut Context<Self>) -> Self::Result {
        MessageResult(self.resolve(&msg.kind, &msg.id, msg.stale, &[], ctx))
    }
}

impl Handler<Retired> for Coordinator {
    type Result = ();
    fn handle(&mut self, msg: Retired, _ctx: &mut Context<Self>) {
        if let Some(ids) = self.registry.get_mut(&*msg.kind)
            && ids
                .get(&msg.id)
                .is_some_and(|r| r.generation == msg.generation)
        {
            ids.remove(&msg.id);
        }
    }
}

impl Handler<Committed> for Coordinator {
    type Result = ();
    fn handle(&mut self, msg: Committed, _ctx: &mut Context<Self>) {
        self.catalog.apply(&msg.kind, &msg.id, msg.value);
    }
}

impl Handler<CheckNewKeys> for Coordinator {
    type Result = Result<(), LockError>;
    fn handle(&mut self, msg: CheckNewKeys, _ctx: &mut Context<Self>) -> Self::Result {
        let Some(record) = self.phases.get(&msg.phase) else {
            return Ok(());
        };
        for (kind, key, id) in &record.new_keys {
            self.catalog
                .key_free(kind, key, id)
                .map_err(|c| LockError::KeyExists {
                    kind: kind.clone(),
                    key: c.key,
                    owner: c.owner,
                    id: id.clone(),
                })?;
        }
        Ok(())
    }
}

impl Handler<ClaimKey> for Coordinator {
    type Result = Result<(), LockError>;
    fn handle(&mut self, msg: ClaimKey, _ctx: &mut Context<Self>) -> Self::Result {
        self.catalog
            .claim_key(&msg.kind, &msg.key, &msg.id)
            .map_err(|c| LockError::KeyExists {
                kind: msg.kind,
                key: c.key,
                owner: c.owner,
                id: msg.id,
            })
    }
}

impl Handler<UnclaimKey> for Coordinator {
    type Result = ();
    fn handle(&mut self, msg: UnclaimKey, _ctx: &mut Context<Self>) {
        self.catalog.unclaim_key(&msg.kind, &msg.key, &msg.id);
    }
}

impl Handler<Collect> for Coordinator {
    type Result = MessageResult<Collect>;
    fn handle(&mut self, msg: Collect, _ctx: &mut Context<Self>) -> Self::Result {
        MessageResult(
            msg.entries
                .into_iter()
                .map(|(at, e, action)| match action {
                    EntryAction::List => {
                        Collected::List(at, self.catalog.list(&e.kind, e.filter.as_ref()))
                    }
                    _ => Collected::Value(at, self.catalog.get(&e.kind, &e.id)),
                })
                .collect(),
        )
    }
}

impl Handler<Peek> for Coordinator {
    type Result = Option<Arc<Value>>;
    fn handle(&mut self, msg: Peek, _ctx: &mut Context<Self>) -> Self::Result {
        self.catalog.get(&msg.kind, &msg.id)
    }
}

impl Handler<Explain> for Coordinator {
    type Result = Result<Plan, LockError>;
    fn handle(&mut self, msg: Explain, _ctx: &mut Context<Self>) -> Self::Result {
        plan::plan(
            self.catalog.schema(),
            &self.catalog,
            &msg.queries,
            msg.context.as_ref(),
        )
    }
}

impl Handler<Stop> for Coordinator {
    type Result = ();
    fn handle(&mut self, _msg: Stop, ctx: &mut Context<Self>) {
        ctx.stop();
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
            last_lock_held: Some(LockedEntry {
                op: Op::Upsert,
                kind: ROOT.to_string(),
                id: ROOT_ID.to_string(),
            }),
            holds_root: true,
            ..LockContext::default()
        },
    }
}

/// The coordinator's address is how its resource actors reach it.
impl CoordinatorLink for Addr<Coordinator> {
    fn retired(&self, msg: Retired) {
        self.do_send(msg);
    }
    fn committed(&self, msg: Committed) {
        self.do_send(msg);
    }
    fn claim_key(&self, msg: ClaimKey) -> RecipientRequest<ClaimKey> {
        self.clone().recipient().send(msg)
    }
    fn unclaim_key(&self, msg: UnclaimKey) {
        self.do_send(msg);
    }
}
