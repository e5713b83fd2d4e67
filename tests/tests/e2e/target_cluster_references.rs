//! With a target cluster, every Secret and ConfigMap key a pod template on the target
//! references exists on the target (the service user's password included), so no container
//! there is held in CreateContainerConfigError by a reference to the management cluster.

use cinder_e2e::group_helpers::group_cinder;
use cinder_e2e::target_helpers::{register, target_cluster, unsatisfied_references};
use cinder_e2e::*;

const CINDER: &str = "refs";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_reference_of_a_pod_on_the_target_resolves_on_the_target() {
    let h = Harness::start().await.unwrap();
    let (target, remote) = target_cluster(false).await.unwrap();
    register(&h, "edge", target.kubeconfig_yaml())
        .await
        .unwrap();
    group_cinder(
        &h.client,
        CINDER,
        serde_json::json!({"targetClusterRef": {"name": "edge"}}),
    )
    .await
    .unwrap();
    wait_cinder_condition(&h.client, CINDER, "Ready", "True", "AllReady")
        .await
        .unwrap();
    let templates = cinder_e2e::target_helpers::pod_templates(&remote)
        .await
        .unwrap();
    assert!(
        templates.iter().any(|(o, _)| o.starts_with("Deployment/")),
        "{:?}",
        templates.iter().map(|(o, _)| o).collect::<Vec<_>>()
    );
    let missing = unsatisfied_references(&remote).await.unwrap();
    assert!(missing.is_empty(), "unresolved on the target: {missing:?}");
    h.stop().await.unwrap();
    target.shutdown().await;
}
