//! What every pod task of the node agent reads: the client, the instance's network, the state
//! directory and the runtime configuration ([`RuntimeConfig`], never changed after start); and the Events the
//! agent posts as its nodes' kubelet.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::{Event, Service};
use kube::api::{Api, ListParams, PostParams};
use rand::Rng;
use serde_json::{Value, json};

use std::time::Duration;

use super::cgroups::Cgroups;
use super::images::ImageMap;
use super::sandbox::Network;

/// What every pod task reads (never changes after start).
pub struct AgentContext {
    pub client: kube::Client,
    pub network: Network,
    pub state_dir: PathBuf,
    pub config: RuntimeConfig,
    /// The instance's memory cgroup; None where no memory controller can be used (limits are
    /// then not enforced, as the agent's start logged).
    pub cgroups: Option<Cgroups>,
}

impl std::fmt::Debug for AgentContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentContext")
            .field("network", &self.network)
            .field("state_dir", &self.state_dir)
            .finish_non_exhaustive()
    }
}

impl AgentContext {
    /// The directory of one pod's container logs.
    pub fn log_dir(&self, namespace: &str, pod: &str, uid: &str) -> PathBuf {
        self.state_dir
            .join("logs")
            .join(format!("{namespace}_{pod}_{uid}"))
    }

    /// The namespace's Services with a ClusterIP, for the pods' /etc/hosts.
    pub async fn services(&self, namespace: &str) -> Vec<(String, String)> {
        let api: Api<Service> = Api::namespaced(self.client.clone(), namespace);
        api.list(&ListParams::default())
            .await
            .map(|list| {
                list.items
                    .into_iter()
                    .filter_map(|s| {
                        let ip = s.spec.as_ref()?.cluster_ip.clone()?;
                        (!ip.is_empty() && ip != "None")
                            .then(|| (s.metadata.name.unwrap_or_default(), ip))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The current time as the API writes it.
pub fn now() -> String {
    crate::controllers::status::now()
}

/// Posts a core/v1 Event about `pod` from the kubelet of its node.
pub async fn event(ctx: &AgentContext, pod: &Value, kind: &str, reason: &str, message: &str) {
    let text = |p: &str| {
        pod.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let namespace = text("/metadata/namespace");
    let name = text("/metadata/name");
    let suffix: u64 = rand::rng().random();
    let at = now();
    let event = json!({
        "metadata": {"name": format!("{name}.{suffix:016x}"), "namespace": namespace},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": namespace,
                           "uid": text("/metadata/uid")},
        "type": kind, "reason": reason, "message": message,
        "source": {"component": "kubelet", "host": text("/spec/nodeName")},
        "reportingComponent": "kubelet", "reportingInstance": text("/spec/nodeName"),
        "firstTimestamp": at, "lastTimestamp": at, "count": 1,
    });
    let Ok(event) = serde_json::from_value::<Event>(event) else {
        return;
    };
    let api: Api<Event> = Api::namespaced(ctx.client.clone(), &namespace);
    if let Err(error) = api.create(&PostParams::default(), &event).await {
        tracing::debug!(%error, "process node: event not recorded");
    }
}

/// The process runtime's configuration (see docs/embedded-cluster.md).
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// Which host root each image runs from.
    pub images: ImageMap,
    /// The first crash-loop (and image pull) back-off; doubled per restart up to five minutes
    /// (the kubelet's is 10 s).
    pub crash_backoff: Duration,
    /// How often each node renews its Lease and heartbeat.
    pub heartbeat: Duration,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            images: ImageMap::default(),
            crash_backoff: Duration::from_secs(10),
            heartbeat: Duration::from_secs(10),
        }
    }
}
