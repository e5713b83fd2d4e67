//! The CinderBackend satellite: its kind-specific parts (finalizer
//! `cinder.openstack.c5c3.io/service-remove`, volume projection) for the shared reconcile.

use super::kind::SatelliteKind;
use crate::crd::validation::validate_backend;
use crate::crd::{BackendType, CinderBackend, NfsSpec, RbdSpec, SatelliteStatus};
use crate::names::SERVICE_REMOVE_FINALIZER;
use crate::steps::projection::PROJECTION_VOLUME;

impl SatelliteKind for CinderBackend {
    const KIND: &'static str = "CinderBackend";
    const PROJECTION: &'static str = PROJECTION_VOLUME;
    const FINALIZER: Option<&'static str> = Some(SERVICE_REMOVE_FINALIZER);

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
        validate_backend(&self.spec).map_err(|e| format!("spec: {e}"))
    }
}
