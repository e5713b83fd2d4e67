//! kubectl against the rest of the pod life cycle: a StatefulSet (`get sts`, `rollout status
//! sts` through a new image, pods `<set>-<ordinal>`), a deleted pod shown Terminating until its
//! grace period ends (`delete --wait=false`, `wait --for=delete`) or removed at once
//! (`--grace-period=0 --force`), and a Job made from a CronJob (`create job --from=cronjob/x`).
//! Skipped (with a printed reason) when no kubectl is on PATH.

use std::time::Duration;

use cinder_sim::controllers::{ControllersConfig, Switch};

use crate::tools::{cluster_with_controllers_and_kubectl, write};

const STATEFUL_SET: &str = r#"
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 3
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: "mariadb:11.4"}]
"#;

fn controllers() -> ControllersConfig {
    let mut config = ControllersConfig {
        pods: Switch::on(Duration::from_millis(50)),
        // a pod's default 30 s of grace last 3 s
        grace_second: Duration::from_millis(100),
        ..ControllersConfig::default()
    };
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
async fn kubectl_rolls_out_a_stateful_set_sees_terminating_pods_and_runs_a_cronjob_by_hand() {
    let Some((cluster, k, dir)) = cluster_with_controllers_and_kubectl(controllers()).await else {
        return;
    };
    let set = write(dir.path(), "sts.yaml", STATEFUL_SET);
    k.ok(&["apply", "-f", &set]).await;
    let status = k
        .ok(&["rollout", "status", "sts/db", "--timeout=60s"])
        .await;
    assert!(status.contains("roll out complete"), "{status}");
    let sts = rows(&k.ok(&["get", "sts"]).await);
    assert_eq!(sts[0], ["NAME", "READY", "AGE"]);
    assert_eq!(sts[1][..2], ["db", "3/3"]);
    let names = k
        .ok(&[
            "get",
            "pods",
            "-l",
            "app=db",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ])
        .await;
    assert_eq!(names, "db-0 db-1 db-2");

    k.ok(&["set", "image", "sts/db", "db=mariadb:11.8"]).await;
    let status = k
        .ok(&["rollout", "status", "sts/db", "--timeout=120s"])
        .await;
    assert!(status.contains("roll out complete"), "{status}");
    let images = k
        .ok(&[
            "get",
            "pods",
            "-l",
            "app=db",
            "-o",
            "jsonpath={.items[*].spec.containers[0].image}",
        ])
        .await;
    assert_eq!(images, "mariadb:11.8 mariadb:11.8 mariadb:11.8");
    let revisions = k
        .ok(&[
            "get",
            "sts",
            "db",
            "-o",
            "jsonpath={.status.currentRevision} {.status.updateRevision}",
        ])
        .await;
    let (current, update) = revisions.split_once(' ').unwrap();
    assert_eq!(current, update);

    // graceful deletion: Terminating for the grace period, then gone
    k.ok(&["run", "sleeper", "--image=busybox:1.36"]).await;
    k.ok(&[
        "wait",
        "--for=condition=Ready",
        "pod/sleeper",
        "--timeout=60s",
    ])
    .await;
    k.ok(&["delete", "pod", "sleeper", "--wait=false"]).await;
    let pods = rows(&k.ok(&["get", "pod", "sleeper"]).await);
    assert_eq!(pods[1][2], "Terminating", "{pods:?}");
    k.ok(&["wait", "--for=delete", "pod/sleeper", "--timeout=60s"])
        .await;
    k.ok(&["run", "quick", "--image=busybox:1.36"]).await;
    k.ok(&[
        "wait",
        "--for=condition=Ready",
        "pod/quick",
        "--timeout=60s",
    ])
    .await;
    k.ok(&["delete", "pod", "quick", "--grace-period=0", "--force"])
        .await;
    let gone = k.run(&["get", "pod", "quick"]).await;
    assert!(!gone.ok);
    assert!(gone.stderr.contains("NotFound"), "{}", gone.stderr);

    // a Job by hand from a CronJob's template
    k.ok(&[
        "create",
        "cronjob",
        "nightly",
        "--image=cinder-manage:1",
        "--schedule=0 0 * * *",
    ])
    .await;
    k.ok(&["create", "job", "manual", "--from=cronjob/nightly"])
        .await;
    k.ok(&[
        "wait",
        "--for=condition=Complete",
        "job/manual",
        "--timeout=60s",
    ])
    .await;
    let instantiated = k
        .ok(&[
            "get",
            "job",
            "manual",
            "-o",
            "jsonpath={.metadata.annotations.cronjob\\.kubernetes\\.io/instantiate} {.metadata.ownerReferences[0].name} {.status.succeeded}",
        ])
        .await;
    assert_eq!(instantiated, "manual nightly 1");
    cluster.shutdown().await;
}
