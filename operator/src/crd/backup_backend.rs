//! The `CinderBackupBackend` custom resource: the backup target (NFS export or Ceph RBD pool)
//! of a parent Cinder. At most one may be attached to a Cinder.

use super::common::ExtraOptions;
use super::satellite::{Satellite, SatelliteSpec, satellite_resource};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

satellite_resource! {
    /// The backup target of a Cinder. Exactly the block matching `type` is set.
    kind = "CinderBackupBackend", plural = "cinderbackupbackends", shortname = "cdrbb",
    pub struct CinderBackupBackendSpec {
        #[serde(flatten)]
        pub satellite: SatelliteSpec,
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
}

impl Satellite for CinderBackupBackend {
    fn satellite(&self) -> &SatelliteSpec {
        &self.spec.satellite
    }
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
