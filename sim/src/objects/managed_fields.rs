//! managedFields bookkeeping: field sets as leaf paths, their `FieldsV1` encoding, ownership
//! transfer on Update operations, and the server-side apply merge with conflict detection.
//!
//! Simplification (documented in docs/embedded-cluster.md): lists are atomic (one field), so two
//! managers cannot own different items of one list.

use crate::error::Cause;
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

/// A set of owned fields: each a path of object keys; a path ends at a non-object or empty object.
pub type FieldSet = BTreeSet<Vec<String>>;

const SERVER_META: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "generateName",
];

/// The leaf paths of an object (apiVersion, kind and server-maintained metadata excluded).
pub fn leaf_paths(obj: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    if let Some(map) = obj.as_object() {
        for (k, v) in map {
            if k == "apiVersion" || k == "kind" {
                continue;
            }
            if k == "metadata" {
                if let Some(meta) = v.as_object() {
                    for (mk, mv) in meta {
                        if !SERVER_META.contains(&mk.as_str()) {
                            collect(mv, &mut vec![k.clone(), mk.clone()], &mut out);
                        }
                    }
                }
                continue;
            }
            collect(v, &mut vec![k.clone()], &mut out);
        }
    }
    out
}

fn collect(v: &Value, path: &mut Vec<String>, out: &mut FieldSet) {
    match v.as_object() {
        Some(map) if !map.is_empty() => {
            for (k, child) in map {
                path.push(k.clone());
                collect(child, path, out);
                path.pop();
            }
        }
        Some(_) => {}
        None => {
            out.insert(path.clone());
        }
    }
}

/// The value at `path`, if any.
pub fn value_at<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = obj;
    for p in path {
        cur = cur.get(p)?;
    }
    Some(cur)
}

fn overlaps(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// `FieldsV1` JSON of a field set.
pub fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut cur = &mut root;
        for p in path {
            let entry = cur.entry(format!("f:{p}")).or_insert_with(|| json!({}));
            match entry.as_object_mut() {
                Some(m) => cur = m,
                None => break,
            }
        }
    }
    Value::Object(root)
}

/// The field set a `FieldsV1` JSON describes.
pub fn from_fields_v1(v: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    fn walk(v: &Value, path: &mut Vec<String>, out: &mut FieldSet) {
        let children: Vec<(&String, &Value)> = v
            .as_object()
            .map(|m| m.iter().filter(|(k, _)| k.starts_with("f:")).collect())
            .unwrap_or_default();
        if children.is_empty() {
            if !path.is_empty() {
                out.insert(path.clone());
            }
            return;
        }
        for (k, child) in children {
            path.push(k[2..].to_string());
            walk(child, path, out);
            path.pop();
        }
    }
    walk(v, &mut Vec::new(), &mut out);
    out
}

/// One managedFields entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub time: String,
    pub subresource: String,
    pub fields: FieldSet,
}

/// The entries of an object's metadata.managedFields.
pub fn entries(obj: &Value) -> Vec<Entry> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|e| Entry {
                    manager: e
                        .get("manager")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    operation: e
                        .get("operation")
                        .and_then(Value::as_str)
                        .unwrap_or("Update")
                        .to_string(),
                    api_version: e
                        .get("apiVersion")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    time: e
                        .get("time")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    subresource: e
                        .get("subresource")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    fields: e.get("fieldsV1").map(from_fields_v1).unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Writes entries into metadata.managedFields (entries owning nothing are dropped).
pub fn set_entries(obj: &mut Value, list: &[Entry]) {
    let arr: Vec<Value> = list
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut v = json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
                "time": e.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": to_fields_v1(&e.fields),
            });
            if !e.subresource.is_empty() {
                v["subresource"] = json!(e.subresource);
            }
            v
        })
        .collect();
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    let meta = map.entry("metadata").or_insert_with(|| json!({}));
    if let Some(meta) = meta.as_object_mut() {
        if arr.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(arr));
        }
    }
}

/// Records an Update operation by `manager`: it takes ownership of every field it changed.
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    subresource: &str,
    now: &str,
) {
    let mut list = old.map(entries).unwrap_or_default();
    let new_paths = leaf_paths(new);
    let old_paths = old.map(leaf_paths).unwrap_or_default();
    let changed: FieldSet = new_paths
        .iter()
        .filter(|p| old.is_none_or(|o| value_at(o, p) != value_at(new, p)))
        .cloned()
        .collect();
    let removed: Vec<&Vec<String>> = old_paths
        .iter()
        .filter(|p| !new_paths.contains(*p))
        .collect();
    for e in list.iter_mut() {
        e.fields.retain(|p| !removed.iter().any(|r| overlaps(p, r)));
        if !(e.manager == manager && e.operation == "Update") {
            e.fields.retain(|p| !changed.iter().any(|c| overlaps(p, c)));
        }
        // fields that no longer exist cannot be owned
        e.fields.retain(|p| value_at(new, p).is_some());
    }
    if !changed.is_empty() {
        match list.iter_mut().find(|e| {
            e.manager == manager && e.operation == "Update" && e.subresource == subresource
        }) {
            Some(e) => {
                e.fields.extend(changed);
                e.time = now.to_string();
                e.api_version = api_version.to_string();
            }
            None => list.push(Entry {
                manager: manager.to_string(),
                operation: "Update".into(),
                api_version: api_version.to_string(),
                time: now.to_string(),
                subresource: subresource.to_string(),
                fields: changed,
            }),
        }
    }
    set_entries(new, &list);
}

