//! The Python `kubernetes` client (from PyPI) as a second real client: `python_flow.py` creates,
//! patches, lists, watches and deletes objects and checks a refusal. The package is installed
//! with pip when it is missing; outside CI the test is skipped, with a printed reason, only when
//! it cannot be installed (no python3, no pip, no registry); under `CI=true` that fails it.

use cinder_sim::controllers::ControllersConfig;
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use std::time::Duration;
use tokio::process::Command;

async fn has_client() -> bool {
    Command::new("python3")
        .args(["-c", "import kubernetes"])
        .output()
        .await
        .is_ok_and(|o| o.status.success())
}

async fn install_client() -> bool {
    let pip = Command::new("python3")
        .args(["-m", "pip", "install", "--quiet", "kubernetes"])
        .output()
        .await;
    pip.is_ok_and(|o| o.status.success()) && has_client().await
}

#[tokio::test]
async fn python_client_creates_patches_watches_and_deletes() {
    if !has_client().await && !install_client().await {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the Python kubernetes package is missing (.ci/run installs it)"
        );
        println!(
            "skipped: the Python kubernetes package is not installed and pip cannot install it"
        );
        return;
    }
    let c = EmbeddedCluster::start(ClusterConfig {
        controllers: ControllersConfig::all_off(),
        ..ClusterConfig::default()
    })
    .await
    .unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/python_flow.py");
    let out = tokio::time::timeout(
        Duration::from_secs(180),
        Command::new("python3")
            .arg(script)
            .env("KUBECONFIG", c.kubeconfig_path())
            .output(),
    )
    .await
    .expect("the Python flow finished")
    .expect("python3 ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "python flow failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("python client flow passed"), "{stdout}");
    let requests = c.requests();
    assert!(
        requests
            .iter()
            .any(|r| r.user_agent.starts_with("OpenAPI-Generator") && r.verb == "watch"),
        "the Python client's requests are recorded"
    );
    c.shutdown().await;
}
