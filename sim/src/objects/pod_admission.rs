//! What kube-apiserver's default admission plugins and the Pod strategy do to a new Pod, after
//! its writer's managedFields are taken (so nobody owns these): ServiceAccount (the
//! `default` account, and the `kube-api-access-*` token volume mounted in every container),
//! LimitRanger (the namespace's LimitRanges' container defaults, listed in the
//! `kubernetes.io/limit-ranger` annotation), Priority (0 and `PreemptLowerPriority` without a
//! class, the two system classes by name), DefaultTolerationSeconds (300 s for not-ready and
//! unreachable nodes) and the QoS class in the status.

use serde_json::{Map, Value, json};

use crate::in_cluster::ROOT_CA_CONFIG_MAP;
use crate::store::{ObjKey, Txn};

/// Where the ServiceAccount admission mounts the token volume.
pub const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The prefix of the token volume's name (a random suffix follows).
pub const TOKEN_VOLUME_PREFIX: &str = "kube-api-access-";
/// The annotation LimitRanger lists what it set in.
const LIMIT_RANGER_ANNOTATION: &str = "kubernetes.io/limit-ranger";
/// The built-in priority classes (name, value).
const SYSTEM_PRIORITIES: [(&str, i64); 2] = [
    ("system-cluster-critical", 2_000_000_000),
    ("system-node-critical", 2_000_001_000),
];

/// Admits the new pod `obj` in its namespace as seen in `txn`.
pub fn admit(obj: &mut Value, txn: &Txn<'_>) {
    let namespace = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let limit_ranges: Vec<Value> = txn
        .list("", "limitranges", Some(&namespace))
        .map(|(_, v)| v.clone())
        .collect();
    let account = obj
        .pointer("/spec/serviceAccountName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("default")
        .to_string();
    let account_object = txn
        .get(&ObjKey::new("", "serviceaccounts", &namespace, &account))
        .cloned();
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    service_account(spec, &account, account_object.as_ref());
    let set = limit_defaults(spec, &limit_ranges);
    priority(spec);
    default_tolerations(spec);
    if !set.is_empty()
        && let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut)
    {
        let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
        if let Some(annotations) = annotations.as_object_mut() {
            annotations.insert(
                LIMIT_RANGER_ANNOTATION.into(),
                json!(format!("LimitRanger plugin set: {}", set.join("; "))),
            );
        }
    }
    let qos = crate::controllers::pods::pod_status::qos_class(obj);
    if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) {
        status.insert("qosClass".into(), json!(qos));
    }
}

/// The containers of both lists (init containers first), with the word LimitRanger names each
/// kind by.
fn containers_mut(
    spec: &mut Map<String, Value>,
) -> impl Iterator<Item = (&'static str, &mut Map<String, Value>)> {
    let mut lists: Vec<(&'static str, &mut Value)> = spec
        .iter_mut()
        .filter_map(|(key, list)| match key.as_str() {
            "initContainers" => Some(("init container", list)),
            "containers" => Some(("container", list)),
            _ => None,
        })
        .collect();
    lists.sort_by_key(|(word, _)| *word != "init container");
    lists.into_iter().flat_map(|(word, list)| {
        list.as_array_mut()
            .into_iter()
            .flatten()
            .filter_map(Value::as_object_mut)
            .map(move |c| (word, c))
    })
}

/// Names the `default` account and mounts its token, unless the pod or its account turns
/// automounting off. A pod naming an account that does not exist keeps no token volume.
fn service_account(spec: &mut Map<String, Value>, account: &str, object: Option<&Value>) {
    spec.insert("serviceAccountName".into(), json!(account));
    spec.insert("serviceAccount".into(), json!(account));
    let automount = spec
        .get("automountServiceAccountToken")
        .and_then(Value::as_bool)
        .or_else(|| {
            object
                .and_then(|sa| sa.get("automountServiceAccountToken"))
                .and_then(Value::as_bool)
        })
        .unwrap_or(true);
    if object.is_none() || !automount {
        return;
    }
    let name = format!("{TOKEN_VOLUME_PREFIX}{}", super::meta::random_suffix());
    mount_token_volume(spec, &name);
}

/// Mounts the token volume `name` read-only at [`TOKEN_MOUNT_PATH`] in every container (init
/// containers too) that mounts nothing there, and adds the volume when one does.
pub fn mount_token_volume(spec: &mut Map<String, Value>, name: &str) {
    let mut mounted = false;
    for (_, container) in containers_mut(spec) {
        let mounts = container.entry("volumeMounts").or_insert_with(|| json!([]));
        let Some(mounts) = mounts.as_array_mut() else {
            continue;
        };
        if mounts.iter().any(|m| m["mountPath"] == TOKEN_MOUNT_PATH) {
            continue;
        }
        mounts.push(json!({"name": name, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH}));
        mounted = true;
    }
    if !mounted {
        return;
    }
    let volumes = spec.entry("volumes").or_insert_with(|| json!([]));
    if let Some(volumes) = volumes.as_array_mut() {
        volumes.push(token_volume(name));
    }
}

/// The projected token volume the ServiceAccount admission adds: a bound token, the cluster's
/// CA and the pod's namespace.
pub fn token_volume(name: &str) -> Value {
    json!({
        "name": name,
        "projected": {"defaultMode": 0o644, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": ROOT_CA_CONFIG_MAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace",
                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
        ]}
    })
}

