//! DBPurge end to end: a failed purge run gives DBPurgeReady=False/DBPurgeJobFailed with a
//! Warning event, a later successful run turns it back to DBPurgeScheduled, and
//! spec.dbPurge.suspend gives DBPurgeSuspended (True) with the CronJob suspended.

use cinder_e2e::database_helpers::*;
use cinder_e2e::workload_helpers::*;
use cinder_e2e::*;
use cinder_operator::crd::Cinder;
use cinder_sim::controllers::config::PodOutcome;
use k8s_openapi::api::batch::v1::CronJob;
use kube::api::{Patch, PatchParams};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_then_successful_runs_then_suspend() {
    let h = Harness::start().await.unwrap();
    database_environment(&h.client, "pg").await.unwrap();
    create_cinder(&h.client, "pg", serde_json::json!({}))
        .await
        .unwrap();
    wait_cinder_condition(&h.client, "pg", "DBPurgeReady", "True", "DBPurgeScheduled")
        .await
        .unwrap();

    purge_rule(&h.cluster, PodOutcome::exit(1, "")).unwrap();
    run_cronjob_now(&h.cluster, "pg-db-purge").await.unwrap();
    let failed =
        wait_cinder_condition(&h.client, "pg", "DBPurgeReady", "False", "DBPurgeJobFailed")
            .await
            .unwrap();
    assert!(
        failed.message.contains("pg-db-purge-"),
        "{}",
        failed.message
    );
    let warnings = eventually("a DBPurgeJobFailed event", || async {
        let e = cinder_events(&h.client, "pg", "DBPurgeJobFailed").await;
        (!e.is_empty()).then_some(e)
    })
    .await
    .unwrap();
    assert_eq!(warnings[0].type_.as_deref(), Some("Warning"));

    purge_rule(&h.cluster, PodOutcome::success()).unwrap();
    run_cronjob_now(&h.cluster, "pg-db-purge").await.unwrap();
    let ok = wait_cinder_condition(&h.client, "pg", "DBPurgeReady", "True", "DBPurgeScheduled")
        .await
        .unwrap();
    assert!(ok.message.contains("succeeded"), "{}", ok.message);

    let api = h.api::<Cinder>();
    let patch = serde_json::json!({"spec": {"dbPurge": {"suspend": true}}});
    api.patch("pg", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_cinder_condition(&h.client, "pg", "DBPurgeReady", "True", "DBPurgeSuspended")
        .await
        .unwrap();
    let cj = h.api::<CronJob>().get("pg-db-purge").await.unwrap();
    assert_eq!(cj.spec.suspend, Some(true));
    h.stop().await.unwrap();
}
