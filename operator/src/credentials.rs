//! Reading credential Secrets: whether a Secret exists with the keys a step needs, and the
//! values (kept in a [`SecretData`], whose Debug never shows them).
//!
//! The operator's Secret watches select its own Secrets and those labelled
//! [`LABEL_CREDENTIAL`] ([`crate::controller::watches`]). A credential Secret without the label
//! (as its user created it) is read from the API server and labelled, so that from then on the
//! watch caches it and a change to it wakes the Cinders and satellites that name it.

use crate::kube_ext::reader::ClusterStores;
use crate::names::LABEL_CREDENTIAL;
use crate::planning::secret_data::SecretData;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use std::collections::BTreeMap;

/// Why a Secret cannot be used yet (names only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Missing {
    Secret(String),
    Keys(String, Vec<String>),
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Missing::Secret(s) => write!(f, "Secret {s:?} does not exist"),
            Missing::Keys(s, keys) => write!(f, "Secret {s:?} lacks key(s) {}", keys.join(", ")),
        }
    }
}

/// Reads `required` (must be non-empty UTF-8) and `optional` keys of Secret `namespace/name`.
pub(crate) async fn read(
    client: &Client,
    reads: &ClusterStores,
    namespace: &str,
    name: &str,
    required: &[&str],
    optional: &[&str],
) -> Result<Result<SecretData, Missing>, kube::Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let Some(fetched) = reads.get_opt_or_live(&api, name).await? else {
        return Ok(Err(Missing::Secret(name.to_string())));
    };
    let secret = fetched.object;
    if fetched.live && !secret.labels().contains_key(LABEL_CREDENTIAL) {
        label_credential(&api, name).await?;
    }
    let data = secret.data.unwrap_or_default();
    let value = |k: &str| {
        data.get(k)
            .and_then(|v| String::from_utf8(v.0.clone()).ok())
            .filter(|v| !v.is_empty())
    };
    let mut values = BTreeMap::new();
    let mut missing = Vec::new();
    for k in required {
        match value(k) {
            Some(v) => {
                values.insert((*k).to_string(), v);
            }
            None => missing.push((*k).to_string()),
        }
    }
    if !missing.is_empty() {
        return Ok(Err(Missing::Keys(name.to_string(), missing)));
    }
    for k in optional {
        if let Some(v) = value(k) {
            values.insert((*k).to_string(), v);
        }
    }
    Ok(Ok(SecretData::from(values)))
}

/// Sets [`LABEL_CREDENTIAL`] on Secret `name` (a merge patch of that one label: the user's
/// labels and data stay as they are).
async fn label_credential(api: &Api<Secret>, name: &str) -> Result<(), kube::Error> {
    let patch = serde_json::json!({"metadata": {"labels": {LABEL_CREDENTIAL: "true"}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    tracing::debug!(
        secret = name,
        "labelled a credential Secret for the Secret watch"
    );
    Ok(())
}
