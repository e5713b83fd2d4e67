//! The pod life cycle owners see: StatefulSets start their pods in ordinal order and replace
//! them in reverse ordinal order on a template change; a deleted pod stays Terminating for its
//! (scaled) grace period while its ReplicaSet already replaces it; a grace period of 0 or an
//! unscheduled pod goes at once; Jobs run `parallelism` pods at once up to `completions`.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::time::Duration;

use cinder_sim::controllers::{ControllersConfig, Switch};
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::common::eventually;
use crate::nodes_and_pods::{events_about, pod, ready, value};

async fn cluster(grace_second: Duration) -> EmbeddedCluster {
    let mut controllers = ControllersConfig {
        pods: Switch::on(Duration::from_millis(50)),
        grace_second,
        ..ControllersConfig::default()
    };
    controllers.jobs.switch = Switch::on(Duration::from_millis(300));
    EmbeddedCluster::start(ClusterConfig {
        controllers,
        ..ClusterConfig::default()
    })
    .await
    .unwrap()
}

fn stateful_set(image: &str) -> StatefulSet {
    serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {
            "replicas": 3,
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}},
                         "spec": {"containers": [{"name": "db", "image": image}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                      "spec": {"accessModes": ["ReadWriteOnce"],
                                               "resources": {"requests": {"storage": "1Gi"}}}}],
        }
    }))
    .unwrap()
}

/// The uid of each pod of the set `db` by ordinal, and whether it is ready.
async fn ordinals(pods: &Api<Pod>) -> BTreeMap<String, (String, bool)> {
    pods.list(&ListParams::default().labels("app=db"))
        .await
        .unwrap()
        .items
        .iter()
        .map(value)
        .map(|p| {
            let name = p["metadata"]["name"].as_str().unwrap().to_owned();
            let uid = p["metadata"]["uid"].as_str().unwrap().to_owned();
            (name, (uid, ready(&p)))
        })
        .collect()
}

