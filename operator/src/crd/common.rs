//! Field types the three CRDs share: references to Secrets, stores, clusters and the parent
//! Cinder, and the NFS / RBD storage blocks of the satellites.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A reference to a Secret in the CR's namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretRef {
    /// The Secret's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The key inside the Secret; each consumer documents its default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// A reference to a named object (cluster, parent Cinder, target cluster).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamedRef {
    /// The object's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// A reference to an object that may live in another namespace (a MariaDB or RabbitMQ cluster).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRef {
    /// The cluster object's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Defaults to the CR's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// The kinds of external-secrets store a Cinder can select.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum SecretStoreKind {
    SecretStore,
    #[default]
    ClusterSecretStore,
}

impl SecretStoreKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SecretStoreKind::SecretStore => "SecretStore",
            SecretStoreKind::ClusterSecretStore => "ClusterSecretStore",
        }
    }
}

/// The external-secrets store the credential Secrets are synced from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretStoreRef {
    /// `SecretStore` (in the Cinder's namespace) or `ClusterSecretStore` (the default).
    #[serde(default)]
    pub kind: SecretStoreKind,
    /// The store's name (`openbao-cluster-store` when unset).
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// The store every Cinder uses unless it says otherwise.
pub const DEFAULT_SECRET_STORE_NAME: &str = "openbao-cluster-store";

impl Default for SecretStoreRef {
    fn default() -> Self {
        SecretStoreRef {
            kind: SecretStoreKind::ClusterSecretStore,
            name: DEFAULT_SECRET_STORE_NAME.to_string(),
        }
    }
}

/// The storage protocol of a satellite. Immutable once set.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum BackendType {
    #[serde(rename = "NFS")]
    Nfs,
    #[serde(rename = "RBD")]
    Rbd,
}

impl BackendType {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendType::Nfs => "NFS",
            BackendType::Rbd => "RBD",
        }
    }
}

/// An NFS export.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NfsSpec {
    /// Host name or IP address of the NFS server.
    #[schemars(length(min = 1, max = 253))]
    pub server: String,
    /// Absolute export path on the server.
    #[schemars(regex(pattern = r"^/"), length(min = 1, max = 4096))]
    pub path: String,
    /// Mount options passed to the NFS client (e.g. `vers=4.1`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mount_options: Vec<String>,
}

fn default_ceph_cluster_name() -> String {
    "ceph".to_string()
}

/// A Ceph RBD pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RbdSpec {
    /// The RBD pool volumes (or backups) are stored in.
    #[schemars(length(min = 1, max = 253))]
    pub pool: String,
    /// The cephx user (without the `client.` prefix).
    #[schemars(length(min = 1, max = 253))]
    pub user: String,
    /// Monitor addresses (`host:port` or `host`).
    #[schemars(length(min = 1))]
    pub monitors: Vec<String>,
    /// CIDRs of the Ceph public network(s), opened by the NetworkPolicy egress rule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<String>,
    /// The Ceph cluster name, which names the `<cluster>.conf` and keyring files (`ceph` when
    /// unset).
    #[serde(default = "default_ceph_cluster_name")]
    #[schemars(length(min = 1, max = 63))]
    pub cluster_name: String,
    /// The Secret holding the cephx key (key `key` unless `keySecretRef.key` says otherwise).
    pub key_secret_ref: SecretRef,
    /// The libvirt secret UUID the compute side uses for this pool.
    #[serde(
        default,
        rename = "secretUUID",
        skip_serializing_if = "Option::is_none"
    )]
    pub secret_uuid: Option<String>,
}

impl Default for RbdSpec {
    fn default() -> Self {
        RbdSpec {
            pool: String::new(),
            user: String::new(),
            monitors: Vec::new(),
            networks: Vec::new(),
            cluster_name: default_ceph_cluster_name(),
            key_secret_ref: SecretRef::default(),
            secret_uuid: None,
        }
    }
}

/// Free-form driver options appended to a backend's section (key → value).
pub type ExtraOptions = BTreeMap<String, String>;
