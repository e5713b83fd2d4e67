//! The Deployment controller's planning, pure: which ReplicaSet carries the current pod
//! template (`pod-template-hash`), which revision it is, how far the roll-out may go in one
//! step (RollingUpdate with maxSurge / maxUnavailable, or Recreate), which old ReplicaSets fall
//! out of the revision history, and the Deployment's status from its ReplicaSets' statuses,
//! as the real controller computes them.

use serde_json::{Map, Value, json};

use super::status::{Wanted, workload_conditions};
use crate::store::selectors::label_selector_matches;

/// Label tying a ReplicaSet and its pods to one pod template.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// Annotation with a ReplicaSet's revision.
pub const REVISION: &str = "deployment.kubernetes.io/revision";

fn i64_at(v: &Value, pointer: &str) -> i64 {
    v.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The revision a ReplicaSet carries (0 when none).
pub fn revision_of(rs: &Value) -> i64 {
    rs.pointer("/metadata/annotations")
        .and_then(|a| a.get(REVISION))
        .and_then(Value::as_str)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn feed(hash: &mut u32, bytes: &[u8]) {
    for b in bytes {
        *hash = (*hash ^ u32::from(*b)).wrapping_mul(16_777_619);
    }
}

/// FNV-1a over the value with object keys in sorted order (independent of key order).
fn hash_value(value: &Value, hash: &mut u32) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            feed(hash, b"{");
            for key in keys {
                feed(hash, key.as_bytes());
                feed(hash, b":");
                hash_value(&map[key], hash);
            }
            feed(hash, b"}");
        }
        Value::Array(items) => {
            feed(hash, b"[");
            items.iter().for_each(|item| hash_value(item, hash));
            feed(hash, b"]");
        }
        other => feed(hash, other.to_string().as_bytes()),
    }
}

/// The `pod-template-hash` of a pod template: a hash of its content, written with the
/// alphabet Kubernetes uses for generated names.
pub fn template_hash(template: &Value) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut hash = 2_166_136_261_u32;
    hash_value(template, &mut hash);
    hash.to_string()
        .bytes()
        .map(|digit| char::from(ALPHABET[usize::from(digit - b'0')]))
        .collect()
}

/// A ReplicaSet's template without its `pod-template-hash` label (to compare with the
/// Deployment's).
fn template_without_hash(rs: &Value) -> Value {
    let mut template = rs.pointer("/spec/template").cloned().unwrap_or(Value::Null);
    if let Some(labels) = template
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove(POD_TEMPLATE_HASH);
        if labels.is_empty()
            && let Some(metadata) = template.get_mut("metadata").and_then(Value::as_object_mut)
        {
            metadata.remove("labels");
        }
    }
    template
}

fn comparable(template: &Value) -> Value {
    let mut template = template.clone();
    if let Some(metadata) = template.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.retain(|key, value| {
            !(value.is_null()
                || (key == "labels" || key == "annotations")
                    && value.as_object().is_some_and(Map::is_empty))
        });
        if metadata.is_empty()
            && let Some(map) = template.as_object_mut()
        {
            map.remove("metadata");
        }
    }
    template
}

/// Whether `rs` carries the Deployment's current template.
pub fn carries_template(rs: &Value, template: &Value) -> bool {
    comparable(&template_without_hash(rs)) == comparable(template)
}

/// An int-or-percent of `total`, rounded up or down.
fn resolve(value: Option<&Value>, default: &str, total: i64, round_up: bool) -> i64 {
    let fallback = Value::String(default.to_owned());
    let value = value.unwrap_or(&fallback);
    if let Some(n) = value.as_i64() {
        return n.max(0);
    }
    let percent: i64 = value
        .as_str()
        .and_then(|s| s.strip_suffix('%'))
        .and_then(|p| p.parse().ok())
        .unwrap_or(25);
    let scaled = percent * total;
    if round_up {
        (scaled + 99) / 100
    } else {
        scaled / 100
    }
}

/// maxSurge (rounded up) and maxUnavailable (rounded down) of a Deployment; both zero is
/// read as one unavailable, as the real controller does.
pub fn surge_and_unavailable(deployment: &Value, replicas: i64) -> (i64, i64) {
    let rolling = deployment.pointer("/spec/strategy/rollingUpdate");
    let surge = resolve(
        rolling.and_then(|r| r.get("maxSurge")),
        "25%",
        replicas,
        true,
    );
    let unavailable = resolve(
        rolling.and_then(|r| r.get("maxUnavailable")),
        "25%",
        replicas,
        false,
    );
    if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable)
    }
}

