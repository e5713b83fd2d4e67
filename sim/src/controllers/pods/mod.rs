//! The simulated scheduler and kubelet, one controller over every Pod.
//!
//! Scheduler: a pod without `spec.nodeName` (and the default scheduler) is bound through the
//! `pods/binding` subresource to the node [`scheduling::choose_node`] picks; a pod that fits
//! nowhere stays Pending with PodScheduled=False and a FailedScheduling event, and is tried
//! again while it waits.
//!
//! Kubelet: a bound Pending pod is checked for what it needs ([`needs::check`]); a missing
//! Secret, ConfigMap, key or ServiceAccount keeps it waiting (CreateContainerConfigError, or
//! ContainerCreating with FailedMount) until it appears. Then it shows ContainerCreating for its
//! start delay and runs, Ready when its simulated readiness probe passes. Pods of Jobs start at
//! once (the Job's simulated duration is the whole run; the Job controller ends them); pods of
//! ReplicaSets take the Deployments delay; others the pods delay. A Terminating pod is stopped:
//! after its grace period (scaled by `grace_second`) the kubelet removes it.
//!
//! Pods bound to a node of runtime `process` belong to the node agent (`crate::agent`): this
//! kubelet leaves them alone (the scheduler still places pods on such nodes). Beside a real
//! control plane ([`super::ControllersConfig::real_control_plane`]) the scheduler is off:
//! kube-scheduler binds the pods, this kubelet starts them, and each running pod gets an
//! address the real API server can reach ([`network`]).

pub mod needs;
pub mod network;
pub mod pod_status;
pub mod quantity;
pub mod scheduling;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::{Action, Controller};
use serde_json::{Value, json};

use super::events::{Note, record};
use super::informers::Informers;
use super::runtime::{FirstSeen, ReconcileError, Shared, drain, retry};
use super::status::now;
use needs::{Blocker, Keys};
use scheduling::Load;

/// How often a pod that cannot be scheduled or started is looked at again.
const WAITING_RECHECK: Duration = Duration::from_millis(500);

struct Context {
    shared: Arc<Shared>,
    seen: FirstSeen,
    /// The last waiting message reported per pod uid, so each problem is an event once.
    reported: Mutex<HashMap<String, String>>,
    /// One scheduling decision at a time (each sees the bindings before it), as one
    /// kube-scheduler places pods; it holds the scheduler's cache.
    scheduling: tokio::sync::Mutex<SchedulerCache>,
    /// Beside a real control plane: the pods' reachable addresses.
    network: Option<network::PodNetwork>,
}

/// What the scheduler remembers between decisions.
#[derive(Default)]
struct SchedulerCache {
    /// The requests of each pod by uid (a pod's containers do not change).
    requests: HashMap<String, (i64, f64)>,
    /// Pods bound by this scheduler that the pod store does not show bound yet, by uid: their
    /// node and requests ("assumed", as kube-scheduler's cache calls them), so a decision
    /// made before the store catches up still counts them.
    assumed: HashMap<String, (String, (i64, f64))>,
    /// The resourceVersion of each node `node_values` was encoded from (one resourceVersion
    /// names one version of one object in a store).
    node_versions: Vec<String>,
    /// The nodes as JSON for [`scheduling::choose_node`], re-encoded only when a node changed.
    node_values: Vec<Value>,
}

impl SchedulerCache {
    /// The nodes of the store as JSON, re-encoded only when one was added, changed or removed.
    fn nodes(&mut self, nodes: &[Arc<Node>]) -> Result<&[Value], ReconcileError> {
        let version = |n: &Arc<Node>| n.metadata.resource_version.clone().unwrap_or_default();
        if !nodes
            .iter()
            .map(version)
            .eq(self.node_versions.iter().cloned())
        {
            self.node_values = nodes
                .iter()
                .map(|node| serde_json::to_value(node.as_ref()))
                .collect::<Result<_, _>>()?;
            self.node_versions = nodes.iter().map(version).collect();
        }
        Ok(&self.node_values)
    }

