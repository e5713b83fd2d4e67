//! The cheap cloneable handle callers use: start, load, plan (explain), lock, nested lock,
//! shutdown, inspect, peek.

use super::guard::{Locked, ShutdownGuard};
use super::{Coordinator, CoordinatorConfig, Core, Inspect, PhaseKind, Stop};
use crate::error::LockError;
use crate::index::Store;
use crate::inspect::CoordinatorSnapshot;
use crate::lock_queue::Priority;
use crate::plan::{self, LockContext, Plan};
use crate::query::Query;
use crate::schema::{ROOT, ROOT_ID, Schema};
use actix::prelude::*;
use serde_json::Value;
use std::sync::Arc;

/// The cheap cloneable handle callers use.
#[derive(Clone)]
pub struct CoordinatorHandle {
    addr: Addr<Coordinator>,
    core: Arc<Core>,
}

impl std::fmt::Debug for CoordinatorHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoordinatorHandle").finish_non_exhaustive()
    }
}

impl CoordinatorHandle {
    /// Starts a coordinator for `schema` on the current actix arbiter (call it inside an actix
    /// System: `#[actix::main]`, `#[actix::test]`, an actix-web server). The resource actors run on
    /// the same arbiter; the handle itself can be used from any thread or runtime.
    pub fn start(schema: Arc<Schema>, config: CoordinatorConfig) -> CoordinatorHandle {
        let store = Arc::new(Store::new(schema));
        // The root resource always exists, so its actor is never retired and re-created.
        if let Some(root) = store.kind(ROOT) {
            let _ = root.set(
                ROOT_ID,
                Some(Arc::new(Value::Object(serde_json::Map::new()))),
            );
        }
        let core = Core::new(store, &config);
        let actor = Coordinator::new(core.clone());
        CoordinatorHandle {
            addr: actor.start(),
            core,
        }
    }

    /// Starts a coordinator for the standard schema with the default configuration.
    pub fn start_standard() -> CoordinatorHandle {
        CoordinatorHandle::start(Schema::standard(), CoordinatorConfig::default())
    }

    /// The schema.
    pub fn schema(&self) -> &Arc<Schema> {
        self.core.store.schema()
    }

    /// Seeds the cache with a value without taking any lock (for bootstrapping, e.g. loading
    /// persisted state at start); it bypasses the locks of transactions holding the resource.
    pub fn load(&self, kind: &str, id: &str, value: Value) -> Result<(), LockError> {
        let index = self
            .core
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
        plan::plan(
            self.core.store.schema(),
            &*self.core.store,
            queries,
            context,
        )
    }

    /// Plans and acquires in the calling task (no round trip through the coordinator actor),
    /// in a `wait` span (the time the caller waits for its locks).
    #[tracing::instrument(name = "wait", level = "info", skip_all,
        fields(kind = "lock", queries = queries.len(), priority = ?priority, otel.name = "wait lock"))]
    async fn begin(
        &self,
        queries: Vec<Query>,
        context: Option<&LockContext>,
        priority: Priority,
        what: PhaseKind,
    ) -> Result<Locked, LockError> {
        self.core.begin(&queries, context, priority, what).await
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
        self.begin(queries, Some(context), priority, PhaseKind::Nested)
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

    /// An inconsistent copy of one value (no lock, no message).
    pub fn peek(&self, kind: &str, id: &str) -> Option<Arc<Value>> {
        self.core.store.kind(kind).and_then(|k| k.get(id))
    }
}
