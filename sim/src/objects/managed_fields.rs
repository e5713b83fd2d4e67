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
        // an empty map is a field of its own (a real server records `f:backup: {}`)
        Some(_) | None => {
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

/// Whether an applier's field `q` contends with another manager's field `p`: they overlap,
/// unless `q` is an empty map the applier only wants to exist and `p` a field inside it.
fn contends(p: &[String], q: &[String], applied: &Value) -> bool {
    let empty_map = value_at(applied, q).is_some_and(|v| v.as_object().is_some_and(Map::is_empty));
    overlaps(p, q) && !(empty_map && p.len() > q.len())
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

/// Rewrites each managedFields entry's `FieldsV1` of `obj` as a real server encodes the same
/// ownership: an Update's map owned key by key also lists itself (`".": {}`) where the server's schema
/// makes it a map rather than a struct (every object of a custom resource; labels,
/// annotations, ConfigMap and Secret data, node selectors and the pointer structs of update
/// strategies in built-in kinds), and an atomic field of a built-in kind ([`is_atomic`]) is
/// owned as one field.
pub fn encode_as_server(obj: &mut Value, custom: bool) {
    let snapshot = obj.clone();
    let Some(list) = obj
        .pointer_mut("/metadata/managedFields")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    // The maps an earlier entry (in the server's order) owns, or owns keys of: a later Update
    // that adds keys to one did not create it, and a real server lists a map itself only in the entry of
    // the manager that created it.
    let mut earlier: Vec<FieldSet> = Vec::new();
    for entry in list {
        // an Apply's set is the applied configuration's fields, without the map members
        let update = entry.get("operation").and_then(Value::as_str) != Some("Apply");
        if let Some(fields) = entry.get_mut("fieldsV1") {
            let owned = from_fields_v1(fields);
            let created_elsewhere = |map: &[String]| {
                earlier
                    .iter()
                    .any(|set| set.iter().any(|p| p.starts_with(map)))
            };
            mark(
                fields,
                &snapshot,
                &mut Vec::new(),
                Marking {
                    custom,
                    update,
                    created_elsewhere: &created_elsewhere,
                },
            );
            earlier.push(owned);
        }
    }
}

/// How [`mark`] encodes one entry.
#[derive(Clone, Copy)]
struct Marking<'a> {
    /// The object is a custom resource (every object a map).
    custom: bool,
    /// The entry is an Update's.
    update: bool,
    /// Whether an earlier entry owns the map at a path or keys of it.
    created_elsewhere: &'a dyn Fn(&[String]) -> bool,
}

fn mark(fields: &mut Value, obj: &Value, path: &mut Vec<String>, how: Marking<'_>) {
    let Marking { custom, update, .. } = how;
    let Some(map) = fields.as_object_mut() else {
        return;
    };
    if !custom && is_atomic(path) {
        map.clear();
        return;
    }
    let segments: Vec<&str> = path.iter().map(String::as_str).collect();
    if !custom
        && update
        && map.is_empty()
        && let Some(Value::Array(items)) = value_at(obj, path)
        && let Some(mut listed) = list_fields(&segments, items)
    {
        if lists_itself(obj, &segments) {
            listed.insert(".".into(), json!({}));
        }
        *map = listed;
        return;
    }
    if !custom && update && is_replication_controller_template(obj, &segments) {
        map.insert(".".into(), json!({}));
    }
    let keys: Vec<String> = map
        .keys()
        .filter(|k| k.starts_with("f:"))
        .cloned()
        .collect();
    if update && !keys.is_empty() && !path.is_empty() {
        let is_map = value_at(obj, path).is_some_and(Value::is_object);
        if is_map && (custom || is_map_typed(path)) && !(how.created_elsewhere)(path) {
            map.insert(".".into(), json!({}));
        }
    }
    for key in keys {
        if let Some(child) = map.get_mut(&key) {
            path.push(key[2..].to_string());
            mark(child, obj, path, how);
            path.pop();
        }
    }
}

/// Whether a built-in kind's field at `path` is atomic (owned as one field): a workload's or
/// Service's `spec.selector`, an events.k8s.io Event's `regarding` and `related`.
fn is_atomic(path: &[String]) -> bool {
    match path {
        [spec, selector] => spec == "spec" && selector == "selector",
        [field] => field == "regarding" || field == "related",
        _ => false,
    }
}

/// Whether a built-in kind's field at `path` is a map (or a pointer to a struct) in the
/// server's schema rather than a plain struct.
fn is_map_typed(path: &[String]) -> bool {
    let last = path.last().map(String::as_str).unwrap_or_default();
    let parent = path
        .len()
        .checked_sub(2)
        .map(|i| path[i].as_str())
        .unwrap_or_default();
    (matches!(last, "labels" | "annotations") && parent == "metadata")
        || (path.len() == 1 && matches!(last, "data" | "binaryData" | "stringData"))
        || matches!(
            last,
            "nodeSelector" | "rollingUpdate" | "resourceAttributes" | "nonResourceAttributes"
        )
}

/// The keys of the associative list at `path` of a built-in kind (its schema's
/// `x-kubernetes-list-map-keys`, in their order), when its items carry them.
fn list_map_keys(path: &[&str], items: &[Value]) -> Option<&'static [&'static str]> {
    let last = *path.last()?;
    let parent = path.len().checked_sub(3).map(|i| path[i]);
    let keys: &'static [&'static str] = match last {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims" => &["name"],
        "volumeMounts" => &["mountPath"],
        "volumeDevices" => &["devicePath"],
        "ports"
            if matches!(
                parent,
                Some("containers" | "initContainers" | "ephemeralContainers")
            ) =>
        {
            &["containerPort", "protocol"]
        }
        "ports" if path == ["spec", "ports"] => &["port", "protocol"],
        "conditions" => &["type"],
        "hostAliases" => &["ip"],
        "topologySpreadConstraints" => &["topologyKey", "whenUnsatisfiable"],
        "ownerReferences" if path == ["metadata", "ownerReferences"] => &["uid"],
        _ => return None,
    };
    items
        .iter()
        .all(|i| keys.iter().all(|k| i.get(*k).is_some()))
        .then_some(keys)
}

