//! `kubectl logs` against a pod on a process node (the node agent's log endpoint, reached
//! through the API server's `pods/log`): `-c` picks the container, `--previous` the run
//! before the last restart, `--tail` the last lines and `-f` follows the log until the
//! container ends; `kubectl exec` runs a command in the container with its exit code. Needs root (network and mount namespaces): without it the test says so and
//! passes outside CI, and fails under `CI=true`.

use std::time::Duration;

use cinder_sim::ClusterConfig;
use serde_json::Value;

use crate::tools::{cluster_and_kubectl_with, write};

/// Whether this process may make namespaces; outside CI a printed reason when it may not.
fn root_or_skip() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "kubectl logs on process nodes needs root (network and mount namespaces); CI runs as root"
    );
    println!("skipped: kubectl logs on process nodes needs root");
    false
}

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: talker
spec:
  restartPolicy: OnFailure
  terminationGracePeriodSeconds: 1
  volumes:
  - name: shared
    emptyDir: {}
  containers:
  - name: a
    image: busybox
    command: ["sh", "-c", "for i in 1 2 3 4 5; do echo line $i; done; sleep 3; echo late"]
  - name: b
    image: busybox
    volumeMounts:
    - name: shared
      mountPath: /shared
    command: ["sh", "-c", "if [ -f /shared/ran ]; then echo second run; exec sleep 600; fi; touch /shared/ran; echo first run; exit 1"]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_logs_with_container_previous_tail_and_follow_and_exec_on_a_process_pod() {
    if !root_or_skip() {
        return;
    }
    let mut config = ClusterConfig::default();
    config.controllers.nodes.count = 0;
    config.controllers.nodes.process = 1;
    config.process_runtime.crash_backoff = Duration::from_millis(300);
    let Some((c, k, dir)) = cluster_and_kubectl_with(config).await else {
        return;
    };
    let file = write(dir.path(), "pod.yaml", POD);
    k.ok(&["apply", "-f", &file]).await;
    let status = |index: usize| {
        let c = &c;
        move || {
            c.store()
                .get("", "pods", "default", "talker")
                .map(|p| p["status"]["containerStatuses"][index].clone())
                .unwrap_or(Value::Null)
        }
    };
    for _ in 0..600 {
        if status(0)()["state"]["running"].is_object() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        status(0)()["state"]["running"].is_object(),
        "{}",
        status(0)()
    );
    // -f: started while container a sleeps, it gets the line written 3 s later and ends with
    // the container.
    let follow = tokio::time::timeout(
        Duration::from_secs(60),
        k.cmd(&["logs", "-f", "talker", "-c", "a"]).output(),
    )
    .await
    .expect("kubectl logs -f ended with the container")
    .expect("kubectl ran");
    assert!(
        follow.status.success(),
        "{}",
        String::from_utf8_lossy(&follow.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&follow.stdout),
        "line 1\nline 2\nline 3\nline 4\nline 5\nlate\n"
    );
    assert_eq!(
        status(0)()["state"]["terminated"]["reason"],
        "Completed",
        "-f returned once a had ended"
    );
    assert_eq!(
        k.ok(&["logs", "talker", "-c", "a", "--tail=2"]).await,
        "line 5\nlate\n"
    );
    for _ in 0..600 {
        let b = status(1)();
        if b["restartCount"].as_u64().unwrap_or(0) >= 1 && b["state"]["running"].is_object() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(k.ok(&["logs", "talker", "-c", "b"]).await, "second run\n");
    assert_eq!(
        k.ok(&["logs", "talker", "-c", "b", "--previous"]).await,
        "first run\n"
    );
    assert_eq!(
        k.ok(&["logs", "talker", "-c", "b", "-p", "--tail=1"]).await,
        "first run\n"
    );
    // exec over the WebSocket protocol kubectl speaks first (v5.channel.k8s.io).
    let exec = k
        .cmd(&[
            "exec",
            "talker",
            "-c",
            "b",
            "--",
            "sh",
            "-c",
            "echo in $(hostname); exit 3",
        ])
        .output()
        .await
        .expect("kubectl ran");
    assert_eq!(
        exec.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&exec.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&exec.stdout), "in talker\n");
    let missing = k.run(&["logs", "talker", "-c", "a", "--previous"]).await;
    assert!(!missing.ok);
    assert!(
        missing
            .stderr
            .contains("previous terminated container \"a\" in pod \"talker\" not found"),
        "{}",
        missing.stderr
    );
    let wrong = k.run(&["logs", "talker", "-c", "nope"]).await;
    assert!(!wrong.ok);
    assert!(
        wrong
            .stderr
            .contains("container nope is not valid for pod talker"),
        "{}",
        wrong.stderr
    );
    c.shutdown().await;
}
