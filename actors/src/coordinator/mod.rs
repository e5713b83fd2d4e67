//! The lock-coordinator actor. It owns the registry of resource actors (started on first use,
//! forgotten when they retire), the catalog of committed values and keys, the transaction table
//! (every Lock / NestedLock / shutdown phase not yet released, with the lock context it issued)
//! and the stop. Every Lock and NestedLock is a `Begin` message: the coordinator checks the lock
//! context against the live phase that issued it, plans the queries with the pure planner against
//! its catalog, records the phase, sends the chain of the phase's grants to the first resource
//! actor and replies with the plan; the chain travels from actor to actor in plan order and the
//! last one answers the caller (see `acquire.rs`).
//!
//! Files: `actor.rs` the actor, its state and the handlers of its messages; `messages.rs` what
//! its callers ask it; `pending_chain.rs` a chain of grants asked for and not yet answered;
//! `acquire.rs` the acquisition; `guard.rs` the outcome (the guard lending the typed results, the NestedLock on it)
//! and its release; `handle.rs` the callers' handle;
//! `inspect.rs` the transaction table's snapshot. What the resource actors report to it
//! (commits, key claims, retirements) is declared in `resource_actor.rs`.

mod acquire;
mod actor;
mod guard;
mod handle;
mod inspect;
pub(crate) mod messages;
mod pending_chain;

pub use actor::CoordinatorConfig;
pub use guard::{Locked, ShutdownGuard};
pub use handle::CoordinatorHandle;
