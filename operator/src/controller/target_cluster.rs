//! Target clusters (seed 001, "Target Clusters"; docs/target-clusters.md): registration, the
//! gate that runs ahead of every step, and the cleanup of a Cinder's children on its target.
//!
//! A target cluster `<name>` is registered by a Secret labelled
//! `cinder.openstack.c5c3.io/target-cluster=<name>` with a non-empty `kubeconfig` key, in the
//! Cinder's namespace or in the operator's lease namespace. It resolves when that kubeconfig
//! parses into a client. Unresolvable → SecretsReady=False / TargetClusterUnavailable, requeue
//! after 15 s, no finalizer, nothing created. Children on a target carry the ownership label
//! [`OWNER_LABEL`]`=<namespace>.<name>` instead of an owner reference (cross-cluster owner
//! references do not work), and are deleted by that label when the Cinder is deleted.

use crate::context::{TARGET_CLUSTER_KUBECONFIG_KEY, TARGET_CLUSTER_LABEL};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{DeleteParams, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::NamespaceResourceScope;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

/// The ownership label of a child projected onto a target cluster: `<namespace>.<name>` of
/// the owning Cinder.
pub const OWNER_LABEL: &str = "cinder.openstack.c5c3.io/owner";

/// The registration Secrets of `name`, looking in `namespaces` (deduplicated), with a non-empty
/// kubeconfig.
async fn registration(
    client: &Client,
    namespaces: &[&str],
    name: &str,
) -> Result<Option<Vec<u8>>, kube::Error> {
    let selector = format!("{TARGET_CLUSTER_LABEL}={name}");
    let mut seen = Vec::new();
    for ns in namespaces {
        if seen.contains(ns) {
            continue;
        }
        seen.push(ns);
        let api: Api<Secret> = Api::namespaced(client.clone(), ns);
        let list = api.list(&ListParams::default().labels(&selector)).await?;
        let found = list.items.into_iter().find_map(|s| {
            s.data
                .and_then(|mut d| d.remove(TARGET_CLUSTER_KUBECONFIG_KEY))
                .filter(|v| !v.0.is_empty())
        });
        if let Some(kubeconfig) = found {
            return Ok(Some(kubeconfig.0));
        }
    }
    Ok(None)
}

/// Whether a target cluster named `name` is registered, looking in `namespaces` (deduplicated).
pub async fn is_registered(
    client: &Client,
    namespaces: &[&str],
    name: &str,
) -> Result<bool, kube::Error> {
    Ok(registration(client, namespaces, name).await?.is_some())
}

/// Why a target cluster does not resolve (no secret material in the message).
#[derive(Debug, thiserror::Error)]
pub enum Unresolvable {
    #[error("target cluster {0:?} is not registered")]
    NotRegistered(String),
    #[error("target cluster {0:?}: the registered kubeconfig does not load: {1}")]
    BadKubeconfig(String, String),
}

/// A client for the target cluster `name` (`Ok(Err(..))` when it does not resolve).
pub async fn resolve(
    client: &Client,
    namespaces: &[&str],
    name: &str,
) -> Result<Result<Client, Unresolvable>, kube::Error> {
    let Some(raw) = registration(client, namespaces, name).await? else {
        return Ok(Err(Unresolvable::NotRegistered(name.to_string())));
    };
    Ok(client_from_kubeconfig(&raw)
        .await
        .map_err(|why| Unresolvable::BadKubeconfig(name.to_string(), why)))
}

/// Builds a client from kubeconfig bytes (its current context). The error names what failed,
/// never the content.
pub async fn client_from_kubeconfig(raw: &[u8]) -> Result<Client, String> {
    let text = std::str::from_utf8(raw).map_err(|_| "not UTF-8".to_string())?;
    let kubeconfig = Kubeconfig::from_yaml(text).map_err(|_| "not a kubeconfig".to_string())?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|_| "incomplete kubeconfig (context, cluster or user)".to_string())?;
    Client::try_from(config).map_err(|_| "no client could be built from it".to_string())
}

async fn delete_labelled<K>(
    client: &Client,
    namespace: &str,
    selector: &str,
    deleted: &mut Vec<String>,
) -> Result<(), kube::Error>
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let list = api
        .list_metadata(&ListParams::default().labels(selector))
        .await?;
    let kind = K::kind(&K::DynamicType::default()).to_string();
    for item in list.items {
        let Some(name) = item.metadata.name else {
            continue;
        };
        if item.metadata.deletion_timestamp.is_none() {
            match api.delete(&name, &DeleteParams::background()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => continue,
                Err(e) => return Err(e),
            }
        }
        deleted.push(format!("{kind}/{name}"));
    }
    Ok(())
}

/// Deletes every child of the Cinder `owner` (`<namespace>.<name>`) on a target cluster by the
/// ownership label, in the Cinder's namespace; returns the `Kind/name` of each child deleted.
pub async fn delete_children(
    target: &Client,
    namespace: &str,
    owner: &str,
) -> Result<Vec<String>, kube::Error> {
    let selector = format!("{OWNER_LABEL}={owner}");
    let mut deleted = Vec::new();
    delete_labelled::<Deployment>(target, namespace, &selector, &mut deleted).await?;
    delete_labelled::<Service>(target, namespace, &selector, &mut deleted).await?;
    delete_labelled::<ConfigMap>(target, namespace, &selector, &mut deleted).await?;
    delete_labelled::<Secret>(target, namespace, &selector, &mut deleted).await?;
    delete_labelled::<PodDisruptionBudget>(target, namespace, &selector, &mut deleted).await?;
    delete_labelled::<HorizontalPodAutoscaler>(target, namespace, &selector, &mut deleted).await?;
    delete_labelled::<NetworkPolicy>(target, namespace, &selector, &mut deleted).await?;
    delete_labelled::<Job>(target, namespace, &selector, &mut deleted).await?;
    delete_labelled::<CronJob>(target, namespace, &selector, &mut deleted).await?;
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_broken_kubeconfig_names_the_problem_not_the_content() {
        let Err(why) = client_from_kubeconfig(b"token: s3cr3t\n: [").await else {
            panic!("a broken kubeconfig loaded");
        };
        assert!(!why.contains("s3cr3t"), "{why}");
        let Err(why) = client_from_kubeconfig(b"apiVersion: v1\nkind: Config\n").await else {
            panic!("an empty kubeconfig loaded");
        };
        assert!(why.contains("incomplete"), "{why}");
    }
}
