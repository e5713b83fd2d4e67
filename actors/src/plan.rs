//! The pure planner (no actix): dedupe, synthetic parent reads, id fill-in from a cache view or
//! the caller's arguments, merge, the synthetic root read, the sort in the total order, and the
//! acquisition steps of a Lock or of a NestedLock validated against a lock context.

use crate::error::LockError;
use crate::fast_hash::FxHashMap;
use crate::query::{Op, Query, Subquery};
use crate::schema::{KindInfo, ROOT, ROOT_ID, Schema};
use serde::Serialize;
use serde_json::Value;
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// What the planner may look at: the current cached values (for id fill-in and key checks).
pub trait CacheView {
    /// The current value of (kind, id).
    fn get(&self, kind: &str, id: &str) -> Option<Arc<Value>>;
    /// The id of the resource of `kind` whose key is `key`.
    fn id_by_key(&self, kind: &str, key: &str) -> Option<String>;
}

/// A lock mode: shared (`read`) or exclusive (`write`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LockMode {
    /// Shared.
    Read,
    /// Exclusive.
    Write,
}

impl LockMode {
    /// The mode an operation takes (none for lists and inconsistent reads).
    pub fn for_op(op: Op) -> Option<LockMode> {
        match op {
            Op::Upsert | Op::Delete => Some(LockMode::Write),
            Op::Read => Some(LockMode::Read),
            Op::List | Op::InconsistentRead => None,
        }
    }
}

/// One entry of a merged plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanEntry {
    /// The operation.
    pub op: Op,
    /// The kind.
    pub kind: String,
    /// The id (empty for lists).
    pub id: String,
    /// The index of the query (result) this entry belongs to; `None` for the root read.
    pub query: Option<usize>,
    /// Added by the planner (parent reads, root read): no result is set from it.
    pub synthetic: bool,
    /// For lists: only values whose parent `.0` has id `.1`.
    #[serde(skip)]
    pub filter: Option<(String, String)>,
}

/// One lock to take or release.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct LockStep {
    /// `read` or `write`.
    pub mode: LockMode,
    /// The kind (`key:<kind>` for the key lock of a rename).
    pub kind: String,
    /// The id (the new key for key locks).
    pub id: String,
}

/// A lock recorded in a lock context (`lastLockHeld`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LockedEntry {
    /// The operation that took it.
    pub op: Op,
    /// The kind.
    pub kind: String,
    /// The id.
    pub id: String,
}

/// What happens to a plan entry at execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryAction {
    /// Copy the (filtered) values of the kind; no lock.
    List,
    /// Copy the value; no lock.
    InconsistentRead,
    /// Take this lock (an index into `Plan::acquire`).
    Acquire(usize),
    /// A lock on the same (kind, id) is taken earlier in this plan.
    Covered,
    /// The lock context already holds (kind, id).
    Held,
}

/// The lock context returned by Lock and NestedLock: what the transaction holds.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct LockContext {
    /// The transaction.
    pub txn: u64,
    /// Every held (kind, id) with its mode; the root read is recorded in `holds_root` instead.
    #[serde(serialize_with = "serialize_held")]
    pub held: BTreeMap<(String, String), LockMode>,
    /// The last lock taken; every new consistent lock of a NestedLock must sort after it.
    #[serde(rename = "lastLockHeld")]
    pub last_lock_held: Option<LockedEntry>,
    /// Whether the synthetic root read is held.
    #[serde(rename = "holdsRoot")]
    pub holds_root: bool,
    /// The phase that issued the context (0: issued by no coordinator, e.g. a plan).
    #[serde(skip)]
    pub(crate) phase: u64,
    /// The issuing coordinator's seal of (txn, phase): a context cannot be built or altered
    /// outside this crate and still be accepted.
    #[serde(skip)]
    pub(crate) seal: u64,
}

fn serialize_held<S: serde::Serializer>(
    held: &BTreeMap<(String, String), LockMode>,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(held.len()))?;
    for ((kind, id), mode) in held {
        seq.serialize_element(&LockStep {
            mode: *mode,
            kind: kind.clone(),
            id: id.clone(),
        })?;
    }
    seq.end()
}

/// The outcome of planning: merged entries in the total order, what each does, and the locks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Number of queries (results).
    pub queries: usize,
    /// Merged, sorted entries (root read first when present).
    pub entries: Vec<PlanEntry>,
    /// What each entry does at execution (same length as `entries`).
    pub actions: Vec<EntryAction>,
    /// Key locks (renames), taken before anything else, sorted.
    pub key_locks: Vec<LockStep>,
    /// Per-resource locks to take, in order.
    pub acquire: Vec<LockStep>,
    /// The lock context after this plan is fully acquired.
    pub context_after: LockContext,
}

