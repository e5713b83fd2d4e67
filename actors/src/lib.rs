//! cinder-actors: the concurrent resource cache (schema, queries, lock ordering, Lock / NestedLock) expressed as actors.
//!
//! This crate owns the schema (kinds, dependencies, ranks), the pure query planner
//! (dedupe, synthetic parent reads, id fill-in, merge and sort in the total order),
//! one actix actor per (kind, id) owning its value and its shared/exclusive lock queue,
//! the lock-coordinator actor that owns the registry of those actors, the catalog of
//! committed values and the transaction table, and plans and checks every Lock /
//! NestedLock, the inspection snapshots the admin endpoint shows, and the `lock-plan`
//! explain function. Every state change is a message handled by the actor that owns it.
//!
//! ```no_run
//! use cinder_actors::query::{query, list_volumes_for_backend, upsert_backend, upsert_volume};
//! use cinder_actors::{CoordinatorHandle, Kind};
//!
//! # async fn example() -> Result<(), cinder_actors::LockError> {
//! let cache = CoordinatorHandle::start_standard();
//! cache.load(Kind::Backend, "backend1", serde_json::json!({"name": "b1"})).await?;
//! // Phase A: write-lock the backend and list its volumes.
//! let outer = cache
//!     .lock(vec![query([list_volumes_for_backend("backend1"), upsert_backend("backend1", "", "")])])
//!     .await?;
//! let volumes = &outer.results()[0].volumes;
//! // Phase B: one query per volume, each sorting after the backend write. The nested guard
//! // borrows the outer one: it cannot outlive it.
//! let nested = outer
//!     .nested_lock(volumes.iter().map(|v| query([upsert_volume(&v.id, "backend1")])).collect())
//!     .await?;
//! for r in nested.results() {
//!     if let Some(mut copy) = r.volume.read.clone() {
//!         copy["checked"] = true.into();
//!         r.volume.upsert(copy).await?; // a message to the volume's actor
//!     }
//! }
//! nested.unlock().await; // volumes, in reverse order
//! outer.unlock().await; // backend, then root
//! # Ok(())
//! # }
//! ```

pub mod catalog;
pub mod coordinator;
pub mod error;
pub mod explain;
pub(crate) mod fast_hash;
pub mod inspect;
pub mod kind;
pub mod kinds;
pub mod lock_queue;
pub mod mutation;
pub mod op;
pub mod plan;
pub mod query;
pub mod resource_actor;
pub mod results;
pub mod schema;
pub mod subquery;

pub use coordinator::{CoordinatorConfig, CoordinatorHandle, Locked, ShutdownGuard};
pub use error::{LockError, SchemaError};
pub use explain::{ExplainInputError, explain, explain_str};
pub use inspect::{CoordinatorSnapshot, ResourceSnapshot, TransactionSnapshot};
pub use kind::Kind;
pub use lock_queue::Priority;
pub use mutation::Mutation;
pub use plan::{LockContext, LockMode, LockStep, LockedEntry, Plan, PlanEntry};
pub use query::{Op, Query, Subquery};
pub use results::{BackendResult, Listed, QueryResult, ResourceResult, WorkingCopy};
pub use schema::{KindDecl, Schema};