/// The kind of the object being encoded.
fn kind(obj: &Value) -> &str {
    obj.get("kind").and_then(Value::as_str).unwrap_or_default()
}

/// Whether kube-apiserver v1.37.2 lists an Update's associative list at `path` itself (`.`)
/// beside its items, as measured by the differential test against it: a Service's `spec.ports`
/// and a ReplicationController's template containers do, a Deployment's, Job's or DaemonSet's
/// template containers do not.
fn lists_itself(obj: &Value, path: &[&str]) -> bool {
    path == ["spec", "ports"]
        || (kind(obj) == "ReplicationController"
            && path == ["spec", "template", "spec", "containers"])
}

/// A ReplicationController's template (a pointer) and its metadata and spec, which
/// kube-apiserver lists themselves (`.`) in an Update's entry.
fn is_replication_controller_template(obj: &Value, path: &[&str]) -> bool {
    kind(obj) == "ReplicationController"
        && matches!(
            path,
            ["spec", "template"] | ["spec", "template", "metadata" | "spec"]
        )
}

/// The `FieldsV1` of an associative list owned as a whole, as a real server records it: each
/// item under its keys (`k:{"name":"web"}`) with its own fields (for some lists the list
/// itself too, [`lists_itself`]). Ownership stays with the list as one field
/// ([`from_fields_v1`] reads `f:` entries only).
fn list_fields(path: &[&str], items: &[Value]) -> Option<Map<String, Value>> {
    let keys = list_map_keys(path, items)?;
    let mut out = Map::new();
    for item in items {
        let key: Map<String, Value> = keys
            .iter()
            .filter_map(|k| Some(((*k).to_string(), item.get(*k)?.clone())))
            .collect();
        let mut fields = Map::new();
        fields.insert(".".into(), json!({}));
        let mut item_path: Vec<&str> = path.to_vec();
        item_path.push("*");
        if let Some(members) = item.as_object() {
            for (name, value) in members {
                item_path.push(name);
                fields.insert(format!("f:{name}"), value_fields(&item_path, value));
                item_path.pop();
            }
        }
        out.insert(format!("k:{}", Value::Object(key)), Value::Object(fields));
    }
    Some(out)
}

