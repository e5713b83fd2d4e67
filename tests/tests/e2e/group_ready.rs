//! The happy path of the whole pipeline: a Cinder with one NFS backend, a Gateway, an HPA, VPAs
//! and a NetworkPolicy reaches Ready=True/AllReady with all fourteen sub-conditions True.

use cinder_e2e::group_helpers::*;
use cinder_e2e::*;
use cinder_operator::pipeline::SUB_CONDITIONS;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn happy_path_reaches_all_ready() {
    let h = Harness::start().await.unwrap();
    create_gateway(&h.client, "public").await.unwrap();
    group_cinder(
        &h.client,
        "whole",
        serde_json::json!({
            "gateway": {"parentRef": {"name": "public"}, "hostname": "volume.example.org"},
            "autoscaling": {"minReplicas": 2, "maxReplicas": 4},
            "networkPolicy": {"ingress": [{"ports": [{"port": 8776, "protocol": "TCP"}]}]}
        }),
    )
    .await
    .unwrap();
    merge_patch_cinder(
        &h.client,
        "whole",
        serde_json::json!({"spec": {"verticalAutoscaling": {}}}),
    )
    .await
    .unwrap();

    wait_cinder_condition(&h.client, "whole", "Ready", "True", "AllReady")
        .await
        .unwrap();
    let conditions = cinder_conditions(&h.client, "whole").await;
    for t in SUB_CONDITIONS {
        let c = condition(&conditions, t).unwrap_or_else(|| panic!("{t} missing"));
        assert_eq!(c.status, "True", "{t}: {}/{}", c.reason, c.message);
    }
    let reason = |t: &str| condition(&conditions, t).map(|c| c.reason.clone());
    assert_eq!(
        reason("HTTPRouteReady").as_deref(),
        Some("HTTPRouteAccepted")
    );
    assert_eq!(reason("CinderAPIReady").as_deref(), Some("APIHealthy"));
    assert_eq!(reason("HPAReady").as_deref(), Some("HPAReady"));
    assert_eq!(reason("VPAReady").as_deref(), Some("VPAReady"));
    assert_eq!(
        reason("NetworkPolicyReady").as_deref(),
        Some("NetworkPolicyReady")
    );

    h.stop().await.unwrap();
}
