//! Services and their endpoints: the EndpointSlice controller keeps a Service's slices and its
//! Endpoints object from the pods it selects (addresses, readiness, named ports, node and
//! zone), discovery serves both kinds, and ClusterIPs come from the cluster's range, distinct,
//! with a requested address checked as the real allocator checks it.

use std::time::Duration;

use cinder_sim::controllers::{ControllersConfig, Switch};
use cinder_sim::{ClusterConfig, EmbeddedCluster, ServiceCidr};
use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::common::{eventually, raw, server_only};

async fn cluster() -> EmbeddedCluster {
    let mut controllers = ControllersConfig::default();
    controllers.nodes.count = 2;
    controllers.pods = Switch::on(Duration::from_millis(20));
    controllers.grace_second = Duration::from_millis(100);
    EmbeddedCluster::start(ClusterConfig {
        controllers,
        ..ClusterConfig::default()
    })
    .await
    .unwrap()
}

fn web_pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36",
                                 "ports": [{"name": "http", "containerPort": 8080}]}]},
    }))
    .unwrap()
}

fn web_service() -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "labels": {"tier": "front"}},
        "spec": {"selector": {"app": "web"},
                 "ports": [{"name": "api", "port": 80, "targetPort": "http"}]},
    }))
    .unwrap()
}

async fn slices_of(client: &kube::Client, service: &str) -> Vec<Value> {
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    api.list(&ListParams::default().labels(&format!("kubernetes.io/service-name={service}")))
        .await
        .unwrap()
        .items
        .iter()
        .map(|s| serde_json::to_value(s).unwrap())
        .collect()
}

