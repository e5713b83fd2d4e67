//! The target-cluster gate that runs ahead of every step. Registration is a later issue; until
//! then a `spec.targetClusterRef` resolves only when a Secret labelled
//! `cinder.openstack.c5c3.io/target-cluster=<name>` with a non-empty `kubeconfig` key exists in
//! the Cinder's namespace or in the operator's lease namespace. Unresolvable → SecretsReady=False
//! / TargetClusterUnavailable, requeue after 15 s, no finalizer, nothing created.

use crate::context::{TARGET_CLUSTER_KUBECONFIG_KEY, TARGET_CLUSTER_LABEL};
use k8s_openapi::api::core::v1::Secret;
use kube::api::ListParams;
use kube::{Api, Client};

/// Whether a target cluster named `name` is registered, looking in `namespaces` (deduplicated).
pub async fn is_registered(
    client: &Client,
    namespaces: &[&str],
    name: &str,
) -> Result<bool, kube::Error> {
    let selector = format!("{TARGET_CLUSTER_LABEL}={name}");
    let mut seen = Vec::new();
    for ns in namespaces {
        if seen.contains(ns) {
            continue;
        }
        seen.push(ns);
        let api: Api<Secret> = Api::namespaced(client.clone(), ns);
        let list = api.list(&ListParams::default().labels(&selector)).await?;
        let found = list.items.iter().any(|s| {
            s.data
                .as_ref()
                .and_then(|d| d.get(TARGET_CLUSTER_KUBECONFIG_KEY))
                .is_some_and(|v| !v.0.is_empty())
        });
        if found {
            return Ok(true);
        }
    }
    Ok(false)
}
