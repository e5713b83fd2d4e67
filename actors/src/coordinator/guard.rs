//! The outcome of a phase and the release of its locks: [`Locked`] (the guard: context, results,
//! plan and the held locks, released in reverse order on `unlock()` or on drop, and the
//! NestedLock that extends it) and [`ShutdownGuard`].
//!
//! The compile-time rules of the typed API live here: the results are lent out by the guard
//! (`results()`), so no result is used after `unlock()` (which consumes the guard) or after a
//! drop; a NestedLock borrows the guard it extends, so the nested guard cannot outlive it.
//!
//! ```compile_fail,E0505
//! # use cinder_actors::{CoordinatorHandle, query::*};
//! # async fn f(cache: CoordinatorHandle) -> Result<(), cinder_actors::LockError> {
//! let locked = cache.lock(vec![query([upsert_volume("v1", "b1")])]).await?;
//! let volume = &locked.results()[0].volume;
//! locked.unlock().await;
//! volume.upsert(serde_json::json!({})).await?; // error: `locked` was moved by unlock()
//! # Ok(()) }
//! ```
//!
//! ```compile_fail,E0505
//! # use cinder_actors::{CoordinatorHandle, query::*};
//! # async fn f(cache: CoordinatorHandle) -> Result<(), cinder_actors::LockError> {
//! let locked = cache.lock(vec![query([upsert_volume("v1", "b1")])]).await?;
//! let volume = &locked.results()[0].volume;
//! drop(locked); // releases the locks
//! volume.upsert(serde_json::json!({})).await?; // error: `locked` was dropped
//! # Ok(()) }
//! ```
//!
//! ```compile_fail,E0505
//! # use cinder_actors::{CoordinatorHandle, query::*};
//! # async fn f(cache: CoordinatorHandle) -> Result<(), cinder_actors::LockError> {
//! let outer = cache.lock(vec![query([upsert_backend("b1", "", "")])]).await?;
//! let nested = outer.nested_lock(vec![query([upsert_volume("v1", "b1")])]).await?;
//! outer.unlock().await; // error: `outer` is borrowed by `nested`
//! nested.unlock().await;
//! # Ok(()) }
//! ```
//!
//! ```compile_fail,E0599
//! # use cinder_actors::{CoordinatorHandle, QueryResult, query::*};
//! # async fn f(cache: CoordinatorHandle) -> Result<(), cinder_actors::LockError> {
//! let locked = cache.lock(vec![query([upsert_volume("v1", "b1")])]).await?;
//! let copy: QueryResult = locked.results()[0].clone(); // error: results cannot be copied
//! # Ok(()) }
//! ```
//!
//! ```compile_fail,E0505
//! # use cinder_actors::{CoordinatorHandle, query::*};
//! # async fn f(cache: CoordinatorHandle) -> Result<(), cinder_actors::LockError> {
//! let outer = cache.lock(vec![query([upsert_backend("b1", "", "")])]).await?;
//! let escaped = {
//!     let nested = outer.nested_lock(vec![query([upsert_volume("v1", "b1")])]).await?;
//!     nested
//! };
//! drop(outer); // error: `outer` is borrowed by `escaped`
//! escaped.unlock().await;
//! # Ok(()) }
//! ```
//!
//! ```compile_fail,E0609
//! # use cinder_actors::{CoordinatorHandle, query::*};
//! # async fn f(cache: CoordinatorHandle) -> Result<(), cinder_actors::LockError> {
//! let locked = cache.lock(vec![query([read_volume("v1")])]).await?;
//! let typo = &locked.results()[0].volumee; // error: no field `volumee`
//! # Ok(()) }
//! ```

use super::actor::{Coordinator, PhaseKind, PhaseTicket};
use super::messages::Resolve;
use crate::error::LockError;
use crate::lock_queue::Priority;
use crate::plan::{LockContext, LockStep, Plan};
use crate::query::Query;
use crate::resource_actor::ResourceRef;
use crate::results::QueryResult;
use actix::{Addr, Recipient};
use std::marker::PhantomData;
use std::sync::Arc;

/// The coordinator as a phase reaches it: to begin a phase (`CoordinatorLinks::begin`, in
/// `acquire.rs`), and for its results to resolve the actors of their resources.
#[derive(Clone)]
pub(crate) struct CoordinatorLinks {
    pub(crate) addr: Addr<Coordinator>,
    pub(crate) resolver: Arc<Recipient<Resolve>>,
}

/// A Lock or NestedLock that holds its locks: the lock context, one result per query (typed:
/// `locked.results()[0].volume.read`), the plan that was carried out, and the locks, released in
/// reverse acquisition order by [`Locked::unlock`] or on drop. `'p` is the guard a NestedLock
/// extends (`'static` for a top-level Lock): the nested guard cannot outlive it.
pub struct Locked<'p> {
    context: LockContext,
    results: Vec<QueryResult>,
    plan: Plan,
    guard: LockGuard,
    links: CoordinatorLinks,
    parent: PhantomData<&'p ()>,
}

impl std::fmt::Debug for Locked<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Locked")
            .field("context", &self.context)
            .field("results", &self.results)
            .field("guard", &self.guard)
            .finish_non_exhaustive()
    }
}

