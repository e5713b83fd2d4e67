//! The artefacts a pass hands from step to step: digests for the pod-template annotations, the
//! broker port, the projected backends, the config map name. Values, never secrets: only
//! digests and object names travel here.

use crate::crd::BackendType;

/// One backend (or the backup target) projected into a content-hashed Secret.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProjectedBackend {
    /// The CinderBackend / CinderBackupBackend name.
    pub name: String,
    pub backend_type: Option<BackendType>,
    /// The content-hashed projection Secret the workloads mount.
    pub secret_name: String,
    /// sha256 of the projected content (rolls the workloads that mount it).
    pub content_hash: String,
    /// NFS: `server` of the export (for the NetworkPolicy rule).
    pub nfs_server: Option<String>,
    /// RBD: the networks the backend names (for the NetworkPolicy rule).
    pub rbd_networks: Vec<String>,
    /// True while the CinderBackend is being deleted (detach in progress).
    pub deleting: bool,
}

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
    /// The projected backup target, if any.
    pub backup_backend: Option<ProjectedBackend>,
    /// The content-addressed config ConfigMap the workloads mount.
    pub config_map_name: Option<String>,
}
