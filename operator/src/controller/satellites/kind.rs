//! What differs between the two satellite kinds, behind one trait the shared reconcile uses.

use crate::crd::{BackendType, NfsSpec, RbdSpec, SatelliteStatus};
use kube::Resource;
use serde::de::DeserializeOwned;

/// A CinderBackend or a CinderBackupBackend.
pub trait SatelliteKind:
    Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
    + Clone
    + std::fmt::Debug
    + DeserializeOwned
    + serde::Serialize
    + Send
    + Sync
    + 'static
{
    /// The kind name (backend-actor ids, messages).
    const KIND: &'static str;
    /// The [`crate::steps::projection::PROJECTION_LABEL`] value of its projection Secrets.
    const PROJECTION: &'static str;
    /// The finalizer the satellite controller adds, if any.
    const FINALIZER: Option<&'static str>;

    fn parent(&self) -> &str;
    fn backend_type(&self) -> BackendType;
    fn nfs(&self) -> Option<&NfsSpec>;
    fn rbd(&self) -> Option<&RbdSpec>;
    fn status(&self) -> Option<&SatelliteStatus>;
    /// The spec check the schema states (CEL-only rules included); the message names the field.
    fn validate(&self) -> Result<(), String>;
}
