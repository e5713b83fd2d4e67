//! The engine under test: the project's actor lock coordinator (`cinder_actors`), driven through
//! its public API — `CoordinatorHandle::lock` / `Locked::nested_lock`, typed results with working
//! copies, commits and interior mutations as messages to the owning resource actor,
//! `Locked::unlock`.

use cinder_actors::query as actor_query;
use cinder_actors::{
    CoordinatorConfig, CoordinatorHandle, Kind as ActorKind, LockError, Locked,
    Query as ActorQuery, QueryResult, ResourceResult, Schema, Subquery,
};
use serde_json::Value;

use crate::engine::{Engine, EngineError, EngineResult, Txn};
use crate::query::{Kind, Op, Query, Sub};

/// The coordinator of the standard schema, started on the current actix arbiter (its resource
/// actors there too, or spread over `arbiters` arbiters of their own).
#[derive(Clone)]
pub struct Actors {
    handle: CoordinatorHandle,
}

impl Actors {
    /// Start a fresh coordinator (needs a running actix system).
    pub fn start(arbiters: usize) -> Self {
        let config = CoordinatorConfig {
            arbiters,
            ..CoordinatorConfig::default()
        };
        Actors {
            handle: CoordinatorHandle::start(Schema::standard(), config),
        }
    }
}

fn failed(e: LockError) -> EngineError {
    EngineError(format!("actors: {e}"))
}

fn parent(sub: &Sub, kind: Kind) -> &str {
    sub.parents
        .iter()
        .find(|(k, _)| *k == kind)
        .map_or("", |(_, id)| id.as_str())
}

/// The coordinator's call for one of the benchmark's subqueries (its constructors named after the reference cache's calls).
fn subquery(sub: &Sub) -> Subquery {
    match (sub.op, sub.kind) {
        (Op::Upsert, Kind::Volume) => {
            actor_query::upsert_volume(&sub.id, parent(sub, Kind::Backend))
        }
        (Op::Upsert, Kind::VolumePublication) => actor_query::upsert_volume_publication(
            parent(sub, Kind::Volume),
            parent(sub, Kind::Node),
        ),
        (Op::Upsert, Kind::Snapshot) => {
            actor_query::upsert_snapshot(parent(sub, Kind::Volume), &sub.id)
        }
        (Op::Upsert, Kind::Backend) => actor_query::upsert_backend(&sub.id, "", ""),
        (Op::Read, Kind::Backend) => actor_query::read_backend(&sub.id),
        (Op::List, Kind::Volume) => match &sub.owner {
            Some((Kind::Backend, backend)) => actor_query::list_volumes_for_backend(backend),
            _ => actor_query::list_volumes(),
        },
        (Op::List, Kind::VolumePublication) => actor_query::list_volume_publications(),
        (Op::List, kind) => Subquery::list(kind.name()),
        (Op::Read, kind) => Subquery::read(kind.name(), &sub.id),
        (Op::Upsert, kind) => Subquery::upsert(kind.name(), &sub.id),
    }
}

fn queries(queries: &[Query]) -> Vec<ActorQuery> {
    queries
        .iter()
        .map(|q| actor_query::query(q.iter().map(subquery)))
        .collect()
}

/// The coordinator's kind of one of the benchmark's kinds.
fn actor_kind(kind: Kind) -> ActorKind {
    match kind {
        Kind::Root => ActorKind::Root,
        Kind::Backend => ActorKind::Backend,
        Kind::Node => ActorKind::Node,
        Kind::Volume => ActorKind::Volume,
        Kind::VolumePublication => ActorKind::VolumePublication,
        Kind::Snapshot => ActorKind::Snapshot,
    }
}

impl Engine for Actors {
    type Txn = ActorsTxn<'static>;

    async fn lock(&self, qs: &[Query]) -> EngineResult<ActorsTxn<'static>> {
        let locked = self.handle.lock(queries(qs)).await.map_err(failed)?;
        Ok(ActorsTxn { locked })
    }

    async fn preload(&self, kind: Kind, values: Vec<(String, Value)>) -> EngineResult<()> {
        for (id, value) in values {
            self.handle
                .load(actor_kind(kind), &id, value)
                .await
                .map_err(failed)?;
        }
        Ok(())
    }
}

/// One Lock / NestedLock of the coordinator (a NestedLock borrows the transaction it extends).
pub struct ActorsTxn<'p> {
    locked: Locked<'p>,
}

impl ActorsTxn<'_> {
    fn result(&self, query: usize) -> Option<&QueryResult> {
        self.locked.results().get(query)
    }

    fn resource(&self, query: usize, kind: Kind) -> EngineResult<&ResourceResult> {
        self.result(query)
            .and_then(|r| r.resource(actor_kind(kind)))
            .filter(|r| r.op().is_some())
            .ok_or_else(|| EngineError(format!("actors: query {query} holds no {kind}")))
    }

    fn listed(&self, query: usize, kind: Kind) -> &[cinder_actors::Listed] {
        self.result(query)
            .map_or(&[], |r| r.listed(actor_kind(kind)))
    }
}

impl Txn for ActorsTxn<'_> {
    fn read(&self, query: usize, kind: Kind) -> Option<&Value> {
        self.result(query)?
            .resource(actor_kind(kind))?
            .read
            .as_deref()
    }

    fn list_ids(&self, query: usize, kind: Kind) -> Vec<String> {
        self.listed(query, kind)
            .iter()
            .map(|l| l.id.clone())
            .collect()
    }

    fn list_values(&self, query: usize, kind: Kind) -> Vec<&Value> {
        self.listed(query, kind).iter().map(|l| &*l.value).collect()
    }

    fn list_len(&self, query: usize, kind: Kind) -> usize {
        self.listed(query, kind).len()
    }

    async fn upsert(&self, query: usize, kind: Kind, value: Value) -> EngineResult<()> {
        self.resource(query, kind)?
            .upsert(value)
            .await
            .map_err(failed)
    }

    async fn reserve_on_backend(&self, query: usize, bytes: u64) -> EngineResult<()> {
        let result = self
            .result(query)
            .filter(|r| r.backend.op().is_some())
            .ok_or_else(|| EngineError(format!("actors: query {query} holds no backend")))?;
        result
            .backend
            .reserve_capacity(bytes)
            .await
            .map(|_| ())
            .map_err(failed)
    }

    type Nested<'a>
        = ActorsTxn<'a>
    where
        Self: 'a;

    async fn nested<'a>(&'a self, qs: &[Query]) -> EngineResult<ActorsTxn<'a>> {
        let locked = self.locked.nested_lock(queries(qs)).await.map_err(failed)?;
        Ok(ActorsTxn { locked })
    }

    async fn unlock(self) {
        self.locked.unlock().await;
    }
}
