//! The process nodes' registration and heartbeat, through the Kubernetes API only: each Node
//! (`process-worker-N`, labelled with the runtime `process`) with capacity, allocatable,
//! addresses (the instance's bridge address, where its pods' gateway and its log endpoint
//! are), daemonEndpoints (the log endpoint's port) and conditions; its Lease in
//! `kube-node-lease` renewed every heartbeat, with its conditions' lastHeartbeatTime.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::context::now;
use crate::controllers::nodes::{KUBELET_VERSION, NODE_LEASE_NAMESPACE, node_labels};

/// The name of process node `index` (0-based).
pub fn node_name(index: usize) -> String {
    format!("process-worker-{}", index + 1)
}

/// The Node a process node registers (without status).
pub fn manifest(name: &str, subnet: u8) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": node_labels(name, "zone-process", "process"),
        },
        "spec": {"podCIDR": format!("10.200.{subnet}.0/24"), "providerID": format!("process://{name}")},
    })
}

/// The status a process node reports at `at`; `previous` keeps transition times.
pub fn status(name: &str, address: &str, port: u16, at: &str, previous: Option<&Value>) -> Value {
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
            {"type": "InternalIP", "address": address},
            {"type": "Hostname", "address": name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
        "nodeInfo": {
            "machineID": format!("{:0>32}", name.len()),
            "systemUUID": "00000000-0000-0000-0000-000000000000",
            "bootID": format!("process-boot-{name}"),
            "kernelVersion": kernel_version(),
            "osImage": "Host (process runtime)",
            "containerRuntimeVersion": "process://1.0.0",
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": KUBELET_VERSION,
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    })
}

fn kernel_version() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// Registers (when absent) and heartbeats the node `name`: status and Lease.
pub async fn heartbeat(
    client: &kube::Client,
    name: &str,
    subnet: u8,
    address: &str,
    port: u16,
) -> Result<(), kube::Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node = match nodes.get_opt(name).await? {
        Some(node) => node,
        None => {
            let node: Node =
                serde_json::from_value(manifest(name, subnet)).map_err(kube::Error::SerdeError)?;
            nodes.create(&PostParams::default(), &node).await?
        }
    };
    let previous = node
        .status
        .map(serde_json::to_value)
        .transpose()
        .map_err(kube::Error::SerdeError)?;
    let uid = node.metadata.uid.unwrap_or_default();
    let body = json!({"status": status(name, address, port, &now(), previous.as_ref())});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&body))
        .await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(NODE_LEASE_NAMESPACE).await?.is_none() {
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": NODE_LEASE_NAMESPACE}}))
                .map_err(kube::Error::SerdeError)?;
        match namespaces.create(&PostParams::default(), &namespace).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    let leases: Api<Lease> = Api::namespaced(client.clone(), NODE_LEASE_NAMESPACE);
    let micro = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": name,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}],
        },
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": micro},
    });
    leases
        .patch(
            name,
            &PatchParams::apply("kubelet").force(),
            &Patch::Apply(&lease),
        )
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::nodes::RUNTIME_LABEL;

    #[test]
    fn process_nodes_carry_the_runtime_label_and_their_endpoint() {
        let m = manifest(&node_name(0), 7);
        assert_eq!(m["metadata"]["name"], "process-worker-1");
        assert_eq!(m["metadata"]["labels"][RUNTIME_LABEL], "process");
        let (t1, t2) = ("2026-01-01T00:00:00Z", "2026-01-01T00:00:10Z");
        let s = status("process-worker-1", "10.200.7.1", 4321, t1, None);
        let again = status("process-worker-1", "10.200.7.1", 4321, t2, Some(&s));
        assert_eq!(again["conditions"][3]["lastTransitionTime"], t1);
        assert_eq!(again["daemonEndpoints"]["kubeletEndpoint"]["Port"], 4321);
        let typed: k8s_openapi::api::core::v1::NodeStatus = serde_json::from_value(again).unwrap();
        assert_eq!(typed.addresses.unwrap()[0].address, "10.200.7.1");
    }
}
