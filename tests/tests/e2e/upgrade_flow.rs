//! The release upgrade end to end: 2025.2 → 2026.1 walks Expanding, Migrating, RollingUpdate,
//! Contracting and promotes installedRelease; the migrate Job's real exit code 2 becomes an
//! UpgradeCheckWarnings event; a downgrade and a two-release jump are refused with their reasons;
//! returning to the installed release mid-upgrade aborts (phase Jobs deleted, state cleared).
//!
//! The RollingUpdate → Contracting flip is the Deployment step's (once every workload rolled onto
//! the new image); the test waits for it like for every other phase.

use cinder_e2e::database_helpers::*;
use cinder_e2e::*;
use cinder_operator::crd::UpgradePhase;
use cinder_sim::controllers::PodOutcome;
use k8s_openapi::api::batch::v1::Job;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The phases seen so far, each change once.
type PhaseLog = Arc<Mutex<Vec<Option<UpgradePhase>>>>;

/// Records every distinct consecutive upgradePhase value of Cinder `name` until stopped.
fn record_phases(
    client: kube::Client,
    name: &'static str,
) -> (PhaseLog, tokio::task::JoinHandle<()>) {
    let seen: PhaseLog = Arc::default();
    let out = seen.clone();
    let task = tokio::spawn(async move {
        loop {
            let phase = cinder_status(&client, name).await.upgrade_phase;
            {
                let mut seen = out.lock().unwrap();
                if seen.last() != Some(&phase) {
                    seen.push(phase);
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    (seen, task)
}

async fn installed(h: &Harness, name: &str, release: &str) {
    wait_cinder_condition(&h.client, name, "DatabaseReady", "True", "DatabaseSynced")
        .await
        .unwrap();
    wait_status(
        &h.client,
        name,
        &format!("installedRelease {release}"),
        |s| s.installed_release.as_deref() == Some(release) && s.upgrade_phase.is_none(),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_walks_the_phases_and_reports_the_check() {
    let h = Harness::start().await.unwrap();
    // Each phase Job runs long enough for every phase to be seen; the upgrade check exits 2,
    // which the wrapper turns into exit 0 with "2" in the termination message.
    for suffix in ["-db-expand", "-db-contract"] {
        job_rule(
            &h.cluster,
            suffix,
            PodOutcome::success(),
            Duration::from_secs(2),
        )
        .unwrap();
    }
    job_rule(
        &h.cluster,
        "-db-migrate",
        PodOutcome::exit(0, "2"),
        Duration::from_secs(2),
    )
    .unwrap();
    database_environment(&h.client, "upgrade").await.unwrap();
    create_cinder(
        &h.client,
        "up",
        serde_json::json!({"openStackRelease": "2025.2", "image": {"repository": "registry.example/cinder", "tag": "2025.2"}}),
    )
    .await
    .unwrap();
    installed(&h, "up", "2025.2").await;

    let (phases, recorder) = record_phases(h.client.clone(), "up");
    set_release(&h.client, "up", "2026.1").await.unwrap();
    let s = wait_status(&h.client, "up", "phase RollingUpdate (or later)", |s| {
        matches!(
            s.upgrade_phase,
            Some(UpgradePhase::RollingUpdate | UpgradePhase::Contracting)
        ) || s.installed_release.as_deref() == Some("2026.1")
    })
    .await
    .unwrap();
    assert_eq!(
        s.target_release
            .as_deref()
            .or(s.installed_release.as_deref()),
        Some("2026.1")
    );
    installed(&h, "up", "2026.1").await;
    let s = cinder_status(&h.client, "up").await;
    assert_eq!((s.target_release, s.upgrade_phase), (None, None));
    // the recorder polls on its own: let it see the end of the upgrade before stopping it
    eventually("the recorder sees the upgrade end", || async {
        (phases.lock().unwrap().last() == Some(&None)).then_some(())
    })
    .await
    .unwrap();
    recorder.abort();

    let seen = phases.lock().unwrap().clone();
    let walk: Vec<Option<UpgradePhase>> = seen.into_iter().skip_while(Option::is_none).collect();
    assert_eq!(
        walk,
        vec![
            Some(UpgradePhase::Expanding),
            Some(UpgradePhase::Migrating),
            Some(UpgradePhase::RollingUpdate),
            Some(UpgradePhase::Contracting),
            None
        ]
    );

    // Exit code 2 became a warning event on the Cinder, once.
    let events = eventually("the UpgradeCheckWarnings event", || async {
        let e = cinder_events(&h.client, "up", "UpgradeCheckWarnings").await;
        (!e.is_empty()).then_some(e)
    })
    .await
    .unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    let note = events[0].note.clone().unwrap_or_default();
    assert!(note.contains("exit code 2"), "{note}");
    assert!(
        cinder_events(&h.client, "up", "UpgradeCheckCompleted")
            .await
            .is_empty()
    );

    // Each phase ran its own Job, one database Job at a time.
    let runs = database_job_runs(&h.cluster, "up");
    for name in ["up-db-expand", "up-db-migrate", "up-db-contract"] {
        assert!(runs.iter().any(|r| r.name == name), "{name} in {runs:?}");
    }
    assert!(overlapping(&runs).is_empty(), "{:?}", overlapping(&runs));
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downgrade_and_jump_are_refused_and_going_back_aborts() {
    let h = Harness::start().await.unwrap();
    database_environment(&h.client, "refuse").await.unwrap();
    create_cinder(&h.client, "rf", serde_json::json!({}))
        .await
        .unwrap();
    installed(&h, "rf", "2026.1").await;

    set_release(&h.client, "rf", "2025.2").await.unwrap();
    wait_cinder_condition(
        &h.client,
        "rf",
        "DatabaseReady",
        "False",
        "DowngradeNotSupported",
    )
    .await
    .unwrap();
    set_release(&h.client, "rf", "2027.1").await.unwrap();
    let c = wait_cinder_condition(
        &h.client,
        "rf",
        "DatabaseReady",
        "False",
        "UpgradePathInvalid",
    )
    .await
    .unwrap();
    assert!(c.message.contains("2026.2"), "{}", c.message);
    let s = cinder_status(&h.client, "rf").await;
    assert_eq!(
        (
            s.installed_release.as_deref(),
            s.target_release,
            s.upgrade_phase
        ),
        (Some("2026.1"), None, None)
    );

    // Mid-upgrade return to the installed release: the expand Job is still running.
    job_rule(
        &h.cluster,
        "-db-expand",
        PodOutcome::success(),
        Duration::from_secs(600),
    )
    .unwrap();
    set_release(&h.client, "rf", "2026.2").await.unwrap();
    wait_status(&h.client, "rf", "phase Expanding", |s| {
        s.upgrade_phase == Some(UpgradePhase::Expanding)
            && s.target_release.as_deref() == Some("2026.2")
    })
    .await
    .unwrap();
    let jobs: kube::Api<Job> = h.api();
    eventually("the expand Job", || async {
        jobs.get_opt("rf-db-expand")
            .await
            .ok()
            .flatten()
            .map(|_| ())
    })
    .await
    .unwrap();
    set_release(&h.client, "rf", "2026.1").await.unwrap();
    installed(&h, "rf", "2026.1").await;
    let s = cinder_status(&h.client, "rf").await;
    assert_eq!((s.target_release, s.upgrade_phase), (None, None));
    eventually("the expand Job is deleted", || async {
        jobs.get_opt("rf-db-expand")
            .await
            .ok()
            .and_then(|j| j.is_none().then_some(()))
    })
    .await
    .unwrap();
    let runs = database_job_runs(&h.cluster, "rf");
    assert!(overlapping(&runs).is_empty(), "{:?}", overlapping(&runs));
    h.stop().await.unwrap();
}
