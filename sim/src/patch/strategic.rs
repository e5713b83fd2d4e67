//! Strategic merge patch for built-in kinds, simplified: objects merge like a JSON merge patch;
//! lists of objects merge by their well-known merge key (containers, initContainers, volumes,
//! env, imagePullSecrets by name; volumeMounts by mountPath; container ports by containerPort,
//! Service ports by port; conditions by type; ownerReferences by uid); `finalizers` merge as a
//! set; other lists are replaced. Directives: `$patch: delete|replace|merge` on list items and
//! maps, `$retainKeys`, `$setElementOrder/*` and `$deleteFromPrimitiveList/*` (the last one
//! honoured, ordering ignored).

use crate::error::ApiError;
use serde_json::{Map, Value};

fn merge_key(field: &str, items: &[Value]) -> Option<&'static str> {
    let has = |k: &str| items.iter().all(|i| i.get(k).is_some());
    let key = match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets" => "name",
        "volumeMounts" | "volumeDevices" => "mountPath",
        "ports" if has("containerPort") => "containerPort",
        "ports" => "port",
        "conditions" => "type",
        "ownerReferences" => "uid",
        "hostAliases" => "ip",
        "topologySpreadConstraints" => "topologyKey",
        _ => return None,
    };
    Some(key)
}

/// Applies a strategic merge patch `patch` to `doc`.
pub fn merge(doc: &Value, patch: &Value) -> Result<Value, ApiError> {
    Ok(merge_value(Some(doc), patch, ""))
}

fn merge_value(doc: Option<&Value>, patch: &Value, field: &str) -> Value {
    match patch {
        Value::Object(p) => {
            if p.get("$patch").and_then(Value::as_str) == Some("replace") {
                let mut out = p.clone();
                out.remove("$patch");
                return Value::Object(out);
            }
            let mut out: Map<String, Value> =
                doc.and_then(Value::as_object).cloned().unwrap_or_default();
            for (k, pv) in p {
                if k.starts_with("$setElementOrder/") || k == "$retainKeys" || k == "$patch" {
                    continue;
                }
                if let Some(name) = k.strip_prefix("$deleteFromPrimitiveList/") {
                    if let (Some(list), Some(del)) = (
                        out.get_mut(name).and_then(Value::as_array_mut),
                        pv.as_array(),
                    ) {
                        list.retain(|x| !del.contains(x));
                    }
                    continue;
                }
                if pv.is_null() {
                    out.remove(k);
                    continue;
                }
                let merged = merge_value(out.get(k), pv, k);
                out.insert(k.clone(), merged);
            }
            if let Some(keep) = p.get("$retainKeys").and_then(Value::as_array) {
                out.retain(|k, _| keep.iter().any(|x| x.as_str() == Some(k)));
            }
            Value::Object(out)
        }
        Value::Array(items) => merge_list(doc.and_then(Value::as_array), items, field),
        other => other.clone(),
    }
}

fn merge_list(doc: Option<&Vec<Value>>, patch: &[Value], field: &str) -> Value {
    if field == "finalizers" {
        let mut out = doc.cloned().unwrap_or_default();
        for p in patch {
            if !out.contains(p) {
                out.push(p.clone());
            }
        }
        return Value::Array(out);
    }
    let objects = !patch.is_empty() && patch.iter().all(Value::is_object);
    let Some(key) = merge_key(field, patch).filter(|_| objects) else {
        return Value::Array(
            patch
                .iter()
                .filter(|p| p.get("$patch").is_none())
                .cloned()
                .collect(),
        );
    };
    if patch
        .iter()
        .any(|p| p.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        return Value::Array(
            patch
                .iter()
                .filter(|p| p.get("$patch").is_none())
                .cloned()
                .collect(),
        );
    }
    let mut out: Vec<Value> = doc.cloned().unwrap_or_default();
    for p in patch {
        let id = p.get(key);
        let pos = out.iter().position(|o| o.get(key) == id);
        match (p.get("$patch").and_then(Value::as_str), pos) {
            (Some("delete"), Some(i)) => {
                out.remove(i);
            }
            (Some("delete"), None) => {}
            (_, Some(i)) => {
                let merged = merge_value(Some(&out[i]), p, "");
                out[i] = merged;
            }
            (_, None) => {
                let mut item = p.clone();
                if let Some(m) = item.as_object_mut() {
                    m.remove("$patch");
                }
                out.push(item);
            }
        }
    }
    Value::Array(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn containers_merge_by_name() {
        let doc = json!({"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}], "args": ["x"]}});
        let patch = json!({"spec": {"containers": [{"name": "b", "image": "2"}, {"name": "c", "image": "3"}], "args": ["y"]}});
        let out = merge(&doc, &patch).unwrap();
        assert_eq!(out["spec"]["containers"].as_array().unwrap().len(), 3);
        assert_eq!(out["spec"]["containers"][1]["image"], "2");
        assert_eq!(out["spec"]["args"], json!(["y"]));
        let del = merge(
            &out,
            &json!({"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}),
        )
        .unwrap();
        assert_eq!(del["spec"]["containers"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn conditions_merge_by_type() {
        let doc = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "X", "status": "True"}]}});
        let out = merge(
            &doc,
            &json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
        )
        .unwrap();
        assert_eq!(
            out["status"]["conditions"],
            json!([{"type": "Ready", "status": "True"}, {"type": "X", "status": "True"}])
        );
    }
}