/// The `FieldsV1` of `value` at `path` inside a list item: structs by member, maps the schema
/// types as maps with `.` too, associative lists by item, anything else one field.
fn value_fields(path: &[&str], value: &Value) -> Value {
    match value {
        Value::Object(members) if !members.is_empty() => {
            let mut out = Map::new();
            let last = path.last().copied().unwrap_or_default();
            if matches!(
                last,
                "limits" | "requests" | "labels" | "annotations" | "nodeSelector" | "claims"
            ) {
                out.insert(".".into(), json!({}));
            }
            let mut inner = path.to_vec();
            for (name, child) in members {
                inner.push(name);
                out.insert(format!("f:{name}"), value_fields(&inner, child));
                inner.pop();
            }
            Value::Object(out)
        }
        Value::Array(items) => list_fields(path, items).map_or_else(|| json!({}), Value::Object),
        _ => json!({}),
    }
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
    // in a real server's order: Apply before Update, then the older first, then by manager
    let mut sorted: Vec<&Entry> = list.iter().collect();
    sorted.sort_by(|a, b| {
        (&a.operation, &a.time, &a.manager).cmp(&(&b.operation, &b.time, &b.manager))
    });
    let arr: Vec<Value> = sorted
        .into_iter()
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
/// An existing object that has no managedFields (its creator owned nothing) stays untracked
/// until an Apply, as kube-apiserver's field manager skips non-applied managers there.
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    subresource: &str,
    now: &str,
) {
    let mut list = old.map(entries).unwrap_or_default();
    if old.is_some() && list.is_empty() {
        set_entries(new, &list);
        return;
    }
    let new_paths = leaf_paths(new);
    let old_paths = old.map(leaf_paths).unwrap_or_default();
    let changed: FieldSet = new_paths
        .iter()
        .filter(|p| old.is_none_or(|o| value_at(o, p) != value_at(new, p)))
        .cloned()
        .collect();
    // gone from the object (an empty map that gained keys is still there)
    let removed: Vec<&Vec<String>> = old_paths
        .iter()
        .filter(|p| !new_paths.contains(*p) && value_at(new, p).is_none())
        .collect();
    for e in list.iter_mut() {
        e.fields.retain(|p| !removed.iter().any(|r| overlaps(p, r)));
        if !(e.manager == manager && e.operation == "Update") {
            // a changed field is taken from whoever owned it or a field inside it; owning a
            // map's existence is not taken by a change of one of its keys
            e.fields.retain(|p| {
                !changed.iter().any(|c| {
                    p.starts_with(c)
                        || (c.starts_with(p) && !value_at(new, p).is_some_and(Value::is_object))
                })
            });
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
                if contends(p, q, applied)
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
                    !applied_set.iter().any(|q| {
                        contends(p, q, applied) && value_at(cur, q) != value_at(applied, q)
                    })
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
        .filter(|p| !applied_set.iter().any(|q| contends(p, q, applied)))
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
    fn an_object_without_managed_fields_stays_untracked_until_an_apply() {
        let mut created = json!({"apiVersion": "v1", "metadata": {"name": "a"}});
        record_update(None, &mut created, "creator", "v1", "", "t");
        assert!(created.pointer("/metadata/managedFields").is_none());
        let mut updated = created.clone();
        updated["data"] = json!({"x": "y"});
        record_update(Some(&created), &mut updated, "kubectl", "v1", "", "t2");
        assert!(updated.pointer("/metadata/managedFields").is_none());
        let applied = apply(
            Some(&updated),
            &json!({"data": {"z": "1"}}),
            "m",
            false,
            "v1",
            "",
            "t3",
        )
        .unwrap();
        assert_eq!(entries(&applied).len(), 1);
    }

    #[test]
    fn an_empty_map_is_owned_and_keeps_its_owner_when_another_manager_adds_keys() {
        let applied = apply(None, &json!({"data": {}}), "m1", false, "v1", "", "t").unwrap();
        assert_eq!(
            applied.pointer("/metadata/managedFields/0/fieldsV1"),
            Some(&json!({"f:data": {}}))
        );
        // a key inside the map: no conflict with the map's existence, and m1 keeps owning it
        let mut updated = applied.clone();
        updated["data"]["a"] = json!("1");
        record_update(Some(&applied), &mut updated, "m3", "v1", "", "t2");
        let owners: Vec<(String, FieldSet)> = entries(&updated)
            .into_iter()
            .map(|e| (e.manager, e.fields))
            .collect();
        assert_eq!(
            owners,
            [
                ("m1".to_string(), FieldSet::from([vec!["data".to_string()]])),
                (
                    "m3".to_string(),
                    FieldSet::from([vec!["data".to_string(), "a".to_string()]])
                ),
            ]
        );
        let again = apply(
            Some(&updated),
            &json!({"data": {}}),
            "m1",
            false,
            "v1",
            "",
            "t3",
        );
        assert!(
            again.is_ok(),
            "applying the empty map again contends with no key"
        );
    }

    #[test]
    fn encoded_as_a_real_server_encodes_maps_and_atomic_selectors() {
        let mut obj = json!({"metadata": {"labels": {"a": "1"}},
            "spec": {"selector": {"matchLabels": {"a": "1"}}, "replicas": 1}});
        record_update(None, &mut obj, "m", "apps/v1", "", "t");
        encode_as_server(&mut obj, false);
        assert_eq!(
            obj.pointer("/metadata/managedFields/0/fieldsV1"),
            Some(&json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}},
                "f:spec": {"f:selector": {}, "f:replicas": {}}}))
        );
        let mut custom = json!({"spec": {"api": {"replicas": 1}}});
        record_update(None, &mut custom, "m", "x/v1", "", "t");
        encode_as_server(&mut custom, true);
        assert_eq!(
            custom.pointer("/metadata/managedFields/0/fieldsV1"),
            Some(&json!({"f:spec": {".": {}, "f:api": {".": {}, "f:replicas": {}}}}))
        );
    }

    #[test]
    fn an_updated_associative_list_lists_its_items_by_their_keys() {
        let mut obj = json!({"spec": {
            "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}],
            "template": {"spec": {"containers": [{
                "name": "web", "image": "nginx", "resources": {},
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "args": ["a"]
            }]}}
        }});
        record_update(None, &mut obj, "m", "v1", "", "t");
        encode_as_server(&mut obj, false);
        assert_eq!(
            obj.pointer("/metadata/managedFields/0/fieldsV1"),
            Some(&json!({"f:spec": {
                "f:ports": {".": {}, "k:{\"port\":80,\"protocol\":\"TCP\"}": {
                    ".": {}, "f:port": {}, "f:protocol": {}, "f:targetPort": {}}},
                "f:template": {"f:spec": {"f:containers": {
                    "k:{\"name\":\"web\"}": {".": {}, "f:args": {}, "f:image": {},
                        "f:name": {}, "f:resources": {},
                        "f:ports": {
                            "k:{\"containerPort\":8080,\"protocol\":\"TCP\"}": {
                                ".": {}, "f:containerPort": {}, "f:protocol": {}}}}}}}
            }}))
        );
        // Ownership stays with the list as one field.
        let fields = obj.pointer("/metadata/managedFields/0/fieldsV1").unwrap();
        assert!(from_fields_v1(fields).contains(&vec![
            "spec".to_string(),
            "template".to_string(),
            "spec".to_string(),
            "containers".to_string()
        ]));
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
