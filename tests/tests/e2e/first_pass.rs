//! The first pass adds the finalizer and requeues after 1 s; the next passes write the
//! conditions of the first six steps. A Cinder with no backends converges with
//! BackendsReady=True/NoBackends, and Ready is the aggregate of the fourteen sub-conditions.

use cinder_e2e::*;
use cinder_operator::crd::Cinder;
use cinder_operator::names;
use kube::Api;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_pass_adds_the_finalizer_then_conditions_appear() {
    let h = Harness::start().await.unwrap();
    let creds = Credentials::fresh("first");
    create_cluster_store(&h.client).await.unwrap();
    create_credentials(&h.client, &creds).await.unwrap();
    create_cinder(&h.client, "alpha", serde_json::json!({}))
        .await
        .unwrap();

    let api: Api<Cinder> = h.api();
    eventually("the finalizer", || {
        let api = api.clone();
        async move {
            let c = api.get_opt("alpha").await.ok().flatten()?;
            c.metadata
                .finalizers
                .unwrap_or_default()
                .iter()
                .any(|f| f == names::CINDER_FINALIZER)
                .then_some(())
        }
    })
    .await
    .unwrap();

    wait_cinder_condition(
        &h.client,
        "alpha",
        "SecretsReady",
        "True",
        "SecretsAvailable",
    )
    .await
    .unwrap();
    wait_cinder_condition(&h.client, "alpha", "BackendsReady", "True", "NoBackends")
        .await
        .unwrap();
    wait_cinder_condition(
        &h.client,
        "alpha",
        "BackupBackendReady",
        "True",
        "NoBackupBackend",
    )
    .await
    .unwrap();
    wait_cinder_condition(
        &h.client,
        "alpha",
        "ExtraConfigHealthy",
        "True",
        "NoOwnedKeysOverridden",
    )
    .await
    .unwrap();
    let conds = cinder_conditions(&h.client, "alpha").await;
    assert_ready_consistent(&conds);

    let c = api.get("alpha").await.unwrap();
    let status = c.status.unwrap();
    assert_eq!(status.observed_generation, c.metadata.generation);
    assert!(
        status
            .conditions
            .iter()
            .all(|x| x.observed_generation == c.metadata.generation)
    );

    // The derived children exist, owned by the Cinder.
    for name in [
        names::db_connection_secret("alpha"),
        names::transport_url_secret("alpha"),
    ] {
        let secrets: Api<k8s_openapi::api::core::v1::Secret> = h.api();
        let s = secrets.get(&name).await.unwrap();
        let owner = &s.metadata.owner_references.unwrap()[0];
        assert_eq!(owner.kind, "Cinder");
        assert_eq!(owner.controller, Some(true));
    }
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = h.api();
    let listed = cms
        .list(&kube::api::ListParams::default().labels("cinder.openstack.c5c3.io/config=true"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    assert!(
        listed.items[0]
            .metadata
            .name
            .as_deref()
            .unwrap()
            .starts_with("alpha-config-")
    );
    assert_eq!(listed.items[0].immutable, Some(true));

    // The pipelines view shows the Cinder and a finished pass.
    let snap = h.ctx.pipelines_snapshot().await;
    let entry = snap["pipelines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "alpha")
        .cloned()
        .unwrap();
    assert!(entry["passes"].as_u64().unwrap() >= 2, "{entry}");

    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_cinder_releases_its_finalizer() {
    let h = Harness::start().await.unwrap();
    let creds = Credentials::fresh("delete");
    create_cluster_store(&h.client).await.unwrap();
    create_credentials(&h.client, &creds).await.unwrap();
    create_cinder(&h.client, "gone", serde_json::json!({}))
        .await
        .unwrap();
    wait_cinder_condition(
        &h.client,
        "gone",
        "SecretsReady",
        "True",
        "SecretsAvailable",
    )
    .await
    .unwrap();
    let api: Api<Cinder> = h.api();
    api.delete("gone", &Default::default()).await.unwrap();
    eventually("the Cinder leaves", || {
        let api = api.clone();
        async move { api.get_opt("gone").await.ok()?.is_none().then_some(()) }
    })
    .await
    .unwrap();
    let snap = h.ctx.pipelines_snapshot().await;
    assert!(
        snap["pipelines"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["name"] != "gone")
    );
    h.stop().await.unwrap();
}
