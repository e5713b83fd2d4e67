//! Workload `backend_update`: the reference design's second worked example while creates run. Each backend is
//! write-locked with a list of its volumes (1 device call to update it), then every listed
//! volume is write-locked by a NestedLock, checked on the device (1 call each, concurrently)
//! and committed; meanwhile new volumes are created on the same backends (3 calls each).

use std::time::Instant;

use futures::future::join_all;
use serde_json::Value;

use crate::device::Devices;
use crate::engine::{Engine, EngineError, EngineResult, Txn};
use crate::query::{self, Kind};
use crate::runtime::{runtime_cpu, spawn};
use crate::stats::ms;

use super::create_publish::{Shape, create, prepare};
use super::objects::{backend_id, verify, volume_value};

/// Figures of one engine.
#[derive(Clone, Debug)]
pub struct BackendUpdate {
    pub makespan_ms: f64,
    /// Volumes re-locked by the nested locks of all backend updates.
    pub nested_volumes: usize,
    pub creates: usize,
    pub device_calls: u64,
    /// Mean duration of one simulated device call as measured.
    pub mean_call_ms: f64,
    /// CPU time of the runtime's threads (the engine and the workflows) during the run.
    pub cpu_ms: Option<f64>,
    /// The busiest device's calls divided by its concurrency, times the call duration.
    pub device_limit_ms: f64,
}

async fn update_backend<E: Engine>(
    engine: &E,
    devices: &Devices,
    backend: usize,
) -> EngineResult<usize> {
    let name = backend_id(backend);
    let txn = engine
        .lock(&[vec![
            query::list_volumes_for_backend(&name),
            query::upsert_backend(&name),
        ]])
        .await?;
    let outcome = async {
        let current = txn
            .read(0, Kind::Backend)
            .ok_or_else(|| EngineError(format!("{name} not found")))?;
        devices.call(backend).await;
        let ids = txn.list_ids(0, Kind::Volume);
        let queries: Vec<_> = ids
            .iter()
            .map(|id| vec![query::upsert_volume(id, &name)])
            .collect();
        let nested = txn.nested(&queries).await?;
        let name = &name;
        let checked = join_all((0..ids.len()).map(|i| {
            let nested = &nested;
            async move {
                devices.call(backend).await;
                let mut volume = match nested.read(i, Kind::Volume) {
                    Some(v) => v.clone(),
                    None => return Ok(()),
                };
                if let Some(map) = volume.as_object_mut() {
                    map.insert(
                        "backendUUID".to_owned(),
                        Value::from(format!("uuid-{name}")),
                    );
                }
                nested.upsert(i, Kind::Volume, volume).await
            }
        }))
        .await;
        nested.unlock().await;
        checked.into_iter().collect::<EngineResult<Vec<()>>>()?;
        let mut updated = current.clone();
        if let Some(map) = updated.as_object_mut() {
            map.insert("state".to_owned(), Value::from("updated"));
        }
        txn.upsert(0, Kind::Backend, updated).await?;
        Ok(ids.len())
    }
    .await;
    txn.unlock().await;
    outcome
}

/// Run: `existing` volumes are preloaded, then half the creates, every backend update and the
/// other half of the creates are started in that order, all at once.
pub async fn run<E: Engine>(
    engine: &E,
    shape: Shape,
    existing: usize,
    creates: usize,
) -> EngineResult<BackendUpdate> {
    prepare(engine, shape.backends, shape.nodes).await?;
    let preload = (0..existing)
        .map(|i| {
            let id = format!("old{i}");
            let value = volume_value(&id, &backend_id(i % shape.backends));
            (id, value)
        })
        .collect();
    engine.preload(Kind::Volume, preload).await?;
    let devices = Devices::new(shape.backends, shape.device_concurrency, shape.call);
    let spawn_create = |i: usize| {
        let (engine, devices) = (engine.clone(), devices.clone());
        spawn(async move {
            create(&engine, &devices, &format!("new{i}"), i % shape.backends)
                .await
                .map(|()| 0)
        })
    };
    let cpu_before = runtime_cpu();
    let start = Instant::now();
    let mut tasks = Vec::new();
    tasks.extend((0..creates / 2).map(spawn_create));
    tasks.extend((0..shape.backends).map(|b| {
        let (engine, devices) = (engine.clone(), devices.clone());
        spawn(async move { update_backend(&engine, &devices, b).await })
    }));
    tasks.extend((creates / 2..creates).map(spawn_create));
    let mut nested_volumes = 0;
    let mut failures = Vec::new();
    for task in tasks {
        match task.await {
            Ok(Ok(n)) => nested_volumes += n,
            Ok(Err(e)) => failures.push(e.0),
            Err(e) => failures.push(format!("task failed: {e}")),
        }
    }
    let makespan = start.elapsed();
    let cpu = runtime_cpu()
        .zip(cpu_before)
        .map(|(after, before)| ms(after.saturating_sub(before)));
    if let Some(first) = failures.first() {
        return Err(EngineError(format!(
            "{} transactions failed, first: {first}",
            failures.len()
        )));
    }
    // Every existing volume (and the creates that finished before its backend's update) was
    // re-checked and committed under a nested lock; every create reserved capacity.
    if nested_volumes < existing {
        return Err(EngineError(format!(
            "only {nested_volumes} of {existing} existing volumes were nested-locked"
        )));
    }
    verify(
        engine,
        shape.backends,
        (nested_volumes, Some("backendUUID")),
        0,
        creates,
    )
    .await?;
    let calls = devices.calls();
    let busiest = calls.iter().copied().max().unwrap_or(0);
    Ok(BackendUpdate {
        makespan_ms: ms(makespan),
        nested_volumes,
        creates,
        device_calls: calls.iter().sum(),
        mean_call_ms: ms(devices.mean_call()),
        cpu_ms: cpu,
        device_limit_ms: busiest as f64 * ms(shape.call) / shape.device_concurrency as f64,
    })
}
