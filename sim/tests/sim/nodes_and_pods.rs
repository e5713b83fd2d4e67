//! Nodes, the simulated scheduler and kubelet, and the Pod subresources: nodes register with
//! heartbeat Leases, a bare Pod is bound and runs, a pod no node can take stays Pending with
//! FailedScheduling, `pods/log` answers a short log, and evictions wait while a
//! PodDisruptionBudget allows no disruption.

use std::time::Duration;

use cinder_sim::controllers::{ControllersConfig, Switch};
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, EvictParams, ListParams, PostParams};
use serde_json::{Value, json};

use crate::common::{eventually, raw};

pub async fn cluster(nodes: usize, rollout: Duration) -> EmbeddedCluster {
    let mut controllers = ControllersConfig::default();
    controllers.nodes.count = nodes;
    controllers.pods = Switch::on(Duration::from_millis(50));
    controllers.deployments.switch = Switch::on(rollout);
    EmbeddedCluster::start(ClusterConfig {
        controllers,
        ..ClusterConfig::default()
    })
    .await
    .unwrap()
}

pub fn pod(name: &str, extra_spec: Value) -> Pod {
    let mut spec = json!({"containers": [{"name": "main", "image": "busybox:1.36"}]});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra_spec.as_object()) {
        spec.extend(extra.clone());
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

pub fn value<T: serde::Serialize>(object: &T) -> Value {
    serde_json::to_value(object).unwrap()
}

pub fn ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

pub async fn events_about(client: &kube::Client, name: &str, reason: &str) -> Vec<Event> {
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object.name.as_deref() == Some(name) && e.reason.as_deref() == Some(reason)
        })
        .collect()
}

