//! What the two satellite kinds (CinderBackend, CinderBackupBackend) have in common: the spec
//! fields naming their parent and their storage, the status they report, and the resource
//! declaration (group, status, printer columns) through [`satellite_resource!`].

use super::common::{BackendType, NamedRef, NfsSpec, RbdSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
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

/// The status both satellite kinds report: CredentialsReady, ConfigProjected and Ready.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SatelliteStatus {
    /// CredentialsReady, ConfigProjected and Ready, one per type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` the conditions describe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Declares the spec of a satellite kind with what both kinds share: group and version, the
/// [`SatelliteStatus`] subresource, the printer columns (Ready, Reason, Type, Cinder, Age), the
/// categories, and the storage-block rules: exactly one block is set (a structural `oneOf`) and
/// it is the one matching `type` (a CEL rule). The kind's name, plural and short name are its own.
macro_rules! satellite_resource {
    (
        $(#[$meta:meta])*
        kind = $kind:tt, plural = $plural:tt, shortname = $shortname:tt,
        pub struct $spec:ident { $($fields:tt)* }
    ) => {
        $(#[$meta])*
        // clippy reads the repeated `type_ = "string"` of the printer columns as duplicated attributes.
        #[allow(clippy::duplicated_attributes)]
        #[derive(
            kube::CustomResource,
            Clone,
            Debug,
            PartialEq,
            serde::Serialize,
            serde::Deserialize,
            kube::KubeSchema,
        )]
        #[kube(
            group = "cinder.openstack.c5c3.io",
            version = "v1alpha1",
            kind = $kind,
            plural = $plural,
            shortname = $shortname,
            category = "openstack",
            category = "cinder",
            namespaced,
            status = "crate::crd::SatelliteStatus",
            derive = "PartialEq",
            printcolumn(
                name = "Ready",
                type_ = "string",
                json_path = ".status.conditions[?(@.type==\"Ready\")].status"
            ),
            printcolumn(
                name = "Reason",
                type_ = "string",
                json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
            ),
            printcolumn(name = "Type", type_ = "string", json_path = ".spec.type"),
            printcolumn(name = "Cinder", type_ = "string", json_path = ".spec.cinderRef.name"),
            printcolumn(
                name = "Age",
                type_ = "date",
                json_path = ".metadata.creationTimestamp"
            )
        )]
        #[serde(rename_all = "camelCase")]
        // Exactly one storage block, structurally; which one `type` asks for only CEL can say
        // (kube's structural transform refuses `oneOf` branches that restate `type`).
        #[schemars(extend("oneOf" = [{"required": ["nfs"]}, {"required": ["rbd"]}]))]
        #[x_kube(validation = Rule::new(
            "self.type == 'NFS' ? (has(self.nfs) && !has(self.rbd)) : (has(self.rbd) && !has(self.nfs))"
        ).message("exactly the block matching type (nfs for NFS, rbd for RBD) must be set"))]
        pub struct $spec { $($fields)* }
    };
}
pub(crate) use satellite_resource;
