//! Rotation: a rotated database password re-renders `{name}-db-connection` (new digest); a
//! rotated RBD key Secret re-renders that backend's content-hashed Secret under a new name and
//! sweeps the old one; a backend leaving has its Secrets swept.

use cinder_e2e::*;
use cinder_operator::crd::{CinderBackend, CinderBackupBackend};
use cinder_operator::names;
use kube::Api;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_database_password_changes_the_db_connection_digest() {
    let h = Harness::start().await.unwrap();
    let creds = Credentials::fresh("rot");
    create_cluster_store(&h.client).await.unwrap();
    create_credentials(&h.client, &creds).await.unwrap();
    create_cinder(&h.client, "rot", serde_json::json!({}))
        .await
        .unwrap();
    wait_cinder_condition(&h.client, "rot", "SecretsReady", "True", "SecretsAvailable")
        .await
        .unwrap();
    let secret = names::db_connection_secret("rot");
    let before = secret_value(&h.client, &secret, "connection")
        .await
        .unwrap();
    assert!(before.starts_with("mysql+pymysql://cinder:"));
    assert!(before.contains("@mariadb.cinder-e2e.svc:3306/cinder"));

    put_secret(
        &h.client,
        "cinder-db",
        &[("username", "cinder"), ("password", "rotated-Pw-9")],
    )
    .await
    .unwrap();
    let after = eventually("the DSN re-renders", || async {
        secret_value(&h.client, &secret, "connection")
            .await
            .filter(|v| *v != before)
    })
    .await
    .unwrap();
    assert!(after.contains(":rotated-Pw-9@"));
    assert_ne!(sha256_hex(&before), sha256_hex(&after));
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_rbd_key_re_renders_the_backend_secret_and_sweeps_the_old() {
    let h = Harness::start().await.unwrap();
    create_cluster_store(&h.client).await.unwrap();
    create_credentials(&h.client, &Credentials::fresh("rbd"))
        .await
        .unwrap();
    // The lane completes, so the workloads mount the projected sections (ConfigProjected).
    cinder_e2e::database_helpers::create_mariadb(&h.client, "mariadb")
        .await
        .unwrap();
    create_cinder(&h.client, "ceph", serde_json::json!({}))
        .await
        .unwrap();
    put_secret(&h.client, "ceph-key", &[("key", "AQBfirstkey==")])
        .await
        .unwrap();
    create_rbd_backend(&h.client, "pool1", "ceph", "ceph-key")
        .await
        .unwrap();
    create_nfs_backend(&h.client, "nfs1", "ceph").await.unwrap();

    wait_cinder_condition(
        &h.client,
        "ceph",
        "BackendsReady",
        "True",
        "AllBackendsProjected",
    )
    .await
    .unwrap();
    let selector = format!(
        "{}=ceph,{}=pool1",
        names::LABEL_INSTANCE,
        names::LABEL_BACKEND
    );
    let first = eventually("one projection Secret", || async {
        let n = secret_names(&h.client, &selector).await;
        (n.len() == 1).then(|| n[0].clone())
    })
    .await
    .unwrap();
    assert!(first.starts_with("ceph-backend-pool1-"), "{first}");
    let keyring = secret_value(&h.client, &first, "keyring").await.unwrap();
    assert!(keyring.contains("AQBfirstkey=="));

    // The satellites report their credentials and the projection.
    wait_satellite_condition::<CinderBackend>(
        &h.client,
        "pool1",
        "CredentialsReady",
        "True",
        "CredentialsAvailable",
    )
    .await
    .unwrap();
    wait_satellite_condition::<CinderBackend>(&h.client, "pool1", "Ready", "True", "AllReady")
        .await
        .unwrap();
    wait_satellite_condition::<CinderBackend>(
        &h.client,
        "nfs1",
        "ConfigProjected",
        "True",
        "Projected",
    )
    .await
    .unwrap();
    let backends: Api<CinderBackend> = h.api();
    let b = backends.get("pool1").await.unwrap();
    assert!(
        b.metadata
            .finalizers
            .unwrap_or_default()
            .iter()
            .any(|f| f == names::SERVICE_REMOVE_FINALIZER)
    );

    put_secret(&h.client, "ceph-key", &[("key", "AQBsecondkey==")])
        .await
        .unwrap();
    let second = eventually("a new projection Secret, the old one swept", || async {
        let n = secret_names(&h.client, &selector).await;
        (n.len() == 1 && n[0] != first).then(|| n[0].clone())
    })
    .await
    .unwrap();
    assert!(second.starts_with("ceph-backend-pool1-"));
    let keyring = secret_value(&h.client, &second, "keyring").await.unwrap();
    assert!(keyring.contains("AQBsecondkey=="));

    // A backend that loses its key waits (and never short-circuits the lane).
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = h.api();
    secrets
        .delete("ceph-key", &Default::default())
        .await
        .unwrap();
    let c = wait_cinder_condition(
        &h.client,
        "ceph",
        "BackendsReady",
        "False",
        "WaitingForBackends",
    )
    .await
    .unwrap();
    assert!(c.message.contains("pool1"), "{}", c.message);
    wait_satellite_condition::<CinderBackend>(
        &h.client,
        "pool1",
        "CredentialsReady",
        "False",
        "WaitingForCredentials",
    )
    .await
    .unwrap();
    wait_cinder_condition(
        &h.client,
        "ceph",
        "BackupBackendReady",
        "True",
        "NoBackupBackend",
    )
    .await
    .unwrap();
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_backends_project_one_and_refuse_two() {
    let h = Harness::start().await.unwrap();
    create_cluster_store(&h.client).await.unwrap();
    create_credentials(&h.client, &Credentials::fresh("bk"))
        .await
        .unwrap();
    // The lane completes, so the workloads mount the projected sections (ConfigProjected).
    cinder_e2e::database_helpers::create_mariadb(&h.client, "mariadb")
        .await
        .unwrap();
    create_cinder(&h.client, "bk", serde_json::json!({}))
        .await
        .unwrap();
    let backup = |name: &str| {
        serde_json::json!({
            "apiVersion": "cinder.openstack.c5c3.io/v1alpha1",
            "kind": "CinderBackupBackend",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"cinderRef": {"name": "bk"}, "type": "NFS", "nfs": {"server": "nfs.example", "path": "/backups"}}
        })
    };
    create_raw::<CinderBackupBackend>(&h.client, backup("target1"))
        .await
        .unwrap();
    wait_cinder_condition(
        &h.client,
        "bk",
        "BackupBackendReady",
        "True",
        "BackupBackendProjected",
    )
    .await
    .unwrap();
    wait_satellite_condition::<CinderBackupBackend>(
        &h.client, "target1", "Ready", "True", "AllReady",
    )
    .await
    .unwrap();
    create_raw::<CinderBackupBackend>(&h.client, backup("target2"))
        .await
        .unwrap();
    let c = wait_cinder_condition(
        &h.client,
        "bk",
        "BackupBackendReady",
        "False",
        "MultipleBackupBackends",
    )
    .await
    .unwrap();
    assert!(
        c.message.contains("target1") && c.message.contains("target2"),
        "{}",
        c.message
    );
    // The second leaves: the first is projected again and the leaver's backend actor goes.
    let backups: Api<CinderBackupBackend> = h.api();
    let id = |n: &str| format!("CinderBackupBackend/{NS}/{n}");
    eventually("both backup targets have actors", || async {
        (h.ctx
            .coordinator
            .peek(cinder_actors::Kind::Backend, &id("target1"))
            .await
            .is_some()
            && h.ctx
                .coordinator
                .peek(cinder_actors::Kind::Backend, &id("target2"))
                .await
                .is_some())
        .then_some(())
    })
    .await
    .unwrap();
    backups
        .delete("target2", &Default::default())
        .await
        .unwrap();
    wait_cinder_condition(
        &h.client,
        "bk",
        "BackupBackendReady",
        "True",
        "BackupBackendProjected",
    )
    .await
    .unwrap();
    eventually("the leaver's actor is forgotten", || async {
        h.ctx
            .coordinator
            .peek(cinder_actors::Kind::Backend, &id("target2"))
            .await
            .is_none()
            .then_some(())
    })
    .await
    .unwrap();
    assert!(
        h.ctx
            .coordinator
            .peek(cinder_actors::Kind::Backend, &id("target1"))
            .await
            .is_some()
    );
    h.stop().await.unwrap();
}
