//! The Migrating phase's report: once the `{name}-db-migrate` Job succeeded, the real
//! `cinder-status upgrade check` exit code is read from the termination message of the Job's
//! succeeded pod (else its newest), counting only pods carrying the Job's UID, through an
//! uncached API list, and turned into an UpgradeCheckCompleted (0) or UpgradeCheckWarnings
//! (1 / 2) event on the Cinder, or an event saying the exit code is unavailable. Once per Job UID.

use super::jobs::{CONTROLLER_UID_LABEL, job_pods};
use super::services::DatabaseServices;
use crate::crd::Cinder;
use crate::planning::upgrade_check::{self, PodSummary, UpgradeCheckEvent};
use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use kube::runtime::events::{Event, EventType};

/// What the planner needs of a pod.
pub(crate) fn pod_summary(pod: &Pod) -> PodSummary {
    let status = pod.status.as_ref();
    PodSummary {
        name: pod.metadata.name.clone().unwrap_or_default(),
        job_uid: pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| {
                l.get(CONTROLLER_UID_LABEL)
                    .or_else(|| l.get("controller-uid"))
            })
            .cloned(),
        succeeded: status.and_then(|s| s.phase.as_deref()) == Some("Succeeded"),
        created: pod
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(0, |t| t.0.as_second()),
        termination_message: status
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|cs| cs.first())
            .and_then(|c| c.state.as_ref())
            .and_then(|s| s.terminated.as_ref())
            .and_then(|t| t.message.clone()),
    }
}

/// The event for the migrate Job `uid`'s pods (None when they could not be read).
pub(crate) fn check_event(pods: Option<&[Pod]>, uid: &str) -> UpgradeCheckEvent {
    let code = pods.and_then(|pods| {
        let summaries: Vec<PodSummary> = pods.iter().map(pod_summary).collect();
        upgrade_check::select_pod(&summaries, uid)
            .and_then(|p| p.termination_message.as_deref())
            .and_then(upgrade_check::parse_exit_code)
    });
    upgrade_check::interpret(code)
}

/// Reads the migrate Job's pods and publishes the event, once per Job UID.
pub(crate) async fn report_upgrade_check(
    client: &kube::Client,
    services: &DatabaseServices,
    cinder: &Cinder,
    job_uid: &str,
) {
    if !services.first_report(job_uid).await {
        return;
    }
    let ns = cinder.metadata.namespace.as_deref().unwrap_or_default();
    let pods = match job_pods(client, ns, job_uid).await {
        Ok(pods) => Some(pods),
        Err(e) => {
            tracing::warn!(namespace = ns, error = %e, "cannot read the upgrade-check pods");
            None
        }
    };
    let ev = check_event(pods.as_deref(), job_uid);
    let event = Event {
        type_: if ev.reason == crate::conditions::event_reason::UPGRADE_CHECK_WARNINGS {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: ev.reason.to_string(),
        note: Some(ev.message),
        action: "UpgradeCheck".to_string(),
        secondary: None,
    };
    let reference = cinder.object_ref(&());
    if let Err(e) = services.recorder().publish(&event, &reference).await {
        tracing::warn!(namespace = ns, error = %e, "cannot publish the upgrade-check event");
        services.unreport(job_uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, uid: &str, phase: &str, created: &str, message: Option<&str>) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "creationTimestamp": created,
                "labels": {"batch.kubernetes.io/controller-uid": uid}},
            "status": {"phase": phase, "containerStatuses": [{
                "name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": if phase == "Succeeded" {0} else {3}, "message": message}}
            }]}
        }))
        .unwrap()
    }

    #[test]
    fn the_succeeded_pod_of_this_job_decides() {
        let pods = vec![
            pod(
                "old",
                "other",
                "Succeeded",
                "2026-01-01T00:00:09Z",
                Some("0"),
            ),
            pod("a", "u", "Failed", "2026-01-01T00:00:01Z", Some("3")),
            pod("b", "u", "Succeeded", "2026-01-01T00:00:02Z", Some("2")),
        ];
        let ev = check_event(Some(&pods), "u");
        assert_eq!(ev.reason, "UpgradeCheckWarnings");
        assert!(ev.message.contains("exit code 2"), "{}", ev.message);
        let clean = vec![pod(
            "b",
            "u",
            "Succeeded",
            "2026-01-01T00:00:02Z",
            Some("0"),
        )];
        assert_eq!(
            check_event(Some(&clean), "u").reason,
            "UpgradeCheckCompleted"
        );
    }

    #[test]
    fn unreadable_pods_say_the_code_is_unavailable() {
        assert!(
            check_event(None, "u")
                .message
                .contains("exit code unavailable")
        );
        let none: Vec<Pod> = Vec::new();
        assert!(
            check_event(Some(&none), "u")
                .message
                .contains("exit code unavailable")
        );
    }
}
