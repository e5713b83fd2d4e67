//! The `CinderBackend` custom resource: one volume backend (NFS export or Ceph RBD pool)
//! attached to a parent Cinder, served by its own `{cinder}-volume-{backend}` Deployment.

use super::common::ExtraOptions;
use super::satellite::{Satellite, SatelliteSpec, satellite_resource};

satellite_resource! {
    /// A volume backend of a Cinder. Exactly the block matching `type` is set.
    kind = "CinderBackend", plural = "cinderbackends", shortname = "cdrbe",
    pub struct CinderBackendSpec {
        #[serde(flatten)]
        pub satellite: SatelliteSpec,
        /// Extra driver options for this backend's section of cinder.conf.
        #[serde(default, skip_serializing_if = "ExtraOptions::is_empty")]
        pub extra_options: ExtraOptions,
    }
}

impl Satellite for CinderBackend {
    fn satellite(&self) -> &SatelliteSpec {
        &self.spec.satellite
    }
}
