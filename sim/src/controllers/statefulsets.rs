//! The simulated StatefulSet controller: pods named `<set>-<ordinal>` (labels
//! `controller-revision-hash`, `statefulset.kubernetes.io/pod-name`, `apps.kubernetes.io/pod-index`;
//! hostname and subdomain set) and, per `volumeClaimTemplates` entry, a PersistentVolumeClaim
//! `<claim>-<pod>` kept after the pod (retention Retain). With podManagementPolicy OrderedReady
//! (the default) one pod changes at a time: ordinal N is created once 0..N-1 run and are ready,
//! the surplus goes highest ordinal first, and a RollingUpdate replaces pods of an older
//! template in reverse ordinal order (down to `partition`), each once the rest are ready;
//! Parallel creates and deletes without waiting. Planning is [`plan`] (pure); status follows
//! the real fields (replicas, readyReplicas, currentReplicas, updatedReplicas,
//! availableReplicas, currentRevision, updateRevision, observedGeneration, collisionCount).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::daemonsets::REVISION_HASH;
use super::events::{Note, record};
use super::pod_template::{Owner, pod_from_template};
use super::pods::pod_status::is_ready;
use super::replicasets::{is_terminating, owned_pods};
use super::rollout::template_hash;
use super::runtime::{ReconcileError, Shared, drain, patch_status, retry};
use super::status::already_applied;

/// Label with the pod's own name.
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// Label with the pod's ordinal.
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

/// What one pass does to a StatefulSet.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// Ordinals to create a pod for (at the update revision).
    pub create: Vec<usize>,
    /// Pods to delete (surplus, failed, or of an older revision).
    pub delete: Vec<String>,
    /// The status to report.
    pub status: Value,
}

