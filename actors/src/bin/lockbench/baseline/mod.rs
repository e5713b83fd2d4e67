//! The two baseline engines, sharing one planner and one cache: `global` (one mutex around
//! every transaction, like the reference orchestrator before concurrency) and `ordered-rwlock`
//! (a tokio `RwLock` per (kind, id) in a map, acquired in plan order: the reference design).

mod locks;
mod plan;
mod store;

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{Mutex, OwnedMutexGuard};

use crate::engine::{Engine, EngineError, EngineResult, Txn};
use crate::query::{Kind, Op, Query};

use locks::{Guard, LockTable, Mode};
use plan::Step;
use store::Store;

/// Which baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    Global,
    OrderedRwLock,
}

struct Inner {
    flavor: Flavor,
    store: Store,
    locks: LockTable,
    global: Arc<Mutex<()>>,
}

/// A baseline engine (cheap to clone).
#[derive(Clone)]
pub struct Baseline {
    inner: Arc<Inner>,
}

impl Baseline {
    pub fn new(flavor: Flavor) -> Self {
        Baseline {
            inner: Arc::new(Inner {
                flavor,
                store: Store::default(),
                locks: LockTable::default(),
                global: Arc::new(Mutex::new(())),
            }),
        }
    }
}

/// One result row: per kind, the resolved id, the working copy, the list.
#[derive(Default)]
struct Row {
    ids: [Option<String>; Kind::ALL.len()],
    reads: [Option<Arc<Value>>; Kind::ALL.len()],
    lists: [Vec<(String, Arc<Value>)>; Kind::ALL.len()],
}

/// Locks and results of one Lock / NestedLock call of a baseline.
pub struct BaselineTxn {
    engine: Baseline,
    rows: Vec<Row>,
    /// Every lock held by this call and its parents, for nested validation and skipping.
    held: Vec<(Kind, String, Mode)>,
    last: Option<Step>,
    /// Guards taken by this call, in acquisition order.
    guards: Vec<Guard>,
    global: Option<OwnedMutexGuard<()>>,
}

impl Baseline {
    async fn run(
        &self,
        queries: &[Query],
        parent: Option<&BaselineTxn>,
    ) -> EngineResult<BaselineTxn> {
        let inner = &self.inner;
        let global = match (inner.flavor, parent) {
            (Flavor::Global, None) => Some(inner.global.clone().lock_owned().await),
            _ => None,
        };
        let steps = plan::plan(queries, &inner.store, parent.is_some())?;
        let mut held = parent.map(|p| p.held.clone()).unwrap_or_default();
        let mut last = parent.and_then(|p| p.last.clone());
        if let Some(parent) = parent {
            validate_nested(&steps, parent)?;
        }
        let mut rows: Vec<Row> = (0..queries.len()).map(|_| Row::default()).collect();
        let mut guards = Vec::with_capacity(steps.len());
        for step in &steps {
            if step.op == Op::List {
                continue;
            }
            let mode = if step.op == Op::Upsert {
                Mode::Write
            } else {
                Mode::Read
            };
            let already = held
                .iter()
                .any(|(k, id, _)| *k == step.kind && *id == step.id);
            if !already {
                if inner.flavor == Flavor::OrderedRwLock {
                    guards.push(inner.locks.acquire(step.kind, &step.id, mode).await);
                }
                held.push((step.kind, step.id.clone(), mode));
                last = Some(step.clone());
            }
            if let (Some(q), false) = (step.query, step.synthetic) {
                let row = &mut rows[q];
                row.ids[step.kind.index()] = Some(step.id.clone());
                row.reads[step.kind.index()] = inner.store.get(step.kind, &step.id)?;
            }
        }
        // Lists are copied once every lock is granted, as the coordinator does, so that both
        // engines see (and then work on) the same state.
        for step in steps.iter().filter(|s| s.op == Op::List) {
            let filter = step.filter.as_ref().map(|(f, id)| (*f, id.as_str()));
            if let Some(q) = step.query {
                rows[q].lists[step.kind.index()] = inner.store.list(step.kind, filter)?;
            }
        }
        Ok(BaselineTxn {
            engine: self.clone(),
            rows,
            held,
            last,
            guards,
            global,
        })
    }
}

