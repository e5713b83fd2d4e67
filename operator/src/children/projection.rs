//! What the Backends / BackupBackend steps and the satellite controllers share about projection
//! Secrets: their labels, the sweep of superseded ones, and the credential check (RBD key Secret
//! present with its key; NFS needs none). The rendering itself is
//! [`crate::planning::backend_projection`].

use super::list::selector;
use super::mounts::mounts;
use crate::crd::{BackendType, RbdSpec, Satellite};
use crate::credentials::{self, Missing};
use crate::kube_ext::reader::{ClusterStores, Field};
use crate::kube_ext::sweep;
use k8s_openapi::api::core::v1::Secret;
use kube::core::NamespaceResourceScope;
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

/// Label telling which projection a Secret is: `volume` or `backup`.
pub const PROJECTION_LABEL: &str = "cinder.openstack.c5c3.io/projection";
/// [`PROJECTION_LABEL`] value of a volume backend's Secrets.
pub const PROJECTION_VOLUME: &str = "volume";
/// [`PROJECTION_LABEL`] value of the backup target's Secrets.
pub(crate) const PROJECTION_BACKUP: &str = "backup";
/// The field the satellites' stores are indexed by: the parent Cinder (`spec.cinderRef.name`).
pub(crate) fn parent_field<K: Satellite>() -> Field<K> {
    Field {
        name: "spec.cinderRef.name",
        value: |s: &K| Some(s.satellite().cinder_ref.name.clone()),
    }
}

/// The satellites of kind `K` in `namespace` whose parent is Cinder `cinder`, in name order
/// (through the store's index on [`parent_field`]).
pub(crate) async fn attached<K>(
    client: &Client,
    reads: &ClusterStores,
    namespace: &str,
    cinder: &str,
) -> Result<Vec<K>, kube::Error>
where
    K: Satellite
        + Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let mut attached: Vec<K> = reads.list_by_field(&api, parent_field(), cinder).await?;
    attached.sort_by_key(|b| b.name_any());
    Ok(attached)
}

/// Deletes the Cinder's projection Secrets of `projection` ([`PROJECTION_VOLUME`] or
/// [`PROJECTION_BACKUP`]) that neither `keep` names nor a Deployment of the Cinder still mounts
/// (the pods of a rollout in progress mount the previous ones).
pub(crate) async fn sweep_projections(
    client: &Client,
    reads: &ClusterStores,
    namespace: &str,
    cinder: &str,
    projection: &str,
    mut keep: Vec<String>,
) -> Result<Vec<String>, kube::Error> {
    keep.extend(mounts(client, reads, namespace, cinder).await?.secrets);
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let sel = selector(cinder, &[(PROJECTION_LABEL, projection)]);
    sweep(&api, reads, &sel, |n| keep.iter().any(|k| k == n)).await
}

/// The key of the cephx key in the RBD key Secret unless `keySecretRef.key` says otherwise.
pub(crate) const DEFAULT_RBD_KEY: &str = "key";

/// The cephx key (never logged; `Debug` hides it).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct CephKey(String);

impl CephKey {
    /// The key, for the one place it belongs (the projection Secret's keyring).
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for CephKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CephKey(..)")
    }
}

/// The credentials a satellite needs: none for NFS, the key for RBD.
pub(crate) async fn credentials_for(
    client: &Client,
    reads: &ClusterStores,
    namespace: &str,
    backend_type: BackendType,
    rbd: Option<&RbdSpec>,
) -> Result<Result<Option<CephKey>, String>, kube::Error> {
    match (backend_type, rbd) {
        (BackendType::Nfs, _) => Ok(Ok(None)),
        (BackendType::Rbd, None) => Ok(Err("spec.rbd is missing".to_string())),
        (BackendType::Rbd, Some(r)) => {
            let key = r.key_secret_ref.key.as_deref().unwrap_or(DEFAULT_RBD_KEY);
            match credentials::read(
                client,
                reads,
                namespace,
                &r.key_secret_ref.name,
                &[key],
                &[],
            )
            .await?
            {
                Ok(v) => Ok(Ok(v.get(key).map(|k| CephKey(k.to_string())))),
                Err(m @ Missing::Secret(_)) | Err(m @ Missing::Keys(..)) => {
                    Ok(Err(format!("spec.rbd.keySecretRef: {m}")))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_never_shows_in_debug() {
        assert_eq!(format!("{:?}", CephKey("secret".into())), "CephKey(..)");
        assert_eq!(CephKey("k".into()).expose(), "k");
    }
}