/// The (address, ready, terminating) of every endpoint of the Service's slices.
async fn endpoints_of(client: &kube::Client, service: &str) -> Vec<(String, bool, bool)> {
    let mut out: Vec<(String, bool, bool)> = slices_of(client, service)
        .await
        .iter()
        .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
        .map(|e| {
            (
                e["addresses"][0].as_str().unwrap_or_default().to_string(),
                e["conditions"]["ready"] == true,
                e["conditions"]["terminating"] == true,
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn slices_and_endpoints_follow_pod_readiness() {
    let c = cluster().await;
    let client = c.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    services
        .create(&PostParams::default(), &web_service())
        .await
        .unwrap();
    // Selecting nothing yet: one slice without endpoints.
    eventually("an empty slice", || async {
        let slices = slices_of(&client, "web").await;
        slices.len() == 1 && slices[0]["endpoints"] == json!([])
    })
    .await;
    for name in ["web-a", "web-b"] {
        pods.create(&PostParams::default(), &web_pod(name))
            .await
            .unwrap();
    }
    let ip_of = |pod: &Pod| pod.status.as_ref().and_then(|s| s.pod_ip.clone());
    let mut ips = Vec::new();
    for name in ["web-a", "web-b"] {
        eventually("the pod runs with an IP", || async {
            pods.get(name).await.ok().and_then(|p| ip_of(&p)).is_some()
        })
        .await;
        ips.push(ip_of(&pods.get(name).await.unwrap()).unwrap());
    }
    let mut both_ready: Vec<(String, bool, bool)> =
        ips.iter().map(|ip| (ip.clone(), true, false)).collect();
    both_ready.sort();
    eventually("both pods are ready endpoints", || async {
        endpoints_of(&client, "web").await == both_ready
    })
    .await;

    let slices = slices_of(&client, "web").await;
    assert_eq!(slices.len(), 1, "{slices:#?}");
    let slice = &slices[0];
    assert_eq!(slice["addressType"], "IPv4");
    assert_eq!(
        slice["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"],
        "endpointslice-controller.k8s.io"
    );
    assert_eq!(slice["metadata"]["labels"]["tier"], "front");
    assert_eq!(slice["metadata"]["ownerReferences"][0]["kind"], "Service");
    assert_eq!(
        slice["ports"],
        json!([{"name": "api", "port": 8080, "protocol": "TCP"}])
    );
    let first = &slice["endpoints"][0];
    assert!(
        first["nodeName"]
            .as_str()
            .is_some_and(|n| n.starts_with("sim-worker-")),
        "{first}"
    );
    assert!(
        first["zone"]
            .as_str()
            .is_some_and(|z| z.starts_with("zone-"))
    );
    assert_eq!(first["targetRef"]["kind"], "Pod");
    assert_eq!(first["conditions"]["serving"], true);

    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), "default");
    let ep = serde_json::to_value(endpoints.get("web").await.unwrap()).unwrap();
    let mut addresses: Vec<String> = ep["subsets"][0]["addresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["ip"].as_str().unwrap().to_string())
        .collect();
    addresses.sort();
    let mut sorted_ips = ips.clone();
    sorted_ips.sort();
    assert_eq!(addresses, sorted_ips);
    assert_eq!(
        ep["subsets"][0]["ports"],
        json!([{"name": "api", "port": 8080, "protocol": "TCP"}])
    );

    // Endpoints on simulated nodes lead nowhere: the proxy subresource keeps its simulated
    // answer (no Deployment selects these pods: 503 in plain text, not a forwarding Status).
    let probe = raw(
        &c.url(),
        "GET",
        "/api/v1/namespaces/default/services/web:api/proxy/healthcheck",
        &[],
        "",
    )
    .await;
    assert_eq!(probe.code, 503, "{}", probe.body);
    assert_eq!(probe.content_type, "text/plain", "{}", probe.body);
    assert_eq!(probe.body, "no endpoints available for service \"web\"");

    // web-b's readiness probe fails: it stays an endpoint, not ready.
    pods.patch(
        "web-b",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {"sim.cinder.c5c3.io/readiness-probe": "fail"}}}),
        ),
    )
    .await
    .unwrap();
    let mut one_ready = vec![
        (ips[0].clone(), true, false),
        (ips[1].clone(), false, false),
    ];
    one_ready.sort();
    eventually("web-b is a not-ready endpoint", || async {
        endpoints_of(&client, "web").await == one_ready
    })
    .await;
    eventually("Endpoints lists web-b as not ready", || async {
        let ep = serde_json::to_value(endpoints.get("web").await.unwrap()).unwrap();
        ep["subsets"][0]["notReadyAddresses"][0]["ip"] == json!(ips[1])
            && ep["subsets"][0]["addresses"].as_array().map(Vec::len) == Some(1)
    })
    .await;

    // web-a is deleted: Terminating (not ready, terminating), then gone.
    pods.delete("web-a", &DeleteParams::default())
        .await
        .unwrap();
    eventually("web-a leaves the slice", || async {
        endpoints_of(&client, "web").await == vec![(ips[1].clone(), false, false)]
    })
    .await;

    // A slice removed by hand comes back.
    let slice_name = slices_of(&client, "web").await[0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let slice_api: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    slice_api
        .delete(&slice_name, &DeleteParams::default())
        .await
        .unwrap();
    eventually("the slice is written again", || async {
        endpoints_of(&client, "web").await == vec![(ips[1].clone(), false, false)]
    })
    .await;

    // The Service goes: its slices and Endpoints go with it.
    services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually("slices and Endpoints are collected", || async {
        slices_of(&client, "web").await.is_empty()
            && endpoints.get_opt("web").await.unwrap().is_none()
    })
    .await;
    c.shutdown().await;
}

#[tokio::test]
async fn terminating_pods_are_serving_not_ready() {
    let c = cluster().await;
    let client = c.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    services
        .create(&PostParams::default(), &web_service())
        .await
        .unwrap();
    let mut pod = web_pod("web-slow");
    pod.spec.as_mut().unwrap().termination_grace_period_seconds = Some(600);
    pods.create(&PostParams::default(), &pod).await.unwrap();
    eventually("the pod is a ready endpoint", || async {
        endpoints_of(&client, "web")
            .await
            .first()
            .is_some_and(|e| e.1)
    })
    .await;
    pods.delete("web-slow", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the Terminating pod is serving, not ready", || async {
        let slices = slices_of(&client, "web").await;
        slices.first().is_some_and(|s| {
            s["endpoints"][0]["conditions"]
                == json!({"ready": false, "serving": true, "terminating": true})
        })
    })
    .await;
    c.shutdown().await;
}

