//! The outcome of a phase and the release of its locks: `Locked` (context, results, guard, plan),
//! `LockGuard` (reverse-order release on `unlock()` or on drop) and `ShutdownGuard`.

use super::actor::PhaseTicket;
use crate::plan::{LockContext, LockStep, Plan};
use crate::resource_actor::ResourceRef;
use crate::results::QueryResult;
use std::sync::Arc;

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
    /// The plan that was carried out (its `context_after` is in `context`).
    pub plan: Plan,
}

impl Locked {
    /// Releases this phase's locks in reverse acquisition order; returns them in release order.
    /// See [`LockGuard::unlock`] for what is guaranteed when it returns.
    pub async fn unlock(self) -> Vec<LockStep> {
        self.guard.unlock().await
    }
}

/// The locks taken by one phase. Dropping it releases them (in reverse order) too.
pub struct LockGuard {
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
    pub fn held(&self) -> Vec<LockStep> {
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
    pub async fn unlock(mut self) -> Vec<LockStep> {
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
}