/// What one reconcile of a Deployment does.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// A new ReplicaSet to create (its manifest).
    pub create: Option<Value>,
    /// ReplicaSets to scale: (name, replicas).
    pub scale: Vec<(String, i64)>,
    /// An existing ReplicaSet that carries the template again, with its new revision.
    pub revise: Option<(String, i64)>,
    /// Old ReplicaSets beyond revisionHistoryLimit, to delete.
    pub delete: Vec<String>,
    /// The revision of the ReplicaSet carrying the current template.
    pub revision: i64,
    /// The Deployment's status.
    pub status: Value,
}

/// The ReplicaSets among `all` that `deployment` controls.
pub fn owned<'a>(deployment: &Value, all: &'a [Value]) -> Vec<&'a Value> {
    let uid = str_at(deployment, "/metadata/uid");
    all.iter()
        .filter(|rs| {
            rs.pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .is_some_and(|refs| {
                    refs.iter()
                        .any(|o| o["uid"] == uid && o["controller"] == true)
                })
        })
        .collect()
}

fn new_replica_set(deployment: &Value, template: &Value, replicas: i64, revision: i64) -> Value {
    let hash = template_hash(template);
    let name = format!("{}-{hash}", str_at(deployment, "/metadata/name"));
    let mut template = template.clone();
    template["metadata"]["labels"][POD_TEMPLATE_HASH] = json!(hash);
    let mut selector = deployment
        .pointer("/spec/selector")
        .cloned()
        .unwrap_or_else(|| json!({}));
    selector["matchLabels"][POD_TEMPLATE_HASH] = json!(hash);
    json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": name,
            "namespace": str_at(deployment, "/metadata/namespace"),
            "labels": template["metadata"]["labels"].clone(),
            "annotations": {REVISION: revision.to_string()},
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "Deployment",
                "name": str_at(deployment, "/metadata/name"),
                "uid": str_at(deployment, "/metadata/uid"),
                "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": {
            "replicas": replicas,
            "minReadySeconds": i64_at(deployment, "/spec/minReadySeconds"),
            "selector": selector,
            "template": template,
        },
    })
}

/// One step of the roll-out of `deployment` over the ReplicaSets it controls; `held` stops the
/// roll-out where it is (status still reported). No pod of an old ReplicaSet is running.
pub fn plan(deployment: &Value, replica_sets: &[&Value], held: bool) -> Plan {
    plan_with_old_pods(deployment, replica_sets, held, false)
}

