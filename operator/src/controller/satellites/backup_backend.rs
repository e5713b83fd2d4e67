//! The CinderBackupBackend satellite: its kind-specific parts (no finalizer, backup projection)
//! for the shared reconcile.

use super::kind::SatelliteKind;
use crate::children::projection::PROJECTION_BACKUP;
use crate::controller::index::SatelliteSide;
use crate::crd::{CinderBackupBackend, SatelliteStatus};

impl SatelliteKind for CinderBackupBackend {
    const SIDE: SatelliteSide = SatelliteSide::BackupBackend;
    const KIND: &'static str = "CinderBackupBackend";
    const PROJECTION: &'static str = PROJECTION_BACKUP;
    const FINALIZER: Option<&'static str> = None;

    fn status(&self) -> Option<&SatelliteStatus> {
        self.status.as_ref()
    }
}
