//! The Job counters survive a replaced operator process: the first process counts the db-sync,
//! a purge run and a service-remove once each and marks each Job counted; a second process
//! started after the first stopped reads the same Jobs, counts none of them again, and still
//! counts a new purge run.

use cinder_e2e::database_helpers::*;
use cinder_e2e::workload_helpers::*;
use cinder_e2e::*;
use cinder_operator::metrics::{JobMetrics, JobResult, JobResultLabels, Metrics};
use cinder_sim::controllers::config::PodOutcome;
use k8s_openapi::api::batch::v1::Job;
use std::time::Duration;

const CINDER: &str = "ctr";

fn succeeded(metrics: &JobMetrics) -> u64 {
    metrics
        .total
        .get_or_create(&JobResultLabels {
            cinder: CINDER.to_string(),
            namespace: NS.to_string(),
            result: JobResult::Succeeded,
        })
        .get()
}

/// (db_sync, db_purge, service_remove) succeeded totals of `metrics`.
fn totals(metrics: &Metrics) -> (u64, u64, u64) {
    (
        succeeded(&metrics.db_sync),
        succeeded(&metrics.db_purge),
        succeeded(&metrics.service_remove),
    )
}

async fn wait_totals(metrics: &Metrics, want: (u64, u64, u64)) {
    let seen = eventually(&format!("the Job totals at {want:?}"), || async {
        (totals(metrics) == want).then_some(())
    })
    .await;
    assert!(seen.is_ok(), "totals {:?}, want {want:?}", totals(metrics));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_counters_read_the_same_after_the_operator_process_is_replaced() {
    let mut h = Harness::start().await.unwrap();
    quick_schema_jobs(&h.cluster).unwrap();
    purge_rule(&h.cluster, PodOutcome::success()).unwrap();
    service_remove_rule(
        &h.cluster,
        PodOutcome::success(),
        Duration::from_millis(200),
    )
    .unwrap();
    cinder_with_nfs(&h.client, CINDER, "keep", serde_json::json!({}))
        .await
        .unwrap();
    create_nfs_backend(&h.client, "leave", CINDER)
        .await
        .unwrap();
    wait_cinder_condition(
        &h.client,
        CINDER,
        "VolumeServicesReady",
        "True",
        "AllVolumeServicesReady",
    )
    .await
    .unwrap();
    run_cronjob_now(&h.cluster, "ctr-db-purge").await.unwrap();
    delete_backend(&h.client, "leave").await.unwrap();
    wait_backend_gone(&h.client, "leave").await.unwrap();
    wait_totals(&h.ctx.metrics, (1, 1, 1)).await;
    let jobs: Vec<Job> = h
        .api::<Job>()
        .list(&Default::default())
        .await
        .unwrap()
        .items;
    assert!(jobs.len() >= 3, "{jobs:?}");
    for j in &jobs {
        let annotations = j.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            annotations
                .get("cinder.c5c3.io/counted")
                .map(String::as_str),
            Some("succeeded"),
            "Job {:?} is not marked counted",
            j.metadata.name
        );
    }

    // The process is replaced.
    h.stop_operator().await.unwrap();
    let second = SecondOperator::start(h.client.clone(), "second-operator")
        .await
        .unwrap();
    // Several passes of the second process, each through every step (all converged).
    eventually("a full pass of the second process", || async {
        let labels = cinder_operator::metrics::CinderLabels {
            cinder: CINDER.to_string(),
            namespace: NS.to_string(),
        };
        (second.ctx.metrics.cinder_ready.get_or_create(&labels).get() == 1).then_some(())
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        totals(&second.ctx.metrics),
        (0, 0, 0),
        "the second process counted Jobs the first had counted"
    );

    // A new run is counted by the process that sees it finish.
    run_cronjob_now(&h.cluster, "ctr-db-purge").await.unwrap();
    wait_totals(&second.ctx.metrics, (0, 1, 0)).await;
    second.stop().await.unwrap();
    h.stop().await.unwrap();
}
