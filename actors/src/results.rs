//! Results of a Lock / NestedLock: one [`QueryResult`] per query, holding working copies (a
//! mutated copy changes nothing) and commit handles whose upsert / delete / interior mutation are
//! messages to the owning resource actor.

use crate::coordinator::messages::Resolve;
use crate::error::LockError;
use crate::query::Op;
use crate::resource_actor::{Change, Commit, Mutate, ResourceRef};
use actix::Recipient;
use serde_json::Value;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// A working copy of a value read under a lock: it shares the value the resource held at lock
/// time until it is first mutated, and is copied then (copy on write, `Arc::make_mut`). Mutating
/// it changes nothing in the cache; commit it with [`ResourceResult::upsert`]. It dereferences to
/// [`Value`], so `copy["field"] = json!(1)`, `copy.as_object_mut()` and `&*copy` work as on a
/// `Value`.
#[derive(Clone, PartialEq)]
pub struct WorkingCopy(Arc<Value>);

impl WorkingCopy {
    /// A working copy of `value`.
    pub fn new(value: Value) -> Self {
        WorkingCopy(Arc::new(value))
    }
    /// The copy as a plain value (a deep copy only if it is still shared).
    pub fn into_value(self) -> Value {
        Arc::unwrap_or_clone(self.0)
    }
    /// The copy as a shared value (no copy).
    pub fn into_shared(self) -> Arc<Value> {
        self.0
    }
    pub(crate) fn shared(value: Arc<Value>) -> Self {
        WorkingCopy(value)
    }
}

impl std::fmt::Debug for WorkingCopy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl Deref for WorkingCopy {
    type Target = Value;
    fn deref(&self) -> &Value {
        &self.0
    }
}

impl DerefMut for WorkingCopy {
    fn deref_mut(&mut self) -> &mut Value {
        Arc::make_mut(&mut self.0)
    }
}

impl AsRef<Value> for WorkingCopy {
    fn as_ref(&self) -> &Value {
        &self.0
    }
}

impl PartialEq<Value> for WorkingCopy {
    fn eq(&self, other: &Value) -> bool {
        *self.0 == *other
    }
}

impl From<Value> for WorkingCopy {
    fn from(value: Value) -> Self {
        WorkingCopy::new(value)
    }
}

impl From<WorkingCopy> for Value {
    fn from(copy: WorkingCopy) -> Self {
        copy.into_value()
    }
}

impl From<WorkingCopy> for Arc<Value> {
    fn from(copy: WorkingCopy) -> Self {
        copy.0
    }
}

/// One listed value with its id.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    /// The id.
    pub id: String,
    /// The value (shared, immutable).
    pub value: Arc<Value>,
}

/// The result of one non-list subquery.
#[derive(Debug, Clone)]
pub struct ResourceResult {
    /// The kind.
    pub kind: String,
    /// The id.
    pub id: String,
    /// The subquery's operation (decides which commits are allowed).
    pub op: Op,
    /// A working copy of the value when the lock was taken (shared until mutated); `None` when
    /// it did not exist.
    pub read: Option<WorkingCopy>,
    target: Option<CommitTarget>,
}

#[derive(Clone)]
pub(crate) struct CommitTarget {
    pub(crate) coordinator: Arc<Recipient<Resolve>>,
    pub(crate) txn: u64,
    pub(crate) resource: Option<ResourceRef>,
}

impl std::fmt::Debug for CommitTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommitTarget")
            .field("txn", &self.txn)
            .field("resource", &self.resource)
            .finish()
    }
}

impl ResourceResult {
    pub(crate) fn new(
        kind: &str,
        id: &str,
        op: Op,
        read: Option<Arc<Value>>,
        target: Option<CommitTarget>,
    ) -> Self {
        ResourceResult {
            kind: kind.to_string(),
            id: id.to_string(),
            op,
            read: read.map(WorkingCopy::shared),
            target,
        }
    }

    fn wrong(&self, attempted: &str) -> LockError {
        LockError::WrongOperation {
            kind: self.kind.clone(),
            id: self.id.clone(),
            op: self.op,
            attempted: attempted.to_string(),
        }
    }