impl Plan {
    /// Every lock this plan takes, in acquisition order (key locks first).
    pub fn acquisitions(&self) -> Vec<LockStep> {
        self.key_locks
            .iter()
            .chain(self.acquire.iter())
            .cloned()
            .collect()
    }
    /// Every lock this plan takes, in release order (the reverse of acquisition).
    pub fn releases(&self) -> Vec<LockStep> {
        let mut r = self.acquisitions();
        r.reverse();
        r
    }
}

/// The total order of plan entries: root first, then lists, then rank, declared kind position,
/// id, and operation (upsert < delete < read < inconsistent read). Unknown kinds sort last.
pub fn compare_entries(schema: &Schema, a: (Op, &str, &str), b: (Op, &str, &str)) -> Ordering {
    order_key(schema, a).cmp(&order_key(schema, b))
}

fn order_key<'a>(
    schema: &Schema,
    (op, kind, id): (Op, &str, &'a str),
) -> (u8, u32, usize, &'a str, Op) {
    let class = order_class(op, kind);
    let (rank, pos) = schema
        .kind(kind)
        .map(|k| (k.rank, k.position))
        .unwrap_or((u32::MAX, usize::MAX));
    (class, rank, pos, id, op)
}

/// The first part of the order key: the root's lock first, then lists, then everything else.
fn order_class(op: Op, kind: &str) -> u8 {
    if kind == ROOT && op != Op::List {
        0
    } else if op == Op::List {
        1
    } else {
        2
    }
}

/// The name of the key-lock "kind" of `kind`.
pub fn key_lock_kind(kind: &str) -> String {
    format!("key:{kind}")
}

