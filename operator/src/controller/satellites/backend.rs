//! The CinderBackend satellite: its kind-specific parts (finalizer
//! `cinder.openstack.c5c3.io/service-remove`, volume projection) for the shared reconcile.

use super::kind::SatelliteKind;
use crate::children::projection::PROJECTION_VOLUME;
use crate::controller::index::SatelliteSide;
use crate::crd::{CinderBackend, SatelliteStatus};
use crate::names::SERVICE_REMOVE_FINALIZER;

impl SatelliteKind for CinderBackend {
    const SIDE: SatelliteSide = SatelliteSide::Backend;
    const KIND: &'static str = "CinderBackend";
    const PROJECTION: &'static str = PROJECTION_VOLUME;
    const FINALIZER: Option<&'static str> = Some(SERVICE_REMOVE_FINALIZER);

    fn status(&self) -> Option<&SatelliteStatus> {
        self.status.as_ref()
    }
}
