//! The Kubernetes Events a user reads in `kubectl describe cinder`: each transition of Ready and
//! of every sub-condition, each upgrade phase started and finished, each Job the operator starts
//! and sees finish, each device Lease taken over from a holder whose Lease expired. They are published through kube-runtime's [`Recorder`] under the operator's
//! name (`cinder-operator`), so a repeated identical event becomes one event series with a count
//! instead of a new object. A pass that changes nothing publishes nothing: events come from
//! differences between the status before and after a pass ([`status_transitions`], pure) and
//! from Jobs seen for the first time.
//!
//! The Recorder keys a series on (type, reason, action, regarding object), not on the note, so
//! each distinct happening gets its own action: the condition type for a transition
//! (`DatabaseReady`), `Upgrade<Phase>` for a phase, `RunJob/<job kind>` for a Job. The same
//! transition seen again then counts in its series instead of hiding under another's note.
//!
//! Notes carry condition reasons and messages, Job names and durations only; no secret value
//! reaches them (condition messages never hold one).

use crate::conditions::event_reason;
use crate::crd::{Cinder, CinderStatus};
use crate::metrics::JobResult;
use cinder_lease::DeviceGuard;
use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use std::time::Duration;

/// The controller name events are reported under.
pub(crate) const REPORTER: &str = "cinder-operator";

/// The action of the events of upgrade phase `phase`.
fn upgrade_action(phase: crate::crd::UpgradePhase) -> String {
    format!("Upgrade{}", phase.as_str())
}

/// The action of device takeover events.
const ACTION_TAKE_OVER: &str = "TakeOverDevice";

/// The action of the events of a Job of kind `what`.
fn job_action(what: &str) -> String {
    format!("RunJob/{what}")
}

/// Longest note sent (the API refuses notes above 1 KiB).
const MAX_NOTE: usize = 1000;

/// A recorder reporting as [`REPORTER`] from `instance` (this replica's identity).
pub(crate) fn recorder(client: kube::Client, instance: Option<String>) -> Recorder {
    Recorder::new(
        client,
        Reporter {
            controller: REPORTER.to_string(),
            instance,
        },
    )
}

fn note(text: String) -> Option<String> {
    if text.len() <= MAX_NOTE {
        return Some(text);
    }
    let mut cut = MAX_NOTE;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    Some(format!("{}…", &text[..cut]))
}