fn validate_nested(steps: &[Step], parent: &BaselineTxn) -> EngineResult<()> {
    for step in steps.iter().filter(|s| s.is_consistent()) {
        if let Some((_, _, mode)) = parent
            .held
            .iter()
            .find(|(k, id, _)| *k == step.kind && *id == step.id)
        {
            if *mode == Mode::Read && step.op == Op::Upsert {
                return Err(EngineError(format!(
                    "lock upgrade of {} {:?}",
                    step.kind, step.id
                )));
            }
            continue;
        }
        if let Some(last) = &parent.last
            && step.order(last).is_le()
        {
            return Err(EngineError(format!(
                "{} {:?} sorts before the last lock held",
                step.kind, step.id
            )));
        }
    }
    Ok(())
}

impl Engine for Baseline {
    type Txn = BaselineTxn;

    async fn lock(&self, queries: &[Query]) -> EngineResult<BaselineTxn> {
        self.run(queries, None).await
    }

    async fn preload(&self, kind: Kind, values: Vec<(String, Value)>) -> EngineResult<()> {
        for (id, value) in values {
            self.inner.store.put(kind, &id, Arc::new(value))?;
        }
        Ok(())
    }
}

impl BaselineTxn {
    fn id(&self, query: usize, kind: Kind) -> EngineResult<&str> {
        self.rows
            .get(query)
            .and_then(|row| row.ids[kind.index()].as_deref())
            .ok_or_else(|| EngineError(format!("query {query} holds no {kind}")))
    }
}

impl Txn for BaselineTxn {
    fn read(&self, query: usize, kind: Kind) -> Option<&Value> {
        self.rows.get(query)?.reads[kind.index()].as_deref()
    }

    fn list_ids(&self, query: usize, kind: Kind) -> Vec<String> {
        self.rows
            .get(query)
            .map(|row| {
                row.lists[kind.index()]
                    .iter()
                    .map(|(id, _)| id.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn list_values(&self, query: usize, kind: Kind) -> Vec<&Value> {
        self.rows
            .get(query)
            .map(|row| row.lists[kind.index()].iter().map(|(_, v)| &**v).collect())
            .unwrap_or_default()
    }

    fn list_len(&self, query: usize, kind: Kind) -> usize {
        self.rows
            .get(query)
            .map_or(0, |row| row.lists[kind.index()].len())
    }

    async fn upsert(&self, query: usize, kind: Kind, value: Value) -> EngineResult<()> {
        let id = self.id(query, kind)?;
        let write_held = self
            .held
            .iter()
            .any(|(k, held, mode)| *k == kind && held == id && *mode == Mode::Write);
        if !write_held {
            return Err(EngineError(format!("{kind} {id:?} is not write-locked")));
        }
        self.engine.inner.store.put(kind, id, Arc::new(value))
    }

    async fn reserve_on_backend(&self, query: usize, bytes: u64) -> EngineResult<()> {
        let id = self.id(query, Kind::Backend)?;
        self.engine.inner.store.update(Kind::Backend, id, |value| {
            let reserved = value
                .get("reservedBytes")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            if let Some(map) = value.as_object_mut() {
                map.insert(
                    "reservedBytes".to_owned(),
                    Value::from(reserved.saturating_add(bytes)),
                );
            }
        })
    }

    type Nested<'a> = BaselineTxn;

    async fn nested(&self, queries: &[Query]) -> EngineResult<BaselineTxn> {
        self.engine.run(queries, Some(self)).await
    }

    async fn unlock(mut self) {
        while let Some(guard) = self.guards.pop() {
            drop(guard);
        }
        drop(self.global.take());
    }
}
