//! What the two satellite kinds (CinderBackend, CinderBackupBackend) have in common: the spec
//! fields naming their parent and their storage, the status they report, and the resource
//! declaration (status, printer columns, storage-block rules) through [`satellite_resource!`].

use super::common::{BackendType, NamedRef, NfsSpec, RbdSpec};
use super::resource::status_with_conditions;
use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// The spec fields both satellite kinds carry (flattened into each spec): the parent Cinder and
/// the storage block matching `type`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SatelliteSpec {
    /// The parent Cinder (same namespace). Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message("cinderRef is immutable"))]
    pub cinder_ref: NamedRef,
    /// The storage protocol. Immutable.
    #[serde(rename = "type")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("type is immutable"))]
    pub backend_type: BackendType,
    /// The NFS export (with `type: NFS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nfs: Option<NfsSpec>,
    /// The Ceph RBD pool (with `type: RBD`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rbd: Option<RbdSpec>,
}

/// A satellite kind: the spec fields it shares with the other kind.
pub trait Satellite {
    fn satellite(&self) -> &SatelliteSpec;
}

status_with_conditions! {
    /// The status both satellite kinds report: CredentialsReady, ConfigProjected and Ready.
    pub struct SatelliteStatus {
        /// CredentialsReady, ConfigProjected and Ready, one per type.
        conditions,
    }
}

/// Declares the spec of a satellite kind through [`cinder_resource!`], with what both satellite
/// kinds share: the [`SatelliteStatus`] subresource, the printer columns Type and Cinder, and the
/// storage-block rules: exactly one block is set (a structural `oneOf`) and it is the one
/// matching `type` (a CEL rule). The kind's name, plural and short name are its own.
macro_rules! satellite_resource {
    (
        $(#[doc = $doc:expr])*
        kind = $kind:tt, plural = $plural:tt, shortname = $shortname:tt,
        pub struct $spec:ident { $($fields:tt)* }
    ) => {
        $crate::crd::resource::cinder_resource! {
            $(#[doc = $doc])*
            kind = $kind, plural = $plural, shortname = $shortname,
            status = "crate::crd::SatelliteStatus",
            kube(
                printcolumn(name = "Type", type_ = "string", json_path = ".spec.type"),
                printcolumn(name = "Cinder", type_ = "string", json_path = ".spec.cinderRef.name"),
            )
            // Exactly one storage block, structurally; which one `type` asks for only CEL can say
            // (kube's structural transform refuses `oneOf` branches that restate `type`).
            #[schemars(extend("oneOf" = [{"required": ["nfs"]}, {"required": ["rbd"]}]))]
            #[x_kube(validation = Rule::new(
                "self.type == 'NFS' ? (has(self.nfs) && !has(self.rbd)) : (has(self.rbd) && !has(self.nfs))"
            ).message("exactly the block matching type (nfs for NFS, rbd for RBD) must be set"))]
            pub struct $spec { $($fields)* }
        }
    };
}
pub(crate) use satellite_resource;
