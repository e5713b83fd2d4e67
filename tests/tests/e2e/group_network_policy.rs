//! The NetworkPolicy member end to end: an empty ingress list is refused fail-closed (nothing
//! applied, NetworkPolicyReady False naming it); a non-empty one is applied with derived egress;
//! unsetting the block deletes the policy (NetworkPolicyNotRequired); an RBD backend naming no
//! networks gets the Ceph monitor and OSD ports.

use cinder_e2e::group_helpers::*;
use cinder_e2e::*;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_ingress_is_refused_and_nothing_applied() {
    let h = Harness::start().await.unwrap();
    group_cinder(
        &h.client,
        "closed",
        serde_json::json!({"networkPolicy": {"ingress": []}}),
    )
    .await
    .unwrap();
    let c = wait_cinder_condition(
        &h.client,
        "closed",
        "NetworkPolicyReady",
        "False",
        "EmptyIngress",
    )
    .await
    .unwrap();
    assert!(c.message.contains("ingress"), "{}", c.message);
    // The other members ran in the same pass: nothing was applied for the policy.
    wait_cinder_condition(&h.client, "closed", "HPAReady", "True", "HPANotRequired")
        .await
        .unwrap();
    let policies = h.api::<NetworkPolicy>();
    assert!(policies.get_opt("closed").await.unwrap().is_none());

    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_applied_then_deleted_when_unset() {
    let h = Harness::start().await.unwrap();
    group_cinder(
        &h.client,
        "fenced",
        serde_json::json!({"networkPolicy": {"ingress": [{"ports": [{"port": 8776, "protocol": "TCP"}]}]}}),
    )
    .await
    .unwrap();
    wait_cinder_condition(
        &h.client,
        "fenced",
        "NetworkPolicyReady",
        "True",
        "NetworkPolicyReady",
    )
    .await
    .unwrap();
    let policies = h.api::<NetworkPolicy>();
    let np = policies.get("fenced").await.unwrap();
    let spec = np.spec.unwrap();
    assert_eq!(spec.ingress.unwrap().len(), 1);
    let egress = spec.egress.unwrap();
    let has_port = |p: i32| {
        egress.iter().any(|r| {
            r.ports.iter().flatten().any(|x| {
                x.port == Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(p))
            })
        })
    };
    assert!(has_port(53) && has_port(3306) && has_port(5000));

    merge_patch_cinder(
        &h.client,
        "fenced",
        serde_json::json!({"spec": {"networkPolicy": null}}),
    )
    .await
    .unwrap();
    wait_cinder_condition(
        &h.client,
        "fenced",
        "NetworkPolicyReady",
        "True",
        "NetworkPolicyNotRequired",
    )
    .await
    .unwrap();
    assert!(policies.get_opt("fenced").await.unwrap().is_none());

    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rbd_backend_without_networks_reaches_its_ceph_monitors_and_osds() {
    let h = Harness::start().await.unwrap();
    cinder_e2e::database_helpers::database_environment(&h.client, "cephnp")
        .await
        .unwrap();
    create_cinder(
        &h.client,
        "cephnp",
        serde_json::json!({"networkPolicy": {"ingress": [{"ports": [{"port": 8776, "protocol": "TCP"}]}]}}),
    )
    .await
    .unwrap();
    put_secret(&h.client, "cephnp-key", &[("key", "AQBcephkey==")])
        .await
        .unwrap();
    // The fixture backend names its monitor 10.0.0.1:6789 and no networks.
    create_rbd_backend(&h.client, "cephnp-rbd", "cephnp", "cephnp-key")
        .await
        .unwrap();
    let policies = h.api::<NetworkPolicy>();
    let egress = eventually("the Ceph egress in the policy", || {
        let policies = policies.clone();
        async move {
            let np = policies.get_opt("cephnp").await.ok().flatten()?;
            let egress = np.spec?.egress?;
            let has_mon = egress.iter().any(|r| {
                let ports: Vec<_> = r
                    .ports
                    .iter()
                    .flatten()
                    .filter_map(|p| p.port.clone())
                    .collect();
                ports.contains(&IntOrString::Int(6789)) && ports.contains(&IntOrString::Int(3300))
            });
            has_mon.then_some(egress)
        }
    })
    .await
    .unwrap();
    let mon = egress
        .iter()
        .find(|r| {
            r.ports
                .iter()
                .flatten()
                .any(|p| p.port == Some(IntOrString::Int(6789)))
        })
        .unwrap();
    let to: Vec<String> = mon
        .to
        .iter()
        .flatten()
        .filter_map(|p| p.ip_block.as_ref().map(|b| b.cidr.clone()))
        .collect();
    assert_eq!(to, ["10.0.0.1/32"]);
    assert!(
        egress.iter().any(|r| r
            .ports
            .iter()
            .flatten()
            .any(|p| { p.port == Some(IntOrString::Int(6800)) && p.end_port == Some(7300) })),
        "no OSD rule: {egress:?}"
    );
    h.stop().await.unwrap();
}
