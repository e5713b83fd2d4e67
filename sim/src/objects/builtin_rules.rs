//! Validation of built-in kinds beyond metadata, with a real API server's fields and messages:
//! ConfigMap and Secret keys, their data at most 1 MiB, immutable ConfigMaps and Secrets
//! (`immutable: true` refuses any change of data and of `immutable` itself), a Job's pod
//! template restart policy (OnFailure or Never), and the workloads' selector and pod template
//! (a selector is required and must select the template's labels; a template has containers).

use super::validation::invalid_value;
use crate::error::Cause;
use base64::Engine as _;
use serde_json::Value;

/// Largest ConfigMap or Secret data (all values of data and binaryData), in bytes.
pub const DATA_MAX_BYTES: usize = 1024 * 1024;
/// Longest ConfigMap or Secret key.
const KEY_MAX: usize = 253;
const KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// Why `obj` (new state; `old` on update) of `group/resource` is invalid (empty: valid).
pub fn causes(group: &str, resource: &str, old: Option<&Value>, obj: &Value) -> Vec<Cause> {
    match (group, resource) {
        ("", "configmaps") => data_causes(obj, old, false),
        ("", "secrets") => data_causes(obj, old, true),
        ("batch", "jobs") => {
            let mut causes = job_causes(obj);
            causes.extend(template_causes(obj, false));
            causes
        }
        ("apps", "deployments" | "replicasets" | "daemonsets" | "statefulsets") => {
            template_causes(obj, true)
        }
        _ => Vec::new(),
    }
}

fn key_causes(field: &str, key: &str, out: &mut Vec<Cause>) {
    let ok_chars = key
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if key.len() > KEY_MAX {
        out.push(invalid_value(
            format!("{field}[{key}]"),
            key,
            &format!("must be no more than {KEY_MAX} characters"),
        ));
    }
    if key.is_empty() || !ok_chars {
        out.push(invalid_value(format!("{field}[{key}]"), key, KEY_MSG));
    }
    if key == "." || key == ".." || key.starts_with("..") {
        out.push(invalid_value(
            format!("{field}[{key}]"),
            key,
            "must not be '.' or '..' or start with '..'",
        ));
    }
}

/// The size in bytes of one data value: Secret data is base64 on the wire, ConfigMap
/// binaryData too, ConfigMap data is plain text.
fn value_size(v: &Value, base64_encoded: bool) -> usize {
    let s = v.as_str().unwrap_or_default();
    if base64_encoded {
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .map(|b| b.len())
            .unwrap_or(s.len())
    } else {
        s.len()
    }
}

fn data_causes(obj: &Value, old: Option<&Value>, secret: bool) -> Vec<Cause> {
    let mut out = Vec::new();
    let mut total = 0;
    for (field, encoded) in [("data", secret), ("binaryData", true)] {
        if let Some(map) = obj.get(field).and_then(Value::as_object) {
            for (k, v) in map {
                key_causes(field, k, &mut out);
                total += value_size(v, encoded);
            }
        }
    }
    if total > DATA_MAX_BYTES {
        // ConfigMap validation reports the size at the root, Secret validation at `data`
        let field = if secret { "data" } else { "[]" };
        out.push(super::validation::too_long(field, DATA_MAX_BYTES));
    }
    if let Some(old) = old
        && old.get("immutable").and_then(Value::as_bool) == Some(true)
    {
        let forbidden = |field: &str| {
            Cause::new(
                "FieldValueForbidden",
                field,
                "Forbidden: field is immutable when `immutable` is set",
            )
        };
        if obj.get("immutable") != old.get("immutable") {
            out.push(forbidden("immutable"));
        }
        for field in ["data", "binaryData"] {
            if obj.get(field).filter(|v| !v.is_null()) != old.get(field).filter(|v| !v.is_null()) {
                out.push(forbidden(field));
            }
        }
    }
    out
}

fn job_causes(obj: &Value) -> Vec<Cause> {
    let policy = obj
        .pointer("/spec/template/spec/restartPolicy")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if matches!(policy, "OnFailure" | "Never") {
        return Vec::new();
    }
    vec![Cause::new(
        "FieldValueNotSupported",
        "spec.template.spec.restartPolicy",
        format!("Unsupported value: {policy:?}: supported values: \"OnFailure\", \"Never\""),
    )]
}

