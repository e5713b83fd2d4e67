//! The simulated ReplicaSet and ReplicationController controller: each keeps `spec.replicas`
//! pods from its template (named `<owner>-<5 characters>`, controlled by it), creating the
//! missing ones and deleting the surplus (unscheduled, then not ready, then newest first), and
//! reports replicas, fullyLabeledReplicas, readyReplicas, availableReplicas and
//! observedGeneration from its pods. Pods are matched by their controller reference, read
//! from the pod store; the pods it created or deleted that the store does not show yet are
//! its "expectations" (as the real controller keeps them), so a stale store does not make it
//! create or delete a pod twice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::events::{Note, record};
use super::pod_template::{Owner, controlled_by, pod_from_template, random_suffix};
use super::pods::pod_status::is_ready;
use super::runtime::{ReconcileError, Shared, drain, retry};
use super::status::already_applied;

/// One of the two kinds this controller keeps.
#[derive(Clone, Copy, Debug)]
pub struct ReplicatedKind {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    /// The controller name (reconcile passes, events).
    controller: &'static str,
}

/// apps/v1 ReplicaSet.
pub const REPLICA_SET: ReplicatedKind = ReplicatedKind {
    group: "apps",
    version: "v1",
    kind: "ReplicaSet",
    plural: "replicasets",
    controller: "replicaset-controller",
};

/// v1 ReplicationController.
pub const REPLICATION_CONTROLLER: ReplicatedKind = ReplicatedKind {
    group: "",
    version: "v1",
    kind: "ReplicationController",
    plural: "replicationcontrollers",
    controller: "replication-controller",
};

impl ReplicatedKind {
    fn resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(self.group, self.version, self.kind),
            self.plural,
        )
    }

    fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

struct Context {
    shared: Arc<Shared>,
    kind: ReplicatedKind,
    /// Pod creations and deletions not yet seen in the pod store, per owner uid.
    expectations: Mutex<HashMap<String, Expectations>>,
}

/// How long a creation or deletion is expected before it is assumed lost (e.g. a created pod
/// deleted before the store saw it).
const EXPECTATION_TIMEOUT: Duration = Duration::from_secs(30);

/// The pods one owner created or deleted whose change the pod store does not show yet, by name.
#[derive(Debug, Default)]
struct Expectations {
    created: HashMap<String, Instant>,
    deleted: HashMap<String, Instant>,
}

impl Expectations {
    /// Forgets what `pods` (the owner's pods in the store) show done, and what timed out.
    fn observe(&mut self, pods: &[Value]) {
        let in_store = |name: &str| pods.iter().find(|p| p["metadata"]["name"] == name);
        let fresh = |at: &Instant| at.elapsed() < EXPECTATION_TIMEOUT;
        self.created
            .retain(|name, at| fresh(at) && in_store(name).is_none());
        self.deleted
            .retain(|name, at| fresh(at) && in_store(name).is_some_and(|p| !is_terminating(p)));
    }
}

/// Runs the controller of `kind` until the task is aborted.
pub async fn run(shared: Arc<Shared>, kind: ReplicatedKind) {
    let resource = kind.resource();
    let api: Api<DynamicObject> = Api::all_with(shared.client.clone(), &resource);
    let pods = shared.informers.pods.subscribe();
    let context = Arc::new(Context {
        shared: Arc::clone(&shared),
        kind,
        expectations: Mutex::default(),
    });
    let stream = Controller::new_with(api, watcher::Config::default(), resource)
        .owns_shared_stream(pods)
        .reconcile_all_on(shared.triggers())
        .run(reconcile, retry, context);
    drain(&shared, kind.controller, stream).await;
}

/// Every pod the object with `uid` controls, Terminating and finished ones included.
pub async fn owned_pods(
    client: &Client,
    namespace: &str,
    uid: &str,
) -> Result<Vec<Value>, ReconcileError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    Ok(pods
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<Vec<Value>, _>>()?
        .into_iter()
        .filter(|p| controlled_by(p, uid))
        .collect())
}

/// Whether a pod still counts for its controller: neither finished nor Terminating (a real
/// ReplicaSet replaces a Terminating pod at once and leaves it out of its status).
pub fn is_active(pod: &Value) -> bool {
    !is_terminating(pod)
        && !matches!(
            pod.pointer("/status/phase").and_then(Value::as_str),
            Some("Succeeded" | "Failed")
        )
}

/// Whether a pod is being deleted (Terminating).
pub fn is_terminating(pod: &Value) -> bool {
    pod.pointer("/metadata/deletionTimestamp").is_some()
}

/// The order surplus pods go in: unscheduled first, then not ready, then the newest.
pub fn deletion_order(pods: &mut [Value]) {
    pods.sort_by_key(|p| {
        let scheduled = p.pointer("/spec/nodeName").is_some();
        let created = p
            .pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        (scheduled, is_ready(p), std::cmp::Reverse(created))
    });
}

/// The status of a replicated object with `count` pods of which `ready` are ready.
pub fn replicated_status(count: usize, ready: usize, generation: i64) -> Value {
    // the counts are `omitempty` in the typed status: a real controller's zero is absent (a
    // null removes it in the merge patch)
    let omit_zero = |n: usize| if n > 0 { json!(n) } else { Value::Null };
    json!({
        "replicas": count,
        "fullyLabeledReplicas": omit_zero(count),
        "readyReplicas": omit_zero(ready),
        "availableReplicas": omit_zero(ready),
        "observedGeneration": generation,
    })
}

