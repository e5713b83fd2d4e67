//! The node agent: the embedded cluster's kubelet for nodes of runtime `process`, whose pods'
//! containers run as local processes in namespace sandboxes. It talks to the API server only
//! through the Kubernetes API (a kube-rs `Client`): it registers its Nodes and renews their
//! Leases ([`node`]), watches the pods bound to them (a field selector per node), and gives each
//! pod one task ([`pod`]) that owns its sandbox and containers, writes `pods/status` and posts
//! Events. It serves container logs ([`logs`]) and exec ([`exec`]) on its nodes'
//! daemonEndpoints port. It owns the instance's bridge and the pods' network namespaces
//! ([`sandbox`]) and the memory cgroups of its containers ([`cgroups`]) and removes them, with
//! every process, when it stops (or is dropped).
//!
//! The contract with the Service side of the cluster: every pod gets a real IP in
//! `status.podIP`/`podIPs` on the instance's bridge (10.200.X.0/24), reachable from the host and
//! from other pods; the bridge's address (10.200.X.1) is the pods' default gateway and the
//! nodes' InternalIP; a pod's Ready condition comes from its real readiness probes. Where the
//! cluster has the `kubernetes` Service, a pod gets the in-cluster API access a kubelet gives
//! ([`api_access`]: the ServiceAccount token volume and `KUBERNETES_SERVICE_*`).

pub mod api_access;
pub mod cgroups;
pub mod container_path;
pub mod context;
pub mod env;
pub mod exec;
pub mod images;
pub mod logs;
pub mod node;
pub mod node_port;
pub mod pod;
pub mod probes;
pub mod sandbox;
pub mod status;
pub mod volumes;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::watcher;
use serde_json::{Value, json};
use tokio::sync::mpsc;

pub use context::{AgentContext, RuntimeConfig, event, now};
pub use images::{ImageMap, ImageRef, ImageRoot, ImageRule};
use pod::PodMsg;
use sandbox::Network;

pub use crate::controllers::nodes::RUNTIME_LABEL;

/// A running agent; [`Agent::shutdown`] (or dropping it) stops every process and removes
/// every namespace, veth and the bridge it made.
pub struct Agent {
    ctx: Arc<AgentContext>,
    nodes: Vec<String>,
    port: u16,
    stop: tokio::sync::watch::Sender<bool>,
    dispatcher: Option<tokio::task::JoinHandle<()>>,
    side_tasks: Vec<tokio::task::JoinHandle<()>>,
    _state: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("nodes", &self.nodes)
            .field("bridge", &self.ctx.network.bridge)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// Creates the instance's bridge, registers `nodes` process nodes and starts serving their
    /// pods. Needs root (network namespaces); the error says what failed.
    pub async fn start(
        client: kube::Client,
        nodes: usize,
        config: RuntimeConfig,
    ) -> Result<Agent, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("process nodes need root (network and mount namespaces)".to_owned());
        }
        let state = tempfile::Builder::new()
            .prefix("cinder-agent-")
            .tempdir()
            .map_err(|e| format!("agent state directory: {e}"))?;
        std::fs::set_permissions(
            state.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o711),
        )
        .map_err(|e| format!("agent state directory: {e}"))?;
        let network = Network::create().await?;
        let listener = match tokio::net::TcpListener::bind((network.gateway(), 0)).await {
            Ok(l) => l,
            Err(e) => {
                network.remove_blocking();
                return Err(format!("log endpoint on {}: {e}", network.gateway()));
            }
        };
        let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
        let cgroups = match cgroups::Cgroups::create(&network.id) {
            Ok(cgroups) => Some(cgroups),
            Err(error) => {
                tracing::warn!(%error, "process nodes: no memory cgroup, memory limits are not enforced");
                None
            }
        };
        let ctx = Arc::new(AgentContext {
            client: client.clone(),
            network,
            state_dir: state.path().to_path_buf(),
            config,
            cgroups,
        });
        let names: Vec<String> = (0..nodes).map(node::node_name).collect();
        let mut agent = Agent {
            ctx: Arc::clone(&ctx),
            nodes: names.clone(),
            port,
            stop: tokio::sync::watch::channel(false).0,
            dispatcher: None,
            side_tasks: Vec::new(),
            _state: Some(state),
        };
        let address = ctx.network.gateway().to_string();
        for name in &names {
            node::heartbeat(&client, name, ctx.network.subnet, &address, port)
                .await
                .map_err(|e| format!("registering node {name}: {e}"))?;
        }
        agent.side_tasks.push(tokio::spawn(node_port::serve(
            listener,
            ctx.state_dir.join("logs"),
        )));
        let beat = Arc::clone(&ctx);
        let beat_names = names.clone();
        agent.side_tasks.push(tokio::spawn(async move {
            loop {
                tokio::time::sleep(beat.config.heartbeat.max(Duration::from_millis(100))).await;
                for name in &beat_names {
                    let subnet = beat.network.subnet;
                    if let Err(error) =
                        node::heartbeat(&beat.client, name, subnet, &address, port).await
                    {
                        tracing::debug!(%error, node = %name, "process node heartbeat failed");
                    }
                }
            }
        }));
        let stop = agent.stop.subscribe();
        agent.dispatcher = Some(tokio::spawn(dispatch(ctx, names, stop)));
        Ok(agent)
    }

    /// The names of the agent's nodes.
    pub fn node_names(&self) -> &[String] {
        &self.nodes
    }

    /// The instance's bridge (its name, subnet and the id in every host object's name).
    pub fn network(&self) -> &Network {
        &self.ctx.network
    }

    /// The instance's memory cgroup directory, when memory limits are enforced.
    pub fn cgroup_dir(&self) -> Option<&std::path::Path> {
        self.ctx.cgroups.as_ref().map(|c| c.root.as_path())
    }

    /// The port of the log endpoint (every node's daemonEndpoints port).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops every pod's processes, removes every sandbox and the bridge, stops the tasks.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(dispatcher) = self.dispatcher.take() {
            let _ = dispatcher.await;
        }
        for task in self.side_tasks.drain(..) {
            task.abort();
        }
        self.cleanup();
    }

    /// What is left after the tasks: processes in this instance's namespaces, the namespaces,
    /// the bridge, the state directory.
    fn cleanup(&mut self) {
        let network = &self.ctx.network;
        network.remove_pods_blocking();
        network.remove_blocking();
        if let Some(cgroups) = &self.ctx.cgroups {
            cgroups.remove();
        }
        self._state.take();
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(dispatcher) = self.dispatcher.take() {
            dispatcher.abort();
        }
        for task in self.side_tasks.drain(..) {
            task.abort();
        }
        if self._state.is_some() {
            self.cleanup();
        }
    }
}