/// The events for going from `before` to `after`: one per condition whose status or reason
/// changed (or that appeared), Warning when it turned False; one per upgrade phase left
/// (finished) and entered (started). Equal statuses give none.
pub(crate) fn status_transitions(before: &CinderStatus, after: &CinderStatus) -> Vec<Event> {
    let mut events = Vec::new();
    for c in &after.conditions {
        let old = before.conditions.iter().find(|o| o.type_ == c.type_);
        if old.is_some_and(|o| o.status == c.status && o.reason == c.reason) {
            continue;
        }
        let from = old.map_or("absent".to_string(), |o| {
            format!("{} ({})", o.status, o.reason)
        });
        let message = if c.message.is_empty() {
            String::new()
        } else {
            format!(": {}", c.message)
        };
        events.push(Event {
            type_: if c.status == "False" {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: c.reason.clone(),
            note: note(format!("{} is {} (was {from}){message}", c.type_, c.status)),
            action: c.type_.clone(),
            secondary: None,
        });
    }
    if before.upgrade_phase != after.upgrade_phase {
        let release = |s: &CinderStatus| {
            format!(
                "{} → {}",
                s.installed_release.as_deref().unwrap_or("?"),
                s.target_release.as_deref().unwrap_or("?")
            )
        };
        if let Some(done) = before.upgrade_phase {
            events.push(Event {
                type_: EventType::Normal,
                reason: event_reason::UPGRADE_PHASE_FINISHED.to_string(),
                note: note(format!(
                    "upgrade phase {} finished ({})",
                    done.as_str(),
                    release(before)
                )),
                action: upgrade_action(done),
                secondary: None,
            });
        }
        if let Some(next) = after.upgrade_phase {
            events.push(Event {
                type_: EventType::Normal,
                reason: event_reason::UPGRADE_PHASE_STARTED.to_string(),
                note: note(format!(
                    "upgrade phase {} started ({})",
                    next.as_str(),
                    release(after)
                )),
                action: upgrade_action(next),
                secondary: None,
            });
        }
    }
    events
}

async fn publish(recorder: &Recorder, cinder: &Cinder, event: &Event) {
    if let Err(e) = recorder.publish(event, &cinder.object_ref(&())).await {
        tracing::warn!(
            cinder = cinder.metadata.name.as_deref().unwrap_or_default(),
            namespace = cinder.metadata.namespace.as_deref().unwrap_or_default(),
            reason = %event.reason,
            error = %e,
            "publishing an event failed"
        );
    }
}

/// Publishes the events of `cinder`'s status turning into `after` (after the status write).
pub(crate) async fn status_changed(recorder: &Recorder, cinder: &Cinder, after: &CinderStatus) {
    let before = cinder.status.clone().unwrap_or_default();
    for event in status_transitions(&before, after) {
        publish(recorder, cinder, &event).await;
    }
}

/// Publishes that the operator created the Job `job` (`what`: what it does).
pub(crate) async fn job_started(recorder: &Recorder, cinder: &Cinder, job: &str, what: &str) {
    let event = Event {
        type_: EventType::Normal,
        reason: event_reason::JOB_STARTED.to_string(),
        note: note(format!("started the {what} Job {job}")),
        action: job_action(what),
        secondary: None,
    };
    publish(recorder, cinder, &event).await;
}

/// Publishes that the Job `job` ended (call once per Job UID).
pub(crate) async fn job_finished(
    recorder: &Recorder,
    cinder: &Cinder,
    job: &str,
    what: &str,
    result: JobResult,
    duration: Duration,
) {
    let (type_, reason) = match result {
        JobResult::Succeeded => (EventType::Normal, event_reason::JOB_SUCCEEDED),
        JobResult::Failed => (EventType::Warning, event_reason::JOB_FAILED),
    };
    let event = Event {
        type_,
        reason: reason.to_string(),
        note: note(format!(
            "the {what} Job {job} {} after {} s",
            result.as_str(),
            duration.as_secs()
        )),
        action: job_action(what),
        secondary: None,
    };
    publish(recorder, cinder, &event).await;
}

/// Publishes a Warning with `reason` and `note` under `action` (a step's own trouble, such as a
/// failed purge Job or an HPA that cannot scale).
pub(crate) async fn warning(
    recorder: &Recorder,
    cinder: &Cinder,
    reason: &str,
    action: &str,
    text: String,
) {
    let event = Event {
        type_: EventType::Warning,
        reason: reason.to_string(),
        note: note(text),
        action: action.to_string(),
        secondary: None,
    };
    publish(recorder, cinder, &event).await;
}

/// Publishes that `guard` took its device over from another holder whose Lease had expired
/// (nothing when it did not).
pub(crate) async fn device_taken_over(
    recorder: &Recorder,
    cinder: &Cinder,
    guard: &DeviceGuard<'_>,
) {
    let Some(previous) = guard.taken_over_from() else {
        return;
    };
    let event = Event {
        type_: EventType::Warning,
        reason: event_reason::DEVICE_TAKEN_OVER.to_string(),
        note: note(format!(
            "took over device {} from {previous}, whose Lease had expired",
            guard.device()
        )),
        action: ACTION_TAKE_OVER.to_string(),
        secondary: None,
    };
    publish(recorder, cinder, &event).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conditions::{Cond, set_condition};
    use crate::crd::UpgradePhase;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn with(conds: &[Cond], phase: Option<UpgradePhase>) -> CinderStatus {
        let mut status = CinderStatus {
            upgrade_phase: phase,
            installed_release: Some("2025.2".into()),
            target_release: phase.map(|_| "2026.1".into()),
            ..Default::default()
        };
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        for c in conds {
            set_condition(&mut status.conditions, c, Some(1), &now);
        }
        status
    }

    #[test]
    fn an_unchanged_status_publishes_nothing() {
        let s = with(
            &[Cond::true_("SecretsReady", "SecretsAvailable", "ok")],
            Some(UpgradePhase::Migrating),
        );
        assert!(status_transitions(&s, &s.clone()).is_empty());
        // A new message under the same status and reason is not a transition.
        let t = with(
            &[Cond::true_("SecretsReady", "SecretsAvailable", "other")],
            Some(UpgradePhase::Migrating),
        );
        assert!(status_transitions(&s, &t).is_empty());
    }

    #[test]
    fn each_condition_transition_is_one_event() {
        let before = with(
            &[
                Cond::false_("SecretsReady", "SecretNotFound", "db missing"),
                Cond::false_("Ready", "NotAllReady", "SecretsReady"),
            ],
            None,
        );
        let after = with(
            &[
                Cond::true_("SecretsReady", "SecretsAvailable", ""),
                Cond::false_("Ready", "NotAllReady", "DatabaseReady"),
                Cond::false_("DatabaseReady", "DatabaseProvisioning", "waiting"),
            ],
            None,
        );
        let events = status_transitions(&before, &after);
        let summary: Vec<(String, String)> = events
            .iter()
            .map(|e| (e.reason.clone(), e.note.clone().unwrap_or_default()))
            .collect();
        assert_eq!(
            summary,
            vec![
                (
                    "SecretsAvailable".into(),
                    "SecretsReady is True (was False (SecretNotFound))".into()
                ),
                (
                    "DatabaseProvisioning".into(),
                    "DatabaseReady is False (was absent): waiting".into()
                ),
            ]
        );
        assert_eq!(events[0].type_, EventType::Normal);
        assert_eq!(events[1].type_, EventType::Warning);
    }

    #[test]
    fn phase_changes_finish_one_phase_and_start_the_next() {
        let a = with(&[], Some(UpgradePhase::Expanding));
        let b = with(&[], Some(UpgradePhase::Migrating));
        let reasons: Vec<String> = status_transitions(&a, &b)
            .into_iter()
            .map(|e| format!("{}: {}", e.reason, e.note.unwrap_or_default()))
            .collect();
        assert_eq!(
            reasons,
            vec![
                "UpgradePhaseFinished: upgrade phase Expanding finished (2025.2 → 2026.1)",
                "UpgradePhaseStarted: upgrade phase Migrating started (2025.2 → 2026.1)",
            ]
        );
        let done = with(&[], None);
        let last = status_transitions(&b, &done);
        assert_eq!(last.len(), 1);
        assert_eq!(last[0].reason, event_reason::UPGRADE_PHASE_FINISHED);
    }

    #[test]
    fn the_events_of_an_upgrade_are_distinct_series() {
        let walk = [
            None,
            Some(UpgradePhase::Expanding),
            Some(UpgradePhase::Migrating),
            Some(UpgradePhase::RollingUpdate),
            Some(UpgradePhase::Contracting),
            None,
        ];
        let mut keys = std::collections::BTreeSet::new();
        for pair in walk.windows(2) {
            for e in status_transitions(&with(&[], pair[0]), &with(&[], pair[1])) {
                assert!(
                    keys.insert((e.reason.clone(), e.action.clone())),
                    "{} / {} twice",
                    e.reason,
                    e.action
                );
            }
        }
        assert_eq!(keys.len(), 8);
        // Two conditions turning to the same reason stay apart too.
        let before = with(&[], None);
        let after = with(
            &[
                Cond::false_("DatabaseReady", "WaitingForConfig", "x"),
                Cond::false_("SchedulerReady", "WaitingForConfig", "y"),
            ],
            None,
        );
        let actions: Vec<String> = status_transitions(&before, &after)
            .into_iter()
            .map(|e| e.action)
            .collect();
        assert_eq!(actions, vec!["DatabaseReady", "SchedulerReady"]);
    }

    #[test]
    fn long_notes_are_cut_on_a_character_boundary() {
        let long = "é".repeat(900);
        let cut = note(long).unwrap_or_default();
        assert!(cut.len() <= MAX_NOTE + "…".len(), "{}", cut.len());
        assert!(cut.ends_with('…'));
    }
}
