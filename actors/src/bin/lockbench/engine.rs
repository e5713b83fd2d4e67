//! The engine-neutral interface every workload drives: lock a set of queries, read working
//! copies and lists, commit upserts, mutate a read-held backend (interior mutability), take a
//! nested lock, unlock. Each engine (global, ordered-rwlock, actors) implements it.

use serde_json::Value;
use std::fmt;

use crate::query::{Kind, Query};

/// A failed engine call, with a message naming what failed.
#[derive(Debug, Clone)]
pub struct EngineError(pub String);

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EngineError {}

pub type EngineResult<T> = Result<T, EngineError>;

/// A lock coordinator under test.
pub trait Engine: Clone + 'static {
    type Txn: Txn;

    /// Lock: plan the queries, acquire every lock in plan order, return the results.
    async fn lock(&self, queries: &[Query]) -> EngineResult<Self::Txn>;

    /// Seed the cache with values without measuring (setup): one upsert transaction per value.
    async fn preload(&self, kind: Kind, values: Vec<(String, Value)>) -> EngineResult<()>;
}

/// Locks held by one Lock (or NestedLock) call, with its results.
pub trait Txn: Sized {
    /// Working copy of the value read (or upsert-locked) for `kind` in query `query`.
    fn read(&self, query: usize, kind: Kind) -> Option<&Value>;

    /// Ids of the values listed for `kind` in query `query`.
    fn list_ids(&self, query: usize, kind: Kind) -> Vec<String>;

    /// How many values were listed for `kind` in query `query`.
    fn list_len(&self, query: usize, kind: Kind) -> usize;

    /// The values listed for `kind` in query `query`.
    fn list_values(&self, query: usize, kind: Kind) -> Vec<&Value>;

    /// Commit a new value for the resource `kind` of query `query`.
    async fn upsert(&self, query: usize, kind: Kind, value: Value) -> EngineResult<()>;

    /// Interior mutation of a backend held for read by query `query`: add `bytes` to its
    /// `reservedBytes`, serialized by the backend itself.
    async fn reserve_on_backend(&self, query: usize, bytes: u64) -> EngineResult<()>;

    /// NestedLock: extend the held locks; the returned transaction owns only the new locks.
    async fn nested(&self, queries: &[Query]) -> EngineResult<Self>;

    /// Release the locks of this call in reverse acquisition order.
    async fn unlock(self);
}
