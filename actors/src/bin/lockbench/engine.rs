//! The engine-neutral interface every workload drives: lock a set of queries, read working
//! copies and lists, commit upserts, mutate a read-held backend (interior mutability), take a
//! nested lock, unlock. Each engine (global, ordered-rwlock, actors) implements it.

use serde_json::Value;
use std::fmt;
use std::future::Future;

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

/// A lock coordinator under test. Engines, transactions and their futures are `Send` so that
/// the workloads can run on a multi-thread runtime as well as on one thread.
pub trait Engine: Clone + Send + Sync + 'static {
    type Txn: Txn;

    /// Lock: plan the queries, acquire every lock in plan order, return the results.
    fn lock(&self, queries: &[Query]) -> impl Future<Output = EngineResult<Self::Txn>> + Send;

    /// Seed the cache with values without measuring (setup): one upsert transaction per value.
    fn preload(
        &self,
        kind: Kind,
        values: Vec<(String, Value)>,
    ) -> impl Future<Output = EngineResult<()>> + Send;
}

/// Locks held by one Lock (or NestedLock) call, with its results.
pub trait Txn: Sized + Send + Sync {
    /// Working copy of the value read (or upsert-locked) for `kind` in query `query`.
    fn read(&self, query: usize, kind: Kind) -> Option<&Value>;

    /// Ids of the values listed for `kind` in query `query`.
    fn list_ids(&self, query: usize, kind: Kind) -> Vec<String>;

    /// How many values were listed for `kind` in query `query`.
    fn list_len(&self, query: usize, kind: Kind) -> usize;

    /// The values listed for `kind` in query `query`.
    fn list_values(&self, query: usize, kind: Kind) -> Vec<&Value>;

    /// Commit a new value for the resource `kind` of query `query`.
    fn upsert(
        &self,
        query: usize,
        kind: Kind,
        value: Value,
    ) -> impl Future<Output = EngineResult<()>> + Send;

    /// Interior mutation of a backend held for read by query `query`: add `bytes` to its
    /// `reservedBytes`, serialized by the backend itself.
    fn reserve_on_backend(
        &self,
        query: usize,
        bytes: u64,
    ) -> impl Future<Output = EngineResult<()>> + Send;

    /// The transaction of a NestedLock on this one (it may borrow this one: a nested guard
    /// cannot outlive the guard it extends).
    type Nested<'a>: Txn
    where
        Self: 'a;

    /// NestedLock: extend the held locks; the returned transaction owns only the new locks.
    fn nested<'a>(
        &'a self,
        queries: &[Query],
    ) -> impl Future<Output = EngineResult<Self::Nested<'a>>> + Send;

    /// Release the locks of this call in reverse acquisition order.
    fn unlock(self) -> impl Future<Output = ()> + Send;
}
