//! The outcome of a phase and the release of its locks: `Locked` (context, results, guard,
//! plan), `LockGuard` (reverse-order release on `unlock().await` or on drop) and `ShutdownGuard`.

use super::Core;
use crate::plan::{LockContext, LockStep, Plan};
use crate::resource_actor::{Release, ResourceRef};
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
    /// The plan that was carried out.
    pub plan: Plan,
}

impl Locked {
    /// Releases this phase's locks in reverse acquisition order; returns them in release order.
    pub async fn unlock(self) -> Vec<LockStep> {
        self.guard.unlock().await
    }
}

/// The locks taken by one phase. Dropping it releases them (in reverse order) too.
pub struct LockGuard {
    pub(crate) txn: u64,
    pub(crate) phase: u64,
    /// Every lock of the phase, in acquisition order; the first `refs.len()` are held.
    pub(crate) steps: Arc<[LockStep]>,
    /// The actors of the held locks, in acquisition order.
    pub(crate) refs: Vec<ResourceRef>,
    pub(crate) core: Arc<Core>,
    pub(crate) released: bool,
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("txn", &self.txn)
            .field("phase", &self.phase)
            .field("held", &&self.steps[..self.refs.len()])
            .finish()
    }
}

impl LockGuard {
    /// The locks held, in acquisition order.
    pub fn held(&self) -> Vec<LockStep> {
        self.steps[..self.refs.len()].to_vec()
    }

    /// Releases the locks in reverse acquisition order; returns them in that order. The releases
    /// are sent without awaiting each reply: every resource actor's mailbox is FIFO, so any
    /// message sent to it after `unlock` returns (a new Acquire, an inspection) is handled after
    /// the release.
    pub async fn unlock(mut self) -> Vec<LockStep> {
        self.released = true;
        let refs = std::mem::take(&mut self.refs);
        for r in refs.iter().rev() {
            // A gone actor has nothing left to release.
            r.release(self.txn);
        }
        self.core.phase_done(self.phase);
        let held = refs.len();
        drop(refs);
        // Once the phase is done the step list is normally this guard's alone (an inspection in
        // progress may still share it): then the held steps are moved out instead of cloned.
        match Arc::get_mut(&mut self.steps) {
            Some(steps) => steps[..held]
                .iter_mut()
                .rev()
                .map(|s| LockStep {
                    mode: s.mode,
                    kind: std::mem::take(&mut s.kind),
                    id: std::mem::take(&mut s.id),
                })
                .collect(),
            None => self.steps[..held].iter().rev().cloned().collect(),
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        for r in self.refs.iter().rev() {
            r.do_send(Release { txn: self.txn });
        }
        self.core.phase_done(self.phase);
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