    /// The load of every node from the pod store plus the assumed bindings; forgets what the
    /// store no longer needs remembered.
    fn loads(&mut self, pods: &[Arc<Pod>]) -> Result<HashMap<String, Load>, ReconcileError> {
        let mut loads: HashMap<String, Load> = HashMap::new();
        let mut unbound = HashSet::new();
        let mut live = HashSet::new();
        for pod in pods {
            let Some(uid) = pod.metadata.uid.as_deref() else {
                continue;
            };
            live.insert(uid);
            let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
            let Some(node) = node else {
                unbound.insert(uid);
                continue;
            };
            let finished = pod
                .status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .is_some_and(|p| matches!(p, "Succeeded" | "Failed"));
            if finished {
                continue;
            }
            let requests = match self.requests.get(uid) {
                Some(requests) => *requests,
                None => {
                    let spec = json!({"spec": serde_json::to_value(&pod.spec)?});
                    let requests = scheduling::requests(&spec);
                    self.requests.insert(uid.to_owned(), requests);
                    requests
                }
            };
            loads.entry(node.to_owned()).or_default().add(requests);
        }
        self.requests.retain(|uid, _| live.contains(uid.as_str()));
        self.assumed.retain(|uid, _| unbound.contains(uid.as_str()));
        for (node, requests) in self.assumed.values() {
            loads.entry(node.clone()).or_default().add(*requests);
        }
        Ok(loads)
    }
}

impl Context {
    /// Whether `message` is new for `uid` (and remembers it).
    fn first_report(&self, uid: &str, message: &str) -> bool {
        let mut reported = self.reported.lock().unwrap_or_else(PoisonError::into_inner);
        if reported.get(uid).map(String::as_str) == Some(message) {
            return false;
        }
        reported.insert(uid.to_owned(), message.to_owned());
        true
    }

    /// The pod's IP: an address that answers on its ports beside a real control plane,
    /// else (or when none can be had) the made-up one.
    async fn pod_address(&self, pod: &Value, uid: &str, ready: bool) -> String {
        let Some(network) = &self.network else {
            return pod_status::pod_ip(uid);
        };
        network
            .attach(uid, &network::tcp_ports(pod), ready)
            .await
            .map_or_else(|| pod_status::pod_ip(uid), |ip| ip.to_string())
    }

    /// Gives the pod's reachable address back, if it had one.
    async fn release_address(&self, uid: &str) {
        if let Some(network) = &self.network {
            network.detach(uid).await;
        }
    }

    fn forget(&self, uid: &str) {
        self.reported
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uid);
        self.seen.forget(uid);
    }
}

/// Runs the scheduler and kubelet until the task is aborted.
pub async fn run(shared: Arc<Shared>) {
    let pods = &shared.informers.pods;
    let network = if shared.read(|c| c.real_control_plane) {
        match network::PodNetwork::claim() {
            Ok(network) => Some(network),
            Err(error) => {
                tracing::warn!(%error, "simulated pods get addresses that lead nowhere");
                None
            }
        }
    } else {
        None
    };
    let context = Arc::new(Context {
        shared: Arc::clone(&shared),
        seen: FirstSeen::default(),
        reported: Mutex::default(),
        scheduling: tokio::sync::Mutex::default(),
        network,
    });
    let stream = Controller::for_shared_stream(pods.subscribe(), pods.store())
        .reconcile_all_on(shared.triggers())
        .run(reconcile, retry, context);
    drain(&shared, "pods", stream).await;
}

fn phase(pod: &Value) -> &str {
    pod.pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending")
}

/// Whether the node `name` runs its pods as processes (the node agent's, not this kubelet's).
pub async fn is_process_node(informers: &Informers, name: &str) -> bool {
    informers.nodes.get(None, name).await.is_some_and(|node| {
        node.labels()
            .get(super::nodes::RUNTIME_LABEL)
            .map(String::as_str)
            == Some("process")
    })
}

