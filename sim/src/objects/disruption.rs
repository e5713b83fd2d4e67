//! PodDisruptionBudget arithmetic, as the Eviction subresource and the disruption controller
//! apply it: which pods a budget covers, how many of them must stay healthy, and whether one
//! more pod may go. Pure functions over JSON objects.

use serde_json::Value;

use crate::store::selectors::label_selector_matches;

/// Whether a pod counts as healthy for a budget: Ready and not being deleted.
pub fn pod_healthy(pod: &Value) -> bool {
    pod.pointer("/metadata/deletionTimestamp").is_none()
        && pod
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
}

/// Whether an eviction of `pod` ignores budgets: a pod that is not running (Pending,
/// Succeeded, Failed) or already being deleted goes without a check.
pub fn ignores_budgets(pod: &Value) -> bool {
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending");
    phase != "Running" || pod.pointer("/metadata/deletionTimestamp").is_some()
}

/// Whether the budget `pdb` covers `pod` (same namespace, selector matches its labels).
pub fn covers(pdb: &Value, pod: &Value) -> bool {
    pdb.pointer("/metadata/namespace") == pod.pointer("/metadata/namespace")
        && label_selector_matches(
            pdb.pointer("/spec/selector").unwrap_or(&Value::Null),
            pod.pointer("/metadata/labels").unwrap_or(&Value::Null),
        )
}

/// A budget's counts over the pods it covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Pods covered (not finished).
    pub expected: i64,
    /// Covered pods that are healthy.
    pub current_healthy: i64,
    /// How many must stay healthy.
    pub desired_healthy: i64,
}

impl Budget {
    /// How many healthy pods may be disrupted now.
    pub fn disruptions_allowed(&self) -> i64 {
        (self.current_healthy - self.desired_healthy).max(0)
    }
}

/// An int-or-percent value of `total`, rounded up.
fn scaled(value: &Value, total: i64) -> Option<i64> {
    if let Some(n) = value.as_i64() {
        return Some(n);
    }
    let percent: i64 = value.as_str()?.strip_suffix('%')?.parse().ok()?;
    Some((percent * total + 99) / 100)
}

/// The counts of `pdb` over `pods` (every pod of its namespace; the budget picks its own).
pub fn budget(pdb: &Value, pods: &[Value]) -> Budget {
    let covered: Vec<&Value> = pods
        .iter()
        .filter(|p| covers(pdb, p))
        .filter(|p| {
            let phase = p.pointer("/status/phase").and_then(Value::as_str);
            phase != Some("Succeeded") && phase != Some("Failed")
        })
        .collect();
    let expected = i64::try_from(covered.len()).unwrap_or(i64::MAX);
    let current_healthy =
        i64::try_from(covered.iter().filter(|p| pod_healthy(p)).count()).unwrap_or(i64::MAX);
    let spec = pdb.get("spec");
    let desired_healthy = if let Some(min) = spec.and_then(|s| s.get("minAvailable")) {
        scaled(min, expected).unwrap_or(expected)
    } else if let Some(max) = spec.and_then(|s| s.get("maxUnavailable")) {
        (expected - scaled(max, expected).unwrap_or(0)).max(0)
    } else {
        0
    };
    Budget {
        expected,
        current_healthy,
        desired_healthy,
    }
}

/// Why an eviction of `pod` must wait, if it must: the first budget covering it that allows
/// no disruption of it, with the real server's cause message.
pub fn eviction_refusal(pod: &Value, pdbs: &[Value], pods: &[Value]) -> Option<String> {
    if ignores_budgets(pod) {
        return None;
    }
    let healthy = pod_healthy(pod);
    pdbs.iter().filter(|pdb| covers(pdb, pod)).find_map(|pdb| {
        let b = budget(pdb, pods);
        let allowed = if healthy {
            b.disruptions_allowed() >= 1
        } else {
            b.current_healthy >= b.desired_healthy
        };
        (!allowed).then(|| {
            format!(
                "The disruption budget {} needs {} healthy pods and has {} currently",
                pdb.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
                b.desired_healthy,
                b.current_healthy
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, ready: bool) -> Value {
        json!({
            "metadata": {"name": name, "namespace": "ns", "labels": {"app": "api"}},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
        })
    }

    fn pdb(spec: Value) -> Value {
        let mut spec = spec;
        spec["selector"] = json!({"matchLabels": {"app": "api"}});
        json!({"metadata": {"name": "api", "namespace": "ns"}, "spec": spec})
    }

    #[test]
    fn min_available_allows_one_of_three_then_refuses() {
        let budget_pdb = pdb(json!({"minAvailable": 2}));
        let budgets = std::slice::from_ref(&budget_pdb);
        let three = vec![pod("a", true), pod("b", true), pod("c", true)];
        assert_eq!(budget(&budget_pdb, &three).disruptions_allowed(), 1);
        assert_eq!(eviction_refusal(&three[0], budgets, &three), None);
        let two = vec![pod("b", true), pod("c", true), pod("d", false)];
        let refusal = eviction_refusal(&two[0], budgets, &two).unwrap();
        assert_eq!(
            refusal,
            "The disruption budget api needs 2 healthy pods and has 2 currently"
        );
        // An unhealthy pod may go while the budget holds; a pending one always may.
        assert_eq!(eviction_refusal(&two[2], budgets, &two), None);
        let mut pending = pod("e", false);
        pending["status"]["phase"] = json!("Pending");
        assert_eq!(eviction_refusal(&pending, &[budget_pdb], &two), None);
    }

    #[test]
    fn max_unavailable_and_percentages() {
        let pods = vec![
            pod("a", true),
            pod("b", true),
            pod("c", true),
            pod("d", true),
        ];
        assert_eq!(
            budget(&pdb(json!({"maxUnavailable": 1})), &pods).desired_healthy,
            3
        );
        assert_eq!(
            budget(&pdb(json!({"minAvailable": "50%"})), &pods).desired_healthy,
            2
        );
        assert_eq!(
            budget(&pdb(json!({"maxUnavailable": "25%"})), &pods).desired_healthy,
            3
        );
        let other =
            json!({"metadata": {"name": "x", "namespace": "other", "labels": {"app": "api"}}});
        assert!(!covers(&pdb(json!({})), &other));
    }
}