/// Plans a Lock (`context` None) or a NestedLock (`context` Some) without touching any actor.
pub fn plan(
    schema: &Schema,
    view: &dyn CacheView,
    queries: &[Query],
    context: Option<&LockContext>,
) -> Result<Plan, LockError> {
    let mut merged: Vec<PlanEntry> = Vec::new();
    // (rank, declared position) of each merged entry's kind, from the lookups of `plan_query`.
    let mut places: Vec<(u32, usize)> = Vec::new();
    let mut key_locks: Vec<LockStep> = Vec::new();
    for (qi, q) in queries.iter().enumerate() {
        let (entries, entry_places, keys) = plan_query(schema, view, qi, q, context.is_some())?;
        merged.extend(entries);
        places.extend(entry_places);
        key_locks.extend(keys);
    }
    key_locks.sort();
    key_locks.dedup();

    let holds_root = context.is_some_and(|c| c.holds_root);
    let any_consistent = merged.iter().any(|e| e.op.is_consistent());
    // The kind's part of the order key is looked up once per entry, not on every comparison, and
    // a permutation is sorted instead of the entries; the sort is stable, so the order is the
    // same as sorting the entries with `compare_entries`.
    let keys: Vec<(u8, u32, usize)> = merged
        .iter()
        .zip(&places)
        .map(|(e, &(rank, pos))| (order_class(e.op, &e.kind), rank, pos))
        .collect();
    let mut order: Vec<usize> = (0..merged.len()).collect();
    order.sort_by(|&a, &b| {
        keys[a]
            .cmp(&keys[b])
            .then_with(|| merged[a].id.cmp(&merged[b].id))
            .then_with(|| merged[a].op.cmp(&merged[b].op))
    });
    let root = any_consistent && !holds_root;
    let mut slots: Vec<Option<PlanEntry>> = merged.into_iter().map(Some).collect();
    let mut merged: Vec<PlanEntry> = Vec::with_capacity(slots.len() + usize::from(root));
    if root {
        merged.push(PlanEntry {
            op: Op::Read,
            kind: ROOT.to_string(),
            id: ROOT_ID.to_string(),
            query: None,
            synthetic: true,
            filter: None,
        });
    }
    merged.extend(order.into_iter().filter_map(|i| slots[i].take()));

    let empty = LockContext::default();
    let ctx = context.unwrap_or(&empty);
    // The held locks, looked up by borrowed (kind, id) (built only for a NestedLock).
    let held_map: FxHashMap<(&str, &str), LockMode> = ctx
        .held
        .iter()
        .map(|((k, i), m)| ((k.as_str(), i.as_str()), *m))
        .collect();
    let last_key = ctx
        .last_lock_held
        .as_ref()
        .map(|last| order_key(schema, (last.op, &last.kind, &last.id)));
    let mut actions = Vec::with_capacity(merged.len());
    let mut acquire: Vec<LockStep> = Vec::new();
    // The entry that took the last lock of this plan.
    let mut last_taken: Option<usize> = None;
    let mut after = ctx.clone();
    for (at, e) in merged.iter().enumerate() {
        let Some(mode) = LockMode::for_op(e.op) else {
            actions.push(if e.op == Op::List {
                EntryAction::List
            } else {
                EntryAction::InconsistentRead
            });
            continue;
        };
        let held = if held_map.is_empty() {
            None
        } else {
            held_map.get(&(e.kind.as_str(), e.id.as_str())).copied()
        };
        if let Some(held) = held {
            if held == LockMode::Read && mode == LockMode::Write {
                return Err(LockError::LockUpgrade {
                    op: e.op,
                    kind: e.kind.clone(),
                    id: e.id.clone(),
                });
            }
            // Reads (and synthetic entries) of held resources are satisfied by the held lock. An
            // explicit write on a held resource asks to lock it again; it sorts at or before
            // lastLockHeld, so it is refused (the reference design: "attempting to lock the volume or backend
            // for write would return an error because those locks are already held as writes").
            if mode == LockMode::Read || e.synthetic || e.kind == ROOT {
                actions.push(EntryAction::Held);
                continue;
            }
            let last = ctx.last_lock_held.clone().unwrap_or(LockedEntry {
                op: e.op,
                kind: e.kind.clone(),
                id: e.id.clone(),
            });
            return Err(LockError::WouldDeadlock {
                op: e.op,
                kind: e.kind.clone(),
                id: e.id.clone(),
                last_op: last.op,
                last_kind: last.kind,
                last_id: last.id,
            });
        }
        if e.kind == ROOT && ctx.holds_root {
            actions.push(EntryAction::Held);
            continue;
        }
        // Entries on one (kind, id) are adjacent in the total order (the kind fixes the class,
        // rank and position; only the operation follows the id), so a lock taken earlier in this
        // plan on the same (kind, id) is the last one taken.
        if acquire
            .last()
            .is_some_and(|s| s.kind == e.kind && s.id == e.id)
        {
            actions.push(EntryAction::Covered);
            continue;
        }
        if let (Some(last), Some(last_key)) = (&ctx.last_lock_held, &last_key)
            && order_key(schema, (e.op, &e.kind, &e.id)).cmp(last_key) != Ordering::Greater
        {
            return Err(LockError::WouldDeadlock {
                op: e.op,
                kind: e.kind.clone(),
                id: e.id.clone(),
                last_op: last.op,
                last_kind: last.kind.clone(),
                last_id: last.id.clone(),
            });
        }
        actions.push(EntryAction::Acquire(acquire.len()));
        acquire.push(LockStep {
            mode,
            kind: e.kind.clone(),
            id: e.id.clone(),
        });
        if e.kind == ROOT {
            after.holds_root = true;
        } else {
            after.held.insert((e.kind.clone(), e.id.clone()), mode);
        }
        last_taken = Some(at);
    }
    if let Some(at) = last_taken {
        let e = &merged[at];
        after.last_lock_held = Some(LockedEntry {
            op: e.op,
            kind: e.kind.clone(),
            id: e.id.clone(),
        });
    }
    Ok(Plan {
        queries: queries.len(),
        entries: merged,
        actions,
        key_locks,
        acquire,
        context_after: after,
    })
}

