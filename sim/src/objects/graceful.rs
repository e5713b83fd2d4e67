//! Graceful deletion of pods, as the pod registry of a real API server decides it: a DELETE of
//! a pod that is bound to a node and still running leaves it in the store with
//! `deletionTimestamp` (now + the grace period) and `deletionGracePeriodSeconds`, shown as
//! Terminating, until its kubelet has stopped it and deletes it with a grace period of 0. The
//! grace period is the request's `gracePeriodSeconds`, else the pod's
//! `spec.terminationGracePeriodSeconds` (30 by default); a pod that never reached a node or has
//! finished goes at once; a second DELETE may shorten the period, never lengthen it.

use serde_json::{Value, json};

/// The default `spec.terminationGracePeriodSeconds`.
pub const DEFAULT_GRACE_SECONDS: i64 = 30;

/// The grace period, in seconds, a DELETE of `pod` asking for `requested` gives it; 0 means
/// the pod goes at once (or waits for its finalizers only).
pub fn grace_seconds(pod: &Value, requested: Option<i64>) -> i64 {
    let bound = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let finished = matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    );
    if !bound || finished {
        return 0;
    }
    requested
        .or_else(|| {
            pod.pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
        })
        .unwrap_or(DEFAULT_GRACE_SECONDS)
        .max(0)
}

/// The pod as a graceful DELETE leaves it: `None` when nothing changes (already terminating
/// with a period no longer than `grace`), else the pod with its (new or shortened) deletion
/// timestamp and grace period. `now` is the current time.
pub fn begin(pod: &Value, grace: i64, now: chrono::DateTime<chrono::Utc>) -> Option<Value> {
    let current = pod
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64);
    let deleting = pod.pointer("/metadata/deletionTimestamp").is_some();
    if deleting && current.is_some_and(|c| c <= grace) {
        return None;
    }
    let at = now + chrono::Duration::seconds(grace);
    let mut new = pod.clone();
    new["metadata"]["deletionTimestamp"] = json!(at.format("%Y-%m-%dT%H:%M:%SZ").to_string());
    new["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
    Some(new)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(node: Option<&str>, phase: &str, grace: Option<i64>) -> Value {
        let mut p = json!({"metadata": {"name": "p"}, "spec": {}, "status": {"phase": phase}});
        if let Some(node) = node {
            p["spec"]["nodeName"] = json!(node);
        }
        if let Some(grace) = grace {
            p["spec"]["terminationGracePeriodSeconds"] = json!(grace);
        }
        p
    }

    #[test]
    fn running_pods_get_the_requested_or_their_own_period() {
        assert_eq!(grace_seconds(&pod(Some("n"), "Running", Some(5)), None), 5);
        assert_eq!(
            grace_seconds(&pod(Some("n"), "Running", Some(5)), Some(2)),
            2
        );
        assert_eq!(grace_seconds(&pod(Some("n"), "Running", None), None), 30);
        assert_eq!(grace_seconds(&pod(Some("n"), "Running", None), Some(0)), 0);
        assert_eq!(grace_seconds(&pod(Some("n"), "Running", None), Some(-3)), 0);
    }

    #[test]
    fn unbound_and_finished_pods_go_at_once() {
        assert_eq!(grace_seconds(&pod(None, "Pending", Some(5)), None), 0);
        assert_eq!(grace_seconds(&pod(Some("n"), "Succeeded", None), None), 0);
        assert_eq!(grace_seconds(&pod(Some("n"), "Failed", None), Some(9)), 0);
    }

    #[test]
    fn a_second_delete_only_shortens() {
        let t0 = chrono::DateTime::from_timestamp(1_000_000, 0).unwrap();
        let first = begin(&pod(Some("n"), "Running", None), 30, t0).unwrap();
        assert_eq!(first["metadata"]["deletionGracePeriodSeconds"], 30);
        assert_eq!(
            first["metadata"]["deletionTimestamp"],
            "1970-01-12T13:47:10Z"
        );
        assert!(begin(&first, 30, t0).is_none());
        assert!(begin(&first, 60, t0).is_none());
        let shorter = begin(&first, 5, t0).unwrap();
        assert_eq!(shorter["metadata"]["deletionGracePeriodSeconds"], 5);
    }
}