async fn reconcile(pod: Arc<Pod>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let uid = pod.uid().ok_or(ReconcileError::Missing("uid"))?;
    if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
        && is_process_node(&ctx.shared.informers, node).await
    {
        return Ok(Action::await_change());
    }
    let enabled = ctx.shared.read(|c| c.pods.enabled);
    let object = serde_json::to_value(pod.as_ref())?;
    let namespace = pod
        .namespace()
        .ok_or(ReconcileError::Missing("namespace"))?;
    let api: Api<Pod> = Api::namespaced(ctx.shared.client.clone(), &namespace);
    if pod.metadata.deletion_timestamp.is_some() {
        if !enabled {
            return Ok(Action::await_change());
        }
        return terminate(&object, &uid, &api, &ctx).await;
    }
    if matches!(phase(&object), "Succeeded" | "Failed") {
        ctx.forget(&uid);
        ctx.release_address(&uid).await;
        return Ok(Action::await_change());
    }
    if !enabled {
        return Ok(Action::await_change());
    }
    match object.pointer("/spec/nodeName").and_then(Value::as_str) {
        // A real control plane's kube-scheduler binds it.
        None if ctx.shared.read(|c| c.real_control_plane) => Ok(Action::await_change()),
        None => schedule(&object, &api, &ctx).await,
        Some(node) if phase(&object) == "Pending" => start(&object, node, &api, &ctx).await,
        Some(node) => probe(&object, node, &api, &ctx).await,
    }
}

async fn schedule(pod: &Value, api: &Api<Pod>, ctx: &Context) -> Result<Action, ReconcileError> {
    let scheduler = pod
        .pointer("/spec/schedulerName")
        .and_then(Value::as_str)
        .unwrap_or("default-scheduler");
    if scheduler != "default-scheduler" {
        return Ok(Action::await_change());
    }
    let client = &ctx.shared.client;
    let informers = &ctx.shared.informers;
    let mut cache = ctx.scheduling.lock().await;
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let namespace = pod["metadata"]["namespace"].as_str().unwrap_or_default();
    let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
    if cache.assumed.contains_key(uid) {
        // Bound already; the store has not caught up (its update wakes the pod again).
        return Ok(Action::requeue(WAITING_RECHECK));
    }
    let nodes = informers.nodes.select(None, |_| true).await;
    // Every pod, in the store's order: the loads are sums, whatever order they come in.
    let loads = cache.loads(&informers.pods.ready().await.state())?;
    let chosen = scheduling::choose_node(pod, cache.nodes(&nodes)?, &loads);
    match chosen {
        Ok(node) => {
            let binding = json!({
                "apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": name, "namespace": namespace},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            });
            api.create_subresource::<Value, Value>(
                "binding",
                name,
                &PostParams::default(),
                &binding,
            )
            .await?;
            cache
                .assumed
                .insert(uid.to_owned(), (node.clone(), scheduling::requests(pod)));
            let message = format!("Successfully assigned {namespace}/{name} to {node}");
            record(
                client,
                pod,
                note("Normal", "Scheduled", &message, "default-scheduler"),
            )
            .await?;
            Ok(Action::await_change())
        }
        Err(message) => {
            if ctx.first_report(uid, &message) {
                let status = pod_status::unschedulable(pod, &message, &now());
                patch_status(api, pod, status).await?;
                record(
                    client,
                    pod,
                    note("Warning", "FailedScheduling", &message, "default-scheduler"),
                )
                .await?;
            }
            Ok(Action::requeue(WAITING_RECHECK))
        }
    }
}

fn note<'a>(kind: &'a str, reason: &'a str, message: &'a str, component: &'a str) -> Note<'a> {
    Note {
        kind,
        reason,
        message,
        component,
    }
}

/// Merge-patches the pod's status, conditional on the resourceVersion the decision was made on.
async fn patch_status(api: &Api<Pod>, pod: &Value, status: Value) -> Result<(), ReconcileError> {
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let body = json!({
        "metadata": {"resourceVersion": pod["metadata"]["resourceVersion"]},
        "status": status,
    });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&body))
        .await?;
    Ok(())
}

