//! The Events `kubectl describe cinder` shows, published by `cinder-operator`: each condition
//! transition (the condition's reason, "<Type> is <Status> (was …)"), the db-sync Job started and
//! succeeded, each upgrade phase started and finished; no event twice as two objects (repeats
//! are an event series); and none while nothing changes (passes triggered on an unchanged
//! Cinder publish nothing).

use cinder_e2e::database_helpers::*;
use cinder_e2e::group_helpers::passes;
use cinder_e2e::observability_helpers::test_telemetry;
use cinder_e2e::*;
use cinder_operator::crd::Cinder;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use std::collections::BTreeMap;
use std::time::Duration;

/// Every events.k8s.io Event regarding Cinder `name`.
async fn events_of(client: &kube::Client, name: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), NS);
    api.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Cinder"))
        .collect()
}

/// (reason, note) → how often it happened (series counts included).
fn tally(events: &[Event]) -> BTreeMap<(String, String), i32> {
    let mut out = BTreeMap::new();
    for e in events {
        let count = e.series.as_ref().map_or(1, |s| s.count);
        *out.entry((
            e.reason.clone().unwrap_or_default(),
            e.note.clone().unwrap_or_default(),
        ))
        .or_default() += count;
    }
    out
}

fn with_reason<'a>(events: &'a [Event], reason: &str) -> Vec<&'a Event> {
    events
        .iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

/// The conditions as (type, status, reason).
async fn condition_states(client: &kube::Client, name: &str) -> Vec<(String, String, String)> {
    cinder_conditions(client, name)
        .await
        .into_iter()
        .map(|c| (c.type_, c.status, c.reason))
        .collect()
}

/// Makes the operator run passes on an unchanged spec (a label change is a watch event).
async fn poke(client: &kube::Client, name: &str, n: u32) {
    let api: Api<Cinder> = Api::namespaced(client.clone(), NS);
    let patch =
        serde_json::json!({"metadata": {"labels": {"observability.test/poke": n.to_string()}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transitions_jobs_and_phases_become_events_and_steady_state_none() {
    test_telemetry();
    let h = Harness::start().await.unwrap();
    database_environment(&h.client, "events").await.unwrap();
    create_cinder(
        &h.client,
        "ev",
        serde_json::json!({"openStackRelease": "2025.2", "image": {"repository": "registry.example/cinder", "tag": "2025.2"}}),
    )
    .await
    .unwrap();
    wait_cinder_condition(&h.client, "ev", "DatabaseReady", "True", "DatabaseSynced")
        .await
        .unwrap();
    // The transition events are published after the status write that the condition wait sees.
    let events = eventually("the db-sync events", || async {
        let e = events_of(&h.client, "ev").await;
        (!with_reason(&e, "JobSucceeded").is_empty()
            && !with_reason(&e, "DatabaseSynced").is_empty())
        .then_some(e)
    })
    .await
    .unwrap();
    for e in &events {
        assert_eq!(
            e.reporting_controller.as_deref(),
            Some("cinder-operator"),
            "{e:?}"
        );
    }
    let notes = |reason: &str| -> Vec<String> {
        with_reason(&events, reason)
            .iter()
            .map(|e| e.note.clone().unwrap_or_default())
            .collect()
    };
    assert!(
        notes("SecretsAvailable")
            .iter()
            .any(|n| n.starts_with("SecretsReady is True (was ")),
        "{events:#?}"
    );
    assert!(
        notes("DatabaseSynced")
            .iter()
            .any(|n| n.starts_with("DatabaseReady is True (was ")),
        "{events:#?}"
    );
    assert!(
        notes("JobStarted").iter().any(|n| n.contains("ev-db-sync")),
        "{events:#?}"
    );
    assert!(
        notes("JobSucceeded")
            .iter()
            .any(|n| n.contains("ev-db-sync")),
        "{events:#?}"
    );
    // No Event object twice: a repeat is counted in its series.
    let mut seen = BTreeMap::new();
    for e in &events {
        let key = (e.reason.clone(), e.note.clone());
        assert!(
            seen.insert(key.clone(), ()).is_none(),
            "two Event objects for {key:?}"
        );
    }

    // Steady state: passes on an unchanged status publish nothing.
    let mut quiet = false;
    for round in 0..10u32 {
        let before = condition_states(&h.client, "ev").await;
        // Events of a transition are published after the status write that made it: let those
        // of the transitions already in `before` land first.
        let mut events_before = tally(&events_of(&h.client, "ev").await);
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let again = tally(&events_of(&h.client, "ev").await);
            if again == events_before {
                break;
            }
            events_before = again;
        }
        let before_passes = passes(&h, "ev").await;
        poke(&h.client, "ev", round).await;
        eventually("two more passes", || async {
            (passes(&h, "ev").await >= before_passes + 2).then_some(())
        })
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let after = condition_states(&h.client, "ev").await;
        let events_after = tally(&events_of(&h.client, "ev").await);
        if before == after && condition_states(&h.client, "ev").await == after {
            assert_eq!(
                events_before, events_after,
                "events were published while the status stayed {after:?}"
            );
            quiet = true;
            break;
        }
    }
    assert!(quiet, "the Cinder's status never settled");

    // An upgrade: each phase starts and finishes once.
    set_release(&h.client, "ev", "2026.1").await.unwrap();
    wait_status(&h.client, "ev", "installedRelease 2026.1", |s| {
        s.installed_release.as_deref() == Some("2026.1") && s.upgrade_phase.is_none()
    })
    .await
    .unwrap();
    let events = eventually("the phase events", || async {
        let e = events_of(&h.client, "ev").await;
        (with_reason(&e, "UpgradePhaseFinished").len() == 4).then_some(e)
    })
    .await;
    let events = match events {
        Ok(e) => e,
        Err(e) => panic!("{e}: {:#?}", tally(&events_of(&h.client, "ev").await)),
    };
    for phase in ["Expanding", "Migrating", "RollingUpdate", "Contracting"] {
        for (reason, verb) in [
            ("UpgradePhaseStarted", "started"),
            ("UpgradePhaseFinished", "finished"),
        ] {
            let matching: Vec<_> = with_reason(&events, reason)
                .into_iter()
                .filter(|e| {
                    e.note.as_deref().unwrap_or_default()
                        == format!("upgrade phase {phase} {verb} (2025.2 → 2026.1)")
                })
                .collect();
            assert_eq!(matching.len(), 1, "{reason} {phase}: {events:#?}");
        }
    }
    // Each phase Job has its own started and succeeded events.
    for job in ["ev-db-expand", "ev-db-migrate", "ev-db-contract"] {
        for reason in ["JobStarted", "JobSucceeded"] {
            assert!(
                with_reason(&events, reason).iter().any(|e| e
                    .note
                    .as_deref()
                    .unwrap_or_default()
                    .contains(job)),
                "{reason} {job}: {events:#?}"
            );
        }
    }
    h.stop().await.unwrap();
}
