//! The HTTPRoute member end to end: `spec.gateway` gives an HTTPRoute `{name}-api` that is
//! NotAccepted until its Gateway exists and accepts it, Accepted after; removing the block
//! deletes the route (HTTPRouteNotRequired); without the Gateway API CRDs the condition says
//! GatewayAPINotInstalled while the other members still converge; with the CRDs the operator
//! watches HTTPRoutes as owned children.

use cinder_e2e::group_helpers::*;
use cinder_e2e::*;

const OPERATOR_AGENT: &str = "cinder-operator-route-watch";

fn gateway_block() -> serde_json::Value {
    serde_json::json!({"gateway": {
        "parentRef": {"name": "public"},
        "hostname": "volume.example.org",
        "path": "/volume"
    }})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_is_accepted_once_the_gateway_is_and_deleted_with_the_block() {
    let h = Harness::start().await.unwrap();
    group_cinder(&h.client, "routed", gateway_block())
        .await
        .unwrap();

    let c = wait_cinder_condition(
        &h.client,
        "routed",
        "HTTPRouteReady",
        "False",
        "HTTPRouteNotAccepted",
    )
    .await
    .unwrap();
    assert!(c.message.contains("public"), "{}", c.message);
    let route = http_route(&h.client, "routed-api").await.unwrap();
    let spec = &route.data["spec"];
    assert_eq!(spec["parentRefs"][0]["name"], "public");
    assert_eq!(spec["hostnames"][0], "volume.example.org");
    assert_eq!(spec["rules"][0]["matches"][0]["path"]["value"], "/volume");
    assert_eq!(spec["rules"][0]["backendRefs"][0]["name"], "routed-api");
    assert_eq!(spec["rules"][0]["backendRefs"][0]["port"], 8776);
    let owners = route.metadata.owner_references.unwrap_or_default();
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0].kind, "Cinder");
    assert_eq!(owners[0].controller, Some(true));

    create_gateway(&h.client, "public").await.unwrap();
    wait_cinder_condition(
        &h.client,
        "routed",
        "HTTPRouteReady",
        "True",
        "HTTPRouteAccepted",
    )
    .await
    .unwrap();

    merge_patch_cinder(
        &h.client,
        "routed",
        serde_json::json!({"spec": {"gateway": null}}),
    )
    .await
    .unwrap();
    wait_cinder_condition(
        &h.client,
        "routed",
        "HTTPRouteReady",
        "True",
        "HTTPRouteNotRequired",
    )
    .await
    .unwrap();
    assert!(http_route(&h.client, "routed-api").await.is_none());

    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_gateway_api_the_condition_says_so_and_the_rest_converges() {
    let h = Harness::start_with(config_with_fixtures(without_gateway_api()))
        .await
        .unwrap();
    group_cinder(&h.client, "nogw", gateway_block())
        .await
        .unwrap();

    let c = wait_cinder_condition(
        &h.client,
        "nogw",
        "HTTPRouteReady",
        "False",
        "GatewayAPINotInstalled",
    )
    .await
    .unwrap();
    assert!(
        c.message.contains("gateway.networking.k8s.io"),
        "{}",
        c.message
    );
    // The other members still report their own conditions.
    wait_cinder_condition(&h.client, "nogw", "HPAReady", "True", "HPANotRequired")
        .await
        .unwrap();
    wait_cinder_condition(&h.client, "nogw", "VPAReady", "True", "VPANotRequired")
        .await
        .unwrap();
    wait_cinder_condition(
        &h.client,
        "nogw",
        "NetworkPolicyReady",
        "True",
        "NetworkPolicyNotRequired",
    )
    .await
    .unwrap();
    wait_cinder_condition(&h.client, "nogw", "CinderAPIReady", "True", "APIHealthy")
        .await
        .unwrap();
    let ready = condition(&cinder_conditions(&h.client, "nogw").await, "Ready")
        .cloned()
        .unwrap();
    assert_eq!(ready.status, "False");
    assert!(
        ready.message.contains("HTTPRouteReady"),
        "{}",
        ready.message
    );

    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_gateway_api_installed_the_http_route_is_watched() {
    // The operator's own user agent tells its requests from the simulated controllers'.
    let config = HarnessConfig {
        operator_user_agent: Some(OPERATOR_AGENT.to_string()),
        ..Default::default()
    };
    let h = Harness::start_with(config).await.unwrap();
    group_cinder(&h.client, "watched", gateway_block())
        .await
        .unwrap();
    create_gateway(&h.client, "public").await.unwrap();
    wait_cinder_condition(
        &h.client,
        "watched",
        "HTTPRouteReady",
        "True",
        "HTTPRouteAccepted",
    )
    .await
    .unwrap();
    // The operator watches HTTPRoutes as an owned kind.
    let watches: Vec<_> = h
        .cluster
        .requests()
        .into_iter()
        .filter(|r| r.verb == "watch" && r.resource == "httproutes")
        .filter(|r| r.user_agent == OPERATOR_AGENT)
        .collect();
    assert!(
        !watches.is_empty(),
        "the operator does not watch httproutes"
    );

    // A deleted route wakes its Cinder, which puts it back.
    let route = http_route(&h.client, "watched-api").await.unwrap();
    let routes: kube::Api<kube::api::DynamicObject> =
        kube::Api::namespaced_with(h.client.clone(), NS, &gateway_kind("HTTPRoute"));
    routes
        .delete("watched-api", &Default::default())
        .await
        .unwrap();
    eventually("the route recreated", || async {
        let now = http_route(&h.client, "watched-api").await?;
        (now.metadata.uid != route.metadata.uid).then_some(())
    })
    .await
    .unwrap();
    h.stop().await.unwrap();
}