/// What the kubelet knows of one namespace's Secrets, ConfigMaps and ServiceAccounts: the
/// pod's references looked up by name in the informers' stores.
struct NamespaceView<'a> {
    informers: &'a Informers,
    namespace: &'a str,
}

/// The keys of a Secret's or ConfigMap's two maps.
fn keys_of<A, B>(
    first: Option<&std::collections::BTreeMap<String, A>>,
    second: Option<&std::collections::BTreeMap<String, B>>,
) -> Keys {
    let first = first.into_iter().flat_map(|m| m.keys());
    let second = second.into_iter().flat_map(|m| m.keys());
    first.chain(second).cloned().collect()
}

impl NamespaceView<'_> {
    /// Waits until every store the view reads holds its first list, so that an absent
    /// object is absent from a complete (if slightly stale) picture.
    async fn ready(&self) {
        self.informers.secrets.ready().await;
        self.informers.config_maps.ready().await;
        self.informers.service_accounts.ready().await;
    }
}

impl needs::Namespace for NamespaceView<'_> {
    fn secret(&self, name: &str) -> Option<Keys> {
        let secret = self.informers.secrets.cached(Some(self.namespace), name)?;
        Some(keys_of(secret.data.as_ref(), secret.string_data.as_ref()))
    }
    fn config_map(&self, name: &str) -> Option<Keys> {
        let map = self
            .informers
            .config_maps
            .cached(Some(self.namespace), name)?;
        Some(keys_of(map.data.as_ref(), map.binary_data.as_ref()))
    }
    fn service_account(&self, name: &str) -> bool {
        self.informers
            .service_accounts
            .cached(Some(self.namespace), name)
            .is_some()
    }
}

/// The pod's container names, comma-separated (for events).
fn container_names(pod: &Value) -> String {
    let names: Vec<&str> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| cs.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    names.join(", ")
}

/// The controller kind that owns the pod (Job, ReplicaSet, ...), if any.
fn owner_kind(pod: &Value) -> Option<&str> {
    pod.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|o| o["controller"] == true)
        .and_then(|o| o["kind"].as_str())
}

/// The node's InternalIP, None while the node store does not hold the node.
async fn host_ip(ctx: &Context, node: &str) -> Option<String> {
    let node = ctx.shared.informers.nodes.get(None, node).await?;
    let addresses = node
        .status
        .as_ref()?
        .addresses
        .as_deref()
        .unwrap_or_default();
    Some(
        addresses
            .iter()
            .find(|a| a.type_ == "InternalIP")
            .map_or("172.18.0.2", |a| a.address.as_str())
            .to_owned(),
    )
}