#[tokio::test]
async fn a_stateful_set_starts_in_order_and_rolls_out_in_reverse_order() {
    let cluster = cluster(Duration::from_millis(5)).await;
    let client = cluster.client().await;
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    sets.create(&PostParams::default(), &stateful_set("db:1"))
        .await
        .unwrap();
    let order = RefCell::new(Vec::new());
    eventually("three ready pods", || async {
        let seen = ordinals(&pods).await;
        for name in seen.keys() {
            if !order.borrow().contains(name) {
                order.borrow_mut().push(name.clone());
            }
        }
        // OrderedReady: ordinal N exists only once N-1 is ready
        for n in 1..3 {
            if seen.contains_key(&format!("db-{n}")) {
                let previous = seen.get(&format!("db-{}", n - 1));
                assert!(
                    previous.is_some_and(|p| p.1),
                    "db-{n} before db-{} was ready: {seen:?}",
                    n - 1
                );
            }
        }
        seen.values().filter(|p| p.1).count() == 3
    })
    .await;
    assert_eq!(order.into_inner(), ["db-0", "db-1", "db-2"]);
    eventually("the status counts three ready pods", || async {
        value(&sets.get("db").await.unwrap().status)["readyReplicas"] == 3
    })
    .await;
    let status = value(&sets.get("db").await.unwrap().status);
    assert_eq!(status["replicas"], 3);
    assert_eq!(status["readyReplicas"], 3);
    assert_eq!(status["availableReplicas"], 3);
    assert_eq!(status["currentReplicas"], 3);
    assert_eq!(status["currentRevision"], status["updateRevision"]);
    assert_eq!(status["observedGeneration"], 1);
    let first_revision = status["updateRevision"].as_str().unwrap().to_owned();
    assert!(first_revision.starts_with("db-"), "{first_revision}");
    let db1 = value(&pods.get("db-1").await.unwrap());
    assert_eq!(db1["spec"]["hostname"], "db-1");
    assert_eq!(db1["spec"]["subdomain"], "db");
    assert_eq!(
        db1["metadata"]["labels"]["apps.kubernetes.io/pod-index"],
        "1"
    );
    assert_eq!(
        db1["metadata"]["labels"]["controller-revision-hash"],
        first_revision.as_str()
    );
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    assert!(claims.get_opt("data-db-2").await.unwrap().is_some());

    // a new template: the pods are replaced from the highest ordinal down, one at a time
    let before = ordinals(&pods).await;
    let patch =
        json!({"spec": {"template": {"spec": {"containers": [{"name": "db", "image": "db:2"}]}}}});
    sets.patch("db", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap();
    let replaced: RefCell<Vec<String>> = RefCell::default();
    eventually("every pod replaced", || async {
        let seen = ordinals(&pods).await;
        for (name, (uid, _)) in &seen {
            if before.get(name).is_some_and(|(old, _)| old != uid)
                && !replaced.borrow().contains(name)
            {
                replaced.borrow_mut().push(name.clone());
            }
        }
        let status = value(&sets.get("db").await.unwrap().status);
        replaced.borrow().len() == 3
            && status["currentRevision"] == status["updateRevision"]
            && status["readyReplicas"] == 3
    })
    .await;
    assert_eq!(replaced.into_inner(), ["db-2", "db-1", "db-0"]);
    let status = value(&sets.get("db").await.unwrap().status);
    assert_ne!(status["updateRevision"], first_revision.as_str());
    assert_eq!(status["updatedReplicas"], 3);
    assert_eq!(status["observedGeneration"], 2);

    // scaled down: the highest ordinal goes
    let patch = json!({"spec": {"replicas": 1}});
    sets.patch("db", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually("one pod left", || async {
        let seen = ordinals(&pods).await;
        seen.keys().map(String::as_str).eq(["db-0"])
    })
    .await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_deleted_pod_terminates_for_its_grace_period_while_its_owner_replaces_it() {
    // one second of grace lasts 100 ms
    let cluster = cluster(Duration::from_millis(100)).await;
    let client = cluster.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(
        &PostParams::default(),
        &pod("slow", json!({"terminationGracePeriodSeconds": 10})),
    )
    .await
    .unwrap();
    pods.create(&PostParams::default(), &pod("quick", json!({})))
        .await
        .unwrap();
    pods.create(
        &PostParams::default(),
        &pod("nowhere", json!({"nodeSelector": {"disk": "none"}})),
    )
    .await
    .unwrap();
    for name in ["slow", "quick"] {
        eventually("running", || async {
            ready(&value(&pods.get(name).await.unwrap()))
        })
        .await;
    }
    let answer = pods.delete("slow", &DeleteParams::default()).await.unwrap();
    let terminating = value(&answer.left().expect("the pod, still there"));
    assert_eq!(terminating["metadata"]["deletionGracePeriodSeconds"], 10);
    assert!(terminating["metadata"]["deletionTimestamp"].is_string());
    // still there, Terminating, for a while
    tokio::time::sleep(Duration::from_millis(300)).await;
    let still = value(&pods.get("slow").await.unwrap());
    assert_eq!(still["metadata"]["deletionGracePeriodSeconds"], 10);
    eventually("removed after its grace period", || async {
        pods.get_opt("slow").await.unwrap().is_none()
    })
    .await;
    assert_eq!(events_about(&client, "slow", "Killing").await.len(), 1);

    // a grace period of 0, and a pod that never reached a node: gone at once
    pods.delete("quick", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    assert!(pods.get_opt("quick").await.unwrap().is_none());
    pods.delete("nowhere", &DeleteParams::default())
        .await
        .unwrap();
    assert!(pods.get_opt("nowhere").await.unwrap().is_none());

    // a ReplicaSet replaces a Terminating pod at once and leaves it out of its count
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"terminationGracePeriodSeconds": 600,
                                       "containers": [{"name": "web", "image": "web:1"}]}}}
    }))
    .unwrap();
    sets.create(&PostParams::default(), &rs).await.unwrap();
    let web = ListParams::default().labels("app=web");
    eventually("two ready web pods", || async {
        let status = value(&sets.get("web").await.unwrap().status);
        status["readyReplicas"] == 2
    })
    .await;
    let victim = pods.list(&web).await.unwrap().items[0]
        .metadata
        .name
        .clone()
        .unwrap();
    pods.delete(&victim, &DeleteParams::default())
        .await
        .unwrap();
    eventually("a replacement beside the Terminating pod", || async {
        let all: Vec<Value> = pods
            .list(&web)
            .await
            .unwrap()
            .items
            .iter()
            .map(value)
            .collect();
        let terminating = all
            .iter()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_string())
            .count();
        let status = value(&sets.get("web").await.unwrap().status);
        all.len() == 3
            && terminating == 1
            && status["replicas"] == 2
            && status["readyReplicas"] == 2
    })
    .await;
    // a second DELETE may shorten the period
    pods.delete(&victim, &DeleteParams::default().grace_period(1))
        .await
        .unwrap();
    eventually("the shortened period ends", || async {
        pods.get_opt(&victim).await.unwrap().is_none()
    })
    .await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_job_runs_parallelism_pods_at_once_up_to_its_completions() {
    let cluster = cluster(Duration::from_millis(5)).await;
    let client = cluster.client().await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "batch"},
        "spec": {"completions": 5, "parallelism": 2,
                 "template": {"spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "w", "image": "w:1"}]}}}
    }))
    .unwrap();
    jobs.create(&PostParams::default(), &job).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let most_at_once = Cell::new(0);
    eventually("the Job completes", || async {
        let all: Vec<Value> = pods
            .list(&ListParams::default().labels("job-name=batch"))
            .await
            .unwrap()
            .items
            .iter()
            .map(value)
            .collect();
        let running = all
            .iter()
            .filter(|p| !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")))
            .count();
        most_at_once.set(most_at_once.get().max(running));
        let status = value(&jobs.get("batch").await.unwrap().status);
        status["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Complete" && c["status"] == "True")
        })
    })
    .await;
    assert_eq!(most_at_once.get(), 2);
    let status = value(&jobs.get("batch").await.unwrap().status);
    assert_eq!(status["succeeded"], 5);
    let pods_made = pods
        .list(&ListParams::default().labels("job-name=batch"))
        .await
        .unwrap()
        .items
        .len();
    assert_eq!(pods_made, 5);
    cluster.shutdown().await;
}
