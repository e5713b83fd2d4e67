//! A fleet's members: one Cinder with its own three credential Secrets (`<name>-db`,
//! `<name>-keystone`, `<name>-rabbit`), the shared MariaDB `mariadb`, and B NFS CinderBackends
//! (`<name>-nfs<b>`), optionally on a target cluster. fleetbench and the shard takeover test
//! create their fleets with it; every object a member brings is named after its Cinder.

use crate::{NS, cinder_json, put_secret};
use cinder_operator::crd::{Cinder, CinderBackend};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};

/// Creates the Cinder `name` with its credentials and `backends` NFS backends, on the target
/// cluster `target` when given (the shared fixtures, the store and the MariaDB, must exist).
pub async fn create_fleet_cinder(
    client: &Client,
    name: &str,
    backends: u32,
    target: Option<&str>,
) -> anyhow::Result<()> {
    let (db, keystone, rabbit) = (
        format!("{name}-db"),
        format!("{name}-keystone"),
        format!("{name}-rabbit"),
    );
    put_secret(
        client,
        &db,
        &[("username", "cinder"), ("password", "fleet-db")],
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
    let mut extra = serde_json::json!({
        "database": {"clusterRef": {"name": "mariadb"}, "secretRef": {"name": db}},
        "messaging": {"secretRef": {"name": rabbit}},
        "serviceUser": {"secretRef": {"name": keystone}},
    });
    if let Some(target) = target {
        extra["targetClusterRef"] = serde_json::json!({ "name": target });
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
                     "nfs": {"server": "nfs.example", "path": format!("/exports/{name}/{b}")}}
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
