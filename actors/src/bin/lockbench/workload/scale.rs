//! Workload `scale`: many volumes resident; resident memory per volume beyond its value, the
//! time to list all volumes, the time to lock one. Run in a fresh child process per engine so
//! that memory freed by earlier workloads does not hide what the engine allocates.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::engine::{Engine, EngineError, EngineResult, Txn};
use crate::query::{self, Kind};
use crate::stats::{SplitMix, ms, rss_bytes};

use super::create_publish::prepare;
use super::objects::{backend_id, volume_value};

/// Figures of one engine.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Scale {
    pub volumes: usize,
    /// Resident bytes per volume, minus what the volume's value alone costs.
    pub bytes_per_volume: f64,
    /// Resident bytes per volume, everything included.
    pub total_bytes_per_volume: f64,
    /// Resident bytes per volume of the values alone (an `Arc<Value>` of the same shape).
    pub value_bytes_per_volume: f64,
    /// Making the volumes resident, one Lock + upsert + unlock each.
    pub populate_ms: f64,
    /// Median of five `Lock(ListVolumes())` calls returning every volume.
    pub list_all_ms: f64,
    /// Mean time to Lock one random volume for write and unlock it.
    pub lock_one_us: f64,
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

fn name(i: usize) -> String {
    format!("volume{i}")
}

/// Run the scale measurement with `volumes` volumes spread over `backends` backends.
pub async fn run<E: Engine>(engine: &E, volumes: usize, backends: usize) -> EngineResult<Scale> {
    prepare(engine, backends, 1).await?;
    let rss = || rss_bytes().ok_or_else(|| EngineError("cannot read /proc/self/status".to_owned()));
    let before = rss()?;
    let start = Instant::now();
    for i in 0..volumes {
        let (id, backend) = (name(i), backend_id(i % backends));
        let txn = engine
            .lock(&[vec![query::upsert_volume(&id, &backend)]])
            .await?;
        let outcome = txn
            .upsert(0, Kind::Volume, volume_value(&id, &backend))
            .await;
        txn.unlock().await;
        outcome?;
    }
    let populate = start.elapsed();
    let resident = rss()?;
    let values: Vec<Arc<Value>> = (0..volumes)
        .map(|i| Arc::new(volume_value(&name(i), &backend_id(i % backends))))
        .collect();
    let with_values = rss()?;

    let mut lists = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        let txn = engine.lock(&[vec![query::list_volumes()]]).await?;
        let listed = txn.list_len(0, Kind::Volume);
        txn.unlock().await;
        lists.push(start.elapsed());
        if listed != volumes {
            return Err(EngineError(format!("listed {listed} of {volumes} volumes")));
        }
    }

    let mut pick = SplitMix(7);
    let rounds = 1000;
    let start = Instant::now();
    for _ in 0..rounds {
        let txn = engine
            .lock(&[vec![query::upsert_volume(
                &name(pick.next_below(volumes)),
                "",
            )]])
            .await?;
        txn.unlock().await;
    }
    let lock_one = start.elapsed();
    drop(values);

    let n = volumes.max(1) as f64;
    let total = resident.saturating_sub(before) as f64 / n;
    let value = with_values.saturating_sub(resident) as f64 / n;
    Ok(Scale {
        volumes,
        bytes_per_volume: total - value,
        total_bytes_per_volume: total,
        value_bytes_per_volume: value,
        populate_ms: ms(populate),
        list_all_ms: ms(median(lists)),
        lock_one_us: lock_one.as_secs_f64() * 1e6 / rounds as f64,
    })
}