/// [`plan`], with `old_pods_running` saying whether a pod of an old ReplicaSet still runs
/// (terminating included: a ReplicaSet's `status.replicas` no longer counts a pod once it is
/// being deleted). Recreate starts the new pods only when none does, as the real controller's
/// `oldPodsRunning` check does: the old processes have exited before a new one starts.
pub fn plan_with_old_pods(
    deployment: &Value,
    replica_sets: &[&Value],
    held: bool,
    old_pods_running: bool,
) -> Plan {
    let template = deployment
        .pointer("/spec/template")
        .cloned()
        .unwrap_or(Value::Null);
    let replicas = deployment
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
        .max(0);
    let paused = deployment.pointer("/spec/paused") == Some(&Value::Bool(true));
    let current = replica_sets
        .iter()
        .copied()
        .find(|rs| carries_template(rs, &template));
    let mut old: Vec<&Value> = replica_sets
        .iter()
        .copied()
        .filter(|rs| current.is_none_or(|c| !std::ptr::eq(*rs, c)))
        .collect();
    old.sort_by_key(|rs| revision_of(rs));
    let max_old_revision = old.iter().map(|rs| revision_of(rs)).max().unwrap_or(0);
    let mut out = Plan::default();
    let (surge, unavailable) = surge_and_unavailable(deployment, replicas);
    let recreate = str_at(deployment, "/spec/strategy/type") == "Recreate";
    let spec_of = |rs: &Value| i64_at(rs, "/spec/replicas");
    let old_specs: i64 = old.iter().map(|rs| spec_of(rs)).sum();
    // The new ReplicaSet: created (or revised) with its first scale.
    let (new_name, new_spec, new_status) = match current {
        Some(rs) => {
            let revision = revision_of(rs);
            out.revision = if revision > max_old_revision {
                revision
            } else {
                out.revise = Some((
                    str_at(rs, "/metadata/name").to_owned(),
                    max_old_revision + 1,
                ));
                max_old_revision + 1
            };
            (
                str_at(rs, "/metadata/name").to_owned(),
                spec_of(rs),
                rs.get("status").cloned(),
            )
        }
        None => {
            out.revision = max_old_revision + 1;
            let manifest = new_replica_set(deployment, &template, 0, out.revision);
            let name = str_at(&manifest, "/metadata/name").to_owned();
            out.create = Some(manifest);
            (name, 0, None)
        }
    };
    let new_available = new_status
        .as_ref()
        .map_or(0, |s| i64_at(s, "/availableReplicas"));
    let mut new_target = new_spec;
    if !held && !paused {
        if recreate {
            if old_specs > 0 {
                for rs in old.iter().filter(|rs| spec_of(rs) > 0) {
                    out.scale.push((str_at(rs, "/metadata/name").to_owned(), 0));
                }
            } else if !old_pods_running && old.iter().all(|rs| i64_at(rs, "/status/replicas") == 0)
            {
                new_target = replicas;
            }
        } else if new_spec > replicas {
            new_target = replicas;
        } else {
            let max_total = replicas + surge;
            let total = old_specs + new_spec;
            if new_spec < replicas && total < max_total {
                new_target = replicas.min(new_spec + max_total - total);
            } else {
                out.scale.extend(scale_down_old(
                    &old,
                    replicas,
                    unavailable,
                    new_spec,
                    new_available,
                    new_status.as_ref(),
                ));
            }
        }
    }
    if new_target != new_spec {
        match out.create.as_mut() {
            Some(manifest) => manifest["spec"]["replicas"] = json!(new_target),
            None => out.scale.push((new_name.clone(), new_target)),
        }
    }
    // Revision history: old ReplicaSets scaled to zero beyond the limit, oldest first.
    let limit = deployment
        .pointer("/spec/revisionHistoryLimit")
        .and_then(Value::as_i64)
        .unwrap_or(10)
        .max(0);
    let idle: Vec<&&Value> = old
        .iter()
        .filter(|rs| spec_of(rs) == 0 && i64_at(rs, "/status/replicas") == 0)
        .collect();
    let extra = idle
        .len()
        .saturating_sub(usize::try_from(limit).unwrap_or(0));
    out.delete = idle
        .iter()
        .take(extra)
        .map(|rs| str_at(rs, "/metadata/name").to_owned())
        .collect();
    out.status = deployment_status(
        deployment,
        &old,
        new_status.as_ref(),
        &new_name,
        replicas,
        unavailable,
        out.create.is_some(),
    );
    out
}

/// Scale-downs of old ReplicaSets allowed now: first their unhealthy pods (within what
/// maxUnavailable leaves), then healthy ones while enough pods stay available.
fn scale_down_old(
    old: &[&Value],
    replicas: i64,
    unavailable: i64,
    new_spec: i64,
    new_available: i64,
    new_status: Option<&Value>,
) -> Vec<(String, i64)> {
    let min_available = replicas - unavailable;
    let mut specs: Vec<(String, i64, i64)> = old
        .iter()
        .map(|rs| {
            (
                str_at(rs, "/metadata/name").to_owned(),
                i64_at(rs, "/spec/replicas"),
                i64_at(rs, "/status/availableReplicas"),
            )
        })
        .collect();
    let all_pods: i64 = specs.iter().map(|(_, spec, _)| spec).sum::<i64>() + new_spec;
    let new_unavailable = (new_spec - new_available).max(0);
    let mut budget = all_pods - min_available - new_unavailable;
    if budget <= 0 {
        return Vec::new();
    }
    for (_, spec, available) in specs.iter_mut() {
        let cut = (*spec - *available).max(0).min(budget);
        *spec -= cut;
        budget -= cut;
    }
    let available_total: i64 = specs.iter().map(|(_, _, a)| a).sum::<i64>()
        + new_status.map_or(0, |s| i64_at(s, "/availableReplicas"));
    let mut healthy_budget = (available_total - min_available).max(0);
    for (_, spec, _) in specs.iter_mut() {
        let cut = (*spec).min(healthy_budget);
        *spec -= cut;
        healthy_budget -= cut;
    }
    old.iter()
        .zip(specs)
        .filter(|(rs, (_, spec, _))| i64_at(rs, "/spec/replicas") != *spec)
        .map(|(_, (name, spec, _))| (name, spec))
        .collect()
}