#[tokio::test]
async fn discovery_serves_endpoints_and_endpointslices() {
    let c = server_only().await;
    let group = raw(&c.url(), "GET", "/apis/discovery.k8s.io/v1", &[], "").await;
    assert_eq!(group.code, 200, "{}", group.body);
    let resources = group.json()["resources"].clone();
    assert!(
        resources
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "endpointslices"
                && r["kind"] == "EndpointSlice"
                && r["namespaced"] == true),
        "{resources}"
    );
    let core = raw(&c.url(), "GET", "/api/v1", &[], "").await;
    assert!(
        core.json()["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "endpoints" && r["kind"] == "Endpoints"),
        "{}",
        core.body
    );
    c.shutdown().await;
}

fn service(name: &str, cluster_ip: Option<&str>) -> Service {
    let mut spec = json!({"ports": [{"port": 80}]});
    if let Some(ip) = cluster_ip {
        spec["clusterIP"] = json!(ip);
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

#[tokio::test]
async fn cluster_ips_are_distinct_and_from_the_cluster_range() {
    let range: ServiceCidr = "10.98.16.0/28".parse().unwrap();
    let c = EmbeddedCluster::start(ClusterConfig {
        controllers: ControllersConfig::all_off(),
        service_cidr: Some(range),
        ..ClusterConfig::default()
    })
    .await
    .unwrap();
    assert_eq!(c.service_cidr(), range);
    let services: Api<Service> = Api::namespaced(c.client().await, "default");
    let mut seen = std::collections::BTreeSet::new();
    // A /28 holds 14 addresses: every one is handed out once.
    for i in 0..14 {
        let created = services
            .create(&PostParams::default(), &service(&format!("s{i}"), None))
            .await
            .unwrap();
        let spec = created.spec.unwrap();
        let ip = spec.cluster_ip.unwrap();
        assert_eq!(spec.cluster_ips, Some(vec![ip.clone()]));
        let parsed: std::net::Ipv4Addr = ip.parse().unwrap();
        assert!(range.allocatable(parsed), "{ip} outside {range}");
        assert!(seen.insert(ip.clone()), "{ip} handed out twice");
    }
    let full = services
        .create(&PostParams::default(), &service("one-too-many", None))
        .await
        .unwrap_err();
    assert!(
        matches!(&full, kube::Error::Api(s) if s.code == 500 && s.message.contains("range is full")),
        "{full:?}"
    );
    services
        .delete("s3", &DeleteParams::default())
        .await
        .unwrap();
    let taken = seen.iter().next().unwrap().clone();
    let refused = services
        .create(&PostParams::default(), &service("dup", Some(&taken)))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 422 && s.message.contains("provided IP is already allocated")),
        "{refused:?}"
    );
    let outside = services
        .create(&PostParams::default(), &service("far", Some("192.168.1.1")))
        .await
        .unwrap_err();
    assert!(
        matches!(&outside, kube::Error::Api(s) if s.code == 422 && s.message.contains("10.98.16.0/28")),
        "{outside:?}"
    );
    let headless = services
        .create(&PostParams::default(), &service("headless", Some("None")))
        .await
        .unwrap();
    assert_eq!(headless.spec.unwrap().cluster_ip.as_deref(), Some("None"));
    // The freed address is handed out again, and an update keeps a Service's address.
    let again = services
        .create(&PostParams::default(), &service("again", None))
        .await
        .unwrap();
    let ip = again.spec.as_ref().unwrap().cluster_ip.clone().unwrap();
    let patched = services
        .patch(
            "again",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.spec.unwrap().cluster_ip, Some(ip));
    c.shutdown().await;
}
