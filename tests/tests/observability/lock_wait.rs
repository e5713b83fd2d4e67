//! `cinder_operator_lock_wait_seconds{kind="device",mode="write"}` on `/metrics` counts the wait
//! of every device-lock grant: after a contended acquire (the second waiter held back for
//! 300 ms by the first), the series has two observations and at least 0.3 s in all.

use cinder_e2e::deploy_helpers::{DeployedOperator, http_get_async};
use cinder_e2e::observability_helpers::test_telemetry;
use cinder_lease::Priority;
use std::time::Duration;

const SERIES: &str = "cinder_operator_lock_wait_seconds";
const LABELS: &str = "{kind=\"device\",mode=\"write\"}";

/// The value of `name{labels}` in the OpenMetrics text.
fn value(text: &str, name: &str) -> Option<f64> {
    let prefix = format!("{name}{LABELS} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contended_device_lock_shows_its_wait_in_lock_wait_seconds() {
    test_telemetry();
    let op = DeployedOperator::start().await.unwrap();
    let scrape = || async {
        let (status, body) =
            http_get_async(op.endpoints.metrics_addr.to_string(), "/metrics".into())
                .await
                .unwrap();
        assert_eq!(status, 200, "{body}");
        body
    };
    let before = scrape().await;
    assert_eq!(
        value(&before, &format!("{SERIES}_count")),
        Some(0.0),
        "{before}"
    );

    let locks = op.ctx.device_locks.clone();
    let first = locks
        .lock("nfs-contended", Priority::Default)
        .await
        .unwrap();
    let waiter = {
        let locks = locks.clone();
        tokio::spawn(async move { locks.lock("nfs-contended", Priority::Default).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    first.release().await;
    let second = waiter.await.unwrap().unwrap();
    second.release().await;

    let after = scrape().await;
    assert_eq!(
        value(&after, &format!("{SERIES}_count")),
        Some(2.0),
        "{after}"
    );
    let sum = value(&after, &format!("{SERIES}_sum")).unwrap_or_default();
    assert!(
        sum >= 0.3,
        "{SERIES}_sum{LABELS} is {sum}, the contended wait was 300 ms"
    );
    op.stop().await.unwrap();
}
