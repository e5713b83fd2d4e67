//! Workload `create_publish`: every volume is created (3 device calls under the volume write
//! lock and a read lock on its backend, reserving capacity on the backend by interior
//! mutation), then published on a node (1 call), and a share also gets a snapshot (1 call).
//! Reports the makespan, transaction latency percentiles and the physical limit.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::Semaphore;

use crate::args::Options;
use crate::device::Devices;
use crate::engine::{Engine, EngineError, EngineResult, Txn};
use crate::query::{self, Kind};
use crate::runtime::{runtime_cpu, spawn};
use crate::stats::{ms, percentile_ms};

use super::objects::{
    RESERVED_PER_VOLUME, backend_id, backend_value, node_id, node_value, verify, volume_value,
};

/// Figures of one engine.
#[derive(Clone, Debug)]
pub struct CreatePublish {
    /// Volumes actually run (fewer than asked when sampled).
    pub volumes_run: usize,
    /// The fraction run, when the engine ran a sample scaled linearly.
    pub sample: Option<f64>,
    /// Makespan of the whole workload (scaled when sampled).
    pub makespan_ms: f64,
    /// Makespan measured on what was run.
    pub measured_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub txns: usize,
    pub device_calls: u64,
    /// Mean duration of one simulated device call as measured.
    pub mean_call_ms: f64,
    /// CPU time of the runtime's threads (the engine and the workflows) during the run.
    pub cpu_ms: Option<f64>,
}

/// The shape of the workload, shared with the limit computation.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub volumes: usize,
    pub backends: usize,
    pub nodes: usize,
    pub snapshot_percent: usize,
    pub call: Duration,
    pub device_concurrency: usize,
}

impl Shape {
    pub fn from_options(o: &Options) -> Self {
        Shape {
            volumes: o.volumes,
            backends: o.backends,
            nodes: o.nodes,
            snapshot_percent: o.snapshot_percent,
            call: o.call,
            device_concurrency: o.device_concurrency,
        }
    }

    fn has_snapshot(&self, volume: usize) -> bool {
        volume % 100 < self.snapshot_percent
    }

    /// Device calls of volume `i`'s whole workflow.
    fn calls_of(&self, volume: usize) -> u64 {
        3 + 1 + u64::from(self.has_snapshot(volume))
    }
}

/// The physical limit: the larger of the longest chain of calls and the busiest device's work
/// divided by its concurrency.
#[derive(Clone, Copy, Debug)]
pub struct Limit {
    pub chain_ms: f64,
    pub device_ms: f64,
    pub limit_ms: f64,
}

pub fn limit(shape: &Shape) -> Limit {
    let call_ms = ms(shape.call);
    let mut per_device = vec![0u64; shape.backends];
    let mut longest = 0u64;
    for v in 0..shape.volumes {
        per_device[v % shape.backends] += shape.calls_of(v);
        longest = longest.max(shape.calls_of(v));
    }
    let busiest = per_device.iter().copied().max().unwrap_or(0);
    let chain_ms = longest as f64 * call_ms;
    let device_ms = busiest as f64 * call_ms / shape.device_concurrency as f64;
    Limit {
        chain_ms,
        device_ms,
        limit_ms: chain_ms.max(device_ms),
    }
}

/// Seed backends and nodes.
pub async fn prepare<E: Engine>(engine: &E, backends: usize, nodes: usize) -> EngineResult<()> {
    let b = (0..backends)
        .map(|i| (backend_id(i), backend_value(&backend_id(i))))
        .collect();
    engine.preload(Kind::Backend, b).await?;
    let n = (0..nodes)
        .map(|i| (node_id(i), node_value(&node_id(i))))
        .collect();
    engine.preload(Kind::Node, n).await
}

/// Create `volume` on `backend`: 3 device calls under the volume write lock and a backend read lock.
pub async fn create<E: Engine>(
    engine: &E,
    devices: &Devices,
    volume: &str,
    backend: usize,
) -> EngineResult<()> {
    let backend_name = backend_id(backend);
    let txn = engine
        .lock(&[vec![
            query::upsert_volume(volume, &backend_name),
            query::read_backend(&backend_name),
        ]])
        .await?;
    let outcome = async {
        if txn.read(0, Kind::Backend).is_none() {
            return Err(EngineError(format!("{backend_name} not found")));
        }
        txn.reserve_on_backend(0, RESERVED_PER_VOLUME).await?;
        for _ in 0..3 {
            devices.call(backend).await;
        }
        txn.upsert(0, Kind::Volume, volume_value(volume, &backend_name))
            .await
    }
    .await;
    txn.unlock().await;
    outcome
}

