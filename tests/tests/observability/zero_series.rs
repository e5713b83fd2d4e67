//! Every labelled family a dashboard panel or an alert reads exists at zero before anything
//! happened: the operator's `/metrics` (before any Cinder) carries a zero
//! `cinder_operator_reconcile_errors_total` series for every step and zero mailbox-depth and
//! lock-wait series for every actor kind, and once a Cinder has had a
//! pass, its Ready and upgrade-phase gauges and its Job counters at zero. The device-lock families
//! get theirs from [`zero_device_lock_series`], as `cinder-operator run` calls it.

use cinder_e2e::deploy_helpers::{DeployedOperator, http_get_async};
use cinder_e2e::observability_helpers::test_telemetry;
use cinder_e2e::*;
use cinder_lease::DeviceLockMetrics;
use cinder_operator::metrics::{Metrics, encode_openmetrics, zero_device_lock_series};
use cinder_operator::pipeline::{GROUP, LANE};

async fn scrape(op: &DeployedOperator) -> String {
    let (status, body) = http_get_async(op.endpoints.metrics_addr.to_string(), "/metrics".into())
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labelled_families_start_at_zero() {
    test_telemetry();
    let op = DeployedOperator::start().await.unwrap();
    let body = scrape(&op).await;
    for step in LANE.iter().chain(GROUP.iter()) {
        let series = format!(
            "cinder_operator_reconcile_errors_total{{sub_reconciler=\"{}\",condition_type=\"{}\"}} 0",
            step.as_str(),
            step.condition_type()
        );
        assert!(body.contains(&series), "{series} missing:\n{body}");
    }
    for series in [
        "cinder_operator_mailbox_depth{kind=\"volume\"} 0",
        "cinder_operator_lock_wait_seconds_count{kind=\"device\",mode=\"write\"} 0",
    ] {
        assert!(body.contains(series), "{series} missing:\n{body}");
    }

    let creds = Credentials::fresh("zero");
    create_cluster_store(&op.client).await.unwrap();
    create_credentials(&op.client, &creds).await.unwrap();
    create_cinder(&op.client, "zeroed", serde_json::json!({}))
        .await
        .unwrap();
    let body = eventually("the Cinder's series", || async {
        let body = scrape(&op).await;
        body.contains("cinder_operator_cinder_ready{cinder=\"zeroed\"")
            .then_some(body)
    })
    .await
    .unwrap();
    for series in [
        "cinder_operator_cinder_ready{cinder=\"zeroed\",namespace=\"cinder-e2e\"} 0",
        "cinder_operator_upgrade_phase{cinder=\"zeroed\",namespace=\"cinder-e2e\",phase=\"Migrating\"} 0",
        "cinder_operator_db_sync_total{cinder=\"zeroed\",namespace=\"cinder-e2e\",result=\"failed\"} 0",
        "cinder_operator_db_purge_total{cinder=\"zeroed\",namespace=\"cinder-e2e\",result=\"succeeded\"} 0",
        "cinder_operator_service_remove_total{cinder=\"zeroed\",namespace=\"cinder-e2e\",result=\"failed\"} 0",
    ] {
        assert!(body.contains(series), "{series} missing:\n{body}");
    }
    op.stop().await.unwrap();
}

#[test]
fn device_lock_families_start_at_zero() {
    let (mut registry, _metrics) = Metrics::new_registry();
    let device = DeviceLockMetrics::default();
    device.register(&mut registry);
    let before = encode_openmetrics(&registry).unwrap();
    assert!(
        !before.contains("cinder_operator_lease_api_calls_total{"),
        "{before}"
    );
    zero_device_lock_series(&device);
    let text = encode_openmetrics(&registry).unwrap();
    for series in [
        "cinder_operator_lease_api_calls_total{verb=\"get\"} 0",
        "cinder_operator_lease_api_calls_total{verb=\"replace\"} 0",
        "cinder_operator_device_lock_wait_seconds_count{priority=\"baseline\"} 0",
        "cinder_operator_device_lock_wait_seconds_count{priority=\"high\"} 0",
    ] {
        assert!(text.contains(series), "{series} missing:\n{text}");
    }
}
