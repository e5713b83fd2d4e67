//! What the declarations of the three kinds share, through [`cinder_resource!`]: the derives, the
//! group and version, the categories, the status subresource, and the printer columns that open
//! (Ready, Reason) and close (Age) every kind's `kubectl get`; and through
//! [`status_with_conditions!`], what every status carries: its conditions and the generation they
//! describe.

/// Declares the spec of a kind with what all three kinds share: the `CustomResource` and schema
/// derives, group `cinder.openstack.c5c3.io` and version `v1alpha1`, namespaced, the categories
/// `openstack` and `cinder`, its `status` type, and the printer columns Ready and Reason first and
/// Age last. `kube(...)` holds the kind's own `#[kube]` entries (its rules and the columns
/// between Reason and Age); the attributes after it go on the spec struct.
macro_rules! cinder_resource {
    (
        $(#[doc = $doc:expr])*
        kind = $kind:tt, plural = $plural:tt, shortname = $shortname:tt, status = $status:tt,
        kube($($own:tt)*)
        $(#[$attr:meta])*
        pub struct $spec:ident { $($fields:tt)* }
    ) => {
        $(#[doc = $doc])*
        // clippy reads the repeated `type_ = "string"` of the printer columns as duplicated attributes.
        #[allow(clippy::duplicated_attributes)]
        #[derive(
            kube::CustomResource,
            Clone,
            Debug,
            PartialEq,
            serde::Serialize,
            serde::Deserialize,
            kube::KubeSchema,
        )]
        #[kube(
            group = "cinder.openstack.c5c3.io",
            version = "v1alpha1",
            kind = $kind,
            plural = $plural,
            shortname = $shortname,
            category = "openstack",
            category = "cinder",
            namespaced,
            status = $status,
            derive = "PartialEq",
            printcolumn(
                name = "Ready",
                type_ = "string",
                json_path = ".status.conditions[?(@.type==\"Ready\")].status"
            ),
            printcolumn(
                name = "Reason",
                type_ = "string",
                json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
            ),
            $($own)*
            printcolumn(
                name = "Age",
                type_ = "date",
                json_path = ".metadata.creationTimestamp"
            )
        )]
        #[serde(rename_all = "camelCase")]
        $(#[$attr])*
        pub struct $spec { $($fields)* }
    };
}
pub(crate) use cinder_resource;

/// Declares a kind's status with what every status carries, ahead of the kind's own fields: its
/// `conditions` (documented by the doc comment above the `conditions,` marker; one per type,
/// merged by type) and `observedGeneration`, the `metadata.generation` they describe.
macro_rules! status_with_conditions {
    (
        $(#[doc = $doc:expr])*
        pub struct $status:ident {
            $(#[doc = $conditions:expr])*
            conditions,
            $($fields:tt)*
        }
    ) => {
        $(#[doc = $doc])*
        #[derive(
            Clone,
            Debug,
            Default,
            PartialEq,
            serde::Serialize,
            serde::Deserialize,
            kube::KubeSchema,
        )]
        #[serde(rename_all = "camelCase")]
        pub struct $status {
            $(#[doc = $conditions])*
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
            pub conditions: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
            /// The `metadata.generation` the conditions describe.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub observed_generation: Option<i64>,
            $($fields)*
        }
    };
}
pub(crate) use status_with_conditions;
