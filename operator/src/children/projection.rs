//! What the Backends / BackupBackend steps and the satellite controllers share about projection
//! Secrets: their labels, the sweep of superseded ones, the credential check (RBD key Secret
//! present with its key; NFS needs none), and the projection of one attached satellite into its
//! Secret ([`Projected`], [`project`]). The rendering itself is
//! [`crate::planning::backend_projection`].

use super::create::{ensure_secret, secret};
use super::list::selector;
use super::mounts::mounts;
use crate::crd::validation::validate_satellite;
use crate::crd::{BackendType, Cinder, CinderBackend, CinderBackupBackend, RbdSpec, Satellite};
use crate::credentials::{self, Missing};
use crate::kube_ext::reader::{ClusterStores, Field};
use crate::kube_ext::sweep;
use crate::names;
use crate::pipeline::{Doing, ProjectedBackend, StepContext, StepError};
use crate::planning::backend_projection::{
    Projection, ProjectionError, project_backend, project_backup_backend,
};
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
    K: Projected,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let mut attached: Vec<K> = reads.list_by_field(&api, parent_field(), cinder).await?;
    attached.sort_by_key(|b| b.name_any());
    Ok(attached)
}

/// The satellites of kind `K` attached to the pass's Cinder, in name order.
pub(crate) async fn attached_to_pass<K: Projected>(
    management: &Client,
    ctx: &StepContext,
) -> Result<Vec<K>, StepError> {
    attached(
        management,
        ctx.management_reads(),
        ctx.namespace(),
        ctx.name(),
    )
    .await
    .doing(format_args!("listing {}s", K::kind(&())))
}

/// Deletes the pass's Cinder's projection Secrets of kind `K` that neither `projected` names nor
/// a Deployment of the Cinder still mounts (the pods of a rollout in progress mount the previous
/// ones).
pub(crate) async fn sweep_projections<K: Projected>(
    client: &Client,
    ctx: &StepContext,
    projected: &[ProjectedBackend],
) -> Result<Vec<String>, kube::Error> {
    let (client, reads) = (&ctx.children(client), ctx.children_reads());
    let (namespace, cinder) = (ctx.namespace(), ctx.name());
    let mut keep: Vec<String> = projected.iter().map(|p| p.secret_name.clone()).collect();
    keep.extend(mounts(client, reads, namespace, cinder).await?.secrets);
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let sel = selector(cinder, &[(PROJECTION_LABEL, K::PROJECTION)]);
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

/// A satellite kind the pipeline projects into Secrets: which projection it is and how one of
/// its objects renders.
pub(crate) trait Projected:
    Satellite
    + Resource<Scope = NamespaceResourceScope, DynamicType = ()>
    + Clone
    + DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    /// [`PROJECTION_VOLUME`] or [`PROJECTION_BACKUP`].
    const PROJECTION: &'static str;
    /// The projection of this satellite of Cinder `cinder` (`key`: its cephx key, for RBD).
    fn render(&self, cinder: &str, key: Option<&str>) -> Result<Projection, ProjectionError>;
}

impl Projected for CinderBackend {
    const PROJECTION: &'static str = PROJECTION_VOLUME;
    fn render(&self, cinder: &str, key: Option<&str>) -> Result<Projection, ProjectionError> {
        project_backend(cinder, &self.name_any(), &self.spec, key)
    }
}

impl Projected for CinderBackupBackend {
    const PROJECTION: &'static str = PROJECTION_BACKUP;
    fn render(&self, cinder: &str, key: Option<&str>) -> Result<Projection, ProjectionError> {
        project_backup_backend(cinder, &self.name_any(), &self.spec, key)
    }
}

/// The projection Secret of the attached satellite `b` of `cinder` (`key`: its cephx key, for
/// RBD) and the summary later steps use, marked deleting while `b` is.
pub(crate) fn projection_of<K: Projected>(
    cinder: &Cinder,
    b: &K,
    key: Option<&str>,
) -> Result<(Secret, ProjectedBackend), ProjectionError> {
    let cinder_name = cinder.metadata.name.as_deref().unwrap_or_default();
    let bname = b.name_any();
    let projection = b.render(cinder_name, key)?;
    let labels = [
        (names::LABEL_BACKEND, bname.as_str()),
        (PROJECTION_LABEL, K::PROJECTION),
    ];
    let desired = secret(
        cinder,
        &projection.secret_name,
        &labels,
        projection.data.into_bytes(),
        true,
    );
    let mut summary = projection.summary;
    summary.deleting = b.meta().deletion_timestamp.is_some();
    Ok((desired, summary))
}

