//! A real Prometheus against the operator: Debian's `prometheus` package (installed with
//! apt-get when missing and the test runs as root; otherwise the test prints why it skips),
//! `promtool check metrics` on the operator's `/metrics`, and a Prometheus process scraping that
//! endpoint while the operator reconciles a Cinder on the embedded cluster, queried through
//! `/api/v1/query` until `cinder_operator_reconcile_duration_seconds_count` is above zero.

use cinder_e2e::deploy_helpers::*;
use cinder_e2e::*;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_the_reconcile_durations() {
    let skip = tokio::task::spawn_blocking(ensure_prometheus)
        .await
        .unwrap()
        .unwrap();
    if let Some(reason) = skip {
        println!("SKIPPED prometheus_scrapes_the_reconcile_durations: {reason}");
        return;
    }

    let op = DeployedOperator::start().await.unwrap();
    let creds = Credentials::fresh("prom");
    create_cluster_store(&op.client).await.unwrap();
    create_credentials(&op.client, &creds).await.unwrap();
    create_cinder(&op.client, "scraped", serde_json::json!({}))
        .await
        .unwrap();
    wait_cinder_condition(
        &op.client,
        "scraped",
        "SecretsReady",
        "True",
        "SecretsAvailable",
    )
    .await
    .unwrap();

    // The endpoint's own output passes promtool's checks (read as text format 0.0.4, see
    // openmetrics_to_text_format) and carries a counted reconcile duration.
    let metrics_addr = op.endpoints.metrics_addr.to_string();
    let (status, body) = http_get_async(metrics_addr.clone(), "/metrics".to_string())
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.ends_with("# EOF\n"), "not OpenMetrics: {body}");
    assert!(
        body.contains("cinder_operator_reconcile_duration_seconds_count{"),
        "{body}"
    );
    let text = openmetrics_to_text_format(&body);
    let (ok, report) = promtool_check_metrics(&text).unwrap();
    assert!(
        ok && report.trim().is_empty(),
        "promtool check metrics: {report}\n--- checked text:\n{text}"
    );

    // Every family, with a sample in each (the live endpoint shows only families with series).
    let all = openmetrics_to_text_format(&every_metric_family_text().unwrap());
    let (ok, report) = promtool_check_metrics(&all).unwrap();
    assert!(
        ok && report.trim().is_empty(),
        "promtool check metrics: {report}\n--- checked text:\n{all}"
    );

    let prometheus = PrometheusProcess::start(&metrics_addr, "cinder-operator").unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    let query = "sum(cinder_operator_reconcile_duration_seconds_count{job=\"cinder-operator\"})";
    let mut last = String::new();
    let count = loop {
        match prometheus.query_scalar(query).await {
            Ok(Some(v)) if v > 0.0 => break Some(v),
            Ok(other) => last = format!("{other:?}"),
            Err(e) => last = e.to_string(),
        }
        if Instant::now() > deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let log = prometheus.log();
    drop(prometheus);
    op.stop().await.unwrap();
    assert!(
        count.is_some(),
        "Prometheus never returned {query} > 0 (last answer: {last}); its log:\n{log}"
    );
}