/// Dedupe, key resolution, synthetic parent reads and id fill-in for one query.
fn plan_query(
    schema: &Schema,
    view: &dyn CacheView,
    qi: usize,
    q: &Query,
    nested: bool,
) -> Result<QueryPlan, LockError> {
    // Kinds exist; dedupe.
    // (Queries are small: linear scans, no maps.)
    let mut lists: Vec<&str> = Vec::new();
    let mut ops: Vec<(&str, Op)> = Vec::with_capacity(q.0.len());
    // The declaration of each subquery's kind, looked up once.
    let mut infos: Vec<&Arc<KindInfo>> = Vec::with_capacity(q.0.len());
    for s in &q.0 {
        let Some(info) = schema.kind(&s.kind) else {
            return Err(LockError::UnknownKind {
                kind: s.kind.clone(),
            });
        };
        infos.push(info);
        if s.op == Op::List {
            if lists.contains(&s.kind.as_str()) {
                return Err(LockError::DuplicateList {
                    query: qi,
                    kind: s.kind.clone(),
                });
            }
            lists.push(&s.kind);
        } else if let Some(slot) = ops.iter_mut().find(|(k, _)| *k == s.kind) {
            // Like a map insert: the later operation replaces the earlier one, which is reported.
            let first = std::mem::replace(&mut slot.1, s.op);
            return Err(LockError::DuplicateOperation {
                query: qi,
                kind: s.kind.clone(),
                first,
                second: s.op,
            });
        } else {
            ops.push((&s.kind, s.op));
        }
    }

    // Caller entries, with ids resolved from keys; key locks for renames. They are visited in a
    // canonical order (declared kind position, then operation: unique once deduped), so nothing
    // below depends on the order of the subqueries.
    // Each kind is looked up once, not on every comparison of the sort (stable, as before).
    let mut canonical: Vec<(usize, Op, &Subquery, &Arc<KindInfo>)> =
        q.0.iter()
            .zip(&infos)
            .map(|(s, info)| (info.position, s.op, s, *info))
            .collect();
    canonical.sort_by_key(|&(pos, op, _, _)| (pos, op));
    let mut keys = Vec::new();
    let mut caller: Vec<(&Subquery, PlanEntry)> = Vec::with_capacity(q.0.len());
    // The declaration of each caller entry's kind.
    let mut caller_kinds: Vec<&Arc<KindInfo>> = Vec::with_capacity(q.0.len());
    for (_, _, s, info) in canonical {
        let mut id = s.id.clone();
        if id.is_empty()
            && s.op != Op::List
            && let Some(key) = &s.key
        {
            match view.id_by_key(&s.kind, key) {
                Some(found) => id = found,
                None => {
                    return Err(LockError::NotFound {
                        kind: s.kind.clone(),
                        id: String::new(),
                        reason: format!("no {} has key {key:?}", s.kind),
                    });
                }
            }
        }
        if let Some(new_key) = &s.new_key {
            if nested {
                return Err(LockError::KeyUpdateInNested {
                    kind: s.kind.clone(),
                    id: id.clone(),
                    new_key: new_key.clone(),
                });
            }
            if let Some(owner) = view.id_by_key(&s.kind, new_key)
                && owner != id
            {
                return Err(LockError::KeyExists {
                    kind: s.kind.clone(),
                    key: new_key.clone(),
                    owner,
                    id: id.clone(),
                });
            }
            keys.push(LockStep {
                mode: LockMode::Write,
                kind: key_lock_kind(&s.kind),
                id: new_key.clone(),
            });
        }
        let entry = PlanEntry {
            op: s.op,
            kind: s.kind.clone(),
            id,
            query: Some(qi),
            synthetic: false,
            filter: s.filter.clone(),
        };
        caller.push((s, entry));
        caller_kinds.push(info);
    }

    // Synthetic parent reads and id fill-in, children before parents: entries are visited by
    // descending rank (a parent's rank is below each of its children's), so every id a child can
    // fill in is filled before the entry that carries it is visited, and that entry's own parents
    // are then found from the cache like any other's. Within a rank the caller's entries come
    // first (by declared kind position), then the synthetic reads by (position, id).
    //
    // A caller entry's parent dependency is served by a caller read of the parent kind (its empty
    // id is filled in); otherwise a synthetic read is appended. A synthetic read brings the reads
    // of its own parents, as the reference cache's buildTrees does, unless the query already has
    // that parent (a caller read of the parent without an id is filled in and serves instead).
    let max_rank = caller_kinds.iter().map(|k| k.rank).max().unwrap_or(0);
    let mut synthetic: Vec<PlanEntry> = Vec::new();
    // The declaration of each synthetic entry's kind (a declared parent kind).
    let mut synthetic_kinds: Vec<Option<&Arc<KindInfo>>> = Vec::new();
    for rank in (0..=max_rank).rev() {
        for i in 0..caller.len() {
            let (s, op) = (caller[i].0, caller[i].1.op);
            if !op.is_consistent() {
                continue;
            }
            let kind = caller_kinds[i];
            if kind.rank != rank {
                continue;
            }
            let cached = if caller[i].1.id.is_empty() {
                None
            } else {
                view.get(&kind.name, &caller[i].1.id)
            };
            for (parent, _) in &kind.parents {
                let parent_id = s
                    .owner(parent)
                    .map(str::to_string)
                    .or_else(|| cached.as_ref().and_then(|v| kind.owner_id(v, parent)));
                let reuse = caller.iter().position(|(_, c)| {
                    c.kind == *parent
                        && c.op == Op::Read
                        && (c.id.is_empty() || Some(&c.id) == parent_id.as_ref())
                });
                match (reuse, parent_id) {
                    (Some(j), Some(pid)) => {
                        if caller[j].1.id.is_empty() {
                            caller[j].1.id = pid;
                        }
                    }
                    (Some(_), None) => {}
                    (None, Some(pid)) => {
                        synthetic.push(PlanEntry {
                            op: Op::Read,
                            kind: parent.clone(),
                            id: pid,
                            query: Some(qi),
                            synthetic: true,
                            filter: None,
                        });
                        synthetic_kinds.push(schema.kind(parent));
                    }
                    (None, None) if op == Op::Upsert => {
                        return Err(LockError::NotFound {
                            kind: kind.name.clone(),
                            id: caller[i].1.id.clone(),
                            reason: format!(
                                "its {parent} is neither given nor recorded in a cached {}",
                                kind.name
                            ),
                        });
                    }
                    // Reading or deleting something that is not cached: nothing to protect.
                    (None, None) => {}
                }
            }
        }
        // The synthetic reads of this rank are complete: every entry that appends one has a
        // higher rank and was visited already.
        // (position, id) identifies a synthetic read: the position fixes the kind.
        let mut level: Vec<(usize, String, &Arc<KindInfo>)> = synthetic
            .iter()
            .zip(&synthetic_kinds)
            .filter_map(|(e, k)| {
                let k = (*k)?;
                (k.rank == rank).then(|| (k.position, e.id.clone(), k))
            })
            .collect();
        level.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        level.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
        for (_, id, kind) in level {
            let Some(cached) = view.get(&kind.name, &id) else {
                continue;
            };
            for (parent, _) in &kind.parents {
                let Some(pid) = kind.owner_id(&cached, parent) else {
                    continue;
                };
                if let Some((_, c)) = caller
                    .iter_mut()
                    .find(|(_, c)| c.kind == *parent && c.op == Op::Read && c.id.is_empty())
                {
                    c.id = pid;
                    continue;
                }
                let present = caller
                    .iter()
                    .any(|(_, c)| c.kind == *parent && c.id == pid && c.op.is_consistent())
                    || synthetic.iter().any(|e| e.kind == *parent && e.id == pid);
                if !present {
                    synthetic.push(PlanEntry {
                        op: Op::Read,
                        kind: parent.clone(),
                        id: pid,
                        query: Some(qi),
                        synthetic: true,
                        filter: None,
                    });
                    synthetic_kinds.push(schema.kind(parent));
                }
            }
        }
    }
    let mut out: Vec<PlanEntry> = Vec::with_capacity(caller.len() + synthetic.len());
    let mut places: Vec<(u32, usize)> = Vec::with_capacity(out.capacity());
    for ((_, e), kind) in caller.into_iter().zip(&caller_kinds) {
        if e.id.is_empty() && e.op != Op::List {
            return Err(LockError::MissingId {
                op: e.op,
                kind: e.kind.clone(),
                reason: "no child in the query records it".to_string(),
            });
        }
        out.push(e);
        places.push((kind.rank, kind.position));
    }
    out.extend(synthetic);
    places.extend(
        synthetic_kinds
            .iter()
            .map(|k| k.map_or((u32::MAX, usize::MAX), |k| (k.rank, k.position))),
    );
    Ok((out, places, keys))
}