/// A workload's selector and pod template: `spec.selector` present (when `selector_required`;
/// a Job's is generated), selecting the template's labels, and at least one container.
fn template_causes(obj: &Value, selector_required: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    match obj.pointer("/spec/selector").filter(|s| !s.is_null()) {
        None if selector_required => {
            causes.push(Cause::new(
                "FieldValueRequired",
                "spec.selector",
                "Required value",
            ));
        }
        None => {}
        Some(selector) => {
            let empty = selector.as_object().is_none_or(|m| {
                m.values().all(|v| {
                    v.is_null()
                        || v.as_object().is_some_and(|o| o.is_empty())
                        || v.as_array().is_some_and(|a| a.is_empty())
                })
            });
            let labels = obj
                .pointer("/spec/template/metadata/labels")
                .cloned()
                .unwrap_or_else(|| Value::Object(Default::default()));
            if empty {
                causes.push(invalid_value(
                    "spec.selector",
                    &selector.to_string(),
                    "empty selector is invalid",
                ));
            } else if !crate::store::selectors::label_selector_matches(selector, &labels) {
                causes.push(invalid_value(
                    "spec.template.metadata.labels",
                    &labels.to_string(),
                    "`selector` does not match template `labels`",
                ));
            }
        }
    }
    if obj
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        causes.push(Cause::new(
            "FieldValueRequired",
            "spec.template.spec.containers",
            "Required value",
        ));
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn configmap_data_limit_and_keys() {
        let big = json!({"data": {"a": "x".repeat(DATA_MAX_BYTES + 1)}});
        let c = causes("", "configmaps", None, &big);
        assert_eq!(
            (c[0].reason.as_str(), c[0].field.as_str()),
            ("FieldValueTooLong", "[]")
        );
        let ok = json!({"data": {"a.b_C-1": "x".repeat(1000)}});
        assert!(causes("", "configmaps", None, &ok).is_empty());
        let bad_key = json!({"data": {"a/b": "x"}});
        assert_eq!(
            causes("", "configmaps", None, &bad_key)[0].field,
            "data[a/b]"
        );
    }

    #[test]
    fn secret_data_counts_decoded_bytes() {
        let b64 = base64::engine::general_purpose::STANDARD.encode(vec![0u8; DATA_MAX_BYTES]);
        let at_limit = json!({"data": {"k": b64}});
        assert!(causes("", "secrets", None, &at_limit).is_empty());
        let b64 = base64::engine::general_purpose::STANDARD.encode(vec![0u8; DATA_MAX_BYTES + 1]);
        let over = json!({"data": {"k": b64}});
        assert_eq!(causes("", "secrets", None, &over)[0].field, "data");
    }

    #[test]
    fn immutable_refuses_data_changes() {
        let old = json!({"immutable": true, "data": {"a": "1"}});
        let same =
            json!({"immutable": true, "data": {"a": "1"}, "metadata": {"labels": {"x": "y"}}});
        assert!(causes("", "configmaps", Some(&old), &same).is_empty());
        let changed = json!({"immutable": true, "data": {"a": "2"}});
        assert_eq!(
            causes("", "configmaps", Some(&old), &changed)[0].field,
            "data"
        );
        let unset = json!({"immutable": false, "data": {"a": "1"}});
        assert_eq!(
            causes("", "secrets", Some(&old), &unset)[0].field,
            "immutable"
        );
    }

    #[test]
    fn job_restart_policy() {
        let containers = json!([{"name": "c", "image": "i"}]);
        let always = json!({"spec": {"template": {"spec": {"restartPolicy": "Always", "containers": containers}}}});
        assert_eq!(causes("batch", "jobs", None, &always).len(), 1);
        let never = json!({"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": containers}}}});
        assert!(causes("batch", "jobs", None, &never).is_empty());
    }

    #[test]
    fn workloads_need_a_matching_selector_and_containers() {
        let deployment = |selector: Value, containers: Value| {
            json!({"spec": {"selector": selector, "template": {
                "metadata": {"labels": {"app": "a"}},
                "spec": {"containers": containers}}}})
        };
        let containers = json!([{"name": "c", "image": "i"}]);
        let good = deployment(json!({"matchLabels": {"app": "a"}}), containers.clone());
        assert!(causes("apps", "deployments", None, &good).is_empty());
        let fields = |obj: &Value| -> Vec<(String, String)> {
            causes("apps", "deployments", None, obj)
                .into_iter()
                .map(|c| (c.reason, c.field))
                .collect()
        };
        let other = deployment(json!({"matchLabels": {"app": "b"}}), containers.clone());
        assert_eq!(
            fields(&other),
            [(
                "FieldValueInvalid".into(),
                "spec.template.metadata.labels".into()
            )]
        );
        let empty = deployment(json!({"matchLabels": {"app": "a"}}), json!([]));
        assert_eq!(
            fields(&empty),
            [(
                "FieldValueRequired".into(),
                "spec.template.spec.containers".into()
            )]
        );
        let mut none = good.clone();
        none["spec"].as_object_mut().unwrap().remove("selector");
        assert_eq!(
            fields(&none),
            [("FieldValueRequired".into(), "spec.selector".into())]
        );
    }
}
