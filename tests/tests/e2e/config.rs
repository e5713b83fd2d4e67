//! The Config step: a control character in spec.extraConfig keeps the previous ConfigMap and
//! reports SecretsReady=False/ConfigError; overriding an owned key reports
//! ExtraConfigHealthy=False/OwnedKeysOverridden (outside the aggregate Ready).

use cinder_e2e::*;
use cinder_operator::crd::Cinder;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};

async fn config_maps(h: &Harness, cinder: &str) -> Vec<String> {
    let api: Api<ConfigMap> = h.api();
    let sel = format!("cinder.openstack.c5c3.io/config=true,app.kubernetes.io/instance={cinder}");
    let mut names: Vec<String> = api
        .list(&ListParams::default().labels(&sel))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    names.sort();
    names
}

async fn set_extra_config(h: &Harness, name: &str, extra: serde_json::Value) {
    let api: Api<Cinder> = h.api();
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"extraConfig": extra}})),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_character_keeps_the_previous_config_map() {
    let h = Harness::start().await.unwrap();
    create_cluster_store(&h.client).await.unwrap();
    create_credentials(&h.client, &Credentials::fresh("cfg"))
        .await
        .unwrap();
    create_cinder(
        &h.client,
        "cfg",
        serde_json::json!({"extraConfig": {"DEFAULT": {"debug": "true"}}}),
    )
    .await
    .unwrap();
    wait_cinder_condition(&h.client, "cfg", "SecretsReady", "True", "SecretsAvailable")
        .await
        .unwrap();
    let before = eventually("one ConfigMap", || async {
        let n = config_maps(&h, "cfg").await;
        (n.len() == 1).then_some(n)
    })
    .await
    .unwrap();
    let api: Api<ConfigMap> = h.api();
    let cm = api.get(&before[0]).await.unwrap();
    assert!(cm.data.unwrap()["cinder.conf"].contains("debug = true"));

    set_extra_config(
        &h,
        "cfg",
        serde_json::json!({"DEFAULT": {"debug": "true\n[evil]\nx = y"}}),
    )
    .await;
    let c = wait_cinder_condition(&h.client, "cfg", "SecretsReady", "False", "ConfigError")
        .await
        .unwrap();
    assert!(
        c.message.contains("DEFAULT") && c.message.contains("debug"),
        "{}",
        c.message
    );
    assert_eq!(
        config_maps(&h, "cfg").await,
        before,
        "the previous ConfigMap stays, nothing new"
    );

    // Fixing it renders again.
    set_extra_config(
        &h,
        "cfg",
        serde_json::json!({"DEFAULT": {"debug": "false"}}),
    )
    .await;
    wait_cinder_condition(&h.client, "cfg", "SecretsReady", "True", "SecretsAvailable")
        .await
        .unwrap();
    let after = eventually("the new ConfigMap replaces the old", || async {
        let n = config_maps(&h, "cfg").await;
        (n.len() == 1 && n != before).then_some(n)
    })
    .await
    .unwrap();
    assert!(after[0].starts_with("cfg-config-"));
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overriding_an_owned_key_is_reported() {
    let h = Harness::start().await.unwrap();
    create_cluster_store(&h.client).await.unwrap();
    create_credentials(&h.client, &Credentials::fresh("own"))
        .await
        .unwrap();
    create_cinder(&h.client, "own", serde_json::json!({}))
        .await
        .unwrap();
    wait_cinder_condition(
        &h.client,
        "own",
        "ExtraConfigHealthy",
        "True",
        "NoOwnedKeysOverridden",
    )
    .await
    .unwrap();
    set_extra_config(
        &h,
        "own",
        serde_json::json!({"keystone_authtoken": {"auth_url": "http://elsewhere:5000"}}),
    )
    .await;
    let c = wait_cinder_condition(
        &h.client,
        "own",
        "ExtraConfigHealthy",
        "False",
        "OwnedKeysOverridden",
    )
    .await
    .unwrap();
    assert!(
        c.message.contains("keystone_authtoken.auth_url"),
        "{}",
        c.message
    );
    // Informational only: the config still renders.
    wait_cinder_condition(&h.client, "own", "SecretsReady", "True", "SecretsAvailable")
        .await
        .unwrap();
    assert_ready_consistent(&cinder_conditions(&h.client, "own").await);
    h.stop().await.unwrap();
}

/// `cinder_operator_reconcile_errors_total{sub_reconciler="Config",condition_type="SecretsReady"}`.
fn config_errors(h: &Harness) -> u64 {
    h.ctx
        .metrics
        .reconcile_errors
        .get_or_create(&cinder_operator::metrics::StepErrorLabels {
            sub_reconciler: "Config".to_string(),
            condition_type: "SecretsReady".to_string(),
        })
        .get()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_extra_config_is_counted_as_a_reconcile_error() {
    let h = Harness::start().await.unwrap();
    create_cluster_store(&h.client).await.unwrap();
    create_credentials(&h.client, &Credentials::fresh("cfgcount"))
        .await
        .unwrap();
    create_cinder(
        &h.client,
        "cfgcount",
        serde_json::json!({"extraConfig": {"DEFAULT": {"debug": "true\n[evil]\nx = y"}}}),
    )
    .await
    .unwrap();
    wait_cinder_condition(
        &h.client,
        "cfgcount",
        "SecretsReady",
        "False",
        "ConfigError",
    )
    .await
    .unwrap();
    eventually("the ConfigError counted", || async {
        (config_errors(&h) > 0).then_some(())
    })
    .await
    .unwrap();
    h.stop().await.unwrap();
}
