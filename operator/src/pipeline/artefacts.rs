//! The artefacts a pass hands from step to step: digests for the pod-template annotations, the
//! broker port, the projected backends, the config map name. Values, never secrets: only
//! digests and object names travel here.

pub use crate::planning::backend_projection::ProjectedBackend;

/// Everything earlier steps produced for later ones in one pass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Artefacts {
    /// sha256 hex of the service-user password (`cinder.c5c3.io/authtoken-hash`).
    pub authtoken_hash: Option<String>,
    /// sha256 hex of the pymysql DSN (`cinder.c5c3.io/db-connection-hash`).
    pub db_connection_hash: Option<String>,
    /// sha256 hex of the transport URL (`cinder.c5c3.io/transport-url-hash`).
    pub transport_url_hash: Option<String>,
    /// The RabbitMQ port the NetworkPolicy opens.
    pub broker_port: Option<u16>,
    /// The projected volume backends, in name order.
    pub backends: Vec<ProjectedBackend>,
    /// The attached volume backends not projected this pass (waiting, invalid), from their
    /// specs: their running volume services keep their egress and their VPAs.
    pub held_backends: Vec<ProjectedBackend>,
    /// The projected backup target, if any.
    pub backup_backend: Option<ProjectedBackend>,
    /// The attached backup target(s) not projected this pass (waiting for credentials, invalid,
    /// or more than one): the running backup service is kept as it is meanwhile.
    pub backup_backend_held: Vec<String>,
    /// The content-addressed config ConfigMap the workloads mount.
    pub config_map_name: Option<String>,
}
