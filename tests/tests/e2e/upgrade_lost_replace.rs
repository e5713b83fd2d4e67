//! An upgrade never contracts under old processes: while every replace of the operator's
//! Deployments is answered 409 (another writer keeps winning), the RollingUpdate phase waits
//! with the scheduler WaitingForScheduler, since the live object still carries the old spec
//! hash, however converged its old rollout is; once the replaces go through, the upgrade
//! completes.

use cinder_e2e::database_helpers::*;
use cinder_e2e::*;
use cinder_operator::crd::UpgradePhase;
use cinder_sim::ErrorRule;
use cinder_sim::controllers::PodOutcome;
use std::time::{Duration, Instant};

const AGENT: &str = "cinder-operator-lost-replace";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replace_lost_to_a_conflict_holds_the_rolling_update() {
    let h = Harness::start_with(HarnessConfig {
        operator_user_agent: Some(AGENT.to_string()),
        ..HarnessConfig::default()
    })
    .await
    .unwrap();
    for suffix in ["-db-expand", "-db-migrate", "-db-contract"] {
        job_rule(
            &h.cluster,
            suffix,
            PodOutcome::success(),
            Duration::from_millis(300),
        )
        .unwrap();
    }
    database_environment(&h.client, "lr").await.unwrap();
    create_cinder(
        &h.client,
        "lr",
        serde_json::json!({"openStackRelease": "2025.2",
            "image": {"repository": "registry.example/cinder", "tag": "2025.2"}}),
    )
    .await
    .unwrap();
    wait_cinder_condition(
        &h.client,
        "lr",
        "DeploymentReady",
        "True",
        "DeploymentReady",
    )
    .await
    .unwrap();

    let rule = ErrorRule {
        user_agent: Some(AGENT.to_string()),
        ..ErrorRule::always(Some("update"), Some("deployments"), 409)
    };
    h.cluster.faults().add_error_rule(rule);
    set_release(&h.client, "lr", "2026.1").await.unwrap();
    wait_status(&h.client, "lr", "phase RollingUpdate", |s| {
        s.upgrade_phase == Some(UpgradePhase::RollingUpdate)
    })
    .await
    .unwrap();
    let c = wait_cinder_condition(
        &h.client,
        "lr",
        "SchedulerReady",
        "False",
        "WaitingForScheduler",
    )
    .await
    .unwrap();
    assert!(c.message.contains("lr-scheduler"), "{}", c.message);

    // Several passes (the step polls every 10 s): the phase stays, nothing contracts.
    let until = Instant::now() + Duration::from_secs(15);
    while Instant::now() < until {
        let s = cinder_status(&h.client, "lr").await;
        assert_eq!(
            s.upgrade_phase,
            Some(UpgradePhase::RollingUpdate),
            "the upgrade moved on while no Deployment could be replaced"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let jobs: kube::Api<k8s_openapi::api::batch::v1::Job> = h.api();
    assert!(jobs.get_opt("lr-db-contract").await.unwrap().is_none());

    h.cluster.faults().update(|f| f.errors.clear());
    wait_status(&h.client, "lr", "installedRelease 2026.1", |s| {
        s.installed_release.as_deref() == Some("2026.1") && s.upgrade_phase.is_none()
    })
    .await
    .unwrap();
    h.stop().await.unwrap();
}