fn deployment_status(
    deployment: &Value,
    old: &[&Value],
    new_status: Option<&Value>,
    new_name: &str,
    replicas: i64,
    unavailable: i64,
    created: bool,
) -> Value {
    let sum = |pointer: &str| {
        old.iter()
            .map(|rs| rs.get("status").map_or(0, |s| i64_at(s, pointer)))
            .sum::<i64>()
            + new_status.map_or(0, |s| i64_at(s, pointer))
    };
    let (total, ready, available) = (
        sum("/replicas"),
        sum("/readyReplicas"),
        sum("/availableReplicas"),
    );
    let updated = new_status.map_or(0, |s| i64_at(s, "/replicas"));
    let complete = updated == replicas && total == replicas && available == replicas;
    let previous = deployment.get("status");
    let available_condition = if available >= replicas - unavailable {
        Wanted::new(
            "Available",
            true,
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
        )
    } else {
        Wanted::new(
            "Available",
            false,
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )
    };
    let message;
    let progressing = if complete {
        message = format!("ReplicaSet \"{new_name}\" has successfully progressed.");
        Wanted::new("Progressing", true, "NewReplicaSetAvailable", &message)
    } else if created {
        message = format!("Created new replica set \"{new_name}\"");
        Wanted::new("Progressing", true, "NewReplicaSetCreated", &message)
    } else {
        message = format!("ReplicaSet \"{new_name}\" is progressing.");
        Wanted::new("Progressing", true, "ReplicaSetUpdated", &message)
    };
    let missing = (replicas - available).max(0);
    json!({
        "observedGeneration": deployment.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
        "replicas": total,
        "updatedReplicas": updated,
        "readyReplicas": ready,
        "availableReplicas": available,
        "unavailableReplicas": if missing == 0 { Value::Null } else { json!(missing) },
        "conditions": workload_conditions(
            previous.and_then(|s| s.get("conditions")),
            &[available_condition, progressing],
            "lastUpdateTime",
        ),
    })
}

