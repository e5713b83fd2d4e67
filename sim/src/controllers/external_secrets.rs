//! The simulated external-secrets controller for ExternalSecrets: syncs `spec.data` (a
//! `remoteRef.key`, and a `property` of a JSON value) and `spec.dataFrom[].extract` (every
//! property of a JSON value) from the `spec.provider.fake.data` of the store `secretStoreRef`
//! names, as external-secrets' fake provider answers, into the target Secret (`spec.target.name`,
//! default the ExternalSecret's name) owned by the ExternalSecret, with the labels of
//! `spec.target.template.metadata`. Ready=True/SecretSynced once written; Ready=False/
//! SecretSyncedError naming the store or key that is missing (no value in the message). A synced
//! ExternalSecret refreshes every [`REFRESH`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DynamicObject, ObjectMeta, PostParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::dynamic::{api_for, run as run_dynamic, status_of};
use super::kinds;
use super::runtime::{ReconcileError, Shared, patch_status};
use super::status::{Wanted, already_applied, condition_status, conditions};

/// How often a synced ExternalSecret is read from its store again.
pub const REFRESH: Duration = Duration::from_secs(30);
/// How soon an ExternalSecret that could not sync is tried again.
const RETRY: Duration = Duration::from_secs(1);

/// Runs the ExternalSecret controller until aborted.
pub async fn run(shared: Arc<Shared>) {
    run_dynamic(
        "external-secrets",
        Arc::clone(&shared),
        kinds::EXTERNAL_SECRET,
        shared,
        reconcile,
    )
    .await;
}

/// The value of `key` in a fake provider's `data` (`[{key, value}]`).
fn fake_value<'a>(store: &'a DynamicObject, key: &str) -> Option<&'a str> {
    store.data["spec"]["provider"]["fake"]["data"]
        .as_array()?
        .iter()
        .find(|entry| entry["key"].as_str() == Some(key))?["value"]
        .as_str()
}

/// The Secret data `spec` asks for from `store`, or what is missing (names only).
pub fn resolve(spec: &Value, store: &DynamicObject) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    let remote = |key: &str| {
        fake_value(store, key).ok_or_else(|| format!("key {key:?} not found in the store"))
    };
    for item in spec["data"].as_array().into_iter().flatten() {
        let secret_key = item["secretKey"]
            .as_str()
            .ok_or("a data entry has no secretKey")?;
        let key = item["remoteRef"]["key"]
            .as_str()
            .ok_or_else(|| format!("data entry {secret_key:?} has no remoteRef.key"))?;
        let value = remote(key)?;
        let value = match item["remoteRef"]["property"].as_str() {
            None => value.to_string(),
            Some(property) => serde_json::from_str::<Value>(value)
                .ok()
                .and_then(|v| match &v[property] {
                    Value::String(s) => Some(s.clone()),
                    Value::Null => None,
                    other => Some(other.to_string()),
                })
                .ok_or_else(|| format!("key {key:?} has no property {property:?}"))?,
        };
        out.insert(secret_key.to_string(), value);
    }
    for item in spec["dataFrom"].as_array().into_iter().flatten() {
        let Some(key) = item["extract"]["key"].as_str() else {
            continue;
        };
        let object = serde_json::from_str::<Value>(remote(key)?)
            .ok()
            .and_then(|v| v.as_object().cloned())
            .ok_or_else(|| format!("key {key:?} does not hold a JSON object"))?;
        for (k, v) in object {
            let v = match v {
                Value::String(s) => s,
                other => other.to_string(),
            };
            out.insert(k, v);
        }
    }
    Ok(out)
}

/// The status to write: synced, or the reason it is not (no secret value in it).
fn status(result: &Result<String, String>, previous: Option<&Value>) -> Value {
    let wanted = match result {
        Ok(_) => Wanted::new("Ready", true, "SecretSynced", "secret synced"),
        Err(why) => Wanted::new("Ready", false, "SecretSyncedError", why),
    };
    let mut status = json!({
        "conditions": conditions(previous.and_then(|s| s.get("conditions")), &[wanted], None),
    });
    if let Ok(target) = result {
        status["binding"] = json!({ "name": target });
    }
    status
}

