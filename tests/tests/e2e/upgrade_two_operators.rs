//! Two operator processes (two OperatorContexts with their own identities and actor threads, in
//! one process) reconcile the same Cinder through an install and a release upgrade against one
//! embedded cluster: the simulator's Job run record never shows two Jobs of that database
//! running at once, and the upgrade completes.

use cinder_e2e::database_helpers::*;
use cinder_e2e::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_operators_never_run_two_jobs_of_one_database_at_once() {
    let h = Harness::start().await.unwrap();
    quick_schema_jobs(&h.cluster).unwrap();
    let second = SecondOperator::start(h.client.clone(), "second-operator")
        .await
        .unwrap();
    assert_ne!(second.ctx.identity, h.ctx.identity);

    database_environment(&h.client, "twoops").await.unwrap();
    create_cinder(
        &h.client,
        "pair",
        serde_json::json!({"openStackRelease": "2025.2", "image": {"repository": "registry.example/cinder", "tag": "2025.2"}}),
    )
    .await
    .unwrap();
    wait_status(&h.client, "pair", "installedRelease 2025.2", |s| {
        s.installed_release.as_deref() == Some("2025.2")
    })
    .await
    .unwrap();

    set_release(&h.client, "pair", "2026.1").await.unwrap();
    wait_status(&h.client, "pair", "phase RollingUpdate (or later)", |s| {
        matches!(
            s.upgrade_phase,
            Some(
                cinder_operator::crd::UpgradePhase::RollingUpdate
                    | cinder_operator::crd::UpgradePhase::Contracting
            )
        ) || s.installed_release.as_deref() == Some("2026.1")
    })
    .await
    .unwrap();
    wait_status(
        &h.client,
        "pair",
        "installedRelease 2026.1, no phase",
        |s| {
            s.installed_release.as_deref() == Some("2026.1")
                && s.upgrade_phase.is_none()
                && s.target_release.is_none()
        },
    )
    .await
    .unwrap();
    wait_cinder_condition(&h.client, "pair", "DatabaseReady", "True", "DatabaseSynced")
        .await
        .unwrap();

    let runs = database_job_runs(&h.cluster, "pair");
    assert_serial_runs(
        &runs,
        &[
            "pair-db-sync",
            "pair-db-expand",
            "pair-db-migrate",
            "pair-db-contract",
        ],
    );

    second.stop().await.unwrap();
    h.stop().await.unwrap();
}
