//! Workload `overhead`: the reference design's first worked example (Lock of two queries, six locks), its three
//! commits and the unlock, uncontended, many times in a row; reports ns per transaction.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::engine::{Engine, EngineError, EngineResult, Txn};
use crate::query::{self, Kind, Query};

use super::objects::{backend_value, node_value, volume_value};

/// Figures of one engine.
#[derive(Clone, Debug)]
pub struct Overhead {
    pub txns: usize,
    pub ns_per_txn: f64,
    /// Of which: Lock (plan and acquire), the body (checks and three commits), unlock.
    pub lock_ns: f64,
    pub body_ns: f64,
    pub unlock_ns: f64,
}

/// Time spent in each phase of the example transactions.
#[derive(Default)]
struct Phases {
    lock: Duration,
    body: Duration,
    unlock: Duration,
}

/// The locks the reference design's first worked example takes (root, backend1, node1, volume1, volume1.node1, snap1).
pub const LOCKS_PER_TXN: usize = 6;

fn example_queries() -> Vec<Query> {
    vec![
        vec![
            query::upsert_volume_publication("volume1", "node1"),
            query::list_volume_publications(),
            query::list_volumes(),
            query::read_backend(""),
            query::upsert_volume("volume1", ""),
        ],
        vec![
            query::upsert_backend("backend1"),
            query::upsert_snapshot("volume1", "snap1"),
        ],
    ]
}

/// One transaction of the reference design's first worked example, with its checks and commits.
async fn example_txn<E: Engine>(engine: &E, phases: &mut Phases) -> EngineResult<()> {
    let start = Instant::now();
    let txn = engine.lock(&example_queries()).await?;
    let locked = Instant::now();
    let outcome = example_body(&txn).await;
    let done = Instant::now();
    txn.unlock().await;
    let unlocked = Instant::now();
    phases.lock += locked - start;
    phases.body += done - locked;
    phases.unlock += unlocked - done;
    outcome
}

async fn example_body<T: Txn>(txn: &T) -> EngineResult<()> {
    if txn.list_len(0, Kind::Volume) == 0 {
        return Err(EngineError("no volumes listed".to_owned()));
    }
    if txn.read(0, Kind::Backend).is_none() {
        return Err(EngineError("no backend found".to_owned()));
    }
    let backend = txn
        .read(1, Kind::Backend)
        .ok_or_else(|| EngineError("no backend found in results[1]".to_owned()))?;
    txn.upsert(
        0,
        Kind::VolumePublication,
        json!({"id": "volume1.node1", "volume": "volume1", "node": "node1"}),
    )
    .await?;
    let mut backend = backend.clone();
    if let Some(map) = backend.as_object_mut() {
        map.insert("state".to_owned(), Value::from("unknown"));
    }
    txn.upsert(1, Kind::Backend, backend).await?;
    txn.upsert(
        1,
        Kind::Snapshot,
        json!({"id": "snap1", "volume": "volume1"}),
    )
    .await
}

/// Seed the cache the example needs: volume1, backend1 and node1 exist.
pub async fn prepare<E: Engine>(engine: &E) -> EngineResult<()> {
    engine
        .preload(
            Kind::Backend,
            vec![("backend1".to_owned(), backend_value("backend1"))],
        )
        .await?;
    engine
        .preload(Kind::Node, vec![("node1".to_owned(), node_value("node1"))])
        .await?;
    engine
        .preload(
            Kind::Volume,
            vec![("volume1".to_owned(), volume_value("volume1", "backend1"))],
        )
        .await
}

/// Run `txns` example transactions after a warm-up of a tenth as many.
pub async fn run<E: Engine>(engine: &E, txns: usize) -> EngineResult<Overhead> {
    prepare(engine).await?;
    let mut phases = Phases::default();
    for _ in 0..(txns / 10).max(1) {
        example_txn(engine, &mut phases).await?;
    }
    let mut phases = Phases::default();
    let start = Instant::now();
    for _ in 0..txns {
        example_txn(engine, &mut phases).await?;
    }
    let elapsed = start.elapsed();
    let per = |d: Duration| d.as_nanos() as f64 / txns.max(1) as f64;
    Ok(Overhead {
        txns,
        ns_per_txn: per(elapsed),
        lock_ns: per(phases.lock),
        body_ns: per(phases.body),
        unlock_ns: per(phases.unlock),
    })
}
