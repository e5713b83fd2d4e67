//! The simulated nodes: each kubelet registers its Node (capacity, allocatable, zone and
//! hostname labels, addresses, node info, pressure and Ready conditions) and keeps a heartbeat:
//! its Lease in `kube-node-lease` is renewed and its conditions' lastHeartbeatTime refreshed
//! every heartbeat period. A deleted Node is registered again at the next heartbeat, as a
//! restarting kubelet would. Cordoning (`spec.unschedulable`) is left to the user.

use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::runtime::{ReconcileError, Shared};
use super::status::now;

/// The Node label naming a node's runtime: `simulated` (these nodes) or `process` (the node
/// agent's, `crate::agent`).
pub const RUNTIME_LABEL: &str = "sim.cinder.openstack.c5c3.io/runtime";
/// The namespace of the node heartbeat Leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// The kubelet version the nodes report.
pub const KUBELET_VERSION: &str = "v1.32.0";
const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];

/// The name of node `index` (0-based).
pub fn node_name(index: usize) -> String {
    format!("sim-worker-{}", index + 1)
}

/// The labels every Node of the embedded cluster carries, simulated or process: host name,
/// OS and architecture (current and beta keys), region and `zone`, and the node runtime.
pub fn node_labels(name: &str, zone: &str, runtime: &str) -> serde_json::Map<String, Value> {
    [
        ("kubernetes.io/hostname", name),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("beta.kubernetes.io/os", "linux"),
        ("beta.kubernetes.io/arch", "amd64"),
        ("topology.kubernetes.io/region", "sim"),
        ("topology.kubernetes.io/zone", zone),
        (RUNTIME_LABEL, runtime),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_string(), json!(value)))
    .collect()
}

/// The Node object a kubelet registers (without status).
pub fn node_manifest(index: usize) -> Value {
    let name = node_name(index);
    let mut labels = node_labels(&name, ZONES[index % ZONES.len()], "simulated");
    labels.insert(
        "node.kubernetes.io/instance-type".into(),
        json!("sim.large"),
    );
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
        },
        "spec": {"podCIDR": format!("10.244.{index}.0/24"), "providerID": format!("sim://{name}")},
    })
}

/// The status a healthy node reports at heartbeat time `at`; `previous` keeps transition times.
pub fn node_status(index: usize, at: &str, previous: Option<&Value>) -> Value {
    let transition = |kind: &str| {
        previous
            .and_then(|s| s.get("conditions"))
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
            .and_then(|c| c.get("lastTransitionTime").cloned())
            .unwrap_or_else(|| json!(at))
    };
    let condition = |kind: &str, status: &str, reason: &str, message: &str| {
        json!({"type": kind, "status": status, "reason": reason, "message": message,
               "lastHeartbeatTime": at, "lastTransitionTime": transition(kind)})
    };
    let name = node_name(index);
    json!({
        "capacity": {"cpu": "4", "memory": "16331504Ki", "pods": "110", "ephemeral-storage": "102687672Ki"},
        "allocatable": {"cpu": "3800m", "memory": "15717104Ki", "pods": "110", "ephemeral-storage": "94636958Ki"},
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        ],
        "addresses": [
            {"type": "InternalIP", "address": format!("172.18.0.{}", index + 2)},
            {"type": "Hostname", "address": name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": format!("sim{index:029}"),
            "systemUUID": format!("00000000-0000-0000-0000-{index:012}"),
            "bootID": format!("sim-boot-{index}"),
            "kernelVersion": "6.1.0-sim",
            "osImage": "Simulated Linux",
            "containerRuntimeVersion": "sim://1.0.0",
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": KUBELET_VERSION,
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    })
}

/// Registers the first `count` nodes with their first heartbeat (what a cluster has before
/// anything runs on it).
pub async fn register(client: &kube::Client, count: usize) -> Result<(), ReconcileError> {
    for index in 0..count {
        heartbeat(client, index).await?;
    }
    Ok(())
}

/// Runs the node heartbeats until the task is aborted.
pub async fn run(shared: Arc<Shared>) {
    loop {
        let (count, period) = shared.read(|c| (c.nodes.count, c.nodes.heartbeat));
        tokio::time::sleep(period.max(std::time::Duration::from_millis(100))).await;
        for index in 0..count {
            if let Err(error) = heartbeat(&shared.client, index).await {
                tracing::debug!(%error, node = index, "simulated node heartbeat failed");
            }
        }
        shared.count_pass("nodes");
    }
}

async fn heartbeat(client: &kube::Client, index: usize) -> Result<(), ReconcileError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let name = node_name(index);
    let node = match nodes.get_opt(&name).await? {
        Some(node) => node,
        None => {
            let node: Node = serde_json::from_value(node_manifest(index))?;
            nodes.create(&PostParams::default(), &node).await?
        }
    };
    let previous = node.status.map(serde_json::to_value).transpose()?;
    let uid = node.metadata.uid.unwrap_or_default();
    let at = now();
    let body = json!({"status": node_status(index, &at, previous.as_ref())});
    nodes
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&body))
        .await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(NODE_LEASE_NAMESPACE).await?.is_none() {
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": NODE_LEASE_NAMESPACE}}))?;
        namespaces
            .create(&PostParams::default(), &namespace)
            .await?;
    }
    let leases: Api<Lease> = Api::namespaced(client.clone(), NODE_LEASE_NAMESPACE);
    let micro = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": name,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name,
                                 "uid": uid}],
        },
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": micro},
    });
    leases
        .patch(
            &name,
            &PatchParams::apply("kubelet").force(),
            &Patch::Apply(&lease),
        )
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_spread_over_zones_and_keep_transition_times() {
        assert_eq!(
            node_manifest(0)["metadata"]["labels"]["topology.kubernetes.io/zone"],
            "zone-a"
        );
        assert_eq!(
            node_manifest(4)["metadata"]["labels"]["topology.kubernetes.io/zone"],
            "zone-b"
        );
        let (t1, t2) = ("2026-01-01T00:00:00Z", "2026-01-01T00:00:10Z");
        let first = node_status(1, t1, None);
        let second = node_status(1, t2, Some(&first));
        assert_eq!(second["conditions"][3]["lastTransitionTime"], t1);
        assert_eq!(second["conditions"][3]["lastHeartbeatTime"], t2);
        assert_eq!(second["addresses"][0]["address"], "172.18.0.3");
        let typed: k8s_openapi::api::core::v1::NodeStatus = serde_json::from_value(second).unwrap();
        assert_eq!(typed.node_info.unwrap().kubelet_version, KUBELET_VERSION);
    }
}