/// Syncs `es` into its target Secret; answers the target's name or why it cannot.
async fn sync(
    es: &DynamicObject,
    shared: &Shared,
) -> Result<Result<String, String>, ReconcileError> {
    let namespace = es.namespace().ok_or(ReconcileError::Missing("namespace"))?;
    let spec = &es.data["spec"];
    let store_name = spec["secretStoreRef"]["name"].as_str().unwrap_or_default();
    let store_kind = match spec["secretStoreRef"]["kind"].as_str() {
        Some("ClusterSecretStore") => kinds::CLUSTER_SECRET_STORE,
        _ => kinds::SECRET_STORE,
    };
    let stores = api_for(shared, store_kind, Some(&namespace));
    let Some(store) = stores.get_opt(store_name).await? else {
        return Ok(Err(format!("{} {store_name:?} not found", store_kind.kind)));
    };
    if condition_status(status_of(&store).and_then(|s| s.get("conditions")), "Ready")
        != Some("True")
    {
        return Ok(Err(format!(
            "{} {store_name:?} is not ready",
            store_kind.kind
        )));
    }
    let data = match resolve(spec, &store) {
        Ok(data) => data,
        Err(why) => return Ok(Err(why)),
    };
    let target = spec["target"]["name"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| es.name_any());
    let labels: Option<BTreeMap<String, String>> =
        serde_json::from_value(spec["target"]["template"]["metadata"]["labels"].clone()).ok();
    let owner = OwnerReference {
        api_version: "external-secrets.io/v1".to_string(),
        kind: "ExternalSecret".to_string(),
        name: es.name_any(),
        uid: es.uid().ok_or(ReconcileError::Missing("metadata.uid"))?,
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let desired = Secret {
        metadata: ObjectMeta {
            name: Some(target.clone()),
            namespace: Some(namespace.clone()),
            labels,
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        data: Some(
            data.into_iter()
                .map(|(k, v)| (k, ByteString(v.into_bytes())))
                .collect(),
        ),
        type_: Some("Opaque".to_string()),
        ..Default::default()
    };
    let secrets: Api<Secret> = Api::namespaced(shared.client.clone(), &namespace);
    match secrets.get_opt(&target).await? {
        None => {
            secrets.create(&PostParams::default(), &desired).await?;
        }
        Some(existing) => {
            let ours = existing
                .owner_references()
                .iter()
                .any(|o| Some(&o.uid) == es.meta().uid.as_ref());
            if !ours {
                return Ok(Err(format!(
                    "Secret {target:?} exists and is not owned by this ExternalSecret"
                )));
            }
            // The labels others set (the Cinder operator's credential label) stay.
            let mut labels = existing.metadata.labels.clone().unwrap_or_default();
            labels.extend(desired.metadata.labels.clone().unwrap_or_default());
            if existing.data != desired.data || Some(&labels) != existing.metadata.labels.as_ref() {
                let mut replacement = desired;
                replacement.metadata.labels = Some(labels);
                replacement.metadata.resource_version = existing.metadata.resource_version;
                secrets
                    .replace(&target, &PostParams::default(), &replacement)
                    .await?;
            }
        }
    }
    Ok(Ok(target))
}

async fn reconcile(es: Arc<DynamicObject>, shared: Arc<Shared>) -> Result<Action, ReconcileError> {
    let enabled = shared.read(|c| c.secret_stores.switch.enabled);
    if !enabled || es.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let result = sync(&es, &shared).await?;
    let previous = status_of(&es);
    let next = status(&result, previous);
    if !already_applied(&next, previous) {
        let api = api_for(&shared, kinds::EXTERNAL_SECRET, es.namespace().as_deref());
        patch_status(&api, &es.name_any(), next).await?;
    }
    Ok(Action::requeue(if result.is_ok() {
        REFRESH
    } else {
        RETRY
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(data: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "external-secrets.io/v1", "kind": "ClusterSecretStore",
            "metadata": {"name": "s"},
            "spec": {"provider": {"fake": {"data": data}}}
        }))
        .unwrap()
    }

    #[test]
    fn data_and_extract_resolve_from_the_fake_provider() {
        let store = store(json!([
            {"key": "plain", "value": "v1"},
            {"key": "db", "value": "{\"username\": \"cinder\", \"port\": 3306}"}
        ]));
        let spec = json!({
            "data": [
                {"secretKey": "a", "remoteRef": {"key": "plain"}},
                {"secretKey": "user", "remoteRef": {"key": "db", "property": "username"}}
            ],
            "dataFrom": [{"extract": {"key": "db"}}]
        });
        let got = resolve(&spec, &store).unwrap();
        assert_eq!(got["a"], "v1");
        assert_eq!(got["user"], "cinder");
        assert_eq!(got["username"], "cinder");
        assert_eq!(got["port"], "3306");
    }

    #[test]
    fn a_missing_key_or_property_is_named_without_values() {
        let store = store(json!([{"key": "db", "value": "{\"username\": \"cinder\"}"}]));
        let missing = json!({"data": [{"secretKey": "p", "remoteRef": {"key": "nope"}}]});
        assert_eq!(
            resolve(&missing, &store).unwrap_err(),
            "key \"nope\" not found in the store"
        );
        let no_property = json!({"data": [{"secretKey": "p", "remoteRef": {"key": "db", "property": "password"}}]});
        let why = resolve(&no_property, &store).unwrap_err();
        assert_eq!(why, "key \"db\" has no property \"password\"");
        assert!(!why.contains("cinder"));
    }
}
