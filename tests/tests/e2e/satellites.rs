//! The satellite controllers: a backend without its parent waits (WaitingForParent); the
//! CinderBackend finalizer is added by the satellite; a backend whose parent Cinder is gone
//! releases it with a ServiceRemoveSkipped event; a backend of a Cinder whose target cluster is
//! unresolvable reports TargetClusterUnavailable; a backend whose section is rendered but that no
//! Deployment mounts yet (the parent's lane waits for its database) is not ConfigProjected.

use cinder_e2e::*;
use cinder_operator::crd::{Cinder, CinderBackend};
use cinder_operator::names;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_wait_and_release_their_finalizer_when_the_parent_is_gone() {
    let h = Harness::start().await.unwrap();
    create_cluster_store(&h.client).await.unwrap();
    create_credentials(&h.client, &Credentials::fresh("sat"))
        .await
        .unwrap();

    create_nfs_backend(&h.client, "orphan", "nobody")
        .await
        .unwrap();
    let c = wait_satellite_condition::<CinderBackend>(
        &h.client,
        "orphan",
        "CredentialsReady",
        "False",
        "WaitingForParent",
    )
    .await
    .unwrap();
    assert!(c.message.contains("nobody"), "{}", c.message);
    wait_satellite_condition::<CinderBackend>(&h.client, "orphan", "Ready", "False", "NotAllReady")
        .await
        .unwrap();
    let api: Api<CinderBackend> = h.api();
    let b = api.get("orphan").await.unwrap();
    assert!(
        b.metadata
            .finalizers
            .unwrap_or_default()
            .iter()
            .any(|f| f == names::SERVICE_REMOVE_FINALIZER)
    );

    // Deleting a backend whose parent does not exist releases the finalizer with an event.
    api.delete("orphan", &Default::default()).await.unwrap();
    eventually("the orphan leaves", || {
        let api = api.clone();
        async move { api.get_opt("orphan").await.ok()?.is_none().then_some(()) }
    })
    .await
    .unwrap();
    let events: Api<Event> = h.api();
    eventually("a ServiceRemoveSkipped event", || {
        let events = events.clone();
        async move {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some("ServiceRemoveSkipped")
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("orphan")
                })
                .then_some(())
        }
    })
    .await
    .unwrap();

    // A parent appearing (with its database, so its volume service comes to mount the
    // backend's section) lets an attached backend converge.
    cinder_e2e::database_helpers::create_mariadb(&h.client, "mariadb")
        .await
        .unwrap();
    create_cinder(&h.client, "parent", serde_json::json!({}))
        .await
        .unwrap();
    create_nfs_backend(&h.client, "child", "parent")
        .await
        .unwrap();
    wait_satellite_condition::<CinderBackend>(&h.client, "child", "Ready", "True", "AllReady")
        .await
        .unwrap();
    wait_cinder_condition(
        &h.client,
        "parent",
        "BackendsReady",
        "True",
        "AllBackendsProjected",
    )
    .await
    .unwrap();
    // The satellite's backend actor holds its summary (what /actors shows), never a secret.
    let value = eventually("the backend actor holds the child", || async {
        h.ctx
            .coordinator
            .peek(
                cinder_actors::Kind::Backend,
                &format!("CinderBackend/{NS}/child"),
            )
            .await
            .filter(|v| v["conditions"]["Ready"]["status"] == "True")
    })
    .await
    .unwrap();
    assert_eq!(value["cinder"], "parent");
    assert_eq!(value["type"], "NFS");
    assert!(
        h.ctx
            .coordinator
            .peek(
                cinder_actors::Kind::Backend,
                &format!("CinderBackend/{NS}/orphan")
            )
            .await
            .is_none()
    );

    // The parent leaving: the backend waits for it again, then deleting it releases the finalizer.
    let cinders: Api<Cinder> = h.api();
    cinders.delete("parent", &Default::default()).await.unwrap();
    wait_satellite_condition::<CinderBackend>(
        &h.client,
        "child",
        "CredentialsReady",
        "False",
        "WaitingForParent",
    )
    .await
    .unwrap();
    api.delete("child", &Default::default()).await.unwrap();
    eventually("the child leaves", || {
        let api = api.clone();
        async move { api.get_opt("child").await.ok()?.is_none().then_some(()) }
    })
    .await
    .unwrap();
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_of_an_unresolvable_target_reports_it() {
    let h = Harness::start().await.unwrap();
    create_cluster_store(&h.client).await.unwrap();
    create_credentials(&h.client, &Credentials::fresh("sattgt"))
        .await
        .unwrap();
    create_cinder(
        &h.client,
        "far",
        serde_json::json!({"targetClusterRef": {"name": "edge-9"}}),
    )
    .await
    .unwrap();
    create_nfs_backend(&h.client, "farnfs", "far")
        .await
        .unwrap();
    let c = wait_satellite_condition::<CinderBackend>(
        &h.client,
        "farnfs",
        "CredentialsReady",
        "False",
        "TargetClusterUnavailable",
    )
    .await
    .unwrap();
    assert!(c.message.contains("edge-9"), "{}", c.message);
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_projected_waits_for_a_deployment_that_mounts_the_section() {
    let h = Harness::start().await.unwrap();
    // Store and credentials, but no MariaDB yet: the lane renders the backend's Secret
    // (Backends) and stops at the Database step, before any volume service exists.
    create_cluster_store(&h.client).await.unwrap();
    create_credentials(&h.client, &Credentials::fresh("proj"))
        .await
        .unwrap();
    create_cinder(&h.client, "proj", serde_json::json!({}))
        .await
        .unwrap();
    create_nfs_backend(&h.client, "proj-nfs", "proj")
        .await
        .unwrap();
    wait_cinder_condition(
        &h.client,
        "proj",
        "BackendsReady",
        "True",
        "AllBackendsProjected",
    )
    .await
    .unwrap();
    wait_cinder_condition(
        &h.client,
        "proj",
        "DatabaseReady",
        "False",
        "ClusterNotReady",
    )
    .await
    .unwrap();
    let rendered = secret_names(
        &h.client,
        "app.kubernetes.io/instance=proj,cinder.openstack.c5c3.io/backend=proj-nfs",
    )
    .await;
    assert!(!rendered.is_empty(), "the backend's section is rendered");
    wait_satellite_condition::<CinderBackend>(
        &h.client,
        "proj-nfs",
        "CredentialsReady",
        "True",
        "CredentialsAvailable",
    )
    .await
    .unwrap();
    let c = wait_satellite_condition::<CinderBackend>(
        &h.client,
        "proj-nfs",
        "ConfigProjected",
        "False",
        "WaitingForProjection",
    )
    .await
    .unwrap();
    assert!(c.message.contains("no Deployment"), "{}", c.message);

    // The database comes: the volume service mounts the section, and the backend is projected.
    cinder_e2e::database_helpers::create_mariadb(&h.client, "mariadb")
        .await
        .unwrap();
    wait_satellite_condition::<CinderBackend>(
        &h.client,
        "proj-nfs",
        "ConfigProjected",
        "True",
        "Projected",
    )
    .await
    .unwrap();
    assert!(
        cinder_e2e::workload_helpers::deployment(&h.client, "proj-volume-proj-nfs")
            .await
            .is_some()
    );
    h.stop().await.unwrap();
}