async fn reconcile(
    object: Arc<DynamicObject>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    if !ctx.shared.read(|c| c.replica_sets.enabled) || object.metadata.deletion_timestamp.is_some()
    {
        return Ok(Action::await_change());
    }
    let namespace = object
        .namespace()
        .ok_or(ReconcileError::Missing("namespace"))?;
    let name = object.name_any();
    let uid = object.uid().ok_or(ReconcileError::Missing("uid"))?;
    let value = serde_json::to_value(object.as_ref())?;
    let desired = value
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
        .max(0);
    let desired = usize::try_from(desired).unwrap_or(0);
    let client = &ctx.shared.client;
    let owned: Vec<Value> = ctx
        .shared
        .informers
        .pods
        .owned_by(Some(&namespace), &uid, |pod| {
            pod.owner_references()
                .iter()
                .any(|o| o.uid == uid && o.controller == Some(true))
        })
        .await
        .iter()
        .map(|pod| serde_json::to_value(pod.as_ref()))
        .collect::<Result<_, _>>()?;
    let (mut pods, pending) = {
        let mut all = ctx
            .expectations
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let expected = all.entry(uid.clone()).or_default();
        expected.observe(&owned);
        let pods: Vec<Value> = owned
            .into_iter()
            .filter(is_active)
            .filter(|p| {
                let name = p["metadata"]["name"].as_str().unwrap_or_default();
                !expected.deleted.contains_key(name)
            })
            .collect();
        let pending = expected.created.len();
        if pending == 0 && expected.deleted.is_empty() {
            all.remove(&uid);
        }
        (pods, pending)
    };
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let kind = ctx.kind;
    let api_version = kind.api_version();
    let template = value
        .pointer("/spec/template")
        .cloned()
        .unwrap_or(Value::Null);
    let mut count = pods.len() + pending;
    while count < desired {
        let pod_name = format!("{name}-{}", random_suffix());
        let owner = Owner {
            api_version: &api_version,
            kind: kind.kind,
            name: &name,
            uid: &uid,
        };
        let pod: Pod = serde_json::from_value(pod_from_template(
            &template,
            &namespace,
            &pod_name,
            owner,
            &[],
            &[],
        ))?;
        pods_api.create(&PostParams::default(), &pod).await?;
        ctx.expect(&uid, |e| &mut e.created, &pod_name);
        count += 1;
        let message = format!("Created pod: {pod_name}");
        record(
            client,
            &value,
            note("SuccessfulCreate", &message, kind.controller),
        )
        .await?;
    }
    let mut ready = pods.iter().filter(|p| is_ready(p)).count();
    if count > desired {
        deletion_order(&mut pods);
        let surplus = (count - desired).min(pods.len());
        for pod in pods.iter().take(surplus) {
            let pod_name = pod["metadata"]["name"].as_str().unwrap_or_default();
            match pods_api.delete(pod_name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Err(error.into()),
            }
            ctx.expect(&uid, |e| &mut e.deleted, pod_name);
            if is_ready(pod) {
                ready -= 1;
            }
            let message = format!("Deleted pod: {pod_name}");
            record(
                client,
                &value,
                note("SuccessfulDelete", &message, kind.controller),
            )
            .await?;
        }
        count -= surplus;
    }
    let generation = object.metadata.generation.unwrap_or(1);
    let status = replicated_status(count, ready, generation);
    let previous = value.get("status");
    if !already_applied(&status, previous) {
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &namespace, &kind.resource());
        api.patch_status(
            &name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&json!({"status": status})),
        )
        .await?;
    }
    Ok(Action::await_change())
}

impl Context {
    /// Remembers that pod `name` of owner `uid` was created or deleted (`which` picks the map).
    fn expect(
        &self,
        uid: &str,
        which: impl FnOnce(&mut Expectations) -> &mut HashMap<String, Instant>,
        name: &str,
    ) {
        let mut all = self
            .expectations
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        which(all.entry(uid.to_owned()).or_default()).insert(name.to_owned(), Instant::now());
    }
}

fn note<'a>(reason: &'a str, message: &'a str, component: &'a str) -> Note<'a> {
    Note {
        kind: "Normal",
        reason,
        message,
        component,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, node: Option<&str>, ready: bool, created: &str) -> Value {
        let mut p = json!({"metadata": {"name": name, "creationTimestamp": created}, "spec": {},
                           "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}});
        if let Some(node) = node {
            p["spec"]["nodeName"] = json!(node);
        }
        p
    }

    #[test]
    fn surplus_goes_unscheduled_then_unready_then_newest() {
        let mut pods = vec![
            pod("old-ready", Some("n"), true, "2026-01-01T00:00:00Z"),
            pod("new-ready", Some("n"), true, "2026-01-02T00:00:00Z"),
            pod("unready", Some("n"), false, "2026-01-01T00:00:00Z"),
            pod("pending", None, false, "2026-01-01T00:00:00Z"),
        ];
        deletion_order(&mut pods);
        let names: Vec<&str> = pods
            .iter()
            .map(|p| p["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["pending", "unready", "new-ready", "old-ready"]);
    }

    #[test]
    fn status_counts() {
        let status = replicated_status(3, 2, 4);
        assert_eq!(status["readyReplicas"], 2);
        assert_eq!(status["observedGeneration"], 4);
        assert_eq!(REPLICATION_CONTROLLER.api_version(), "v1");
        assert_eq!(REPLICA_SET.api_version(), "apps/v1");
    }
}
