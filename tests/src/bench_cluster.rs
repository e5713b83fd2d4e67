//! The embedded cluster of the benchmarks (`fleetbench`, `soakbench`, `cachebench`) and the fleet
//! tests: what its management cluster holds before the first Cinder ([`prepare_management`]), the
//! simulated controllers with every delay (Job runs, roll-outs, readiness) multiplied by one
//! scale, so a benchmark can run its passes faster or slower than the defaults, and a fleet's
//! Cinder (its own credential Secrets and schema in the shared MariaDB, NFS backends on its own
//! server; every object it brings is named after it).

use crate::database_helpers::create_mariadb;
use crate::{NS, cinder_json, create_cluster_store, create_namespace, install_crds, put_secret};
use cinder_operator::crd::{Cinder, CinderBackend};
use cinder_sim::controllers::config::{ControllersConfig, Switch};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};

fn scaled(s: &Switch, scale: f64) -> Switch {
    Switch {
        enabled: s.enabled,
        delay: s.delay.mul_f64(scale),
    }
}

/// The simulated controllers with every delay times `scale` (a finite number of at least 0).
pub fn scaled_controllers(scale: f64) -> ControllersConfig {
    let mut c = ControllersConfig::default();
    c.deployments.switch = scaled(&c.deployments.switch, scale);
    c.jobs.switch = scaled(&c.jobs.switch, scale);
    c.mariadb.switch = scaled(&c.mariadb.switch, scale);
    c.secret_stores.switch = scaled(&c.secret_stores.switch, scale);
    c.gateways.switch = scaled(&c.gateways.switch, scale);
    c.autoscalers = scaled(&c.autoscalers, scale);
    c
}

/// Prepares the management cluster behind `client` for benchmark Cinders: the CRDs, the
/// namespace [`NS`], and what the Cinders share there (the ClusterSecretStore and the MariaDB
/// cluster `mariadb`).
pub async fn prepare_management(client: &Client) -> anyhow::Result<()> {
    install_crds(client).await?;
    create_namespace(client, NS).await?;
    create_cluster_store(client).await?;
    create_mariadb(client, "mariadb").await
}

/// The names of the three credential Secrets of benchmark Cinder `name`: database, service
/// user, messaging.
pub fn credential_secrets(name: &str) -> [String; 3] {
    [
        format!("{name}-db"),
        format!("{name}-keystone"),
        format!("{name}-rabbit"),
    ]
}

/// Creates benchmark Cinder `name` in [`NS`]: its own credential Secrets (the database
/// password is `db_password`), the MariaDB cluster `mariadb`, `backends` NFS CinderBackends
/// (`<name>-nfs<b>` on server `nfs-<name>.example`), on target cluster `target` when there is
/// one, and the spec fields of `extra` (its `database` keeps what it sets beside the cluster and
/// Secret references; the schema is `name` with `_` for `-` unless it sets one).
pub async fn create_bench_cinder(
    client: &Client,
    name: &str,
    backends: u32,
    target: Option<&str>,
    db_password: &str,
    mut extra: serde_json::Value,
) -> anyhow::Result<()> {
    let [db, keystone, rabbit] = credential_secrets(name);
    put_secret(
        client,
        &db,
        &[("username", "cinder"), ("password", db_password)],
    )
    .await?;
    put_secret(client, &keystone, &[("password", "fleet-keystone")]).await?;
    put_secret(
        client,
        &rabbit,
        &[
            ("username", "cinder"),
            ("password", "fleet-rabbit"),
            ("host", "rabbitmq"),
        ],
    )
    .await?;
    // Each Cinder is a region of its own: its own schema (one database device lock each)
    // unless `extra` names one, and its own NFS server below. Cinders sharing a device would
    // run their device-locked work one at a time, by design.
    if extra["database"]["database"].is_null() {
        extra["database"]["database"] = serde_json::json!(name.replace('-', "_"));
    }
    extra["database"]["clusterRef"] = serde_json::json!({"name": "mariadb"});
    extra["database"]["secretRef"] = serde_json::json!({"name": db});
    extra["messaging"] = serde_json::json!({"secretRef": {"name": rabbit}});
    extra["serviceUser"] = serde_json::json!({"secretRef": {"name": keystone}});
    if let Some(target) = target {
        extra["targetClusterRef"] = serde_json::json!({"name": target});
    }
    let cinder: Cinder = serde_json::from_value(cinder_json(name, extra))?;
    Api::<Cinder>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &cinder)
        .await?;
    for b in 0..backends {
        let backend: CinderBackend = serde_json::from_value(serde_json::json!({
            "apiVersion": "cinder.openstack.c5c3.io/v1alpha1",
            "kind": "CinderBackend",
            "metadata": {"name": format!("{name}-nfs{b}"), "namespace": NS},
            "spec": {"cinderRef": {"name": name}, "type": "NFS",
                     "nfs": {"server": format!("nfs-{name}.example"), "path": format!("/exports/{b}")}}
        }))?;
        Api::<CinderBackend>::namespaced(client.clone(), NS)
            .create(&PostParams::default(), &backend)
            .await?;
    }
    Ok(())
}

/// How many Cinders in [`NS`] have Ready=True.
pub async fn ready_count(client: &Client) -> anyhow::Result<usize> {
    let list = Api::<Cinder>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await?;
    Ok(list
        .items
        .iter()
        .filter(|c| {
            c.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
        })
        .count())
}