#[tokio::test]
async fn nodes_register_and_a_bare_pod_runs_on_one() {
    let cluster = cluster(3, Duration::from_millis(100)).await;
    let client = cluster.client().await;
    let nodes: Api<Node> = Api::all(client.clone());
    eventually("three ready nodes", || async {
        let list = nodes.list(&ListParams::default()).await.unwrap().items;
        list.len() == 3 && list.iter().all(|n| ready(&value(n)))
    })
    .await;
    let node = value(&nodes.get("sim-worker-2").await.unwrap());
    assert_eq!(
        node["metadata"]["labels"]["kubernetes.io/hostname"],
        "sim-worker-2"
    );
    assert_eq!(
        node["metadata"]["labels"]["topology.kubernetes.io/zone"],
        "zone-b"
    );
    assert_eq!(node["status"]["allocatable"]["pods"], "110");
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    eventually("node leases", || async {
        leases
            .get_opt("sim-worker-3")
            .await
            .unwrap()
            .is_some_and(|l| {
                l.spec.and_then(|s| s.holder_identity).as_deref() == Some("sim-worker-3")
            })
    })
    .await;

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("bare", json!({})))
        .await
        .unwrap();
    eventually("bare pod running and ready", || async {
        let p = value(&pods.get("bare").await.unwrap());
        p["status"]["phase"] == "Running" && ready(&p)
    })
    .await;
    let p = value(&pods.get("bare").await.unwrap());
    let node = p["spec"]["nodeName"].as_str().unwrap().to_owned();
    assert!(node.starts_with("sim-worker-"), "{node}");
    assert!(
        p["status"]["podIP"]
            .as_str()
            .unwrap()
            .starts_with("10.244.")
    );
    assert_eq!(p["status"]["qosClass"], "BestEffort");
    assert!(p["status"]["containerStatuses"][0]["state"]["running"].is_object());
    assert_eq!(events_about(&client, "bare", "Scheduled").await.len(), 1);

    let log = raw(
        &cluster.url(),
        "GET",
        "/api/v1/namespaces/default/pods/bare/log",
        &[],
        "",
    )
    .await;
    assert_eq!(log.code, 200);
    assert!(
        log.content_type.starts_with("text/plain"),
        "{}",
        log.content_type
    );
    assert!(
        log.body.contains("started (image busybox:1.36)"),
        "{}",
        log.body
    );
    // a second binding is refused
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "bare"}, "target": {"name": "sim-worker-1"}});
    let again = raw(
        &cluster.url(),
        "POST",
        "/api/v1/namespaces/default/pods/bare/binding",
        &[("Content-Type", "application/json")],
        binding.to_string(),
    )
    .await;
    assert_eq!(again.code, 409, "{}", again.body);
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_pod_no_node_can_take_stays_pending_with_failed_scheduling() {
    let cluster = cluster(3, Duration::from_millis(100)).await;
    let client = cluster.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(
        &PostParams::default(),
        &pod("picky", json!({"nodeSelector": {"disktype": "ssd"}})),
    )
    .await
    .unwrap();
    eventually("FailedScheduling event", || async {
        !events_about(&client, "picky", "FailedScheduling")
            .await
            .is_empty()
    })
    .await;
    let p = value(&pods.get("picky").await.unwrap());
    assert_eq!(p["status"]["phase"], "Pending");
    assert!(p["spec"]["nodeName"].is_null());
    let scheduled = &p["status"]["conditions"][0];
    assert_eq!(scheduled["type"], "PodScheduled");
    assert_eq!(scheduled["status"], "False");
    assert_eq!(scheduled["reason"], "Unschedulable");
    let message = scheduled["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
        ),
        "{message}"
    );
    // the log of a pod that never started is refused with the reason
    let log = raw(
        &cluster.url(),
        "GET",
        "/api/v1/namespaces/default/pods/picky/log",
        &[],
        "",
    )
    .await;
    assert_eq!(log.code, 400, "{}", log.body);

    // Labelling a node makes it fit.
    let nodes: Api<Node> = Api::all(client.clone());
    let patch = json!({"metadata": {"labels": {"disktype": "ssd"}}});
    nodes
        .patch(
            "sim-worker-3",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
    eventually("picky pod runs on the labelled node", || async {
        let p = value(&pods.get("picky").await.unwrap());
        p["spec"]["nodeName"] == "sim-worker-3" && p["status"]["phase"] == "Running"
    })
    .await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn evictions_wait_while_the_disruption_budget_allows_none() {
    // slow pod starts, so the replacement of an evicted pod is not ready at once
    let cluster = cluster(2, Duration::from_secs(2)).await;
    let client = cluster.client().await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "api"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "api"}},
                 "template": {"metadata": {"labels": {"app": "api"}},
                              "spec": {"containers": [{"name": "api", "image": "cinder:1"}]}}}
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "api"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "api"}}}
    }))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let api_pods = ListParams::default().labels("app=api");
    eventually("three ready api pods", || async {
        let list = pods.list(&api_pods).await.unwrap().items;
        list.len() == 3 && list.iter().all(|p| ready(&value(p)))
    })
    .await;
    let names: Vec<String> = pods
        .list(&api_pods)
        .await
        .unwrap()
        .items
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    pods.evict(&names[0], &EvictParams::default())
        .await
        .unwrap();
    // raw HTTP: kube-rs retries a 429 by itself
    let eviction = |name: &str| {
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "default"}})
            .to_string()
    };
    let refused = raw(
        &cluster.url(),
        "POST",
        &format!("/api/v1/namespaces/default/pods/{}/eviction", names[1]),
        &[("Content-Type", "application/json")],
        eviction(&names[1]),
    )
    .await;
    assert_eq!(refused.code, 429, "{}", refused.body);
    let status = refused.json();
    assert_eq!(status["reason"], "TooManyRequests");
    assert_eq!(
        status["message"],
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    assert_eq!(status["details"]["causes"][0]["reason"], "DisruptionBudget");
    assert_eq!(
        status["details"]["causes"][0]["message"],
        "The disruption budget api needs 2 healthy pods and has 2 currently"
    );
    assert!(pods.get_opt(&names[1]).await.unwrap().is_some());
    // once the replacement is ready the budget allows the next eviction
    eventually("second eviction allowed", || async {
        let path = format!("/api/v1/namespaces/default/pods/{}/eviction", names[1]);
        let answer = raw(
            &cluster.url(),
            "POST",
            &path,
            &[("Content-Type", "application/json")],
            eviction(&names[1]),
        )
        .await;
        answer.code == 201
    })
    .await;
    eventually("evicted pod gone", || async {
        pods.get_opt(&names[1]).await.unwrap().is_none()
    })
    .await;
    cluster.shutdown().await;
}
