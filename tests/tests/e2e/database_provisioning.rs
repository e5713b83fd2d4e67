//! The Database step end to end: the happy path (MariaDB Ready, one NFS backend) provisions
//! Database/User/Grant with the topology's connection cap, runs one `{name}-db-sync` Job and
//! promotes installedRelease; an image whose tag names another release is refused; a missing
//! MariaDB, a missing config and brownfield mode; the cap for two backends and for an HPA ceiling.

use cinder_e2e::database_helpers::*;
use cinder_e2e::*;
use cinder_operator::crd::Cinder;
use cinder_operator::planning::connection_cap::connection_cap;
use k8s_openapi::api::batch::v1::Job;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn happy_path_provisions_syncs_and_promotes() {
    let h = Harness::start().await.unwrap();
    database_environment(&h.client, "dbhappy").await.unwrap();
    create_cinder(&h.client, "happy", serde_json::json!({}))
        .await
        .unwrap();
    create_nfs_backend(&h.client, "nfs1", "happy")
        .await
        .unwrap();

    wait_cinder_condition(
        &h.client,
        "happy",
        "DatabaseReady",
        "True",
        "DatabaseSynced",
    )
    .await
    .unwrap();
    let status = wait_status(&h.client, "happy", "installedRelease 2026.1", |s| {
        s.installed_release.as_deref() == Some("2026.1")
    })
    .await
    .unwrap();
    assert_eq!(status.upgrade_phase, None);
    assert_eq!(status.target_release, None);

    // The connection cap of this topology: default API (3 pods x 2 processes x 1 thread),
    // one scheduler, one volume Deployment for the NFS backend, the backup service.
    let cinder: Cinder = h.api::<Cinder>().get("happy").await.unwrap();
    let cap = connection_cap(&cinder.spec, 1);
    assert_eq!(cap, (3 + 1) * 2 * 2 + 2 * (1 + 1 + 1) + 2);
    wait_user_cap(&h.client, "happy", cap).await.unwrap();
    let user = mariadb_object(&h.client, "User", "happy").await.unwrap();
    assert_eq!(
        user.data["spec"]["passwordSecretKeyRef"]["name"],
        "cinder-db"
    );
    assert_eq!(user.data["spec"]["passwordSecretKeyRef"]["key"], "password");
    assert_eq!(user.data["spec"]["name"], "cinder");
    let grant = mariadb_object(&h.client, "Grant", "happy").await.unwrap();
    assert_eq!(grant.data["spec"]["database"], "cinder");
    let database = mariadb_object(&h.client, "Database", "happy")
        .await
        .unwrap();
    assert_eq!(database.data["spec"]["name"], "cinder");
    assert_eq!(
        database.metadata.owner_references.unwrap()[0].kind,
        "Cinder"
    );

    // One db-sync Job running `cinder-manage db sync`, config directory from the ConfigMap,
    // the connection from the db-connection Secret.
    let job = h.api::<Job>().get("happy-db-sync").await.unwrap();
    let pod = job.spec.unwrap().template.spec.unwrap();
    let c = &pod.containers[0];
    assert_eq!(
        c.command.clone().unwrap().join(" "),
        "cinder-manage db sync"
    );
    assert_eq!(c.image.as_deref(), Some("registry.example/cinder:2026.1"));
    let cm = pod.volumes.unwrap()[0].config_map.clone().unwrap().name;
    assert!(cm.starts_with("happy-config-"), "{cm}");
    let env = &c.env.clone().unwrap()[0];
    assert_eq!(
        env.value_from.clone().unwrap().secret_key_ref.unwrap().name,
        "happy-db-connection"
    );
    let runs = database_job_runs(&h.cluster, "happy");
    assert!(runs.iter().any(|r| r.name == "happy-db-sync"), "{runs:?}");
    assert!(overlapping(&runs).is_empty());

    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_naming_another_release_is_refused() {
    let h = Harness::start().await.unwrap();
    database_environment(&h.client, "dbmismatch").await.unwrap();
    create_cinder(
        &h.client,
        "mismatch",
        serde_json::json!({"image": {"repository": "registry.example/cinder", "tag": "2025.2"}}),
    )
    .await
    .unwrap();
    let c = wait_cinder_condition(
        &h.client,
        "mismatch",
        "DatabaseReady",
        "False",
        "ImageReleaseMismatch",
    )
    .await
    .unwrap();
    assert!(
        c.message.contains("2025.2") && c.message.contains("2026.1"),
        "{}",
        c.message
    );
    assert!(
        h.api::<Job>()
            .get_opt("mismatch-db-sync")
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        cinder_status(&h.client, "mismatch").await.installed_release,
        None
    );
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gates_cluster_config_and_brownfield() {
    let h = Harness::start().await.unwrap();
    let creds = Credentials::fresh("dbgates");
    create_cluster_store(&h.client).await.unwrap();
    create_credentials(&h.client, &creds).await.unwrap();

    // No MariaDB yet: ClusterNotReady, nothing provisioned.
    create_cinder(&h.client, "gated", serde_json::json!({}))
        .await
        .unwrap();
    wait_cinder_condition(
        &h.client,
        "gated",
        "DatabaseReady",
        "False",
        "ClusterNotReady",
    )
    .await
    .unwrap();
    assert!(mariadb_object(&h.client, "User", "gated").await.is_none());

    // The MariaDB appears (the watch on it wakes the Cinder): provisioned and synced.
    create_mariadb(&h.client, "mariadb").await.unwrap();
    wait_cinder_condition(
        &h.client,
        "gated",
        "DatabaseReady",
        "True",
        "DatabaseSynced",
    )
    .await
    .unwrap();

    // A config that cannot be rendered and no live Deployment to fall back on: WaitingForConfig.
    create_cinder(
        &h.client,
        "noconfig",
        serde_json::json!({"extraConfig": {"DEFAULT": {"debug": "true\nx = y"}}}),
    )
    .await
    .unwrap();
    wait_cinder_condition(
        &h.client,
        "noconfig",
        "DatabaseReady",
        "False",
        "WaitingForConfig",
    )
    .await
    .unwrap();
    assert!(
        h.api::<Job>()
            .get_opt("noconfig-db-sync")
            .await
            .unwrap()
            .is_none()
    );

    // Brownfield: host and port given; nothing is provisioned, the schema is still synced.
    create_cinder(
        &h.client,
        "brown",
        serde_json::json!({"database": {"host": "db.example", "port": 3306, "secretRef": {"name": "cinder-db"}}}),
    )
    .await
    .unwrap();
    wait_cinder_condition(
        &h.client,
        "brown",
        "DatabaseReady",
        "True",
        "DatabaseSynced",
    )
    .await
    .unwrap();
    for kind in ["Database", "User", "Grant"] {
        assert!(
            mariadb_object(&h.client, kind, "brown").await.is_none(),
            "{kind}"
        );
    }
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_cap_follows_backends_and_the_hpa_ceiling() {
    let h = Harness::start().await.unwrap();
    database_environment(&h.client, "dbcap").await.unwrap();

    // Two backends: 26.
    create_cinder(&h.client, "two", serde_json::json!({}))
        .await
        .unwrap();
    create_nfs_backend(&h.client, "nfs-a", "two").await.unwrap();
    create_nfs_backend(&h.client, "nfs-b", "two").await.unwrap();
    wait_user_cap(&h.client, "two", 26).await.unwrap();

    // An HPA owns the API count: its ceiling (10) sizes the cap.
    create_cinder(
        &h.client,
        "scaled",
        serde_json::json!({"autoscaling": {"minReplicas": 2, "maxReplicas": 10, "targetCPUUtilization": 80}}),
    )
    .await
    .unwrap();
    // (10 + 1) x 2 processes x 1 thread x 2 + 2 x (1 scheduler + 0 volumes + 1 backup) + 2
    wait_user_cap(&h.client, "scaled", 50).await.unwrap();
    h.stop().await.unwrap();
}
