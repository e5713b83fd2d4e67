//! The Deployment step's RollingUpdate → Contracting flip end to end (no test-side flip): a
//! 2025.2 → 2026.1 upgrade with one NFS backend reaches Contracting only after the scheduler,
//! the volume service and the API all run the new image, promotes installedRelease, and the
//! promotion rolls the RPC services once more (installed-release annotation) but not the API.

use cinder_e2e::database_helpers::*;
use cinder_e2e::workload_helpers::*;
use cinder_e2e::*;
use cinder_operator::crd::UpgradePhase;
use cinder_sim::controllers::PodOutcome;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const WORKLOADS: [&str; 3] = ["fl-scheduler", "fl-volume-nfs1", "fl-api"];

async fn image(client: &kube::Client, name: &str) -> Option<String> {
    deployment(client, name)
        .await?
        .spec
        .template
        .spec?
        .containers
        .first()?
        .image
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contracting_follows_the_converged_rollout() {
    let h = Harness::start().await.unwrap();
    for suffix in ["-db-expand", "-db-migrate", "-db-contract"] {
        job_rule(
            &h.cluster,
            suffix,
            PodOutcome::success(),
            Duration::from_millis(500),
        )
        .unwrap();
    }
    cinder_with_nfs(
        &h.client,
        "fl",
        "nfs1",
        serde_json::json!({"openStackRelease": "2025.2", "image": {"repository": "registry.example/cinder", "tag": "2025.2"}}),
    )
    .await
    .unwrap();
    wait_cinder_condition(
        &h.client,
        "fl",
        "DeploymentReady",
        "True",
        "DeploymentReady",
    )
    .await
    .unwrap();

    // Records, the first time Contracting is seen, which image every workload runs.
    let at_contracting: Arc<Mutex<Option<Vec<Option<String>>>>> = Arc::default();
    let out = at_contracting.clone();
    let client = h.client.clone();
    let recorder = tokio::spawn(async move {
        loop {
            let phase = cinder_status(&client, "fl").await.upgrade_phase;
            if phase == Some(UpgradePhase::Contracting) {
                let mut images = Vec::new();
                for name in WORKLOADS {
                    images.push(image(&client, name).await);
                }
                *out.lock().unwrap() = Some(images);
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });

    set_release(&h.client, "fl", "2026.1").await.unwrap();
    wait_status(&h.client, "fl", "installedRelease 2026.1", |s| {
        s.installed_release.as_deref() == Some("2026.1")
    })
    .await
    .unwrap();
    recorder.await.unwrap();
    let images = at_contracting.lock().unwrap().clone().unwrap();
    for (name, image) in WORKLOADS.iter().zip(images) {
        assert_eq!(
            image.as_deref(),
            Some("registry.example/cinder:2026.1"),
            "{name} at Contracting"
        );
    }

    // The promotion rolls the RPC services once more; the API carries no installed-release.
    for name in ["fl-scheduler", "fl-volume-nfs1"] {
        eventually(&format!("{name} annotated with 2026.1"), || async {
            let a = template_annotations(&h.client, name).await;
            (a.get("cinder.c5c3.io/installed-release")
                .map(String::as_str)
                == Some("2026.1"))
            .then_some(())
        })
        .await
        .unwrap();
    }
    let api = template_annotations(&h.client, "fl-api").await;
    assert!(!api.contains_key("cinder.c5c3.io/installed-release"));
    h.stop().await.unwrap();
}