/// What `plan_query` gives for one query: its entries, the (rank, declared position) of each
/// entry's kind, and the key locks of its renames.
type QueryPlan = (Vec<PlanEntry>, Vec<(u32, usize)>, Vec<LockStep>);

/// A cache view over plain maps, for tests and `lock-plan`.
#[derive(Debug, Default, Clone)]
pub struct MapView {
    values: HashMap<String, HashMap<String, Arc<Value>>>,
    keys: HashMap<String, HashMap<String, String>>,
}

impl MapView {
    /// An empty view.
    pub fn new() -> Self {
        MapView::default()
    }
    /// Adds a value; its key (when the kind is keyed) is indexed too.
    pub fn insert(&mut self, schema: &Schema, kind: &str, id: &str, value: Value) {
        if let Some(k) = schema.kind(kind).and_then(|k| k.key_of(&value)) {
            self.keys
                .entry(kind.to_string())
                .or_default()
                .insert(k, id.to_string());
        }
        self.values
            .entry(kind.to_string())
            .or_default()
            .insert(id.to_string(), Arc::new(value));
    }
}

impl CacheView for MapView {
    fn get(&self, kind: &str, id: &str) -> Option<Arc<Value>> {
        self.values.get(kind).and_then(|m| m.get(id)).cloned()
    }
    fn id_by_key(&self, kind: &str, key: &str) -> Option<String> {
        self.keys.get(kind).and_then(|m| m.get(key)).cloned()
    }
}
