//! Rotation of the database password on real parts (the set-up of `real_cinder_convergence`), at
//! 2026.1: once the samples are Ready, the password changes at its source, the sample
//! ClusterSecretStore's `openstack/cinder/database` entry. Shown:
//!
//! - the ExternalSecret syncs it into `cinder-db-credentials`, the mariadb-operator fixture
//!   sets it on the real server, and there the old password is refused (MySQL error 1045)
//!   while the new one logs in;
//! - the pods of every workload are replaced, the Cinder is Ready again, and every connection
//!   of the Cinder user on the server was opened after the old password stopped working, so
//!   with the new one; the services keep heartbeating in `cinder-manage service list`.

use cinder_e2e::real_cinder_cluster::{
    DB_PASSWORD, DB_USER, RealCinderCluster, RealCinderOptions, SAMPLES_NS, ServiceRow,
    real_cinder_roots,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const CONVERGENCE: Duration = Duration::from_secs(20 * 60);
const ROTATION: Duration = Duration::from_secs(8 * 60);
const NEW_PASSWORD: &str = "rotated-db-password-5f2e";
const WORKLOADS: [&str; 4] = [
    "cinder-api-",
    "cinder-scheduler-",
    "cinder-volume-ceph-",
    "cinder-backup-",
];

/// Logs in to the server over TCP as the Cinder user with `password`: Ok, or the client's
/// error.
fn login(port: u16, password: &str) -> Result<(), String> {
    let out = std::process::Command::new("/usr/bin/mariadb")
        .args([
            "--no-defaults",
            "-h",
            "127.0.0.1",
            "-u",
            DB_USER,
            "-N",
            "-B",
        ])
        .arg(format!("--port={port}"))
        .args(["-e", "SELECT 1"])
        .env("MYSQL_PWD", password)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

/// The workload pods: name -> uid, ready.
async fn workload_pods(cluster: &RealCinderCluster) -> Vec<(String, String, bool)> {
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), SAMPLES_NS);
    pods.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| {
            let name = p.metadata.name.clone()?;
            if !WORKLOADS.iter().any(|w| name.starts_with(w)) {
                return None;
            }
            let ready = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
                && p.metadata.deletion_timestamp.is_none();
            Some((name, p.metadata.uid.clone()?, ready))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_database_password_rolls_the_pods() {
    let Some(roots) = real_cinder_roots("a_rotated_database_password_rolls_the_pods") else {
        return;
    };
    let cluster = RealCinderCluster::start(&roots[0], RealCinderOptions::default())
        .await
        .unwrap();
    cluster.wait_ready(CONVERGENCE).await.unwrap();
    let port = cluster.db.port();
    login(port, DB_PASSWORD).unwrap();
    let before: BTreeSet<String> = workload_pods(&cluster)
        .await
        .into_iter()
        .map(|(_, uid, _)| uid)
        .collect();
    assert_eq!(before.len(), WORKLOADS.len());

    // The source: the sample store's entry.
    let store = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("external-secrets.io", "v1", "ClusterSecretStore"),
        "clustersecretstores",
    );
    let stores: Api<DynamicObject> = Api::all_with(cluster.client.clone(), &store);
    let mut current = stores.get("openbao-cluster-store").await.unwrap();
    let data = current.data["spec"]["provider"]["fake"]["data"]
        .as_array_mut()
        .unwrap();
    let entry = data
        .iter_mut()
        .find(|e| e["key"] == "openstack/cinder/database")
        .unwrap();
    entry["value"] = serde_json::json!(
        serde_json::json!({"username": DB_USER, "password": NEW_PASSWORD}).to_string()
    );
    let rotated = Instant::now();
    stores
        .patch(
            "openbao-cluster-store",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": current.data["spec"].clone()})),
        )
        .await
        .unwrap();

    // The server takes the new password and refuses the old one.
    let refused = loop {
        if let Err(e) = login(port, DB_PASSWORD) {
            break e;
        }
        assert!(
            rotated.elapsed() < ROTATION,
            "the old password still logs in"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let on_server = rotated.elapsed();
    let marker: u64 = cluster
        .db
        .sql("SELECT CONNECTION_ID()")
        .await
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    eprintln!(
        "the old password refused {:.1} s after the store changed: {refused}",
        on_server.as_secs_f64()
    );
    assert!(refused.contains("1045"), "{refused}");
    login(port, NEW_PASSWORD).unwrap();

    // Every workload's pod replaced and ready, the Cinder Ready.
    let since = Instant::now();
    loop {
        let pods = workload_pods(&cluster).await;
        let rolled = WORKLOADS.iter().all(|w| {
            let of: Vec<_> = pods.iter().filter(|(n, _, _)| n.starts_with(w)).collect();
            !of.is_empty()
                && of
                    .iter()
                    .all(|(_, uid, ready)| *ready && !before.contains(uid))
        });
        if rolled {
            break;
        }
        assert!(
            since.elapsed() < ROTATION,
            "the pods did not roll: {pods:?}\n  {}",
            cluster.conditions_line().await
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    cluster.wait_ready(ROTATION).await.unwrap();
    eprintln!(
        "pods rolled and the Cinder Ready {:.1} s after the store changed",
        rotated.elapsed().as_secs_f64()
    );
    // Some heartbeats with the new password.
    tokio::time::sleep(Duration::from_secs(15)).await;

    // A replaced pod's process may still be shutting down (within its grace period) with a
    // connection it opened under the old password: every connection is eventually a new one.
    let deadline = Instant::now() + Duration::from_secs(120);
    let ids = loop {
        let ids = cluster
            .db
            .sql("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = 'cinder'")
            .await
            .unwrap();
        let ids: Vec<u64> = ids.lines().filter_map(|l| l.trim().parse().ok()).collect();
        if (!ids.is_empty() && ids.iter().all(|id| *id > marker)) || Instant::now() > deadline {
            break ids;
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
    };
    eprintln!("the Cinder user's connections: {ids:?}, opened after connection {marker}");
    assert!(!ids.is_empty());
    if ids.iter().any(|id| *id <= marker) {
        let rows = cluster
            .db
            .sql(
                "SELECT ID, HOST, DB, COMMAND, TIME, STATE FROM information_schema.PROCESSLIST \
                 WHERE USER = 'cinder'",
            )
            .await
            .unwrap_or_default();
        panic!(
            "a connection of the old password outlived the rotation by 120 s: {ids:?} (marker \
             {marker})\n  the Cinder user's connections (id, host, db, command, time, state):\n{rows}\n  pods: {}",
            cluster.pods_line().await
        );
    }
    let rows = ServiceRow::parse(
        &cluster
            .cinder_manage_as(&roots[0], NEW_PASSWORD, &["service", "list"])
            .await
            .unwrap(),
    );
    for binary in ["cinder-scheduler", "cinder-volume", "cinder-backup"] {
        let row = rows.iter().find(|r| r.binary == binary).unwrap();
        assert_eq!(row.state, ":-)", "{binary} heartbeats: {rows:#?}");
    }
    assert!(login(port, DB_PASSWORD).is_err());
    cluster.stop().await.unwrap();
}