impl<'p> Locked<'p> {
    pub(crate) fn new(
        context: LockContext,
        results: Vec<QueryResult>,
        plan: Plan,
        guard: LockGuard,
        links: CoordinatorLinks,
    ) -> Self {
        Locked {
            context,
            results,
            plan,
            guard,
            links,
            parent: PhantomData,
        }
    }

    /// What the transaction holds after this phase (`lastLockHeld`, held locks): inspection and
    /// explain (`CoordinatorHandle::plan`) read it; NestedLock goes through the guard.
    pub fn context(&self) -> &LockContext {
        &self.context
    }

    /// One result per query, in query order, lent out for as long as the guard lives.
    pub fn results(&self) -> &[QueryResult] {
        &self.results
    }

    /// The plan that was carried out (its `context_after` is [`Locked::context`]).
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The locks held by this phase, in acquisition order.
    pub fn held(&self) -> Vec<LockStep> {
        self.guard.held()
    }

    /// Releases this phase's locks in reverse acquisition order; returns them in release order.
    /// The guard, and with it every result, is gone afterwards.
    ///
    /// The releases are messages sent without waiting for their handling. When `unlock` returns,
    /// every release is in its resource actor's mailbox, ahead of any message sent to that actor
    /// afterwards by anyone (a new Acquire, a commit, an inspection), so nothing can be granted,
    /// committed or observed on these resources as if the locks were still held by this phase.
    pub async fn unlock(self) -> Vec<LockStep> {
        self.guard.unlock().await
    }

    /// The guard alone (a shutdown phase has no results).
    pub(crate) fn into_guard(self) -> LockGuard {
        self.guard
    }

    /// NestedLock with the default priority: extends this phase (which must be the newest of its
    /// transaction: a second NestedLock on it while the first lives is refused, `stale_context`).
    /// Everything new must sort after this phase's last lock (`would_deadlock`). The nested guard
    /// borrows this one, so it is unlocked first.
    pub async fn nested_lock(&self, queries: Vec<Query>) -> Result<Locked<'_>, LockError> {
        self.nested_lock_with(queries, Priority::Default).await
    }

    /// NestedLock with a priority.
    pub async fn nested_lock_with(
        &self,
        queries: Vec<Query>,
        priority: Priority,
    ) -> Result<Locked<'_>, LockError> {
        self.links
            .begin(
                queries,
                Some(&self.context),
                priority,
                PhaseKind::Nested,
                None,
            )
            .await
    }
}

/// The locks taken by one phase. Dropping it releases them (in reverse order) too.
pub(crate) struct LockGuard {
    txn: u64,
    /// Every lock of the phase, in acquisition order; the first `refs.len()` are held.
    steps: Arc<[LockStep]>,
    /// The actors of the held locks, in acquisition order.
    refs: Vec<ResourceRef>,
    /// The phase's entry in the coordinator's transaction table, ended after the releases.
    ticket: Option<PhaseTicket>,
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("txn", &self.txn)
            .field("held", &&self.steps[..self.refs.len()])
            .finish()
    }
}

impl LockGuard {
    pub(crate) fn new(txn: u64, steps: Arc<[LockStep]>, ticket: PhaseTicket) -> Self {
        LockGuard {
            txn,
            refs: Vec::with_capacity(steps.len()),
            steps,
            ticket: Some(ticket),
        }
    }

    /// Records the next lock of the plan as held.
    pub(crate) fn push_held(&mut self, r: ResourceRef) {
        self.refs.push(r);
    }

    /// The actor of the held lock at `at` (acquisition order).
    pub(crate) fn resource(&self, at: usize) -> Option<&ResourceRef> {
        self.refs.get(at)
    }

    /// The locks held, in acquisition order.
    pub(crate) fn held(&self) -> Vec<LockStep> {
        self.steps[..self.refs.len()].to_vec()
    }

    /// Sends every release (reverse acquisition order), then ends the phase in the transaction
    /// table.
    fn release_all(&mut self) {
        for r in self.refs.iter().rev() {
            r.release(self.txn);
        }
        self.ticket.take();
    }

    /// Releases the locks in reverse acquisition order; returns them in that order.
    ///
    /// The releases are messages sent without waiting for their handling. When `unlock` returns,
    /// every release is in its resource actor's mailbox, ahead of any message sent to that actor
    /// afterwards by anyone (a new Acquire, a commit, an inspection), so nothing can be granted,
    /// committed or observed on these resources as if the locks were still held by this phase;
    /// the phase is gone from the transaction table only after that (its end is sent after the
    /// releases, and an inspection asks the resource actors only after handling it).
    pub(crate) async fn unlock(mut self) -> Vec<LockStep> {
        let held = self.refs.len();
        self.release_all();
        self.refs.clear();
        self.steps[..held].iter().rev().cloned().collect()
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        self.release_all();
    }
}

/// Holds the root write lock: while it lives, new consistent locks wait; lists and inconsistent
/// reads proceed. Release it with [`ShutdownGuard::release`] or by dropping it.
#[derive(Debug)]
pub struct ShutdownGuard {
    pub(crate) guard: LockGuard,
}

impl ShutdownGuard {
    /// Releases the root write lock.
    pub async fn release(self) {
        self.guard.unlock().await;
    }

    /// The lock it holds (the root, for write).
    pub fn held(&self) -> Vec<LockStep> {
        self.guard.held()
    }
}
