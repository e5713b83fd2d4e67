//! The simulated DaemonSet controller: one pod per eligible node (nodeSelector, required node
//! affinity and NoSchedule/NoExecute taints checked as the scheduler does; cordoned nodes still
//! run daemons, as daemon pods tolerate `unschedulable`), bound to its node directly. Pods of
//! an older template (`controller-revision-hash`) are replaced one at a time once the others
//! are ready and none is Terminating (a node gets its new pod once the old one is gone); pods
//! on nodes that are gone or no longer eligible are deleted. Status follows the real fields
//! (desired/current/ready/available/updated numbers, observedGeneration).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::events::{Note, record};
use super::pod_template::{Owner, pod_from_template, random_suffix};
use super::pods::pod_status::is_ready;
use super::pods::scheduling::{UNSCHEDULABLE_TAINT, selector_accepts, untolerated_taint};
use super::replicasets::{is_active, is_terminating, owned_pods};
use super::rollout::template_hash;
use super::runtime::{ReconcileError, Shared, drain, patch_status, retry};
use super::status::already_applied;

/// Label with the template revision a daemon pod runs.
pub const REVISION_HASH: &str = "controller-revision-hash";

/// Runs the DaemonSet controller until the task is aborted.
pub async fn run(shared: Arc<Shared>) {
    let api: Api<DaemonSet> = Api::all(shared.client.clone());
    let pods = shared.informers.pods.subscribe();
    let stream = Controller::new(api, watcher::Config::default())
        .owns_shared_stream(pods)
        .reconcile_all_on(shared.triggers())
        .run(reconcile, retry, Arc::clone(&shared));
    drain(&shared, "daemonsets", stream).await;
}

/// Whether a daemon pod from `template` may run on `node`.
pub fn eligible(template: &Value, node: &Value) -> bool {
    let mut pod = json!({"spec": template.get("spec").cloned().unwrap_or_default()});
    // Daemon pods tolerate cordoned nodes.
    let tolerations = pod["spec"]["tolerations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut tolerations = tolerations;
    tolerations
        .push(json!({"key": UNSCHEDULABLE_TAINT, "operator": "Exists", "effect": "NoSchedule"}));
    pod["spec"]["tolerations"] = Value::Array(tolerations);
    selector_accepts(&pod, node) && untolerated_taint(&pod, node).is_none()
}

async fn reconcile(ds: Arc<DaemonSet>, shared: Arc<Shared>) -> Result<Action, ReconcileError> {
    if !shared.read(|c| c.daemon_sets.enabled) || ds.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let namespace = ds.namespace().ok_or(ReconcileError::Missing("namespace"))?;
    let name = ds.name_any();
    let uid = ds.uid().ok_or(ReconcileError::Missing("uid"))?;
    let object = serde_json::to_value(ds.as_ref())?;
    let template = object
        .pointer("/spec/template")
        .cloned()
        .unwrap_or(Value::Null);
    let hash = template_hash(&template);
    let client = &shared.client;
    let nodes: Vec<Value> = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()?;
    let eligible_nodes: Vec<&str> = nodes
        .iter()
        .filter(|n| eligible(&template, n))
        .filter_map(|n| n.pointer("/metadata/name").and_then(Value::as_str))
        .collect();
    let owned = owned_pods(client, &namespace, &uid).await?;
    // A node whose daemon pod is Terminating gets its new one once the old one is gone.
    let terminating_on: Vec<String> = owned
        .iter()
        .filter(|p| is_terminating(p))
        .filter_map(|p| p.pointer("/spec/nodeName").and_then(Value::as_str))
        .map(str::to_owned)
        .collect();
    let pods: Vec<Value> = owned.into_iter().filter(is_active).collect();
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let node_of = |p: &Value| {
        p.pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let updated = |p: &Value| {
        p.pointer(&format!("/metadata/labels/{REVISION_HASH}"))
            .and_then(Value::as_str)
            == Some(hash.as_str())
    };
    // Misplaced pods go.
    for pod in pods
        .iter()
        .filter(|p| !eligible_nodes.contains(&node_of(p).as_str()))
    {
        delete_pod(&pods_api, pod).await?;
    }
    // One outdated pod at a time, once every other pod is ready.
    let placed: Vec<&Value> = pods
        .iter()
        .filter(|p| eligible_nodes.contains(&node_of(p).as_str()))
        .collect();
    // A Terminating daemon pod counts as unavailable (maxUnavailable 1).
    let all_ready = placed.iter().all(|p| is_ready(p)) && terminating_on.is_empty();
    if all_ready && let Some(outdated) = placed.iter().find(|p| !updated(p)) {
        delete_pod(&pods_api, outdated).await?;
    }
    let api_version = "apps/v1";
    let mut created = 0;
    for node in &eligible_nodes {
        if placed.iter().any(|p| node_of(p) == *node) || terminating_on.iter().any(|n| n == node) {
            continue;
        }
        let owner = Owner {
            api_version,
            kind: "DaemonSet",
            name: &name,
            uid: &uid,
        };
        let pod_name = format!("{name}-{}", random_suffix());
        let mut manifest = pod_from_template(
            &template,
            &namespace,
            &pod_name,
            owner,
            &[(REVISION_HASH, &hash)],
            &[],
        );
        manifest["spec"]["nodeName"] = json!(node);
        let pod: Pod = serde_json::from_value(manifest)?;
        pods_api.create(&PostParams::default(), &pod).await?;
        created += 1;
        let message = format!("Created pod: {pod_name}");
        let note = Note {
            kind: "Normal",
            reason: "SuccessfulCreate",
            message: &message,
            component: "daemonset-controller",
        };
        record(client, &object, note).await?;
    }
    let current = placed.len();
    let ready = placed.iter().filter(|p| is_ready(p)).count();
    let up_to_date = placed.iter().filter(|p| updated(p)).count();
    // `omitempty` counts of the typed status: a zero is absent (null removes it in the patch)
    let omit_zero = |n: usize| if n > 0 { json!(n) } else { Value::Null };
    let status = json!({
        "desiredNumberScheduled": eligible_nodes.len(),
        "currentNumberScheduled": current + created,
        "numberMisscheduled": pods.len() - current,
        "numberReady": ready,
        "numberAvailable": omit_zero(ready),
        "numberUnavailable": omit_zero(eligible_nodes.len().saturating_sub(ready)),
        "updatedNumberScheduled": omit_zero(up_to_date),
        "observedGeneration": ds.metadata.generation.unwrap_or(1),
    });
    if !already_applied(&status, object.get("status")) {
        let api: Api<DaemonSet> = Api::namespaced(client.clone(), &namespace);
        patch_status(&api, &name, status).await?;
    }
    Ok(Action::await_change())
}

async fn delete_pod(api: &Api<Pod>, pod: &Value) -> Result<(), ReconcileError> {
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemons_run_on_cordoned_nodes_but_honour_selectors_and_taints() {
        let node = |labels: Value, spec: Value| {
            json!({"metadata": {"name": "n", "labels": labels}, "spec": spec,
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
        };
        let template = json!({"spec": {"nodeSelector": {"disk": "ssd"}}});
        let cordoned = node(
            json!({"disk": "ssd"}),
            json!({"unschedulable": true,
            "taints": [{"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}]}),
        );
        assert!(eligible(&template, &cordoned));
        assert!(!eligible(
            &template,
            &node(json!({"disk": "hdd"}), json!({}))
        ));
        let tainted = node(
            json!({"disk": "ssd"}),
            json!({"taints": [{"key": "gpu", "effect": "NoSchedule"}]}),
        );
        assert!(!eligible(&template, &tainted));
    }
}
