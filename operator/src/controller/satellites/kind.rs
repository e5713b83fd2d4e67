//! What differs between the two satellite kinds, behind one trait the shared reconcile uses.

use crate::controller::index::SatelliteSide;
use crate::crd::validation::validate_satellite;
use crate::crd::{BackendType, RbdSpec, Satellite, SatelliteStatus};
use kube::Resource;
use serde::de::DeserializeOwned;

/// A CinderBackend or a CinderBackupBackend.
pub(crate) trait SatelliteKind:
    Satellite
    + Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
    + Clone
    + std::fmt::Debug
    + DeserializeOwned
    + serde::Serialize
    + Send
    + Sync
    + 'static
{
    /// Its side in the index.
    const SIDE: SatelliteSide;
    /// The kind name (backend-actor ids, messages).
    const KIND: &'static str;
    /// The [`crate::children::projection::PROJECTION_LABEL`] value of its projection Secrets.
    const PROJECTION: &'static str;
    /// The finalizer the satellite controller adds, if any.
    const FINALIZER: Option<&'static str>;

    fn status(&self) -> Option<&SatelliteStatus>;

    /// The parent Cinder's name.
    fn parent(&self) -> &str {
        &self.satellite().cinder_ref.name
    }
    fn backend_type(&self) -> BackendType {
        self.satellite().backend_type
    }
    fn rbd(&self) -> Option<&RbdSpec> {
        self.satellite().rbd.as_ref()
    }
    /// The spec check the schema states (CEL-only rules included); the message names the field.
    fn validate(&self) -> Result<(), String> {
        validate_satellite(self.satellite()).map_err(|e| format!("spec: {e}"))
    }
}
