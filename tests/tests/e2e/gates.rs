//! The gates ahead of the lane: an unresolvable target cluster (nothing created, no finalizer),
//! a store that is not Ready (the lane stops at Secrets), a ClusterSecretStore under
//! `--namespace`, and missing credentials.

use cinder_e2e::*;
use cinder_operator::crd::Cinder;
use cinder_operator::names;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::api::ListParams;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unresolvable_target_cluster_creates_nothing_and_takes_no_finalizer() {
    let h = Harness::start().await.unwrap();
    create_cluster_store(&h.client).await.unwrap();
    create_credentials(&h.client, &Credentials::fresh("target"))
        .await
        .unwrap();
    create_cinder(
        &h.client,
        "remote",
        serde_json::json!({"targetClusterRef": {"name": "edge-1"}}),
    )
    .await
    .unwrap();
    let c = wait_cinder_condition(
        &h.client,
        "remote",
        "SecretsReady",
        "False",
        "TargetClusterUnavailable",
    )
    .await
    .unwrap();
    assert!(c.message.contains("edge-1"), "{}", c.message);
    wait_cinder_condition(&h.client, "remote", "Ready", "False", "NotAllReady")
        .await
        .unwrap();

    let api: Api<Cinder> = h.api();
    let cinder = api.get("remote").await.unwrap();
    assert!(cinder.metadata.finalizers.unwrap_or_default().is_empty());
    let selector = format!("{}=remote", names::LABEL_INSTANCE);
    let secrets: Api<Secret> = h.api();
    let cms: Api<ConfigMap> = h.api();
    assert!(
        secrets
            .list(&ListParams::default().labels(&selector))
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(
        cms.list(&ListParams::default().labels(&selector))
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let status = cinder.status.unwrap();
    assert!(status.conditions.iter().all(|c| c.type_ != "BackendsReady"));

    // A registration whose kubeconfig does not load still does not resolve: the reason says
    // so without quoting the content.
    let registration = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("edge-1".into()),
            namespace: Some(NS.into()),
            labels: Some(
                [(
                    "cinder.openstack.c5c3.io/target-cluster".to_string(),
                    "edge-1".to_string(),
                )]
                .into(),
            ),
            ..Default::default()
        },
        data: Some(
            [(
                "kubeconfig".to_string(),
                k8s_openapi::ByteString(b"apiVersion: v1\ntoken: s3cr3t-in-kubeconfig".to_vec()),
            )]
            .into(),
        ),
        ..Default::default()
    };
    secrets
        .create(&Default::default(), &registration)
        .await
        .unwrap();
    let c = eventually("TargetClusterUnavailable naming the kubeconfig", || {
        let client = h.client.clone();
        async move {
            let conds = cinder_conditions(&client, "remote").await;
            let c = condition(&conds, "SecretsReady")?.clone();
            (c.reason == "TargetClusterUnavailable" && c.message.contains("does not load"))
                .then_some(c)
        }
    })
    .await
    .unwrap();
    assert!(!c.message.contains("s3cr3t"), "{}", c.message);
    let cinder = api.get("remote").await.unwrap();
    assert!(cinder.metadata.finalizers.unwrap_or_default().is_empty());

    // Registering a reachable target lets the lane run (the 15 s requeue picks it up).
    let (target, _remote) = cinder_e2e::target_helpers::target_cluster(false)
        .await
        .unwrap();
    let mut working = secrets.get("edge-1").await.unwrap();
    working.data = Some(
        [(
            "kubeconfig".to_string(),
            k8s_openapi::ByteString(target.kubeconfig_yaml().into_bytes()),
        )]
        .into(),
    );
    secrets
        .replace("edge-1", &Default::default(), &working)
        .await
        .unwrap();
    wait_cinder_condition(
        &h.client,
        "remote",
        "SecretsReady",
        "True",
        "SecretsAvailable",
    )
    .await
    .unwrap();
    target.shutdown().await;
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_is_not_ready_stops_the_lane() {
    let mut config = HarnessConfig::default();
    config
        .cluster
        .controllers
        .secret_stores
        .not_ready
        .insert("openbao-cluster-store");
    let h = Harness::start_with(config).await.unwrap();
    create_cluster_store(&h.client).await.unwrap();
    create_credentials(&h.client, &Credentials::fresh("store"))
        .await
        .unwrap();
    create_cinder(&h.client, "blocked", serde_json::json!({}))
        .await
        .unwrap();
    let c = wait_cinder_condition(
        &h.client,
        "blocked",
        "SecretsReady",
        "False",
        "SecretStoreNotReady",
    )
    .await
    .unwrap();
    assert!(c.message.contains("openbao-cluster-store"), "{}", c.message);
    let conds = cinder_conditions(&h.client, "blocked").await;
    assert!(condition(&conds, "BackendsReady").is_none(), "{conds:?}");
    assert!(condition(&conds, "DatabaseReady").is_none(), "{conds:?}");
    assert!(
        secret_value(
            &h.client,
            &names::db_connection_secret("blocked"),
            "connection"
        )
        .await
        .is_none()
    );

    // The store becoming Ready wakes the Cinder through the store watch.
    if let Some(ctl) = h.cluster.controllers() {
        ctl.update_config(|c| {
            c.secret_stores.not_ready.remove("openbao-cluster-store");
        });
    }
    wait_cinder_condition(
        &h.client,
        "blocked",
        "SecretsReady",
        "True",
        "SecretsAvailable",
    )
    .await
    .unwrap();
    wait_cinder_condition(&h.client, "blocked", "BackendsReady", "True", "NoBackends")
        .await
        .unwrap();
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_credentials_wait_with_their_own_reasons() {
    let h = Harness::start().await.unwrap();
    create_cluster_store(&h.client).await.unwrap();
    create_cinder(&h.client, "waiting", serde_json::json!({}))
        .await
        .unwrap();
    wait_cinder_condition(
        &h.client,
        "waiting",
        "SecretsReady",
        "False",
        "WaitingForDBCredentials",
    )
    .await
    .unwrap();
    let creds = Credentials::fresh("wait");
    put_secret(
        &h.client,
        "cinder-db",
        &[("username", "cinder"), ("password", &creds.db_password)],
    )
    .await
    .unwrap();
    wait_cinder_condition(
        &h.client,
        "waiting",
        "SecretsReady",
        "False",
        "WaitingForServiceUserCredentials",
    )
    .await
    .unwrap();
    put_secret(
        &h.client,
        "cinder-keystone",
        &[("password", &creds.service_password)],
    )
    .await
    .unwrap();
    let c = wait_cinder_condition(
        &h.client,
        "waiting",
        "SecretsReady",
        "False",
        "WaitingForMessagingCredentials",
    )
    .await
    .unwrap();
    assert!(c.message.contains("cinder-rabbit"), "{}", c.message);
    // A Secret lacking a key is named with the key.
    put_secret(
        &h.client,
        "cinder-rabbit",
        &[("username", "cinder"), ("password", &creds.rabbit_password)],
    )
    .await
    .unwrap();
    let c = eventually("the missing host key is named", || async {
        let cs = cinder_conditions(&h.client, "waiting").await;
        condition(&cs, "SecretsReady")
            .filter(|c| c.message.contains("host"))
            .cloned()
    })
    .await
    .unwrap();
    assert_eq!(c.reason, "WaitingForMessagingCredentials");
    put_secret(
        &h.client,
        "cinder-rabbit",
        &[
            ("username", "cinder"),
            ("password", &creds.rabbit_password),
            ("host", "rabbitmq"),
        ],
    )
    .await
    .unwrap();
    wait_cinder_condition(
        &h.client,
        "waiting",
        "SecretsReady",
        "True",
        "SecretsAvailable",
    )
    .await
    .unwrap();
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_secret_store_is_unsupported_under_a_namespace() {
    let mut config = HarnessConfig::default();
    config.options.namespace = Some(NS.to_string());
    let h = Harness::start_with(config).await.unwrap();
    create_cluster_store(&h.client).await.unwrap();
    create_credentials(&h.client, &Credentials::fresh("ns"))
        .await
        .unwrap();
    create_cinder(&h.client, "scoped", serde_json::json!({}))
        .await
        .unwrap();
    wait_cinder_condition(
        &h.client,
        "scoped",
        "SecretsReady",
        "False",
        "ClusterSecretStoreUnsupported",
    )
    .await
    .unwrap();
    // A namespaced SecretStore works.
    create_store(&h.client, "SecretStore", Some(NS), "local-store")
        .await
        .unwrap();
    let api: Api<Cinder> = h.api();
    api.patch(
        "scoped",
        &Default::default(),
        &kube::api::Patch::Merge(serde_json::json!({"spec": {"secretStoreRef": {"kind": "SecretStore", "name": "local-store"}}})),
    )
    .await
    .unwrap();
    wait_cinder_condition(
        &h.client,
        "scoped",
        "SecretsReady",
        "True",
        "SecretsAvailable",
    )
    .await
    .unwrap();
    h.stop().await.unwrap();
}
