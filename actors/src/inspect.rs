//! Inspection snapshots (serde::Serialize) for the admin endpoint: every resource actor's lock
//! state and every in-flight lock phase (held locks, what it waits on, age).

use crate::lock_queue::Priority;
use crate::plan::{LockMode, LockStep};
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;

/// One queued lock request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WaiterSnapshot {
    /// The waiting transaction.
    pub txn: u64,
    /// Requested mode.
    pub mode: LockMode,
    /// Base priority.
    pub priority: Priority,
    /// How long it has waited, in milliseconds.
    pub waited_ms: u64,
}

/// The lock state of one resource actor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceSnapshot {
    /// The kind (`key:<kind>` for key locks).
    pub kind: String,
    /// The id.
    pub id: String,
    /// The held mode, if held.
    pub mode: Option<LockMode>,
    /// Holding transactions.
    pub holders: Vec<u64>,
    /// Waiters, in arrival order.
    pub waiters: Vec<WaiterSnapshot>,
    /// Lock requests queued at the actor (its waiters): its backlog.
    pub mailbox_len: usize,
    /// Whether the resource has a value.
    pub exists: bool,
    /// The value when the snapshot was taken (not serialized: callers redact it before showing it).
    #[serde(skip)]
    pub value: Option<Arc<Value>>,
}

/// A lock being acquired, or the locks of one Lock / NestedLock phase not yet released.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WaitSnapshot {
    /// The lock waited for.
    pub lock: LockStep,
    /// For how long, in milliseconds.
    pub waited_ms: u64,
}

/// One in-flight Lock / NestedLock / shutdown phase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TransactionSnapshot {
    /// The phase (each Lock and NestedLock is one).
    pub phase: u64,
    /// The transaction (shared by a Lock and its NestedLocks).
    pub txn: u64,
    /// `lock`, `nested_lock` or `shutdown`.
    pub what: &'static str,
    /// Its priority.
    pub priority: Priority,
    /// Milliseconds since it started.
    pub age_ms: u64,
    /// Locks held by this phase, in acquisition order.
    pub held: Vec<LockStep>,
    /// What it is waiting for, if anything.
    pub waiting_on: Option<WaitSnapshot>,
}

/// Everything the coordinator can report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CoordinatorSnapshot {
    /// In-flight phases, oldest first.
    pub transactions: Vec<TransactionSnapshot>,
    /// Every live resource actor, sorted by kind and id.
    pub resources: Vec<ResourceSnapshot>,
}

impl CoordinatorSnapshot {
    /// The resources that are held or waited for.
    pub fn busy(&self) -> Vec<&ResourceSnapshot> {
        self.resources
            .iter()
            .filter(|r| !r.holders.is_empty() || !r.waiters.is_empty())
            .collect()
    }
}
