//! Helpers of the parallel-group tests (HTTPRoute, HealthCheck, HPA, VPA, NetworkPolicy): a
//! harness whose cluster lacks chosen CRD fixtures, a Cinder whose lane completes (store,
//! credentials, MariaDB, one NFS backend), spec and annotation patches, the Gateway API objects,
//! and the count of /healthcheck probes in the simulator's request record.

use crate::database_helpers::database_environment;
use crate::fixtures::{create_cinder, create_nfs_backend};
use crate::harness::{Harness, HarnessConfig};
use crate::test_cluster::TestCluster;
use crate::test_env::NS;
use crate::waiting::eventually;
use cinder_operator::crd::Cinder;
use cinder_sim::controllers::config::FixtureSet;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Api, Client};

/// A harness config whose cluster installs `fixtures` only.
pub fn config_with_fixtures(fixtures: FixtureSet) -> HarnessConfig {
    let mut config = HarnessConfig::default();
    config.cluster.controllers.fixtures = fixtures;
    config
}

/// Every fixture but the Gateway API CRDs.
pub fn without_gateway_api() -> FixtureSet {
    FixtureSet {
        gateway_api: false,
        ..FixtureSet::ALL
    }
}

/// Every fixture but the VPA CRD.
pub fn without_vpa() -> FixtureSet {
    FixtureSet {
        vpa: false,
        ..FixtureSet::ALL
    }
}

/// The store, credentials and MariaDB, then Cinder `name` (spec merged with `extra`) with one
/// NFS backend `{name}-nfs`: a Cinder whose lane can complete so the group runs.
pub async fn group_cinder(
    client: &Client,
    name: &str,
    extra: serde_json::Value,
) -> anyhow::Result<Cinder> {
    database_environment(client, name).await?;
    let cinder = create_cinder(client, name, extra).await?;
    create_nfs_backend(client, &format!("{name}-nfs"), name).await?;
    Ok(cinder)
}

/// Merge-patches Cinder `name` with `patch` (`null` removes a field).
pub async fn merge_patch_cinder(
    client: &Client,
    name: &str,
    patch: serde_json::Value,
) -> anyhow::Result<()> {
    let api: Api<Cinder> = Api::namespaced(client.clone(), NS);
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// A Gateway API kind (`Gateway`, `HTTPRoute`).
pub fn gateway_kind(kind: &str) -> ApiResource {
    let plural = if kind == "Gateway" {
        "gateways"
    } else {
        "httproutes"
    };
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", kind),
        plural,
    )
}

/// Creates the Gateway `name` in [`NS`] (the simulator accepts it).
pub async fn create_gateway(client: &Client, name: &str) -> anyhow::Result<()> {
    let ar = gateway_kind("Gateway");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &ar);
    let mut gw = DynamicObject::new(name, &ar).data(serde_json::json!({
        "spec": {
            "gatewayClassName": "sim",
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]
        }
    }));
    gw.metadata.namespace = Some(NS.to_string());
    api.create(&PostParams::default(), &gw).await?;
    Ok(())
}

/// The HTTPRoute `name` in [`NS`], if present.
pub async fn http_route(client: &Client, name: &str) -> Option<DynamicObject> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NS, &gateway_kind("HTTPRoute"));
    api.get_opt(name).await.ok().flatten()
}

/// The VerticalPodAutoscaler kind.
pub fn vpa_kind() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("autoscaling.k8s.io", "v1", "VerticalPodAutoscaler"),
        "verticalpodautoscalers",
    )
}

/// The names of the VPAs in [`NS`].
pub async fn vpa_names(client: &Client) -> Vec<String> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &vpa_kind());
    api.list(&Default::default())
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter_map(|o| o.metadata.name)
                .collect()
        })
        .unwrap_or_default()
}

/// The /healthcheck probes of Cinder `name` the simulator served, in order.
pub fn health_probes(cluster: &TestCluster, name: &str) -> Vec<cinder_sim::RequestRecord> {
    let needle = format!("/namespaces/{NS}/services/{name}-api:8776/proxy/healthcheck");
    cluster
        .requests()
        .into_iter()
        .filter(|r| r.path.contains(&needle))
        .collect()
}

/// Waits until Deployment `name` in [`NS`] exists.
pub async fn wait_deployment(client: &Client, name: &str) -> anyhow::Result<Deployment> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), NS);
    eventually(&format!("Deployment {name}"), || {
        let api = api.clone();
        async move { api.get_opt(name).await.ok().flatten() }
    })
    .await
}

/// Waits until `probe` turns false (an object is gone), for up to [`EVENTUALLY`](crate::test_env::EVENTUALLY).
pub async fn wait_gone<F, Fut>(what: &str, mut probe: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    eventually(what, || {
        let fut = probe();
        async move { (!fut.await).then_some(()) }
    })
    .await
}

/// The passes the operator finished for Cinder `name` (its record in the pipelines view).
pub async fn passes(h: &Harness, name: &str) -> u64 {
    let records = h
        .ctx
        .pipelines
        .send(cinder_operator::pipeline::Inspect)
        .await
        .unwrap_or_default();
    records
        .into_iter()
        .find(|r| r.namespace == NS && r.name == name)
        .map_or(0, |r| r.passes)
}

/// Seconds between consecutive records.
pub fn gaps_seconds(records: &[cinder_sim::RequestRecord]) -> Vec<f64> {
    records
        .windows(2)
        .map(|w| (w[1].time - w[0].time).num_milliseconds() as f64 / 1000.0)
        .collect()
}