/// Watches the pods bound to `nodes` and hands each to its task; on stop, tells every task to
/// stop and waits for them.
async fn dispatch(
    ctx: Arc<AgentContext>,
    nodes: Vec<String>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let api: Api<Pod> = Api::all(ctx.client.clone());
    let streams = nodes.iter().map(|node| {
        let config = watcher::Config::default().fields(&format!("spec.nodeName={node}"));
        watcher(api.clone(), config).boxed()
    });
    let mut events = futures::stream::select_all(streams);
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(String, u8)>();
    let mut pods: HashMap<String, mpsc::UnboundedSender<PodMsg>> = HashMap::new();
    let mut used: BTreeSet<u8> = BTreeSet::new();
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            Some((uid, host)) = done_rx.recv() => {
                pods.remove(&uid);
                used.remove(&host);
            }
            event = events.next() => {
                let Some(event) = event else { break };
                let (pod, gone) = match event {
                    Ok(watcher::Event::Apply(pod)) | Ok(watcher::Event::InitApply(pod)) => (pod, false),
                    Ok(watcher::Event::Delete(pod)) => (pod, true),
                    Ok(_) => continue,
                    Err(error) => {
                        tracing::debug!(%error, "process node: pod watch failed; retrying");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    }
                };
                let Ok(mut value) = serde_json::to_value(&pod) else { continue };
                value["apiVersion"] = json!("v1");
                value["kind"] = json!("Pod");
                let uid = value["metadata"]["uid"].as_str().unwrap_or_default().to_owned();
                if uid.is_empty() {
                    continue;
                }
                if let Some(tx) = pods.get(&uid) {
                    let _ = tx.send(if gone { PodMsg::Gone } else { PodMsg::Update(value) });
                    continue;
                }
                let phase = value.pointer("/status/phase").and_then(Value::as_str).unwrap_or("Pending");
                if gone || matches!(phase, "Succeeded" | "Failed") {
                    continue;
                }
                let Some(host) = (2..=254u8).find(|h| !used.contains(h)) else {
                    tracing::warn!("process node: no free pod address left in the instance's /24");
                    continue;
                };
                used.insert(host);
                let (tx, rx) = mpsc::unbounded_channel();
                pods.insert(uid.clone(), tx.clone());
                let task_ctx = Arc::clone(&ctx);
                let done = done_tx.clone();
                tasks.spawn(async move {
                    pod::run(task_ctx, value, host, tx, rx).await;
                    let _ = done.send((uid, host));
                });
            }
        }
    }
    for tx in pods.values() {
        let _ = tx.send(PodMsg::Shutdown);
    }
    while tasks.join_next().await.is_some() {}
}