/// Sets each container's missing limits and requests from the Container items of
/// `limit_ranges`; what was set, as LimitRanger lists it.
fn limit_defaults(spec: &mut Map<String, Value>, limit_ranges: &[Value]) -> Vec<String> {
    let mut limits = Map::new();
    let mut requests = Map::new();
    for item in limit_ranges
        .iter()
        .filter_map(|lr| lr.pointer("/spec/limits").and_then(Value::as_array))
        .flatten()
        .filter(|item| item["type"] == "Container")
    {
        for (from, into) in [("default", &mut limits), ("defaultRequest", &mut requests)] {
            if let Some(values) = item.get(from).and_then(Value::as_object) {
                into.extend(values.clone());
            }
        }
    }
    let mut set = Vec::new();
    if limits.is_empty() && requests.is_empty() {
        return set;
    }
    for (word, container) in containers_mut(spec) {
        let name = container
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let resources = container.entry("resources").or_insert_with(|| json!({}));
        let Some(resources) = resources.as_object_mut() else {
            continue;
        };
        let mut filled = |key: &str, defaults: &Map<String, Value>| -> Vec<String> {
            let mut names = Vec::new();
            let Some(current) = resources
                .entry(key)
                .or_insert_with(|| json!({}))
                .as_object_mut()
            else {
                return names;
            };
            for (resource, value) in defaults {
                if !current.contains_key(resource) {
                    current.insert(resource.clone(), value.clone());
                    names.push(resource.clone());
                }
            }
            names.sort();
            names
        };
        let set_requests = filled("requests", &requests);
        let set_limits = filled("limits", &limits);
        resources.retain(|_, v| v.as_object().is_none_or(|m| !m.is_empty()));
        if !set_requests.is_empty() {
            set.push(format!(
                "{} request for {word} {name}",
                set_requests.join(", ")
            ));
        }
        if !set_limits.is_empty() {
            set.push(format!("{} limit for {word} {name}", set_limits.join(", ")));
        }
    }
    set
}

/// The pod's priority: its system class's value, else 0 (no class names a global default
/// here), and the preemption policy that goes with it.
fn priority(spec: &mut Map<String, Value>) {
    let class = spec
        .get("priorityClassName")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let value = if class.is_empty() {
        Some(0)
    } else {
        SYSTEM_PRIORITIES
            .iter()
            .find(|(name, _)| *name == class)
            .map(|(_, v)| *v)
    };
    if let Some(value) = value {
        spec.entry("priority").or_insert(json!(value));
        spec.entry("preemptionPolicy")
            .or_insert(json!("PreemptLowerPriority"));
    }
}

/// Tolerates not-ready and unreachable nodes for 300 s, unless the pod tolerates them already.
fn default_tolerations(spec: &mut Map<String, Value>) {
    let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
    let Some(tolerations) = tolerations.as_array_mut() else {
        return;
    };
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let tolerated = tolerations.iter().any(|t| {
            let k = t["key"].as_str().unwrap_or_default();
            let effect = t["effect"].as_str().unwrap_or_default();
            (k == key || k.is_empty()) && (effect == "NoExecute" || effect.is_empty())
        });
        if !tolerated {
            tolerations.push(
                json!({"key": key, "operator": "Exists", "effect": "NoExecute",
                                    "tolerationSeconds": 300}),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_of(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn limit_ranges_fill_what_a_container_lacks_and_say_so() {
        let mut spec = spec_of(json!({"containers": [
            {"name": "c", "resources": {"limits": {"cpu": "1"}}},
            {"name": "d"}
        ]}));
        let ranges = [json!({"spec": {"limits": [{"type": "Container",
            "default": {"memory": "64Mi", "cpu": "2"}, "defaultRequest": {"memory": "32Mi"}}]}})];
        let set = limit_defaults(&mut spec, &ranges);
        assert_eq!(
            set,
            [
                "memory request for container c",
                "memory limit for container c",
                "memory request for container d",
                "cpu, memory limit for container d",
            ]
        );
        assert_eq!(spec["containers"][0]["resources"]["limits"]["cpu"], "1");
        assert_eq!(spec["containers"][1]["resources"]["limits"]["cpu"], "2");
    }

    #[test]
    fn the_token_volume_is_mounted_unless_automounting_is_off() {
        let mut spec = spec_of(json!({"containers": [{"name": "c"}]}));
        service_account(&mut spec, "default", Some(&json!({})));
        let volume = spec["volumes"][0]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(volume.starts_with(TOKEN_VOLUME_PREFIX), "{volume}");
        assert_eq!(
            spec["containers"][0]["volumeMounts"][0]["name"],
            volume.as_str()
        );
        assert_eq!(spec["serviceAccount"], "default");

        let mut off = spec_of(json!({"containers": [{"name": "c"}]}));
        service_account(
            &mut off,
            "default",
            Some(&json!({"automountServiceAccountToken": false})),
        );
        assert!(off.get("volumes").is_none());
        let mut missing = spec_of(json!({"containers": [{"name": "c"}]}));
        service_account(&mut missing, "absent", None);
        assert!(missing.get("volumes").is_none());
    }

    #[test]
    fn tolerations_and_priority_are_defaulted_once() {
        let mut spec = spec_of(json!({"tolerations": [{"operator": "Exists"}]}));
        default_tolerations(&mut spec);
        assert_eq!(spec["tolerations"].as_array().map(Vec::len), Some(1));
        let mut spec = spec_of(json!({}));
        default_tolerations(&mut spec);
        priority(&mut spec);
        assert_eq!(spec["tolerations"].as_array().map(Vec::len), Some(2));
        assert_eq!(spec["priority"], 0);
        assert_eq!(spec["preemptionPolicy"], "PreemptLowerPriority");
    }
}