/// Whether the Deployment's selector selects its template's labels (a real server refuses a
/// Deployment where it does not; the simulator stores it and never rolls it out).
pub fn selector_matches_template(deployment: &Value) -> bool {
    label_selector_matches(
        deployment.pointer("/spec/selector").unwrap_or(&Value::Null),
        deployment
            .pointer("/spec/template/metadata/labels")
            .unwrap_or(&Value::Null),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(replicas: i64, image: &str, generation: i64) -> Value {
        json!({
            "metadata": {"name": "api", "namespace": "ns", "uid": "d-1", "generation": generation},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": "api"}},
                "template": {"metadata": {"labels": {"app": "api"}}, "spec": {"containers": [{"name": "api", "image": image}]}},
            },
        })
    }

    /// The ReplicaSet a plan creates, as the API returns it once its pods are all available.
    fn settled(manifest: &Value, available: i64) -> Value {
        let mut rs = manifest.clone();
        rs["metadata"]["ownerReferences"][0]["uid"] = json!("d-1");
        rs["status"] = json!({"replicas": available, "readyReplicas": available, "availableReplicas": available});
        rs
    }

    #[test]
    fn hash_is_stable_and_depends_on_the_template() {
        let a = deployment(1, "img:1", 1)["spec"]["template"].clone();
        let b = deployment(1, "img:2", 1)["spec"]["template"].clone();
        assert_eq!(template_hash(&a), template_hash(&a.clone()));
        assert_ne!(template_hash(&a), template_hash(&b));
        assert!(template_hash(&a).chars().all(|c| c.is_ascii_alphanumeric()));
    }

    #[test]
    fn a_new_deployment_creates_its_first_replica_set_at_full_scale() {
        let d = deployment(3, "img:1", 1);
        let p = plan(&d, &[], false);
        let created = p.create.unwrap();
        assert_eq!(created["spec"]["replicas"], 3);
        assert_eq!(created["metadata"]["annotations"][REVISION], "1");
        let hash = created["metadata"]["labels"][POD_TEMPLATE_HASH]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(
            created["spec"]["selector"]["matchLabels"][POD_TEMPLATE_HASH],
            hash
        );
        assert_eq!(
            created["spec"]["template"]["metadata"]["labels"][POD_TEMPLATE_HASH],
            hash
        );
        assert_eq!(p.status["updatedReplicas"], 0);
        assert_eq!(p.status["conditions"][0]["status"], "False");
        assert_eq!(p.revision, 1);
    }

    #[test]
    fn rolling_update_surges_then_scales_old_down_as_new_pods_become_available() {
        let v1 = plan(&deployment(3, "img:1", 1), &[], false).create.unwrap();
        let old = settled(&v1, 3);
        let d2 = deployment(3, "img:2", 2);
        // step 1: new ReplicaSet with one surge pod (maxSurge 25% of 3 rounds up to 1)
        let p = plan(&d2, &[&old], false);
        let new = p.create.unwrap();
        assert_eq!(new["spec"]["replicas"], 1);
        assert_eq!(new["metadata"]["annotations"][REVISION], "2");
        assert!(p.scale.is_empty());
        assert_eq!(p.status["updatedReplicas"], 0);
        assert_eq!(p.status["conditions"][0]["status"], "True");
        // step 2: the new pod is not available yet: nothing moves (maxUnavailable rounds to 0)
        let mut new_rs = settled(&new, 0);
        new_rs["status"]["replicas"] = json!(1);
        let p = plan(&d2, &[&old, &new_rs], false);
        assert!(p.create.is_none() && p.scale.is_empty(), "{p:?}");
        // step 3: available: one old pod goes
        let new_rs = settled(&new, 1);
        let p = plan(&d2, &[&old, &new_rs], false);
        assert_eq!(
            p.scale,
            vec![(old["metadata"]["name"].as_str().unwrap().to_owned(), 2)]
        );
        // last: everything on the new ReplicaSet: complete
        let mut old_done = old.clone();
        old_done["spec"]["replicas"] = json!(0);
        old_done["status"] = json!({"replicas": 0});
        let mut new_done = new.clone();
        new_done["spec"]["replicas"] = json!(3);
        let new_done = settled(&new_done, 3);
        let p = plan(&d2, &[&old_done, &new_done], false);
        assert!(p.scale.is_empty() && p.create.is_none());
        assert_eq!(
            p.status["conditions"][1]["reason"],
            "NewReplicaSetAvailable"
        );
        assert_eq!(p.status["updatedReplicas"], 3);
        assert!(p.status["unavailableReplicas"].is_null());
    }

    #[test]
    fn undo_revives_the_old_replica_set_with_a_new_revision() {
        let v1 = settled(
            &plan(&deployment(1, "img:1", 1), &[], false).create.unwrap(),
            0,
        );
        let mut v2 = plan(&deployment(1, "img:2", 2), &[&v1], false)
            .create
            .unwrap();
        v2["metadata"]["ownerReferences"][0]["uid"] = json!("d-1");
        let p = plan(&deployment(1, "img:1", 3), &[&v1, &v2], false);
        assert!(p.create.is_none());
        assert_eq!(
            p.revise,
            Some((v1["metadata"]["name"].as_str().unwrap().to_owned(), 3))
        );
        assert_eq!(p.revision, 3);
    }

    #[test]
    fn held_and_recreate() {
        let old = settled(
            &plan(&deployment(2, "img:1", 1), &[], false).create.unwrap(),
            2,
        );
        let p = plan(&deployment(2, "img:2", 2), &[&old], true);
        assert_eq!(p.create.unwrap()["spec"]["replicas"], 0);
        assert!(p.scale.is_empty());
        let mut recreate = deployment(2, "img:2", 2);
        recreate["spec"]["strategy"] = json!({"type": "Recreate"});
        let p = plan(&recreate, &[&old], false);
        assert_eq!(p.create.unwrap()["spec"]["replicas"], 0);
        assert_eq!(
            p.scale,
            vec![(old["metadata"]["name"].as_str().unwrap().to_owned(), 0)]
        );
    }

    #[test]
    fn recreate_waits_for_the_old_pods_to_be_gone() {
        let mut old = settled(
            &plan(&deployment(1, "img:1", 1), &[], false).create.unwrap(),
            1,
        );
        old["spec"]["replicas"] = json!(0);
        old["status"]["replicas"] = json!(0);
        let mut recreate = deployment(1, "img:2", 2);
        recreate["spec"]["strategy"] = json!({"type": "Recreate"});
        let p = plan_with_old_pods(&recreate, &[&old], false, true);
        assert_eq!(p.create.unwrap()["spec"]["replicas"], 0, "an old pod runs");
        let p = plan_with_old_pods(&recreate, &[&old], false, false);
        assert_eq!(p.create.unwrap()["spec"]["replicas"], 1);
    }

    #[test]
    fn history_beyond_the_limit_is_deleted() {
        let mut d = deployment(1, "img:9", 9);
        d["spec"]["revisionHistoryLimit"] = json!(1);
        let idle = |rev: i64, image: &str| {
            let mut rs = settled(
                &plan(&deployment(1, image, rev), &[], false).create.unwrap(),
                0,
            );
            rs["spec"]["replicas"] = json!(0);
            rs["metadata"]["annotations"][REVISION] = json!(rev.to_string());
            rs
        };
        let (a, b) = (idle(1, "img:1"), idle(2, "img:2"));
        let p = plan(&d, &[&b, &a], false);
        assert_eq!(
            p.delete,
            vec![a["metadata"]["name"].as_str().unwrap().to_owned()]
        );
        assert_eq!(surge_and_unavailable(&d, 1), (1, 0));
        assert!(selector_matches_template(&d));
    }
}
