//! The `CinderBackupBackend` custom resource: the backup target (NFS export or Ceph RBD pool)
//! of a parent Cinder. At most one may be attached to a Cinder.

use super::backend::SatelliteStatus;
use super::common::{BackendType, ExtraOptions, NamedRef, NfsSpec, RbdSpec};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The backup target of a Cinder. Exactly the block matching `type` is set.
// clippy reads the repeated `type_ = "string"` of the printer columns as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cinder.openstack.c5c3.io",
    version = "v1alpha1",
    kind = "CinderBackupBackend",
    plural = "cinderbackupbackends",
    shortname = "cdrbb",
    namespaced,
    status = "SatelliteStatus",
    derive = "PartialEq",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
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
pub struct CinderBackupBackendSpec {
    /// The parent Cinder (same namespace). Immutable.
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "cinderRef is immutable"}]))]
    pub cinder_ref: NamedRef,
    /// The storage protocol. Immutable.
    #[serde(rename = "type")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "type is immutable"}]))]
    pub backend_type: BackendType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nfs: Option<NfsSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rbd: Option<RbdSpec>,
    /// Extra driver options for the backup section of cinder.conf.
    #[serde(default, skip_serializing_if = "ExtraOptions::is_empty")]
    pub extra_options: ExtraOptions,
    /// Size in bytes of one backup chunk (`backup_file_size` for NFS, `backup_ceph_chunk_size` for RBD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1048576))]
    pub file_size: Option<i64>,
    /// Compression of backup data (`backup_compression_algorithm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<BackupCompression>,
}

/// `backup_compression_algorithm` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BackupCompression {
    None,
    Zlib,
    Bz2,
    Zstd,
}

impl BackupCompression {
    pub fn as_str(self) -> &'static str {
        match self {
            BackupCompression::None => "none",
            BackupCompression::Zlib => "zlib",
            BackupCompression::Bz2 => "bz2",
            BackupCompression::Zstd => "zstd",
        }
    }
}