fn spec_i64(set: &Value, path: &str, default: i64) -> i64 {
    set.pointer(path).and_then(Value::as_i64).unwrap_or(default)
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The revision name of a StatefulSet's current template (`<set>-<hash>`).
pub fn update_revision(set: &Value) -> String {
    let name = set.pointer("/metadata/name").and_then(Value::as_str);
    let template = set
        .pointer("/spec/template")
        .cloned()
        .unwrap_or(Value::Null);
    format!("{}-{}", name.unwrap_or_default(), template_hash(&template))
}

/// The ordinal of pod `pod` of the set `set`, if its name is `<set>-<n>`.
pub fn ordinal(set: &str, pod: &str) -> Option<usize> {
    pod.strip_prefix(set)?.strip_prefix('-')?.parse().ok()
}

fn revision_of(pod: &Value) -> Option<&str> {
    pod.pointer("/metadata/labels")
        .and_then(|l| l.get(REVISION_HASH))
        .and_then(Value::as_str)
}

fn running_and_ready(pod: &Value) -> bool {
    pod.pointer("/status/phase").and_then(Value::as_str) == Some("Running") && is_ready(pod)
}

/// The next step for `set` given the pods it controls.
pub fn plan(set: &Value, pods: &[Value]) -> Plan {
    let name = set
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let replicas = usize::try_from(spec_i64(set, "/spec/replicas", 1).max(0)).unwrap_or(0);
    let partition = usize::try_from(spec_i64(
        set,
        "/spec/updateStrategy/rollingUpdate/partition",
        0,
    ))
    .unwrap_or(0);
    let ordered = set
        .pointer("/spec/podManagementPolicy")
        .and_then(Value::as_str)
        != Some("Parallel");
    let rolling = set
        .pointer("/spec/updateStrategy/type")
        .and_then(Value::as_str)
        != Some("OnDelete");
    let update = update_revision(set);
    let mut by_ordinal: Vec<(usize, &Value)> = pods
        .iter()
        .filter_map(|p| {
            let pod_name = p.pointer("/metadata/name").and_then(Value::as_str)?;
            Some((ordinal(name, pod_name)?, p))
        })
        .collect();
    by_ordinal.sort_by_key(|(o, _)| *o);
    let pod_name = |p: &Value| {
        p.pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut plan = Plan::default();
    let terminating = by_ordinal.iter().any(|(_, p)| is_terminating(p));
    // Failed pods are replaced (deleted here, created again on a later pass).
    for (_, pod) in &by_ordinal {
        if !is_terminating(pod)
            && pod.pointer("/status/phase").and_then(Value::as_str) == Some("Failed")
        {
            plan.delete.push(pod_name(pod));
        }
    }
    let mut blocked = ordered && (terminating || !plan.delete.is_empty());
    for wanted in 0..replicas {
        match by_ordinal.iter().find(|(o, _)| *o == wanted) {
            None if !blocked => {
                plan.create.push(wanted);
                blocked = ordered;
            }
            None => blocked = blocked || ordered,
            Some((_, pod)) => {
                if ordered && !running_and_ready(pod) {
                    blocked = true;
                }
            }
        }
    }
    let all_ready = !terminating
        && plan.delete.is_empty()
        && plan.create.is_empty()
        && by_ordinal.iter().all(|(_, p)| running_and_ready(p));
    // The surplus, highest ordinal first.
    let surplus: Vec<&Value> = by_ordinal
        .iter()
        .rev()
        .filter(|(o, p)| *o >= replicas && !is_terminating(p))
        .map(|(_, p)| *p)
        .collect();
    if !ordered {
        plan.delete.extend(surplus.iter().map(|p| pod_name(p)));
    } else if all_ready && let Some(pod) = surplus.first() {
        plan.delete.push(pod_name(pod));
    }
    // The roll-out, highest ordinal first, one pod at a time.
    let complete = all_ready && surplus.is_empty() && by_ordinal.len() == replicas;
    if rolling
        && complete
        && let Some((_, pod)) = by_ordinal
            .iter()
            .rev()
            .find(|(o, p)| *o >= partition && revision_of(p) != Some(update.as_str()))
    {
        plan.delete.push(pod_name(pod));
    }
    plan.status = status(set, &by_ordinal, &update, replicas);
    plan
}

fn status(set: &Value, pods: &[(usize, &Value)], update: &str, replicas: usize) -> Value {
    let previous = set
        .pointer("/status/currentRevision")
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty())
        .unwrap_or(update);
    let live = || pods.iter().filter(|(_, p)| !is_terminating(p));
    let ready = pods.iter().filter(|(_, p)| running_and_ready(p)).count();
    let updated = live()
        .filter(|(_, p)| revision_of(p) == Some(update))
        .count();
    let (current, current_replicas) = if updated == replicas && ready == replicas {
        (update, updated)
    } else {
        (
            previous,
            live()
                .filter(|(_, p)| revision_of(p) == Some(previous))
                .count(),
        )
    };
    json!({
        "replicas": count(pods.len()),
        "readyReplicas": count(ready),
        "availableReplicas": count(ready),
        "currentReplicas": count(current_replicas),
        "updatedReplicas": count(updated),
        "currentRevision": current,
        "updateRevision": update,
        "observedGeneration": spec_i64(set, "/metadata/generation", 1),
        "collisionCount": 0,
    })
}

/// The pod with `ordinal` of `set` (namespace `namespace`, uid `uid`).
pub fn pod_manifest(set: &Value, namespace: &str, uid: &str, ordinal: usize) -> Value {
    let name = set
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let template = set
        .pointer("/spec/template")
        .cloned()
        .unwrap_or(Value::Null);
    let pod_name = format!("{name}-{ordinal}");
    let revision = update_revision(set);
    let index = ordinal.to_string();
    let owner = Owner {
        api_version: "apps/v1",
        kind: "StatefulSet",
        name,
        uid,
    };
    let mut pod = pod_from_template(
        &template,
        namespace,
        &pod_name,
        owner,
        &[
            (REVISION_HASH, &revision),
            (POD_NAME_LABEL, &pod_name),
            (POD_INDEX_LABEL, &index),
        ],
        &[],
    );
    pod["spec"]["hostname"] = json!(pod_name);
    if let Some(service) = set.pointer("/spec/serviceName").and_then(Value::as_str) {
        pod["spec"]["subdomain"] = json!(service);
    }
    let claims = claim_manifests(set, namespace, &pod_name);
    if !claims.is_empty() {
        let mut volumes = pod["spec"]["volumes"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for (template_name, claim) in &claims {
            volumes.retain(|v| v["name"] != template_name.as_str());
            volumes.push(json!({
                "name": template_name,
                "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]},
            }));
        }
        pod["spec"]["volumes"] = Value::Array(volumes);
    }
    pod
}

/// The PersistentVolumeClaims pod `pod` of `set` uses: (template name, claim manifest).
pub fn claim_manifests(set: &Value, namespace: &str, pod: &str) -> Vec<(String, Value)> {
    let selector_labels = set
        .pointer("/spec/selector/matchLabels")
        .cloned()
        .unwrap_or_else(|| json!({}));
    set.pointer("/spec/volumeClaimTemplates")
        .and_then(Value::as_array)
        .map(|templates| {
            templates
                .iter()
                .filter_map(|t| {
                    let template_name = t.pointer("/metadata/name")?.as_str()?;
                    let mut labels = t
                        .pointer("/metadata/labels")
                        .cloned()
                        .unwrap_or_else(|| json!({}));
                    if let (Some(all), Some(extra)) =
                        (labels.as_object_mut(), selector_labels.as_object())
                    {
                        all.extend(extra.clone());
                    }
                    let claim = json!({
                        "apiVersion": "v1",
                        "kind": "PersistentVolumeClaim",
                        "metadata": {
                            "name": format!("{template_name}-{pod}"),
                            "namespace": namespace,
                            "labels": labels,
                        },
                        "spec": t.get("spec").cloned().unwrap_or_else(|| json!({})),
                    });
                    Some((template_name.to_owned(), claim))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Runs the StatefulSet controller until the task is aborted.
pub async fn run(shared: Arc<Shared>) {
    let api: Api<StatefulSet> = Api::all(shared.client.clone());
    let pods = shared.informers.pods.subscribe();
    let stream = Controller::new(api, watcher::Config::default())
        .owns_shared_stream(pods)
        .reconcile_all_on(shared.triggers())
        .run(reconcile, retry, Arc::clone(&shared));
    drain(&shared, "statefulsets", stream).await;
}

async fn reconcile(set: Arc<StatefulSet>, shared: Arc<Shared>) -> Result<Action, ReconcileError> {
    if !shared.read(|c| c.stateful_sets.enabled) || set.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let namespace = set
        .namespace()
        .ok_or(ReconcileError::Missing("namespace"))?;
    let name = set.name_any();
    let uid = set.uid().ok_or(ReconcileError::Missing("uid"))?;
    let object = serde_json::to_value(set.as_ref())?;
    let client = &shared.client;
    let pods = owned_pods(client, &namespace, &uid).await?;
    let plan = plan(&object, &pods);
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let claims_api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &namespace);
    for ordinal in &plan.create {
        let manifest = pod_manifest(&object, &namespace, &uid, *ordinal);
        let pod_name = manifest["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        for (_, claim) in claim_manifests(&object, &namespace, &pod_name) {
            let claim: PersistentVolumeClaim = serde_json::from_value(claim)?;
            match claims_api.create(&PostParams::default(), &claim).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(error) => return Err(error.into()),
            }
        }
        let pod: Pod = serde_json::from_value(manifest)?;
        match pods_api.create(&PostParams::default(), &pod).await {
            Ok(_) => {}
            // The old pod of this ordinal is still being removed: a later pass creates it.
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(error) => return Err(error.into()),
        }
        let message = format!("create Pod {pod_name} in StatefulSet {name} successful");
        record(client, &object, note("SuccessfulCreate", &message)).await?;
    }
    for pod_name in &plan.delete {
        match pods_api.delete(pod_name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(error.into()),
        }
        let message = format!("delete Pod {pod_name} in StatefulSet {name} successful");
        record(client, &object, note("SuccessfulDelete", &message)).await?;
    }
    if !already_applied(&plan.status, object.get("status")) {
        let api: Api<StatefulSet> = Api::namespaced(client.clone(), &namespace);
        patch_status(&api, &name, plan.status).await?;
    }
    Ok(Action::await_change())
}

fn note<'a>(reason: &'a str, message: &'a str) -> Note<'a> {
    Note {
        kind: "Normal",
        reason,
        message,
        component: "statefulset-controller",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(replicas: i64, image: &str) -> Value {
        json!({
            "metadata": {"name": "db", "generation": 2},
            "spec": {
                "replicas": replicas,
                "serviceName": "db",
                "podManagementPolicy": "OrderedReady",
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                "selector": {"matchLabels": {"app": "db"}},
                "template": {"metadata": {"labels": {"app": "db"}},
                             "spec": {"containers": [{"name": "c", "image": image}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                          "spec": {"accessModes": ["ReadWriteOnce"]}}],
            }
        })
    }

    fn pod(set: &Value, ordinal: usize, ready: bool) -> Value {
        let mut p = pod_manifest(set, "ns", "u", ordinal);
        p["status"] = json!({
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
        });
        p
    }

    #[test]
    fn pods_are_named_by_ordinal_and_carry_their_claims() {
        let s = set(2, "img:1");
        let p = pod_manifest(&s, "ns", "u", 1);
        assert_eq!(p["metadata"]["name"], "db-1");
        assert_eq!(p["metadata"]["labels"][POD_INDEX_LABEL], "1");
        assert_eq!(p["metadata"]["labels"][POD_NAME_LABEL], "db-1");
        assert_eq!(p["metadata"]["labels"][REVISION_HASH], update_revision(&s));
        assert_eq!(p["spec"]["hostname"], "db-1");
        assert_eq!(p["spec"]["subdomain"], "db");
        assert_eq!(
            p["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"],
            "data-db-1"
        );
        let claims = claim_manifests(&s, "ns", "db-1");
        assert_eq!(claims[0].1["metadata"]["labels"]["app"], "db");
        assert_eq!(ordinal("db", "db-12"), Some(12));
        assert_eq!(ordinal("db", "dbx-1"), None);
    }

    #[test]
    fn ordered_ready_creates_one_pod_after_the_previous_is_ready() {
        let s = set(3, "img:1");
        assert_eq!(plan(&s, &[]).create, [0]);
        assert!(plan(&s, &[pod(&s, 0, false)]).create.is_empty());
        let p = plan(&s, &[pod(&s, 0, true)]);
        assert_eq!(p.create, [1]);
        assert_eq!(p.status["readyReplicas"], 1);
        assert_eq!(p.status["replicas"], 1);
        assert_eq!(p.status["observedGeneration"], 2);
    }

    #[test]
    fn parallel_creates_every_missing_pod() {
        let mut s = set(3, "img:1");
        s["spec"]["podManagementPolicy"] = json!("Parallel");
        assert_eq!(plan(&s, &[]).create, [0, 1, 2]);
    }

    #[test]
    fn scale_down_removes_the_highest_ordinal_first() {
        let s3 = set(3, "img:1");
        let pods: Vec<Value> = (0..3).map(|i| pod(&s3, i, true)).collect();
        let s1 = set(1, "img:1");
        assert_eq!(plan(&s1, &pods).delete, ["db-2"]);
        let mut terminating = pods.clone();
        terminating[2]["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert!(plan(&s1, &terminating).delete.is_empty());
    }

    #[test]
    fn rolling_update_goes_in_reverse_ordinal_order_down_to_the_partition() {
        let old = set(3, "img:1");
        let pods: Vec<Value> = (0..3).map(|i| pod(&old, i, true)).collect();
        let new = set(3, "img:2");
        let p = plan(&new, &pods);
        assert_eq!(p.delete, ["db-2"]);
        assert_eq!(p.status["currentRevision"], update_revision(&new));
        let mut new_started = new.clone();
        new_started["status"] = json!({"currentRevision": update_revision(&old)});
        let p = plan(&new_started, &pods);
        assert_eq!(p.status["currentRevision"], update_revision(&old));
        assert_eq!(p.status["updateRevision"], update_revision(&new));
        assert_eq!(p.status["currentReplicas"], 3);
        assert_eq!(p.status["updatedReplicas"], 0);
        let mut half = pods.clone();
        half[2] = pod(&new, 2, true);
        assert_eq!(plan(&new_started, &half).delete, ["db-1"]);
        let mut partitioned = new_started.clone();
        partitioned["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = json!(2);
        assert!(plan(&partitioned, &half).delete.is_empty());
        let done: Vec<Value> = (0..3).map(|i| pod(&new, i, true)).collect();
        let p = plan(&new_started, &done);
        assert!(p.delete.is_empty() && p.create.is_empty());
        assert_eq!(p.status["currentRevision"], update_revision(&new));
        assert_eq!(p.status["currentReplicas"], 3);
    }

    #[test]
    fn a_failed_pod_is_replaced() {
        let s = set(1, "img:1");
        let mut failed = pod(&s, 0, false);
        failed["status"]["phase"] = json!("Failed");
        let p = plan(&s, &[failed]);
        assert_eq!(p.delete, ["db-0"]);
        assert!(p.create.is_empty());
    }
}
