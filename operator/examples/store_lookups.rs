//! The cost of one reconcile pass's cached lookups as the fleet grows: fills the management
//! cluster's stores with `N` Cinders' worth of objects in one namespace (as fleetbench lays a
//! fleet out), then times the lookups one pass makes for every Cinder (the Deployments its
//! mounts read, the projection Secrets a sweep lists, its CinderBackends, its ConfigMaps, the
//! target-cluster registration) and prints the mean per Cinder for each fleet size and the ratio
//! between the largest and the smallest. No API server is contacted: every lookup is answered
//! from the stores (a lookup they could not answer would fail to connect and stop the run).
//!
//! `cargo run -p cinder-operator --example store_lookups [-- N ...]` (default 100 1000).

use anyhow::Context as _;
use cinder_operator::children::projection::{PROJECTION_LABEL, PROJECTION_VOLUME};
use cinder_operator::children::{list_children, mounts, selector};
use cinder_operator::crd::CinderBackend;
use cinder_operator::kube_ext::reader::ClusterStores;
use cinder_operator::kube_ext::shared_watch::SharedWatch;
use cinder_operator::names;
use cinder_operator::target_cluster::TARGET_CLUSTER_LABEL;
use cinder_operator::workloads::attached_backends;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::ListParams;
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const NS: &str = "fleet";
/// Target clusters the fleet spreads over (one registration Secret each).
const TARGETS: usize = 10;
/// Passes timed per fleet size (the mean is over every Cinder of every pass).
const PASSES: usize = 3;

/// An object of kind `K` named `name` in [`NS`] with `labels`, from its JSON form.
fn object<K: DeserializeOwned>(
    name: &str,
    labels: serde_json::Value,
    rest: serde_json::Value,
) -> anyhow::Result<K> {
    let mut value = json!({"metadata": {"name": name, "namespace": NS, "labels": labels}});
    if let (Some(obj), Some(extra)) = (value.as_object_mut(), rest.as_object()) {
        obj.extend(extra.clone());
    }
    serde_json::from_value(value).context("building a fixture object")
}

/// The common labels of Cinder `cinder`'s children plus `extra`.
fn labels(cinder: &str, extra: &[(&str, &str)]) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    for (k, v) in names::common_labels(cinder) {
        out.insert(k, json!(v));
    }
    for (k, v) in extra {
        out.insert((*k).to_string(), json!(v));
    }
    serde_json::Value::Object(out)
}

/// A watch of `K` on `client` whose store `stores` serves, delivered `objects` as one list.
fn serve<K>(client: &Client, stores: &ClusterStores, objects: Vec<K>) -> SharedWatch<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let mut watch = SharedWatch::new(
        Api::namespaced(client.clone(), NS),
        watcher::Config::default(),
    );
    stores.add(&mut watch);
    watch.deliver(&watcher::Event::Init);
    for o in objects {
        watch.deliver(&watcher::Event::InitApply(o));
    }
    watch.deliver(&watcher::Event::InitDone);
    watch
}

fn cinder_name(i: usize) -> String {
    format!("cinder-{i:05}")
}

/// The watches filling a fleet's stores (kept for as long as the stores are read).
type Watches = Vec<Box<dyn std::any::Any>>;

/// The stores of a fleet of `n` Cinders: per Cinder 3 Deployments, 8 Secrets (2 of them volume
/// projections), 2 ConfigMaps and 2 CinderBackends; plus the [`TARGETS`] registration Secrets.
/// Returns the watches too (they own the stores' writers).
fn fleet(client: &Client, n: usize) -> anyhow::Result<(ClusterStores, Watches)> {
    let mut deployments = Vec::new();
    let mut secrets = Vec::new();
    let mut config_maps = Vec::new();
    let mut backends = Vec::new();
    for i in 0..n {
        let c = cinder_name(i);
        for d in ["api", "scheduler", "volume"] {
            let volumes = json!([
                {"name": "config", "configMap": {"name": format!("{c}-config-0")}},
                {"name": "backend", "secret": {"secretName": format!("{c}-volume-b0")}},
            ]);
            deployments.push(object::<Deployment>(
                &format!("{c}-{d}"),
                labels(&c, &[(names::LABEL_COMPONENT, d)]),
                json!({"spec": {"selector": {}, "template": {"spec": {"containers": [], "volumes": volumes}}}}),
            )?);
        }
        for s in [
            "db",
            "transport",
            "keystone",
            "config",
            "api-tls",
            "internal",
        ] {
            secrets.push(object::<Secret>(
                &format!("{c}-{s}"),
                labels(&c, &[]),
                json!({}),
            )?);
        }
        for b in ["b0", "b1"] {
            secrets.push(object::<Secret>(
                &format!("{c}-volume-{b}"),
                labels(&c, &[(PROJECTION_LABEL, PROJECTION_VOLUME)]),
                json!({}),
            )?);
            backends.push(object::<CinderBackend>(
                &format!("{c}-{b}"),
                json!({}),
                json!({"spec": {"cinderRef": {"name": c}, "type": "NFS", "nfs": {"server": "s", "path": "/e"}}}),
            )?);
        }
        for m in ["config-0", "scripts"] {
            config_maps.push(object::<ConfigMap>(
                &format!("{c}-{m}"),
                labels(&c, &[]),
                json!({}),
            )?);
        }
    }
    for t in 0..TARGETS {
        secrets.push(object::<Secret>(
            &format!("target-{t}"),
            json!({TARGET_CLUSTER_LABEL: format!("target-{t}")}),
            json!({"data": {"kubeconfig": "eA=="}}),
        )?);
    }
    let stores = ClusterStores::default();
    let watches: Watches = vec![
        Box::new(serve(client, &stores, deployments)),
        Box::new(serve(client, &stores, secrets)),
        Box::new(serve(client, &stores, config_maps)),
        Box::new(serve(client, &stores, backends)),
    ];
    Ok((stores, watches))
}

