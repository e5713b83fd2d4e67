//! Workload `throughput`: create_publish with devices whose calls take no time, so that the lock
//! engine itself is the bottleneck; run on 1, 2 and 4 arbiters for the actors and on as many
//! workers for the baselines. Reports transactions per second.

use std::time::Duration;

use crate::engine::{Engine, EngineResult};

use super::create_publish::{self, Shape};

/// The settings the workload runs on: arbiters for the actors, workers for the baselines.
pub const SETTINGS: [usize; 3] = [1, 2, 4];

/// Figures of one engine on one setting.
#[derive(Clone, Debug)]
pub struct Throughput {
    pub txns: usize,
    pub measured_ms: f64,
    pub txns_per_sec: f64,
    /// CPU time of the runtime's threads (see `create_publish`), when measured.
    pub cpu_ms: Option<f64>,
}

/// The create_publish shape of the workload: `volumes` volumes, calls of no time.
pub fn shape(base: Shape, volumes: usize) -> Shape {
    Shape {
        volumes,
        call: Duration::ZERO,
        ..base
    }
}

/// Run create_publish of `shape` (calls of no time) on `engine`, one task per volume.
pub async fn run<E: Engine>(engine: &E, shape: Shape) -> EngineResult<Throughput> {
    let c = create_publish::run(engine, shape, 0, 1.0).await?;
    Ok(Throughput {
        txns: c.txns,
        measured_ms: c.measured_ms,
        txns_per_sec: c.txns as f64 / (c.measured_ms / 1e3).max(1e-9),
        cpu_ms: c.cpu_ms,
    })
}
