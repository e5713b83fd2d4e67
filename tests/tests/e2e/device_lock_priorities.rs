//! The priorities the operator's device locks are taken at, read from
//! `cinder_operator_device_lock_wait_seconds{priority}`: a Cinder with an NFS backend converging
//! (db-sync under the database lock, the volume service rolled out under the backend's lock)
//! takes every lock at High: a backend change is foundational work, as the schema Jobs are.

use cinder_e2e::workload_helpers::*;
use cinder_e2e::*;

/// `cinder_operator_device_lock_wait_seconds_count{priority="<priority>"}` of the harness's
/// operator.
fn wait_count(h: &Harness, priority: &str) -> u64 {
    let (mut registry, _) = cinder_operator::metrics::Metrics::new_registry();
    h.ctx.device_locks.metrics().register(&mut registry);
    let text = cinder_operator::metrics::encode_openmetrics(&registry).unwrap();
    let series =
        format!("cinder_operator_device_lock_wait_seconds_count{{priority=\"{priority}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(series.as_str()))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_service_roll_out_takes_its_device_at_high() {
    let h = Harness::start().await.unwrap();
    cinder_with_nfs(&h.client, "prio", "nfs1", serde_json::json!({}))
        .await
        .unwrap();
    wait_cinder_condition(
        &h.client,
        "prio",
        "VolumeServicesReady",
        "True",
        "AllVolumeServicesReady",
    )
    .await
    .unwrap();
    assert!(deployment(&h.client, "prio-volume-nfs1").await.is_some());
    // The db-sync Job and the volume Deployment: at least two grants, all at High.
    assert!(
        wait_count(&h, "high") >= 2,
        "high: {}",
        wait_count(&h, "high")
    );
    assert_eq!(wait_count(&h, "default"), 0, "a lock was taken at Default");
    assert_eq!(
        wait_count(&h, "baseline"),
        0,
        "a lock was taken at Baseline"
    );
    h.stop().await.unwrap();
}