/// Projects the attached satellite `b` of the pass's Cinder into its Secret: `Ok(Ok(summary))`,
/// `Ok(Err(why it waits))` (an invalid spec, missing credentials, a refused render), or an API
/// error.
pub(crate) async fn project<K: Projected>(
    management: &Client,
    ctx: &StepContext,
    b: &K,
) -> Result<Result<ProjectedBackend, String>, kube::Error> {
    let satellite = b.satellite();
    if let Err(e) = validate_satellite(satellite) {
        return Ok(Err(e.to_string()));
    }
    let key = match credentials_for(
        management,
        ctx.management_reads(),
        ctx.namespace(),
        satellite.backend_type,
        satellite.rbd.as_ref(),
    )
    .await?
    {
        Ok(k) => k,
        Err(why) => return Ok(Err(why)),
    };
    let (desired, summary) = match projection_of(&ctx.cinder, b, key.as_ref().map(|k| k.expose())) {
        Ok(p) => p,
        Err(e) => return Ok(Err(e.to_string())),
    };
    ensure_secret(&ctx.children(management), ctx.children_reads(), desired).await?;
    Ok(Ok(summary))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    const NFS: &str = "{cinderRef: {name: c}, type: NFS, nfs: {server: 10.0.0.5, path: /export}}";
    const RBD: &str = "{cinderRef: {name: c}, type: RBD, rbd: {pool: volumes, user: cinder, \
                       monitors: ['10.1.0.1:6789'], keySecretRef: {name: ceph-key}}}";

    fn spec<S: DeserializeOwned>(yaml: &str) -> S {
        serde_norway::from_str(yaml).expect("a satellite spec")
    }

    /// The projection of `b` is its own Secret: named `{prefix}{hash}` like the artefact says,
    /// labelled with the backend and `K`'s projection, immutable, owned by the Cinder, holding
    /// what the render produced.
    fn assert_projected<K: Projected>(b: &K, prefix: &str) {
        let c = crate::test_fixtures::cinder();
        let (secret, summary) = projection_of(&c, b, None).unwrap();
        let name = secret.metadata.name.clone().unwrap();
        assert!(name.starts_with(prefix), "{name}");
        assert_eq!(summary.secret_name, name, "the artefact names the Secret");
        assert_eq!(summary.name, b.name_any());
        assert!(!summary.deleting);
        assert_eq!(secret.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(secret.metadata.owner_references.unwrap()[0].uid, "u");
        let labels = secret.metadata.labels.unwrap();
        assert_eq!(labels[names::LABEL_BACKEND], b.name_any());
        assert_eq!(labels[PROJECTION_LABEL], K::PROJECTION);
        assert_eq!(secret.immutable, Some(true));
        let rendered = b.render("c", None).unwrap().data.into_bytes();
        let data = secret.data.unwrap();
        assert_eq!(data.len(), rendered.len());
        for (k, v) in rendered {
            assert_eq!(data[&k].0, v, "{k}");
        }
    }

    #[test]
    fn each_kind_is_projected_into_its_own_labelled_immutable_secret() {
        assert_projected(&CinderBackend::new("nfs1", spec(NFS)), "c-backend-nfs1-");
        assert_projected(
            &CinderBackupBackend::new("nfs-b", spec(NFS)),
            "c-backup-backend-",
        );
    }

    #[test]
    fn a_satellite_being_deleted_is_handed_on_as_deleting() {
        let mut b = CinderBackupBackend::new("nfs-b", spec(NFS));
        b.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        let (_, summary) = projection_of(&crate::test_fixtures::cinder(), &b, None).unwrap();
        assert!(summary.deleting);
    }

    #[test]
    fn an_rbd_satellite_is_projected_only_with_a_usable_key() {
        let c = crate::test_fixtures::cinder();
        let b = CinderBackend::new("ceph1", spec(RBD));
        for unusable in [None, Some("  ")] {
            let err = projection_of(&c, &b, unusable).unwrap_err();
            assert_eq!(err, ProjectionError::BadKey);
        }
        let (secret, summary) = projection_of(&c, &b, Some("AQBk==")).unwrap();
        assert!(summary.secret_name.starts_with("c-backend-ceph1-"));
        assert_eq!(summary.rbd_monitors, ["10.1.0.1:6789"]);
        let keyring = &secret.data.unwrap()["keyring"].0;
        assert!(String::from_utf8_lossy(keyring).contains("key = AQBk=="));
    }

    #[test]
    fn the_key_never_shows_in_debug() {
        assert_eq!(format!("{:?}", CephKey("secret".into())), "CephKey(..)");
        assert_eq!(CephKey("k".into()).expose(), "k");
    }
}
