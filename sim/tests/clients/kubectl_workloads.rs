//! kubectl against the simulated nodes and workloads: `get nodes` and `describe node`, `get
//! pods -o wide` with the node column, `rollout status`, `history` and `undo`, `logs` of a
//! Job's pod, `get ds` and `get rc`, and `drain` of a node running two of three pods under a
//! PodDisruptionBudget, where the second eviction waits for the first pod's replacement.
//! Skipped (with a printed reason) when no kubectl is on PATH.

use std::time::Duration;

use cinder_sim::controllers::{ControllersConfig, Switch};

use crate::tools::{cluster_with_controllers_and_kubectl, write};

const API: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  replicas: 3
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers: [{name: api, image: "cinder-api:1"}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: api}
spec:
  minAvailable: 2
  selector: {matchLabels: {app: api}}
"#;

const OTHER_WORKLOADS: &str = r#"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: agent, image: "agent:1"}]
---
apiVersion: v1
kind: ReplicationController
metadata: {name: legacy}
spec:
  replicas: 2
  selector: {app: legacy}
  template:
    metadata: {labels: {app: legacy}}
    spec:
      containers: [{name: legacy, image: "legacy:1"}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: db-sync}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: sync, image: "cinder-manage:1"}]
"#;

fn controllers() -> ControllersConfig {
    let mut config = ControllersConfig::default();
    config.nodes.count = 2;
    config.pods = Switch::on(Duration::from_millis(50));
    // pod starts slow enough that an evicted pod's replacement is not ready at once
    config.deployments.switch = Switch::on(Duration::from_millis(1500));
    config.jobs.switch = Switch::on(Duration::from_millis(100));
    config
}

fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

