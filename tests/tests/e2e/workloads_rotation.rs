//! Rotation end to end: a rotated service-user password changes the authtoken-hash of the API
//! pod template and rolls exactly the workloads carrying it (the API), while the scheduler and
//! the volume service keep their templates and generations.

use cinder_e2e::workload_helpers::*;
use cinder_e2e::*;

const AUTHTOKEN: &str = "cinder.c5c3.io/authtoken-hash";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_password_rolls_only_the_api() {
    let h = Harness::start().await.unwrap();
    cinder_with_nfs(&h.client, "rt", "nfs1", serde_json::json!({}))
        .await
        .unwrap();
    wait_cinder_condition(
        &h.client,
        "rt",
        "DeploymentReady",
        "True",
        "DeploymentReady",
    )
    .await
    .unwrap();
    let api_before = template_annotations(&h.client, "rt-api").await;
    let old_hash = api_before
        .get(AUTHTOKEN)
        .cloned()
        .expect("the API carries authtoken-hash");
    let others = ["rt-scheduler", "rt-volume-nfs1"];
    let mut before = Vec::new();
    for name in others {
        let d = deployment(&h.client, name).await.unwrap();
        let annotations = template_annotations(&h.client, name).await;
        assert!(
            !annotations.contains_key(AUTHTOKEN),
            "{name} carries authtoken-hash"
        );
        before.push((name, d.metadata.generation, annotations));
    }

    rotate_service_user_password(&h.client, "rotated-service-password")
        .await
        .unwrap();
    let new_hash = eventually("a new authtoken-hash on the API template", || async {
        let a = template_annotations(&h.client, "rt-api").await;
        a.get(AUTHTOKEN).filter(|h| **h != old_hash).cloned()
    })
    .await
    .unwrap();
    assert_eq!(new_hash, sha256_hex("rotated-service-password"));
    wait_cinder_condition(
        &h.client,
        "rt",
        "DeploymentReady",
        "True",
        "DeploymentReady",
    )
    .await
    .unwrap();
    for (name, generation, annotations) in before {
        let d = deployment(&h.client, name).await.unwrap();
        assert_eq!(d.metadata.generation, generation, "{name} rolled");
        assert_eq!(
            template_annotations(&h.client, name).await,
            annotations,
            "{name}"
        );
    }
    h.stop().await.unwrap();
}
