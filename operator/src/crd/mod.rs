//! The three custom resources (group `cinder.openstack.c5c3.io`, version `v1alpha1`): their Rust
//! types, the generated CRDs with the rules the derive cannot express, and the validation the
//! operator applies itself as a second line.

pub mod backend;
pub mod backup_backend;
pub mod cinder;
pub mod common;
pub(crate) mod resource;
pub mod satellite;
pub mod schema_rules;
pub mod validation;

pub use backend::{CinderBackend, CinderBackendSpec};
pub use backup_backend::{BackupCompression, CinderBackupBackend, CinderBackupBackendSpec};
pub use cinder::{Cinder, CinderSpec, CinderStatus, UpgradePhase, VolumeServiceStatus};
pub use common::{BackendType, NfsSpec, RbdSpec, SecretRef, SecretStoreKind, SecretStoreRef};
pub use satellite::{Satellite, SatelliteSpec, SatelliteStatus};
pub use schema_rules::{cinder_backend_crd, cinder_backup_backend_crd, cinder_crd, crds};

/// The API group of the three kinds.
pub const GROUP: &str = "cinder.openstack.c5c3.io";
/// The served and stored version.
pub const VERSION: &str = "v1alpha1";