async fn start(
    pod: &Value,
    node: &str,
    api: &Api<Pod>,
    ctx: &Context,
) -> Result<Action, ReconcileError> {
    let Some(host) = host_ip(ctx, node).await else {
        return Ok(Action::requeue(WAITING_RECHECK));
    };
    let namespace = pod["metadata"]["namespace"].as_str().unwrap_or_default();
    let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
    let client = &ctx.shared.client;
    let at = now();
    let view = NamespaceView {
        informers: &ctx.shared.informers,
        namespace,
    };
    view.ready().await;
    let (blocker, warnings) = needs::check(pod, &view);
    for warning in &warnings {
        if ctx.first_report(&format!("{uid}/pull"), warning) {
            record(
                client,
                pod,
                note(
                    "Warning",
                    "FailedToRetrieveImagePullSecret",
                    warning,
                    "kubelet",
                ),
            )
            .await?;
        }
    }
    match blocker {
        Some(Blocker::Config { container, message }) => {
            if ctx.first_report(uid, &message) {
                let status = pod_status::waiting(
                    pod,
                    "CreateContainerConfigError",
                    Some(&message),
                    &at,
                    &host,
                );
                patch_status(api, pod, status).await?;
                let event = format!("Error: {message} (container {container})");
                record(client, pod, note("Warning", "Failed", &event, "kubelet")).await?;
            }
            return Ok(Action::requeue(WAITING_RECHECK));
        }
        Some(Blocker::Mount { message }) => {
            if ctx.first_report(uid, &message) {
                let status = pod_status::waiting(pod, "ContainerCreating", None, &at, &host);
                patch_status(api, pod, status).await?;
                record(
                    client,
                    pod,
                    note("Warning", "FailedMount", &message, "kubelet"),
                )
                .await?;
            }
            return Ok(Action::requeue(WAITING_RECHECK));
        }
        None => {}
    }
    let delay = ctx.shared.read(|c| match owner_kind(pod) {
        Some("Job") => Duration::ZERO,
        Some("ReplicaSet") if c.deployments.switch.enabled || c.real_control_plane => {
            c.deployments.switch.delay
        }
        _ => c.pods.delay,
    });
    if let Some(left) = ctx.seen.remaining(uid, 0, delay) {
        if pod_status::waiting_reason(pod) != Some("ContainerCreating") {
            let status = pod_status::waiting(pod, "ContainerCreating", None, &at, &host);
            patch_status(api, pod, status).await?;
        }
        return Ok(Action::requeue(left));
    }
    let ready = pod_status::probes_pass(pod);
    let ip = ctx.pod_address(pod, uid, ready).await;
    patch_status(api, pod, pod_status::running(pod, ready, &at, &host, &ip)).await?;
    ctx.forget(uid);
    let message = format!("Started container {}", container_names(pod));
    record(client, pod, note("Normal", "Started", &message, "kubelet")).await?;
    Ok(Action::await_change())
}

/// A Terminating pod: its kubelet stops the containers within the grace period (scaled by
/// [`super::ControllersConfig::grace_second`]) and then removes the pod (a DELETE with a grace
/// period of 0, for this pod's uid only).
async fn terminate(
    pod: &Value,
    uid: &str,
    api: &Api<Pod>,
    ctx: &Context,
) -> Result<Action, ReconcileError> {
    let grace = pod
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0)
        .max(0);
    let bound = pod.pointer("/spec/nodeName").is_some();
    let key = format!("{uid}/terminating");
    if grace > 0 && bound {
        let second = ctx.shared.read(|c| c.grace_second);
        let period = second.saturating_mul(u32::try_from(grace).unwrap_or(u32::MAX));
        if ctx.first_report(&key, "Killing") {
            let message = format!("Stopping container {}", container_names(pod));
            record(
                &ctx.shared.client,
                pod,
                note("Normal", "Killing", &message, "kubelet"),
            )
            .await?;
        }
        if let Some(left) = ctx.seen.remaining(&key, grace, period) {
            return Ok(Action::requeue(left));
        }
    } else if grace == 0 {
        // Removed already, or waiting for its finalizers only.
        ctx.forget(uid);
        ctx.forget(&key);
        ctx.release_address(uid).await;
        return Ok(Action::await_change());
    }
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if matches!(status.code, 404 | 409) => {}
        Err(error) => return Err(error.into()),
    }
    ctx.forget(uid);
    ctx.forget(&key);
    ctx.release_address(uid).await;
    Ok(Action::await_change())
}

/// A running pod: its readiness follows the simulated probe.
async fn probe(
    pod: &Value,
    node: &str,
    api: &Api<Pod>,
    ctx: &Context,
) -> Result<Action, ReconcileError> {
    let ready = pod_status::probes_pass(pod);
    if pod_status::is_ready(pod) == ready || phase(pod) != "Running" {
        return Ok(Action::await_change());
    }
    let Some(host) = host_ip(ctx, node).await else {
        return Ok(Action::await_change());
    };
    let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
    let ip = ctx.pod_address(pod, uid, ready).await;
    patch_status(
        api,
        pod,
        pod_status::running(pod, ready, &now(), &host, &ip),
    )
    .await?;
    if !ready {
        let message = "Readiness probe failed: simulated probe set to fail";
        record(
            &ctx.shared.client,
            pod,
            note("Warning", "Unhealthy", message, "kubelet"),
        )
        .await?;
    }
    Ok(Action::await_change())
}
