//! What the volume backends attached to a Cinder contribute to its workloads: the attached
//! CinderBackends by name, and the volumes of one backend (its projection Secret with the RBD
//! keyring, or its NFS export).

use super::pod::ExtraVolume;
use crate::crd::CinderBackend;
use crate::kube_ext::reader::ClusterStores;
use kube::{Client, ResourceExt};
use std::collections::BTreeMap;

/// The CinderBackends of Cinder `cinder` in `namespace`, by name (including those being deleted).
pub async fn attached_backends(
    client: &Client,
    reads: &ClusterStores,
    namespace: &str,
    cinder: &str,
) -> Result<BTreeMap<String, CinderBackend>, kube::Error> {
    Ok(
        crate::children::projection::attached::<CinderBackend>(client, reads, namespace, cinder)
            .await?
            .into_iter()
            .map(|b| (b.name_any(), b))
            .collect(),
    )
}

/// The volumes every volume backend contributes to a workload (its NFS export, or its RBD
/// projection Secret with the keyring), named after the backend.
pub(crate) fn backend_volumes(
    backend: &crate::pipeline::ProjectedBackend,
    spec: Option<&CinderBackend>,
) -> Vec<ExtraVolume> {
    let mut out = vec![ExtraVolume::secret(
        &format!("backend-{}", backend.name),
        &backend.secret_name,
        crate::planning::backend_projection::backend_mount_dir(&backend.name),
    )];
    if let Some(nfs) = spec.and_then(|b| b.spec.satellite.nfs.as_ref())
        && backend.backend_type == Some(crate::crd::BackendType::Nfs)
    {
        out.push(ExtraVolume::nfs(
            &format!("nfs-{}", backend.name),
            &backend.name,
            nfs,
        ));
    }
    out
}
