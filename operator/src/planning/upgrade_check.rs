//! The upgrade check's exit code: `cinder-status upgrade check` (oslo.upgradecheck) exits 0
//! (clean), 1 (a warning) or 2 (a check failed), and 255 when a check raised instead of
//! answering (the database unreachable, say). In cinder 28 and 29 a failed check is a
//! configuration to change (a backup driver named by module path, the nested quota driver, a
//! removed volume driver) or rows that only the Queens online data migrations fixed (services or
//! volumes with a NULL `service_uuid`, attachment specs): no service repairs either on its own.
//! The phase Job normalises 0–2 to success, so that none of them wedges an upgrade, and fails on
//! anything else; the real code travels in the pod's termination message and becomes an
//! UpgradeCheckCompleted or UpgradeCheckWarnings event. The message is read off
//! the Job's succeeded pod (else its newest), counting only pods carrying the Job's UID.

use crate::conditions::event_reason;

/// A pod of the migrate Job, as the planner needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PodSummary {
    pub name: String,
    /// The `controller-uid` / `batch.kubernetes.io/controller-uid` label.
    pub job_uid: Option<String>,
    pub succeeded: bool,
    /// Seconds since the epoch.
    pub created: i64,
    pub termination_message: Option<String>,
}

/// The pod whose message counts: the succeeded one, else the newest, among the Job's own pods.
pub(crate) fn select_pod<'a>(pods: &'a [PodSummary], job_uid: &str) -> Option<&'a PodSummary> {
    let own = pods
        .iter()
        .filter(|p| p.job_uid.as_deref() == Some(job_uid));
    let own: Vec<&PodSummary> = own.collect();
    own.iter()
        .copied()
        .filter(|p| p.succeeded)
        .max_by_key(|p| p.created)
        .or_else(|| own.iter().copied().max_by_key(|p| p.created))
}

/// The exit code a termination message carries: the first integer in it (`2`, `exit code: 2`).
pub fn parse_exit_code(message: &str) -> Option<i32> {
    let start = message.find(|c: char| c.is_ascii_digit())?;
    let digits: String = message[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// The event the operator emits for a finished migrate Job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpgradeCheckEvent {
    pub reason: &'static str,
    pub message: String,
}

/// Interprets the code (None: the pod or cluster could not be read, or the message had none).
pub fn interpret(exit_code: Option<i32>) -> UpgradeCheckEvent {
    match exit_code {
        Some(0) => UpgradeCheckEvent {
            reason: event_reason::UPGRADE_CHECK_COMPLETED,
            message: "upgrade check passed cleanly (exit code 0)".into(),
        },
        Some(1) => UpgradeCheckEvent {
            reason: event_reason::UPGRADE_CHECK_WARNINGS,
            message: "upgrade check reported warnings (exit code 1); the upgrade continues".into(),
        },
        Some(2) => UpgradeCheckEvent {
            reason: event_reason::UPGRADE_CHECK_WARNINGS,
            message: "upgrade check reported a failed check (exit code 2), which no service \
                      repairs on its own: read the migrate Job's log for the check and its fix; \
                      the upgrade continues"
                .into(),
        },
        Some(255) => UpgradeCheckEvent {
            reason: event_reason::UPGRADE_CHECK_WARNINGS,
            message: "upgrade check raised an error instead of checking (exit code 255, for \
                      example the database unreachable); the migrate Job fails"
                .into(),
        },
        Some(c) => UpgradeCheckEvent {
            reason: event_reason::UPGRADE_CHECK_WARNINGS,
            message: format!("upgrade check exit code {c} is outside 0-2; the migrate Job fails"),
        },
        None => UpgradeCheckEvent {
            reason: event_reason::UPGRADE_CHECK_COMPLETED,
            message: "upgrade check finished; exit code unavailable".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, uid: &str, succeeded: bool, created: i64, msg: Option<&str>) -> PodSummary {
        PodSummary {
            name: name.into(),
            job_uid: Some(uid.into()),
            succeeded,
            created,
            termination_message: msg.map(Into::into),
        }
    }

    #[test]
    fn exit_codes() {
        assert_eq!(interpret(Some(0)).reason, "UpgradeCheckCompleted");
        assert_eq!(interpret(Some(1)).reason, "UpgradeCheckWarnings");
        assert_eq!(interpret(Some(2)).reason, "UpgradeCheckWarnings");
        assert!(!interpret(Some(2)).message.contains("backfill"));
        assert!(interpret(Some(255)).message.contains("raised an error"));
        assert!(interpret(Some(255)).message.contains("Job fails"));
        assert!(interpret(None).message.contains("exit code unavailable"));
        assert_eq!(parse_exit_code("2"), Some(2));
        assert_eq!(parse_exit_code("exit code: 1\n"), Some(1));
        assert_eq!(parse_exit_code("none"), None);
    }

    #[test]
    fn the_succeeded_pod_of_this_job_counts() {
        let pods = vec![
            pod("old-job-pod", "old", true, 50, Some("0")),
            pod("retry-1", "uid", false, 10, Some("3")),
            pod("retry-2", "uid", true, 20, Some("2")),
            pod("retry-3", "uid", false, 30, Some("3")),
        ];
        assert_eq!(select_pod(&pods, "uid").unwrap().name, "retry-2");
        let no_success = &pods[..2];
        assert_eq!(select_pod(no_success, "uid").unwrap().name, "retry-1");
        assert!(select_pod(&pods, "other").is_none());
    }
}
