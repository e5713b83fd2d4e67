//! The cheap cloneable handle callers use: start, load, plan (explain), lock, shutdown, inspect,
//! peek. Every call is a message to the coordinator actor; a Lock then asks the resource actors
//! for their grants from the calling task. NestedLock is a method of the guard it extends
//! ([`Locked::nested_lock`]).

use super::actor::{Coordinator, CoordinatorConfig, PhaseKind};
use super::guard::{CoordinatorLinks, Locked, ShutdownGuard};
use super::messages::{Explain, Inspect, Peek, Stop};
use crate::error::LockError;
use crate::inspect::CoordinatorSnapshot;
use crate::kind::Kind;
use crate::lock_queue::Priority;
use crate::plan::{LockContext, Plan};
use crate::query::{Query, Subquery};
use crate::schema::Schema;
use actix::prelude::*;
use serde_json::Value;
use std::sync::Arc;

/// The cheap cloneable handle callers use.
#[derive(Clone)]
pub struct CoordinatorHandle {
    addr: Addr<Coordinator>,
    /// The coordinator as a phase reaches it (shared by every phase).
    links: CoordinatorLinks,
    schema: Arc<Schema>,
    arbiter: ArbiterHandle,
}

impl std::fmt::Debug for CoordinatorHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoordinatorHandle").finish_non_exhaustive()
    }
}

impl CoordinatorHandle {
    /// Starts a coordinator for `schema` on the current actix arbiter (call it inside an actix
    /// System: `#[actix::main]`, `#[actix::test]`, an actix-web server). The resource actors run on
    /// the same arbiter, or on `config.arbiters` arbiters of their own; the handle itself can be
    /// used from any thread or runtime.
    pub fn start(schema: Arc<Schema>, config: CoordinatorConfig) -> CoordinatorHandle {
        let addr = Coordinator::new(schema.clone(), &config).start();
        CoordinatorHandle {
            links: CoordinatorLinks {
                resolver: Arc::new(addr.clone().recipient()),
                addr: addr.clone(),
            },
            addr,
            schema,
            arbiter: Arbiter::current(),
        }
    }

    /// Starts a coordinator for the standard schema with the default configuration.
    pub fn start_standard() -> CoordinatorHandle {
        CoordinatorHandle::start(Schema::standard(), CoordinatorConfig::default())
    }

    /// The schema.
    pub fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    /// The arbiter the coordinator runs on (where companions such as device actors start).
    pub fn arbiter(&self) -> &ArbiterHandle {
        &self.arbiter
    }

    /// Sets the value of (kind, id) as a transaction of its own: locks it for write (with its
    /// parents' reads, their ids taken from `value`), commits `value` through its resource actor,
    /// unlocks. For seeding the cache, e.g. with persisted state at start.
    pub async fn load(&self, kind: Kind, id: &str, value: Value) -> Result<(), LockError> {
        let unknown = || LockError::UnknownKind {
            kind: kind.name().to_string(),
        };
        let info = self.schema.kind(kind.name()).ok_or_else(unknown)?;
        let mut upsert = Subquery::upsert(kind.name(), id);
        for (parent, _) in &info.parents {
            if let Some(pid) = info.owner_id(&value, parent) {
                upsert = upsert.with_owner(parent, &pid);
            }
        }
        let locked = self.lock(vec![Query::new(vec![upsert])]).await?;
        let committed = match locked.results().first().and_then(|r| r.resource(kind)) {
            Some(r) => r.upsert(value).await,
            None => Err(unknown()),
        };
        locked.unlock().await;
        committed
    }

    /// Plans `queries` against the live cache without taking anything (explain).
    pub async fn plan(
        &self,
        queries: Vec<Query>,
        context: Option<&LockContext>,
    ) -> Result<Plan, LockError> {
        self.addr
            .send(Explain {
                queries,
                context: context.cloned(),
            })
            .await
            .map_err(|_| LockError::ShuttingDown)?
    }

    /// Lock with the default priority.
    pub async fn lock(&self, queries: Vec<Query>) -> Result<Locked<'static>, LockError> {
        self.lock_with(queries, Priority::Default).await
    }

    /// Lock with a priority.
    pub async fn lock_with(
        &self,
        queries: Vec<Query>,
        priority: Priority,
    ) -> Result<Locked<'static>, LockError> {
        self.links
            .begin(queries, None, priority, PhaseKind::Lock, None)
            .await
    }

    /// A top-level Lock from code that may hold a transaction: `held` is the newest context of
    /// the transaction it holds (`None`: it holds none). Refused with `lock_while_held` while that
    /// transaction still holds locks: a second top-level Lock could wait for a lock that sorts
    /// before one it holds, with a holder of that lock waiting for this transaction. Nested work
    /// goes through [`Locked::nested_lock`]; a context whose phases were all unlocked holds
    /// nothing, and the Lock is a new transaction.
    pub async fn lock_from(
        &self,
        held: Option<&LockContext>,
        queries: Vec<Query>,
        priority: Priority,
    ) -> Result<Locked<'static>, LockError> {
        self.links
            .begin(queries, None, priority, PhaseKind::Lock, held)
            .await
    }

    /// Takes the root write lock (High priority): waits for in-flight consistent locks and blocks
    /// new ones until the guard is released.
    pub async fn shutdown(&self) -> Result<ShutdownGuard, LockError> {
        let locked = self
            .links
            .begin(Vec::new(), None, Priority::High, PhaseKind::Shutdown, None)
            .await?;
        Ok(ShutdownGuard {
            guard: locked.into_guard(),
        })
    }

    /// Stops the coordinator: every later call on any handle fails with `shutting_down`. Call
    /// [`CoordinatorHandle::shutdown`] first to let in-flight transactions finish.
    pub async fn stop(&self) {
        // Already stopped is stopped.
        let _ = self.addr.send(Stop).await;
    }

    /// Every in-flight phase and every live resource actor.
    pub async fn inspect(&self) -> Result<CoordinatorSnapshot, LockError> {
        self.addr
            .send(Inspect)
            .await
            .map_err(|_| LockError::ShuttingDown)
    }

    /// An inconsistent copy of one value (no lock): the value the coordinator's catalog has.
    pub async fn peek(&self, kind: Kind, id: &str) -> Option<Arc<Value>> {
        self.addr
            .send(Peek {
                kind: kind.name().to_string(),
                id: id.to_string(),
            })
            .await
            .ok()
            .flatten()
    }
}
