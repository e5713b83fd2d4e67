//! Workload controllers on the pod model: Deployments roll out through ReplicaSets with
//! revisions (and back, as `kubectl rollout undo` does), availability comes from pod readiness
//! (a missing Secret key or a failing readiness probe keeps a Deployment from becoming
//! available), DaemonSets run one pod per node and ReplicationControllers keep their replicas.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::common::eventually;
use crate::nodes_and_pods::{cluster, events_about, ready, value};

fn deployment(name: &str, replicas: i32, pod_spec: Value) -> Deployment {
    let mut spec = json!({"containers": [{"name": "app", "image": "app:1"}]});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), pod_spec.as_object()) {
        spec.extend(extra.clone());
    }
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}
    }))
    .unwrap()
}

async fn status(api: &Api<Deployment>, name: &str) -> Value {
    value(&api.get(name).await.unwrap().status)
}

fn available(status: &Value) -> bool {
    status["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Available" && c["status"] == "True")
    })
}

fn complete(status: &Value, replicas: i64) -> bool {
    status["updatedReplicas"] == replicas
        && status["availableReplicas"] == replicas
        && status["replicas"] == replicas
        && status["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["reason"] == "NewReplicaSetAvailable"))
}

#[tokio::test]
async fn a_missing_secret_key_keeps_a_deployment_unavailable_until_it_appears() {
    let cluster = cluster(3, Duration::from_millis(100)).await;
    let client = cluster.client().await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let env = json!({"containers": [{"name": "app", "image": "app:1", "env": [
        {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]}]});
    deployments
        .create(&PostParams::default(), &deployment("db-client", 1, env))
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let selector = ListParams::default().labels("app=db-client");
    eventually("container waits in CreateContainerConfigError", || async {
        pods.list(&selector).await.unwrap().items.iter().any(|p| {
            value(p).pointer("/status/containerStatuses/0/state/waiting/reason")
                == Some(&json!("CreateContainerConfigError"))
        })
    })
    .await;
    let waiting = value(&pods.list(&selector).await.unwrap().items[0]);
    assert_eq!(
        waiting["status"]["containerStatuses"][0]["state"]["waiting"]["message"],
        "secret \"db\" not found"
    );
    let s = status(&deployments, "db-client").await;
    assert!(!available(&s), "{s}");
    assert_eq!(s["availableReplicas"], 0);

    // a Secret without the key: still waiting, now for the key
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let secret: Secret = serde_json::from_value(
        json!({"metadata": {"name": "db"}, "stringData": {"user": "cinder"}}),
    )
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    eventually("waiting for the key", || async {
        pods.list(&selector).await.unwrap().items.iter().any(|p| {
            value(p).pointer("/status/containerStatuses/0/state/waiting/message")
                == Some(&json!("couldn't find key password in Secret default/db"))
        })
    })
    .await;
    assert!(!available(&status(&deployments, "db-client").await));
    let patch = json!({"stringData": {"password": "s3cret"}});
    secrets
        .patch("db", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually("deployment available once the key exists", || async {
        let s = status(&deployments, "db-client").await;
        available(&s) && complete(&s, 1)
    })
    .await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_failing_readiness_probe_keeps_a_rollout_from_completing() {
    let cluster = cluster(3, Duration::from_millis(100)).await;
    let client = cluster.client().await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    deployments
        .create(&PostParams::default(), &deployment("web", 2, json!({})))
        .await
        .unwrap();
    eventually("first roll-out complete", || async {
        complete(&status(&deployments, "web").await, 2)
    })
    .await;
    let failing = json!({"spec": {"template": {"metadata": {"annotations": {
        "sim.cinder.c5c3.io/readiness-probe": "fail"}}}}});
    deployments
        .patch("web", &PatchParams::default(), &Patch::Merge(&failing))
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    eventually("a new pod runs but is not ready", || async {
        pods.list(&ListParams::default().labels("app=web"))
            .await
            .unwrap()
            .items
            .iter()
            .any(|p| {
                let p = value(p);
                p["status"]["phase"] == "Running" && !ready(&p)
            })
    })
    .await;
    // give the roll-out time: it stays at one surge pod, the old ones keep serving
    tokio::time::sleep(Duration::from_millis(800)).await;
    let s = status(&deployments, "web").await;
    assert_eq!(s["observedGeneration"], 2);
    assert_eq!(s["updatedReplicas"], 1, "{s}");
    assert_eq!(s["availableReplicas"], 2, "{s}");
    assert!(available(&s));
    assert!(!complete(&s, 2), "{s}");
    let unhealthy = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items;
    let not_ready = unhealthy.iter().find(|p| !ready(&value(p))).unwrap();
    let name = not_ready.metadata.name.clone().unwrap();
    assert_eq!(
        events_about(&client, &name, "Unhealthy").await.len(),
        0,
        "the probe failed from the start"
    );
    // the probe passing again finishes the roll-out
    let passing = json!({"spec": {"template": {"metadata": {"annotations": {
        "sim.cinder.c5c3.io/readiness-probe": "pass"}}}}});
    deployments
        .patch("web", &PatchParams::default(), &Patch::Merge(&passing))
        .await
        .unwrap();
    eventually("roll-out complete", || async {
        complete(&status(&deployments, "web").await, 2)
    })
    .await;
    cluster.shutdown().await;
}

fn revision(rs: &ReplicaSet) -> String {
    rs.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("deployment.kubernetes.io/revision"))
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn deployments_keep_revisions_in_replica_sets_and_roll_back() {
    let cluster = cluster(3, Duration::from_millis(50)).await;
    let client = cluster.client().await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    deployments
        .create(&PostParams::default(), &deployment("svc", 3, json!({})))
        .await
        .unwrap();
    eventually("v1 complete", || async {
        complete(&status(&deployments, "svc").await, 3)
    })
    .await;
    let image = |tag: &str| json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": format!("app:{tag}")}]}}}});
    deployments
        .patch(
            "svc",
            &PatchParams::default(),
            &Patch::Strategic(image("2")),
        )
        .await
        .unwrap();
    eventually("v2 complete", || async {
        let s = status(&deployments, "svc").await;
        s["observedGeneration"] == 2 && complete(&s, 3)
    })
    .await;
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let list = sets
        .list(&ListParams::default().labels("app=svc"))
        .await
        .unwrap()
        .items;
    assert_eq!(list.len(), 2);
    let v1 = list.iter().find(|rs| revision(rs) == "1").unwrap();
    let v2 = list.iter().find(|rs| revision(rs) == "2").unwrap();
    assert_eq!(v1.spec.replicas, Some(0));
    assert_eq!(v2.spec.replicas, Some(3));
    let hash = v2.metadata.labels.as_ref().unwrap()["pod-template-hash"].clone();
    assert_eq!(
        v2.metadata.name.as_deref(),
        Some(format!("svc-{hash}").as_str())
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let v2_pods = pods
        .list(&ListParams::default().labels(&format!("pod-template-hash={hash}")))
        .await
        .unwrap()
        .items;
    assert_eq!(v2_pods.len(), 3);

    // back to v1's template (what `kubectl rollout undo` sends): the v1 ReplicaSet is revived
    deployments
        .patch(
            "svc",
            &PatchParams::default(),
            &Patch::Strategic(image("1")),
        )
        .await
        .unwrap();
    eventually("undo complete on the old ReplicaSet", || async {
        let s = status(&deployments, "svc").await;
        s["observedGeneration"] == 3 && complete(&s, 3)
    })
    .await;
    let v1_again = sets
        .get(v1.metadata.name.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(revision(&v1_again), "3");
    assert_eq!(v1_again.spec.replicas, Some(3));
    assert_eq!(
        sets.list(&ListParams::default().labels("app=svc"))
            .await
            .unwrap()
            .items
            .len(),
        2
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn daemon_sets_run_on_every_node_and_replication_controllers_keep_their_pods() {
    let cluster = cluster(3, Duration::from_millis(50)).await;
    let client = cluster.client().await;
    let daemon_sets: Api<DaemonSet> = Api::namespaced(client.clone(), "default");
    let ds: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {"containers": [{"name": "a", "image": "agent:1"}]}}}
    }))
    .unwrap();
    daemon_sets
        .create(&PostParams::default(), &ds)
        .await
        .unwrap();
    eventually("a ready daemon pod on each node", || async {
        let s = value(&daemon_sets.get("agent").await.unwrap().status);
        s["desiredNumberScheduled"] == 3
            && s["numberReady"] == 3
            && s["updatedNumberScheduled"] == 3
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut nodes: Vec<String> = pods
        .list(&ListParams::default().labels("app=agent"))
        .await
        .unwrap()
        .items
        .iter()
        .filter_map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
        .collect();
    nodes.sort();
    assert_eq!(nodes, ["sim-worker-1", "sim-worker-2", "sim-worker-3"]);

    let controllers: Api<ReplicationController> = Api::namespaced(client.clone(), "default");
    let rc: ReplicationController = serde_json::from_value(json!({
        "metadata": {"name": "legacy"},
        "spec": {"replicas": 2, "selector": {"app": "legacy"},
                 "template": {"metadata": {"labels": {"app": "legacy"}}, "spec": {"containers": [{"name": "l", "image": "legacy:1"}]}}}
    }))
    .unwrap();
    controllers
        .create(&PostParams::default(), &rc)
        .await
        .unwrap();
    eventually("two ready rc pods", || async {
        let s = value(&controllers.get("legacy").await.unwrap().status);
        s["readyReplicas"] == 2 && s["replicas"] == 2
    })
    .await;
    // a deleted pod is replaced
    let legacy = ListParams::default().labels("app=legacy");
    let first = pods.list(&legacy).await.unwrap().items[0]
        .metadata
        .name
        .clone()
        .unwrap();
    pods.delete(&first, &Default::default()).await.unwrap();
    eventually("replacement pod", || async {
        let list = pods.list(&legacy).await.unwrap().items;
        list.len() == 2
            && list
                .iter()
                .all(|p| p.metadata.name.as_deref() != Some(first.as_str()) && ready(&value(p)))
    })
    .await;
    cluster.shutdown().await;
}
