//! Results of a Lock / NestedLock: one [`QueryResult`] per query, holding working copies (a
//! mutated copy changes nothing) and commit handles whose upsert / delete / interior mutation are
//! messages to the owning resource actor.

use crate::coordinator::{Coordinator, Resolve};
use crate::error::LockError;
use crate::query::Op;
use crate::resource_actor::{Change, Commit, Mutate, ResourceRef};
use actix::Addr;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

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
    /// A working copy of the value when the lock was taken; `None` when it did not exist.
    pub read: Option<Value>,
    target: Option<CommitTarget>,
}

#[derive(Debug, Clone)]
pub(crate) struct CommitTarget {
    pub(crate) coordinator: Addr<Coordinator>,
    pub(crate) txn: u64,
    pub(crate) resource: Option<ResourceRef>,
}

impl ResourceResult {
    pub(crate) fn new(
        kind: &str,
        id: &str,
        op: Op,
        read: Option<Value>,
        target: Option<CommitTarget>,
    ) -> Self {
        ResourceResult {
            kind: kind.to_string(),
            id: id.to_string(),
            op,
            read,
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
            })
            .await
            .map_err(|_| LockError::ShuttingDown)?;
        Ok((t.txn, r))
    }

    /// Commits `value` as the new value (only through an upsert result, while locked).
    pub async fn upsert(&self, value: Value) -> Result<(), LockError> {
        if self.op != Op::Upsert {
            return Err(self.wrong("upsert"));
        }
        let (txn, r) = self.resource("upsert").await?;
        let change = match r.commit_direct(txn, Change::Upsert(value)) {
            Ok(done) => return done,
            Err(change) => change,
        };
        r.send(Commit { txn, change })
            .await
            .map_err(|_| LockError::ShuttingDown)?
    }

    /// Deletes the resource (only through a delete result, while locked).
    pub async fn delete(&self) -> Result<(), LockError> {
        if self.op != Op::Delete {
            return Err(self.wrong("delete"));
        }
        let (txn, r) = self.resource("delete").await?;
        if let Ok(done) = r.commit_direct(txn, Change::Delete) {
            return done;
        }
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
        if let Some(done) = r.mutate_direct(txn, name, &args) {
            return done;
        }
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
    pub(crate) resources: BTreeMap<String, ResourceResult>,
    pub(crate) lists: BTreeMap<String, Vec<Listed>>,
}

impl QueryResult {
    /// The result of the subquery on `kind`.
    pub fn get(&self, kind: &str) -> Option<&ResourceResult> {
        self.resources.get(kind)
    }
    /// The working copy read for `kind` (None when absent or not asked).
    pub fn read(&self, kind: &str) -> Option<&Value> {
        self.resources.get(kind).and_then(|r| r.read.as_ref())
    }
    /// The list of `kind`, when the query listed it.
    pub fn list(&self, kind: &str) -> Option<&[Listed]> {
        self.lists.get(kind).map(Vec::as_slice)
    }
}