/// How a pass's lookups are answered.
#[derive(Clone, Copy, Debug)]
enum Path {
    /// By a scan of the kind's store (every list before the stores had an index; still how
    /// a selector without an indexed equality term is answered).
    Scan,
    /// As the steps read: through the stores' index.
    Indexed,
}

/// One pass's lookups for Cinder `i` of the fleet by `path`; returns how many objects they
/// found.
async fn lookups(
    client: &Client,
    stores: &ClusterStores,
    i: usize,
    path: Path,
) -> anyhow::Result<usize> {
    let c = cinder_name(i);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let projections = selector(&c, &[(PROJECTION_LABEL, PROJECTION_VOLUME)]);
    let target = format!("{TARGET_CLUSTER_LABEL}=target-{}", i % TARGETS);
    let found = match path {
        Path::Indexed => {
            mounts(client, stores, NS, &c).await?.secrets.len()
                + stores
                    .list(&secrets, &ListParams::default().labels(&projections))
                    .await?
                    .len()
                + attached_backends(client, stores, NS, &c).await?.len()
                + list_children::<ConfigMap>(client, stores, NS, &c, None)
                    .await?
                    .len()
                + stores
                    .list(&secrets, &ListParams::default().labels(&target))
                    .await?
                    .len()
        }
        Path::Scan => {
            // The same selections, with the instance label tested by the scan instead.
            let managed = format!("{}={}", names::LABEL_MANAGED_BY, names::MANAGED_BY);
            let projection = format!("{managed},{PROJECTION_LABEL}={PROJECTION_VOLUME}");
            let of = |labels: Option<&BTreeMap<String, String>>| {
                labels.and_then(|l| l.get(names::LABEL_INSTANCE)) == Some(&c)
            };
            let target_of = |labels: Option<&BTreeMap<String, String>>| {
                labels.and_then(|l| l.get(TARGET_CLUSTER_LABEL))
                    == Some(&format!("target-{}", i % TARGETS))
            };
            let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
            let backends: Api<CinderBackend> = Api::namespaced(client.clone(), NS);
            let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
            let all = ListParams::default();
            stores
                .list_where(&deployments, &all.clone().labels(&managed), |d| {
                    of(d.metadata.labels.as_ref())
                })
                .await?
                .len()
                + stores
                    .list_where(&secrets, &all.clone().labels(&projection), |s| {
                        of(s.metadata.labels.as_ref())
                    })
                    .await?
                    .len()
                + stores
                    .list_where(&backends, &all, |b| b.spec.satellite.cinder_ref.name == c)
                    .await?
                    .len()
                + stores
                    .list_where(&config_maps, &all.clone().labels(&managed), |m| {
                        of(m.metadata.labels.as_ref())
                    })
                    .await?
                    .len()
                + stores
                    .list_where(&secrets, &all, |s| target_of(s.metadata.labels.as_ref()))
                    .await?
                    .len()
        }
    };
    Ok(found)
}

/// The mean time of one Cinder's lookups by `path` over [`PASSES`] passes of a fleet of `n`.
async fn per_cinder(n: usize, path: Path) -> anyhow::Result<Duration> {
    let config = kube::Config::new("http://127.0.0.1:1".parse().context("a local URL")?);
    let client = Client::try_from(config).context("a client")?;
    let (stores, _watches) = fleet(&client, n)?;
    let started = Instant::now();
    for _ in 0..PASSES {
        for i in 0..n {
            let found = lookups(&client, &stores, i, path).await?;
            // 3 Deployments: each a mount, 2 projections, 2 backends, 2 ConfigMaps, 1 target.
            anyhow::ensure!(
                found == 10,
                "Cinder {i}: {found} objects found, 10 expected"
            );
        }
    }
    Ok(started.elapsed() / u32::try_from(PASSES * n).context("fleet size")?)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let parsed = std::env::args()
        .skip(1)
        .map(|a| a.parse::<usize>())
        .collect::<Result<Vec<_>, _>>();
    let sizes = match parsed {
        Ok(s) if !s.is_empty() => s,
        Ok(_) => vec![100, 1000],
        Err(e) => anyhow::bail!("fleet sizes must be whole numbers: {e}"),
    };
    for path in [Path::Scan, Path::Indexed] {
        let mut results = Vec::new();
        for &n in &sizes {
            let cost = per_cinder(n, path).await?;
            println!(
                "{path:?}: cinders={n:>6}  lookups per Cinder per pass: {:>10.1} us",
                cost.as_secs_f64() * 1e6
            );
            results.push((n, cost));
        }
        if let (Some((n0, c0)), Some((n1, c1))) = (results.first(), results.last())
            && n0 != n1
        {
            println!(
                "{path:?}: ratio (cinders={n1} / cinders={n0}): {:.2}",
                c1.as_secs_f64() / c0.as_secs_f64()
            );
        }
    }
    Ok(())
}