#[tokio::test]
async fn kubectl_sees_nodes_pods_and_workloads_and_drains_a_node() {
    let Some((cluster, k, dir)) = cluster_with_controllers_and_kubectl(controllers()).await else {
        return;
    };
    let nodes = rows(&k.ok(&["get", "nodes"]).await);
    assert_eq!(nodes[0], ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]);
    assert_eq!(nodes.len(), 3, "{nodes:?}");
    assert_eq!(nodes[1][0], "sim-worker-1");
    assert_eq!(nodes[1][1], "Ready");
    assert_eq!(nodes[1][2], "<none>");
    assert_eq!(nodes[1][4], "v1.32.0");

    let api = write(dir.path(), "api.yaml", API);
    k.ok(&["apply", "-f", &api]).await;
    let status = k
        .ok(&["rollout", "status", "deployment/api", "--timeout=60s"])
        .await;
    assert!(
        status.contains("deployment \"api\" successfully rolled out"),
        "{status}"
    );

    let wide = rows(&k.ok(&["get", "pods", "-l", "app=api", "-o", "wide"]).await);
    assert_eq!(
        wide[0],
        [
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED",
            "NODE",
            "READINESS",
            "GATES"
        ]
    );
    assert_eq!(wide.len(), 4, "{wide:?}");
    assert!(
        wide[1..].iter().all(|r| r[1] == "1/1" && r[2] == "Running"),
        "{wide:?}"
    );
    let on = |node: &str| wide[1..].iter().filter(|r| r[6] == node).count();
    // the scheduler spreads: two of three on the first node
    assert_eq!((on("sim-worker-1"), on("sim-worker-2")), (2, 1), "{wide:?}");

    let described = k.ok(&["describe", "node", "sim-worker-1"]).await;
    for expected in [
        "Name:               sim-worker-1",
        "topology.kubernetes.io/zone=zone-a",
        "Ready            True",
        "InternalIP:  172.18.0.2",
        "Kubelet Version:            v1.32.0",
        "Non-terminated Pods:",
        "HolderIdentity:  sim-worker-1",
    ] {
        assert!(
            described.contains(expected),
            "{expected:?} not in {described}"
        );
    }

    let others = write(dir.path(), "others.yaml", OTHER_WORKLOADS);
    k.ok(&["apply", "-f", &others]).await;
    k.ok(&["rollout", "status", "daemonset/agent", "--timeout=60s"])
        .await;
    let ds = rows(&k.ok(&["get", "ds"]).await);
    assert_eq!(
        ds[0][..6],
        [
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE"
        ]
    );
    let rc = rows(&k.ok(&["get", "rc"]).await);
    assert_eq!(rc[0], ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]);
    assert_eq!(rc[1][..2], ["legacy", "2"]);

    // the Job's pod log
    k.ok(&[
        "wait",
        "--for=condition=Complete",
        "job/db-sync",
        "--timeout=60s",
    ])
    .await;
    let pod = k
        .ok(&[
            "get",
            "pods",
            "-l",
            "job-name=db-sync",
            "-o",
            "jsonpath={.items[0].metadata.name}",
        ])
        .await;
    let log = k.ok(&["logs", &pod]).await;
    assert!(
        log.contains("simulated container sync started (image cinder-manage:1)"),
        "{log}"
    );
    assert!(log.contains("exited with code 0"), "{log}");

    // a new revision, its history, and back
    k.ok(&["set", "image", "deployment/api", "api=cinder-api:2"])
        .await;
    k.ok(&["rollout", "status", "deployment/api", "--timeout=60s"])
        .await;
    let history = k.ok(&["rollout", "history", "deployment/api"]).await;
    let revisions: Vec<String> = rows(&history)
        .into_iter()
        .filter_map(|r| r.first().cloned())
        .filter(|r| r.parse::<u32>().is_ok())
        .collect();
    assert_eq!(revisions, ["1", "2"], "{history}");
    let undone = k.ok(&["rollout", "undo", "deployment/api"]).await;
    assert!(undone.contains("rolled back"), "{undone}");
    k.ok(&["rollout", "status", "deployment/api", "--timeout=60s"])
        .await;
    let image = k
        .ok(&[
            "get",
            "deployment",
            "api",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}",
        ])
        .await;
    assert_eq!(image, "cinder-api:1");
    let history = k.ok(&["rollout", "history", "deployment/api"]).await;
    assert!(
        history.contains("\n2 ") && history.contains("\n3 "),
        "{history}"
    );

    // drain the node with two api pods: the budget makes the second eviction wait; the pods the
    // roll-back replaced finish their grace period first (kubectl lists them as Terminating)
    let mut wide = rows(&k.ok(&["get", "pods", "-l", "app=api", "-o", "wide"]).await);
    for _ in 0..120 {
        if !wide[1..].iter().any(|r| r[2] == "Terminating") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        wide = rows(&k.ok(&["get", "pods", "-l", "app=api", "-o", "wide"]).await);
    }
    let busiest = ["sim-worker-1", "sim-worker-2"]
        .into_iter()
        .max_by_key(|n| wide[1..].iter().filter(|r| r[6] == *n).count())
        .unwrap();
    assert_eq!(
        wide[1..].iter().filter(|r| r[6] == busiest).count(),
        2,
        "{wide:?}"
    );
    let drain = k
        .run(&[
            "drain",
            busiest,
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--timeout=120s",
        ])
        .await;
    assert!(drain.ok, "drain failed: {}", drain.stderr);
    assert!(
        drain.stdout.contains(&format!("node/{busiest} drained")),
        "{}",
        drain.stdout
    );
    // The budget refuses the second eviction with 429 and a Retry-After, as a real API server
    // does; kubectl's client waits that out and retries on its own (printing the refusal only
    // when its retries run out), so the refusal is read from the request record.
    let refused = cluster
        .requests()
        .iter()
        .filter(|r| r.subresource == "eviction" && r.status == 429)
        .count();
    assert!(
        refused >= 1,
        "no eviction was refused by the budget; kubectl said: {}",
        drain.stderr
    );
    let nodes = rows(&k.ok(&["get", "nodes"]).await);
    let drained = nodes.iter().find(|r| r[0] == busiest).unwrap();
    assert_eq!(drained[1], "Ready,SchedulingDisabled");
    let wide = rows(&k.ok(&["get", "pods", "-l", "app=api", "-o", "wide"]).await);
    assert!(wide[1..].iter().all(|r| r[6] != busiest), "{wide:?}");
    k.ok(&["uncordon", busiest]).await;
    let nodes = rows(&k.ok(&["get", "nodes"]).await);
    assert!(nodes.iter().any(|r| r[0] == busiest && r[1] == "Ready"));
    cluster.shutdown().await;
}
