//! The Python `kubernetes` client's own e2e tests that run a pod and read its exit codes and
//! output (`python_e2e/`: `TestClient.test_pod_apis`, `test_exit_code`) against a cluster
//! whose only node is a process node, so the pod's command really runs. Needs root (network
//! and mount namespaces) and the Python package (installed with pip when missing): without
//! them the test says so and passes outside CI, and fails under `CI=true`.

use std::time::Duration;

use cinder_sim::{ClusterConfig, EmbeddedCluster};
use tokio::process::Command;

/// Outside CI, whether the test can run (printing why not); under `CI=true` it must.
async fn can_run() -> bool {
    let in_ci = std::env::var("CI").as_deref() == Ok("true");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        assert!(
            !in_ci,
            "the Python e2e tests on process nodes need root; CI runs as root"
        );
        println!("skipped: the Python e2e tests on process nodes need root");
        return false;
    }
    let has = || async {
        Command::new("python3")
            .args(["-c", "import kubernetes"])
            .output()
            .await
            .is_ok_and(|o| o.status.success())
    };
    if !has().await {
        let _ = Command::new("python3")
            .args(["-m", "pip", "install", "--quiet", "kubernetes"])
            .output()
            .await;
    }
    if !has().await {
        assert!(
            !in_ci,
            "the Python kubernetes package is missing (.ci/run installs it)"
        );
        println!(
            "skipped: the Python kubernetes package is not installed and pip cannot install it"
        );
        return false;
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_clients_pod_and_exit_code_e2e_tests_pass_on_process_nodes() {
    if !can_run().await {
        return;
    }
    let mut config = ClusterConfig::default();
    config.controllers.nodes.count = 0;
    config.controllers.nodes.process = 1;
    let cluster = EmbeddedCluster::start(config).await.unwrap();
    let runner = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/python_e2e/run.py"
    );
    let out = tokio::time::timeout(
        Duration::from_secs(240),
        Command::new("python3")
            .args(["-u", runner])
            .args([
                "test_client.TestClient.test_exit_code",
                "test_client.TestClient.test_pod_apis",
                "test_client.TestClient.test_pod_exec_close_channel",
            ])
            .env("KUBECONFIG", cluster.kubeconfig_path())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the Python e2e tests finished within 4 minutes")
    .expect("python3 ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "Python e2e tests failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("e2e: 3 run, 0 failed, 0 errors, 0 skipped"),
        "{stdout}"
    );
    cluster.shutdown().await;
}
