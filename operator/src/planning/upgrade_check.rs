//! The upgrade check's exit code: `cinder-status upgrade check` exits 0 (clean),
//! 1 (warnings) or 2 (a check failed, typically a NULL service_uuid the service backfills). The
//! phase Job normalises 0–2 to success; the real code travels in the pod's termination message
//! and becomes an UpgradeCheckCompleted or UpgradeCheckWarnings event. The message is read off
//! the Job's succeeded pod (else its newest), counting only pods carrying the Job's UID.

use crate::conditions::event_reason;

/// A pod of the migrate Job, as the planner needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodSummary {
    pub name: String,
    /// The `controller-uid` / `batch.kubernetes.io/controller-uid` label.
    pub job_uid: Option<String>,
    pub succeeded: bool,
    /// Seconds since the epoch.
    pub created: i64,
    pub termination_message: Option<String>,
}

/// The pod whose message counts: the succeeded one, else the newest, among the Job's own pods.
pub fn select_pod<'a>(pods: &'a [PodSummary], job_uid: &str) -> Option<&'a PodSummary> {
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
        Some(c @ (1 | 2)) => UpgradeCheckEvent {
            reason: event_reason::UPGRADE_CHECK_WARNINGS,
            message: format!(
                "upgrade check reported {} (exit code {c}); the upgrade continues",
                if c == 1 { "warnings" } else { "a failed check" }
            ),
        },
        Some(c) => UpgradeCheckEvent {
            reason: event_reason::UPGRADE_CHECK_WARNINGS,
            message: format!("upgrade check exit code {c} is outside 0-2"),
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