    /// The transaction and the actor that owns the resource (resolved through the coordinator
    /// when the lock was taken by an earlier phase).
    async fn resource(&self, attempted: &str) -> Result<(u64, ResourceRef), LockError> {
        let t = self.target.as_ref().ok_or_else(|| self.wrong(attempted))?;
        if let Some(r) = &t.resource
            && r.connected()
        {
            return Ok((t.txn, r.clone()));
        }
        let r = t
            .coordinator
            .send(Resolve {
                kind: self.kind.clone(),
                id: self.id.clone(),
                stale: t.resource.as_ref().map(|r| r.generation),
            })
            .await
            .map_err(|_| LockError::ShuttingDown)?;
        Ok((t.txn, r))
    }

    /// Commits `value` (a [`Value`], or a [`WorkingCopy`] without copying it) as the new value
    /// (only through an upsert result, while locked): a message to the resource's actor, answered
    /// once the value is set (or refused: lock not held, key taken).
    pub async fn upsert(&self, value: impl Into<Arc<Value>>) -> Result<(), LockError> {
        if self.op != Op::Upsert {
            return Err(self.wrong("upsert"));
        }
        let (txn, r) = self.resource("upsert").await?;
        r.send(Commit {
            txn,
            change: Change::Upsert(value.into()),
        })
        .await
        .map_err(|_| LockError::ShuttingDown)?
    }

    /// Deletes the resource (only through a delete result, while locked).
    pub async fn delete(&self) -> Result<(), LockError> {
        if self.op != Op::Delete {
            return Err(self.wrong("delete"));
        }
        let (txn, r) = self.resource("delete").await?;
        r.send(Commit {
            txn,
            change: Change::Delete,
        })
        .await
        .map_err(|_| LockError::ShuttingDown)?
    }

    /// Runs a declared interior mutation (allowed while read- or write-held); returns the new value.
    pub async fn mutate(&self, name: &str, args: Value) -> Result<Value, LockError> {
        if !self.op.is_consistent() {
            return Err(self.wrong("interior mutation"));
        }
        let (txn, r) = self.resource("interior mutation").await?;
        r.send(Mutate {
            txn,
            name: name.to_string(),
            args,
        })
        .await
        .map_err(|_| LockError::ShuttingDown)?
    }
}

/// The result of one query: at most one resource result per kind, and at most one list per kind.
#[derive(Debug, Clone, Default)]
pub struct QueryResult {
    /// At most one per kind (a query has at most one non-list subquery per kind).
    resources: Vec<ResourceResult>,
    /// At most one per kind.
    lists: Vec<(String, Vec<Listed>)>,
}

impl QueryResult {
    /// The result of the subquery on `kind`.
    pub fn get(&self, kind: &str) -> Option<&ResourceResult> {
        self.resources.iter().find(|r| r.kind == kind)
    }
    /// The working copy read for `kind` (None when absent or not asked).
    pub fn read(&self, kind: &str) -> Option<&Value> {
        self.get(kind).and_then(|r| r.read.as_deref())
    }
    /// The list of `kind`, when the query listed it.
    pub fn list(&self, kind: &str) -> Option<&[Listed]> {
        self.lists
            .iter()
            .find(|(k, _)| k == kind)
            .map(|(_, l)| l.as_slice())
    }
    /// Sets the result of `kind` (replacing an earlier one of the same kind).
    pub(crate) fn set_resource(&mut self, r: ResourceResult) {
        match self.resources.iter_mut().find(|x| x.kind == r.kind) {
            Some(slot) => *slot = r,
            None => self.resources.push(r),
        }
    }
    /// Sets the list of `kind` (replacing an earlier one of the same kind).
    pub(crate) fn set_list(&mut self, kind: &str, listed: Vec<Listed>) {
        match self.lists.iter_mut().find(|(k, _)| k == kind) {
            Some(slot) => slot.1 = listed,
            None => self.lists.push((kind.to_string(), listed)),
        }
    }
}