async fn publish<E: Engine>(
    engine: &E,
    devices: &Devices,
    volume: &str,
    backend: usize,
    node: &str,
) -> EngineResult<()> {
    let txn = engine
        .lock(&[vec![query::upsert_volume_publication(volume, node)]])
        .await?;
    devices.call(backend).await;
    let outcome = txn
        .upsert(
            0,
            Kind::VolumePublication,
            json!({"id": format!("{volume}.{node}"), "volume": volume, "node": node}),
        )
        .await;
    txn.unlock().await;
    outcome
}

async fn snapshot<E: Engine>(
    engine: &E,
    devices: &Devices,
    volume: &str,
    backend: usize,
) -> EngineResult<()> {
    let id = format!("{volume}-snap");
    let txn = engine
        .lock(&[vec![query::upsert_snapshot(volume, &id)]])
        .await?;
    devices.call(backend).await;
    let outcome = txn
        .upsert(0, Kind::Snapshot, json!({"id": id, "volume": volume}))
        .await;
    txn.unlock().await;
    outcome
}

/// Latencies of every transaction, pushed by the workflows (on one thread or several).
type Latencies = Arc<Mutex<Vec<Duration>>>;

async fn timed(
    latencies: &Latencies,
    txn: impl Future<Output = EngineResult<()>>,
) -> EngineResult<()> {
    let start = Instant::now();
    let outcome = txn.await;
    let elapsed = start.elapsed();
    // A poisoned list only means another workflow panicked while pushing; the list is intact.
    latencies
        .lock()
        .unwrap_or_else(|poison| poison.into_inner())
        .push(elapsed);
    outcome
}

async fn workflow<E: Engine>(
    engine: E,
    devices: Devices,
    shape: Shape,
    volume: usize,
    latencies: Latencies,
) -> EngineResult<()> {
    let name = format!("volume{volume}");
    let backend = volume % shape.backends;
    let node = node_id(volume % shape.nodes);
    timed(&latencies, create(&engine, &devices, &name, backend)).await?;
    timed(
        &latencies,
        publish(&engine, &devices, &name, backend, &node),
    )
    .await?;
    if shape.has_snapshot(volume) {
        timed(&latencies, snapshot(&engine, &devices, &name, backend)).await?;
    }
    Ok(())
}

/// Run the workload on `engine`; with `sample` < 1 only that fraction of the volumes
/// (the first ones, same backend spread) and the makespan is scaled linearly.
pub async fn run<E: Engine>(
    engine: &E,
    shape: Shape,
    workers: usize,
    sample: f64,
) -> EngineResult<CreatePublish> {
    prepare(engine, shape.backends, shape.nodes).await?;
    let devices = Devices::new(shape.backends, shape.device_concurrency, shape.call);
    let run_volumes = if sample < 1.0 {
        ((shape.volumes as f64 * sample).ceil() as usize).clamp(1, shape.volumes)
    } else {
        shape.volumes
    };
    let latencies: Latencies = Arc::new(Mutex::new(Vec::with_capacity(run_volumes * 3)));
    let pool = Arc::new(Semaphore::new(if workers == 0 {
        run_volumes
    } else {
        workers
    }));
    let cpu_before = runtime_cpu();
    let start = Instant::now();
    let tasks: Vec<_> = (0..run_volumes)
        .map(|volume| {
            let (engine, devices, latencies, pool) = (
                engine.clone(),
                devices.clone(),
                latencies.clone(),
                pool.clone(),
            );
            spawn(async move {
                let _worker = pool.acquire_owned().await;
                workflow(engine, devices, shape, volume, latencies).await
            })
        })
        .collect();
    let mut failures = Vec::new();
    for task in tasks {
        match task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failures.push(e.0),
            Err(e) => failures.push(format!("workflow task failed: {e}")),
        }
    }
    let measured = start.elapsed();
    let cpu = runtime_cpu()
        .zip(cpu_before)
        .map(|(after, before)| ms(after.saturating_sub(before)));
    if let Some(first) = failures.first() {
        return Err(EngineError(format!(
            "{} of {run_volumes} workflows failed, first: {first}",
            failures.len()
        )));
    }
    verify(
        engine,
        shape.backends,
        (run_volumes, None),
        run_volumes,
        run_volumes,
    )
    .await?;
    let mut samples = latencies
        .lock()
        .unwrap_or_else(|poison| poison.into_inner())
        .clone();
    let scale = shape.volumes as f64 / run_volumes as f64;
    Ok(CreatePublish {
        volumes_run: run_volumes,
        sample: (run_volumes < shape.volumes).then_some(run_volumes as f64 / shape.volumes as f64),
        makespan_ms: ms(measured) * scale,
        measured_ms: ms(measured),
        p50_ms: percentile_ms(&mut samples, 50.0),
        p99_ms: percentile_ms(&mut samples, 99.0),
        txns: samples.len(),
        device_calls: devices.calls().iter().sum(),
        mean_call_ms: ms(devices.mean_call()),
        cpu_ms: cpu,
    })
}