fn remove_path(obj: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    for p in parents {
        match cur.get_mut(p) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let Some(m) = cur.as_object_mut() {
        m.remove(last);
    }
}

fn deep_merge(target: &mut Value, applied: &Value) {
    let Some(a) = applied.as_object() else {
        *target = applied.clone();
        return;
    };
    if a.is_empty() && target.is_object() {
        return;
    }
    let Some(t) = target.as_object_mut() else {
        *target = applied.clone();
        return;
    };
    for (k, v) in a {
        match t.get_mut(k) {
            Some(existing) if existing.is_object() && v.is_object() => deep_merge(existing, v),
            _ => {
                t.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Server-side apply of `applied` by `manager` onto `current` (None: the object is new).
/// Returns the merged object (managedFields updated) or the conflicts when `force` is false.
pub fn apply(
    current: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    api_version: &str,
    subresource: &str,
    now: &str,
) -> Result<Value, Vec<Cause>> {
    let mut list = current.map(entries).unwrap_or_default();
    let applied_set = leaf_paths(applied);
    let empty = json!({});
    let cur = current.unwrap_or(&empty);
    let mut conflicts = Vec::new();
    for e in &list {
        if e.manager == manager && e.operation == "Apply" {
            continue;
        }
        for p in &e.fields {
            for q in &applied_set {
                if overlaps(p, q)
                    && value_at(cur, q) != value_at(applied, q)
                    && value_at(cur, q).is_some()
                {
                    conflicts.push(Cause::new(
                        "FieldManagerConflict",
                        format!(".{}", q.join(".")),
                        format!(
                            "conflict with \"{}\"{}: .{}",
                            e.manager,
                            if e.operation == "Update" {
                                " using ".to_string() + &e.api_version
                            } else {
                                String::new()
                            },
                            q.join(".")
                        ),
                    ));
                }
            }
        }
    }
    if !conflicts.is_empty() && !force {
        conflicts.dedup();
        return Err(conflicts);
    }
    if force {
        for e in list.iter_mut() {
            if !(e.manager == manager && e.operation == "Apply") {
                e.fields.retain(|p| {
                    !applied_set
                        .iter()
                        .any(|q| overlaps(p, q) && value_at(cur, q) != value_at(applied, q))
                });
            }
        }
    }
    let previous: FieldSet = list
        .iter()
        .find(|e| e.manager == manager && e.operation == "Apply")
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let mut result = current.cloned().unwrap_or_else(|| json!({}));
    for p in previous
        .iter()
        .filter(|p| !applied_set.iter().any(|q| overlaps(p, q)))
    {
        let owned_elsewhere = list
            .iter()
            .filter(|e| !(e.manager == manager && e.operation == "Apply"))
            .any(|e| e.fields.iter().any(|o| overlaps(o, p)));
        if !owned_elsewhere {
            remove_path(&mut result, p);
        }
    }
    deep_merge(&mut result, applied);
    match list
        .iter_mut()
        .find(|e| e.manager == manager && e.operation == "Apply")
    {
        Some(e) => {
            e.fields = applied_set;
            e.time = now.to_string();
            e.api_version = api_version.to_string();
        }
        None => list.push(Entry {
            manager: manager.to_string(),
            operation: "Apply".into(),
            api_version: api_version.to_string(),
            time: now.to_string(),
            subresource: subresource.to_string(),
            fields: applied_set,
        }),
    }
    set_entries(&mut result, &list);
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_v1_round_trip() {
        let obj = json!({"apiVersion": "v1", "metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"a": 1, "b": {"c": [1]}}});
        let set = leaf_paths(&obj);
        assert_eq!(set.len(), 3);
        assert_eq!(from_fields_v1(&to_fields_v1(&set)), set);
    }

    #[test]
    fn apply_conflicts_and_force() {
        let a = apply(
            None,
            &json!({"spec": {"x": 1, "y": 1}}),
            "alice",
            false,
            "v1",
            "",
            "t",
        )
        .unwrap();
        let conflict = apply(
            Some(&a),
            &json!({"spec": {"x": 2}}),
            "bob",
            false,
            "v1",
            "",
            "t",
        );
        assert!(conflict.is_err());
        let same = apply(
            Some(&a),
            &json!({"spec": {"x": 1}}),
            "bob",
            false,
            "v1",
            "",
            "t",
        );
        assert!(same.is_ok());
        let forced = apply(
            Some(&a),
            &json!({"spec": {"x": 2}}),
            "bob",
            true,
            "v1",
            "",
            "t",
        )
        .unwrap();
        assert_eq!(forced["spec"]["x"], 2);
        // alice stops applying y: removed; x is bob's now
        let after = apply(
            Some(&forced),
            &json!({"spec": {}}),
            "alice",
            false,
            "v1",
            "",
            "t",
        )
        .unwrap();
        assert_eq!(after["spec"], json!({"x": 2}));
    }
}
