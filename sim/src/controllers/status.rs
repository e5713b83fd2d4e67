//! Status builders shared by the simulated controllers: `metav1.Condition`-shaped conditions
//! that keep their lastTransitionTime while unchanged, timestamps in Kubernetes format, and the
//! "is this status already there" check that keeps controllers from writing unchanged status.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};

/// A Kubernetes timestamp (RFC 3339, whole seconds, `Z`).
pub fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Now, as a Kubernetes timestamp.
pub fn now() -> String {
    timestamp(Utc::now())
}

/// One wanted condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted<'a> {
    /// Condition type.
    pub kind: &'a str,
    /// True or False.
    pub status: bool,
    /// CamelCase reason.
    pub reason: &'a str,
    /// Human message.
    pub message: &'a str,
}

impl<'a> Wanted<'a> {
    /// A condition of type `kind`.
    pub fn new(kind: &'a str, status: bool, reason: &'a str, message: &'a str) -> Self {
        Self {
            kind,
            status,
            reason,
            message,
        }
    }
}

fn status_word(status: bool) -> &'static str {
    if status { "True" } else { "False" }
}

/// Builds a `metav1.Condition` list: each wanted condition keeps the lastTransitionTime of the
/// previous condition of the same type when its status did not change. `observed_generation`
/// is stamped when given. Conditions of other types are dropped (the simulated controller owns
/// the whole list).
pub fn conditions(
    previous: Option<&Value>,
    wanted: &[Wanted<'_>],
    observed_generation: Option<i64>,
) -> Value {
    let previous = previous.and_then(Value::as_array);
    let list = wanted
        .iter()
        .map(|want| {
            let word = status_word(want.status);
            let transition = previous
                .and_then(|list| {
                    list.iter().find(|c| {
                        c.get("type").and_then(Value::as_str) == Some(want.kind)
                            && c.get("status").and_then(Value::as_str) == Some(word)
                    })
                })
                .and_then(|c| c.get("lastTransitionTime").cloned())
                .unwrap_or_else(|| Value::String(now()));
            let mut condition = json!({
                "type": want.kind,
                "status": word,
                "reason": want.reason,
                "message": want.message,
                "lastTransitionTime": transition,
            });
            if let (Some(generation), Some(map)) = (observed_generation, condition.as_object_mut())
            {
                map.insert("observedGeneration".into(), json!(generation));
            }
            condition
        })
        .collect();
    Value::Array(list)
}

/// Like [`conditions`] for the older core/apps/batch shape, which also carries
/// lastUpdateTime / lastProbeTime (kept with the transition time while unchanged).
pub fn workload_conditions(
    previous: Option<&Value>,
    wanted: &[Wanted<'_>],
    extra_time: &str,
) -> Value {
    let mut list = conditions(previous, wanted, None);
    if let Some(items) = list.as_array_mut() {
        for item in items {
            if let Some(map) = item.as_object_mut() {
                let transition = map
                    .get("lastTransitionTime")
                    .cloned()
                    .unwrap_or(Value::Null);
                map.insert(extra_time.into(), transition);
            }
        }
    }
    list
}

/// Whether merge-patching `patch` onto `current` would change nothing.
pub fn already_applied(patch: &Value, current: Option<&Value>) -> bool {
    match (patch, current) {
        (Value::Null, None | Some(Value::Null)) => true,
        (Value::Null, Some(_)) => false,
        (Value::Object(wanted), Some(Value::Object(have))) => object_applied(wanted, have),
        (Value::Object(wanted), None | Some(Value::Null)) => wanted.values().all(Value::is_null),
        (other, Some(have)) => other == have,
        (_, None) => false,
    }
}

fn object_applied(wanted: &Map<String, Value>, have: &Map<String, Value>) -> bool {
    wanted
        .iter()
        .all(|(key, value)| already_applied(value, have.get(key)))
}

/// The non-null value of `key` in a status object.
pub fn field(status: Option<&Value>, key: &str) -> Option<Value> {
    status?.get(key).filter(|v| !v.is_null()).cloned()
}

/// The `status` of condition `kind` in a condition list, if present.
pub fn condition_status<'a>(conditions: Option<&'a Value>, kind: &str) -> Option<&'a str> {
    conditions?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))?
        .get("status")?
        .as_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_keep_transition_time_while_status_unchanged() {
        let previous = json!([
            {"type": "Ready", "status": "True", "reason": "Old", "message": "", "lastTransitionTime": "2020-01-01T00:00:00Z"},
            {"type": "Other", "status": "False", "lastTransitionTime": "2020-01-01T00:00:00Z"}
        ]);
        let built = conditions(
            Some(&previous),
            &[
                Wanted::new("Ready", true, "New", "m"),
                Wanted::new("Other", true, "Flipped", "m"),
            ],
            Some(3),
        );
        assert_eq!(built[0]["lastTransitionTime"], "2020-01-01T00:00:00Z");
        assert_eq!(built[0]["reason"], "New");
        assert_eq!(built[0]["observedGeneration"], 3);
        assert_ne!(built[1]["lastTransitionTime"], "2020-01-01T00:00:00Z");
        assert_eq!(built[1]["status"], "True");
    }

    #[test]
    fn workload_conditions_carry_the_extra_time() {
        let built = workload_conditions(
            None,
            &[Wanted::new("Complete", true, "R", "")],
            "lastProbeTime",
        );
        assert_eq!(built[0]["lastProbeTime"], built[0]["lastTransitionTime"]);
        assert!(built[0].get("observedGeneration").is_none());
    }

    #[test]
    fn already_applied_is_a_merge_patch_no_op_check() {
        let current = json!({"a": 1, "b": {"c": [1, 2], "d": "x"}, "e": 5});
        assert!(already_applied(
            &json!({"a": 1, "b": {"c": [1, 2]}}),
            Some(&current)
        ));
        assert!(already_applied(&json!({"zz": null}), Some(&current)));
        assert!(!already_applied(&json!({"e": null}), Some(&current)));
        assert!(!already_applied(&json!({"b": {"c": [1]}}), Some(&current)));
        assert!(!already_applied(&json!({"new": 1}), Some(&current)));
        assert!(!already_applied(&json!({"a": 1}), None));
    }

    #[test]
    fn condition_status_finds_by_type() {
        let list = json!([{"type": "Ready", "status": "False"}]);
        assert_eq!(condition_status(Some(&list), "Ready"), Some("False"));
        assert_eq!(condition_status(Some(&list), "Other"), None);
        assert_eq!(condition_status(None, "Ready"), None);
    }
}
