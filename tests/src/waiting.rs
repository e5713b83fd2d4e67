//! Polling waits with generous timeouts: for any probe, for a Cinder's or a satellite's
//! condition; and the check of the Ready aggregate.

use crate::test_env::{EVENTUALLY, NS};
use cinder_operator::crd::Cinder;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{Api, Client};
use std::future::Future;
use std::time::{Duration, Instant};

/// Polls `probe` every 100 ms until it yields `Some`, for up to [`EVENTUALLY`].
pub async fn eventually<T, F, Fut>(what: &str, mut probe: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + EVENTUALLY;
    loop {
        if let Some(v) = probe().await {
            return Ok(v);
        }
        if Instant::now() > deadline {
            anyhow::bail!("timed out after {EVENTUALLY:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The condition `type_` of a condition list.
pub fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Checks the aggregate: Ready is True exactly when all fourteen sub-conditions are True
/// (whichever steps exist yet), and ExtraConfigHealthy never decides it. Returns Ready.
pub fn assert_ready_consistent(conditions: &[Condition]) -> Condition {
    let ready = condition(conditions, "Ready")
        .cloned()
        .expect("a Ready condition");
    let all_true = cinder_operator::pipeline::SUB_CONDITIONS
        .iter()
        .all(|t| condition(conditions, t).is_some_and(|c| c.status == "True"));
    assert_eq!(ready.status == "True", all_true, "{ready:?}");
    if all_true {
        assert_eq!(ready.reason, "AllReady");
    } else {
        assert_eq!(ready.reason, "NotAllReady");
        assert!(
            !ready.message.contains("ExtraConfigHealthy"),
            "{}",
            ready.message
        );
    }
    ready
}

/// The current conditions of Cinder `name`.
pub async fn cinder_conditions(client: &Client, name: &str) -> Vec<Condition> {
    cinder_conditions_in(client, NS, name).await
}

/// The current conditions of Cinder `name` in namespace `ns` (none while it cannot be read).
pub async fn cinder_conditions_in(client: &Client, ns: &str, name: &str) -> Vec<Condition> {
    let api: Api<Cinder> = Api::namespaced(client.clone(), ns);
    api.get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|c| c.status)
        .map(|s| s.conditions)
        .unwrap_or_default()
}

/// Waits until Cinder `name` has condition `type_` with `status` and `reason`; returns it.
pub async fn wait_cinder_condition(
    client: &Client,
    name: &str,
    type_: &str,
    status: &str,
    reason: &str,
) -> anyhow::Result<Condition> {
    let what = format!("Cinder {name} {type_}={status}/{reason}");
    let result = eventually(&what, || async {
        let cs = cinder_conditions(client, name).await;
        condition(&cs, type_)
            .filter(|c| c.status == status && c.reason == reason)
            .cloned()
    })
    .await;
    if result.is_err() {
        let cs = cinder_conditions(client, name).await;
        let seen: Vec<String> = cs
            .iter()
            .map(|c| format!("{}={}/{}: {}", c.type_, c.status, c.reason, c.message))
            .collect();
        anyhow::bail!("timed out waiting for {what}; conditions: {seen:#?}");
    }
    result
}

/// Waits until satellite `K` `name` has condition `type_` with `status` and `reason`.
pub async fn wait_satellite_condition<K>(
    client: &Client,
    name: &str,
    type_: &str,
    status: &str,
    reason: &str,
) -> anyhow::Result<Condition>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + serde::Serialize,
{
    let api: Api<K> = Api::namespaced(client.clone(), NS);
    let what = format!("{name} {type_}={status}/{reason}");
    eventually(&what, || {
        let api = api.clone();
        async move {
            let obj = api.get_opt(name).await.ok().flatten()?;
            let v = serde_json::to_value(&obj).ok()?;
            let cs: Vec<Condition> =
                serde_json::from_value(v.pointer("/status/conditions")?.clone()).ok()?;
            condition(&cs, type_)
                .filter(|c| c.status == status && c.reason == reason)
                .cloned()
        }
    })
    .await
}
