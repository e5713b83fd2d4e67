//! The CinderBackupBackend satellite: its kind-specific parts (no finalizer, backup projection)
//! for the shared reconcile.

use super::kind::SatelliteKind;
use crate::crd::validation::validate_backup_backend;
use crate::crd::{BackendType, CinderBackupBackend, NfsSpec, RbdSpec, SatelliteStatus};
use crate::steps::projection::PROJECTION_BACKUP;

impl SatelliteKind for CinderBackupBackend {
    const KIND: &'static str = "CinderBackupBackend";
    const PROJECTION: &'static str = PROJECTION_BACKUP;
    const FINALIZER: Option<&'static str> = None;

    fn parent(&self) -> &str {
        &self.spec.cinder_ref.name
    }
    fn backend_type(&self) -> BackendType {
        self.spec.backend_type
    }
    fn nfs(&self) -> Option<&NfsSpec> {
        self.spec.nfs.as_ref()
    }
    fn rbd(&self) -> Option<&RbdSpec> {
        self.spec.rbd.as_ref()
    }
    fn status(&self) -> Option<&SatelliteStatus> {
        self.status.as_ref()
    }
    fn validate(&self) -> Result<(), String> {
        validate_backup_backend(&self.spec).map_err(|e| format!("spec: {e}"))
    }
}
