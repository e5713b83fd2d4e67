//! The external kinds the operator reads or writes without typed bindings.

use kube::api::ApiResource;
use kube::core::GroupVersionKind;

/// The external-secrets SecretStore.
pub(crate) fn secret_store_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("external-secrets.io", "v1", "SecretStore"),
        "secretstores",
    )
}

/// The external-secrets ClusterSecretStore.
pub(crate) fn cluster_secret_store_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("external-secrets.io", "v1", "ClusterSecretStore"),
        "clustersecretstores",
    )
}

/// The mariadb-operator MariaDB.
pub(crate) fn mariadb_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("k8s.mariadb.com", "v1alpha1", "MariaDB"),
        "mariadbs",
    )
}
