//! The `CinderBackend` custom resource: one volume backend (NFS export or Ceph RBD pool)
//! attached to a parent Cinder, served by its own `{cinder}-volume-{backend}` Deployment.

use super::common::{BackendType, ExtraOptions, NamedRef, NfsSpec, RbdSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A volume backend of a Cinder. Exactly the block matching `type` is set.
// clippy reads the repeated `type_ = "string"` of the printer columns as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cinder.openstack.c5c3.io",
    version = "v1alpha1",
    kind = "CinderBackend",
    plural = "cinderbackends",
    shortname = "cdrbe",
    namespaced,
    status = "SatelliteStatus",
    derive = "PartialEq",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(name = "Type", type_ = "string", json_path = ".spec.type"),
    printcolumn(name = "Cinder", type_ = "string", json_path = ".spec.cinderRef.name"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct CinderBackendSpec {
    /// The parent Cinder (same namespace). Immutable.
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "cinderRef is immutable"}]))]
    pub cinder_ref: NamedRef,
    /// The storage protocol. Immutable.
    #[serde(rename = "type")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "type is immutable"}]))]
    pub backend_type: BackendType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nfs: Option<NfsSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rbd: Option<RbdSpec>,
    /// Extra driver options for this backend's section of cinder.conf.
    #[serde(default, skip_serializing_if = "ExtraOptions::is_empty")]
    pub extra_options: ExtraOptions,
}

/// The status both satellite kinds report: CredentialsReady, ConfigProjected and Ready.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SatelliteStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
