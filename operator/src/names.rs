//! Object names, labels, annotations and finalizers of the product, in one place. Every child the
//! operator creates is named here, so the 43-character Cinder name limit keeps all of them within
//! the 63-character label / DNS-label bound.

/// The longest Cinder name: `{name}-volume-{backend}` and friends must stay valid object names.
pub(crate) const MAX_CINDER_NAME_LEN: usize = 43;

/// Finalizer of a Cinder: deletes the MariaDB Database/User/Grant before the owner chain goes.
pub const CINDER_FINALIZER: &str = "cinder.openstack.c5c3.io/finalizer";
/// Finalizer of a CinderBackend: released after `cinder-manage service remove` ran.
pub const SERVICE_REMOVE_FINALIZER: &str = "cinder.openstack.c5c3.io/service-remove";

/// Pod-template annotation: digest of the service-user password.
pub(crate) const AUTHTOKEN_HASH_ANNOTATION: &str = "cinder.c5c3.io/authtoken-hash";
/// Pod-template annotation: digest of the pymysql DSN.
pub(crate) const DB_CONNECTION_HASH_ANNOTATION: &str = "cinder.c5c3.io/db-connection-hash";
/// Pod-template annotation: digest of the rabbit:// transport URL.
pub(crate) const TRANSPORT_URL_HASH_ANNOTATION: &str = "cinder.c5c3.io/transport-url-hash";
/// Pod-template annotation of scheduler / volume / backup: the installed release (rolls them once
/// more after contract, dropping the cached RPC version pin).
pub const INSTALLED_RELEASE_ANNOTATION: &str = "cinder.c5c3.io/installed-release";

/// `app.kubernetes.io/name` value of every child.
pub(crate) const APP_NAME: &str = "cinder";
/// `app.kubernetes.io/managed-by` value of every child.
pub const MANAGED_BY: &str = "cinder-operator";
pub(crate) const LABEL_NAME: &str = "app.kubernetes.io/name";
pub const LABEL_INSTANCE: &str = "app.kubernetes.io/instance";
pub const LABEL_COMPONENT: &str = "app.kubernetes.io/component";
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Set by the operator on a credential Secret a spec names (`true`), so that its Secret watch,
/// which otherwise selects the operator's own Secrets only, sees the Secret change.
pub(crate) const LABEL_CREDENTIAL: &str = "cinder.openstack.c5c3.io/credential";
/// The parent Cinder of a child (the ownership label used on target clusters).
pub(crate) const LABEL_CINDER: &str = "cinder.openstack.c5c3.io/cinder";
/// The backend a projection Secret / volume Deployment belongs to.
pub const LABEL_BACKEND: &str = "cinder.openstack.c5c3.io/backend";

/// Port of the API Service.
pub(crate) const API_PORT: i32 = 8776;

/// The components of a Cinder, as `app.kubernetes.io/component` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Component {
    Api,
    Scheduler,
    Volume,
    Backup,
    DbSync,
    DbPurge,
    ServiceRemove,
}

impl Component {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Component::Api => "api",
            Component::Scheduler => "scheduler",
            Component::Volume => "volume",
            Component::Backup => "backup",
            Component::DbSync => "db-sync",
            Component::DbPurge => "db-purge",
            Component::ServiceRemove => "service-remove",
        }
    }
}

/// The common labels of every child of Cinder `cinder` (what the DBPurge step lists Jobs by).
pub fn common_labels(cinder: &str) -> std::collections::BTreeMap<String, String> {
    [
        (LABEL_NAME, APP_NAME.to_string()),
        (LABEL_INSTANCE, cinder.to_string()),
        (LABEL_MANAGED_BY, MANAGED_BY.to_string()),
        (LABEL_CINDER, cinder.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// [`common_labels`] plus the component label.
pub(crate) fn component_labels(
    cinder: &str,
    component: Component,
) -> std::collections::BTreeMap<String, String> {
    let mut labels = common_labels(cinder);
    labels.insert(LABEL_COMPONENT.to_string(), component.as_str().to_string());
    labels
}

/// `{name}-db-connection`: the derived Secret holding the pymysql DSN.
pub fn db_connection_secret(cinder: &str) -> String {
    format!("{cinder}-db-connection")
}
/// `{name}-service-user`: the derived Secret holding the service user's password, written where
/// the API pods run (which may be a target cluster the credential Secret never reaches).
pub(crate) fn service_user_secret(cinder: &str) -> String {
    format!("{cinder}-service-user")
}
/// `{name}-transport-url`: the derived Secret holding the rabbit:// URL.
pub fn transport_url_secret(cinder: &str) -> String {
    format!("{cinder}-transport-url")
}
/// `{name}-db-sync`: the steady-state `cinder-manage db sync` Job.
pub fn db_sync_job(cinder: &str) -> String {
    format!("{cinder}-db-sync")
}
/// `{name}-db-expand`: the Expanding phase Job.
pub(crate) fn db_expand_job(cinder: &str) -> String {
    format!("{cinder}-db-expand")
}
/// `{name}-db-migrate`: the Migrating phase Job (`cinder-status upgrade check`).
pub(crate) fn db_migrate_job(cinder: &str) -> String {
    format!("{cinder}-db-migrate")
}
/// `{name}-db-contract`: the Contracting phase Job (online data migrations).
pub(crate) fn db_contract_job(cinder: &str) -> String {
    format!("{cinder}-db-contract")
}
/// `{name}-scheduler`: the scheduler Deployment.
pub fn scheduler_deployment(cinder: &str) -> String {
    format!("{cinder}-scheduler")
}
/// `{name}-volume-{backend}`: one volume Deployment per projected backend.
pub fn volume_deployment(cinder: &str, backend: &str) -> String {
    format!("{cinder}-volume-{backend}")
}
/// `{name}-backup`: the backup Deployment.
pub(crate) fn backup_deployment(cinder: &str) -> String {
    format!("{cinder}-backup")
}
/// `{name}-db-purge`: the purge CronJob.
pub fn db_purge_cronjob(cinder: &str) -> String {
    format!("{cinder}-db-purge")
}
/// `{name}-{backend}-service-remove`: the detach Job.
pub fn service_remove_job(cinder: &str, backend: &str) -> String {
    format!("{cinder}-{backend}-service-remove")
}
/// `{name}-api`: the API Deployment, its Service, PDB, HPA and VPA.
pub fn api_deployment(cinder: &str) -> String {
    format!("{cinder}-api")
}
/// The API Service (same name as the Deployment).
pub fn api_service(cinder: &str) -> String {
    api_deployment(cinder)
}
/// The API PodDisruptionBudget.
pub fn api_pdb(cinder: &str) -> String {
    api_deployment(cinder)
}
/// The HPA of the API Deployment.
pub(crate) fn api_hpa(cinder: &str) -> String {
    api_deployment(cinder)
}
/// The VPA of a Deployment: same name as the Deployment.
pub(crate) fn vpa_for(deployment: &str) -> String {
    deployment.to_string()
}
/// `{name}`: the NetworkPolicy and the HTTPRoute.
pub(crate) fn network_policy(cinder: &str) -> String {
    cinder.to_string()
}
/// The HTTPRoute of the API.
pub(crate) fn http_route(cinder: &str) -> String {
    api_deployment(cinder)
}
/// The cluster-local URL the HealthCheck member probes and status.endpoint reports.
pub(crate) fn api_endpoint(cinder: &str, namespace: &str) -> String {
    format!("http://{}.{namespace}.svc:{API_PORT}", api_service(cinder))
}

/// Length of the content hash suffix of content-addressed names.
const CONTENT_HASH_LEN: usize = 10;

/// `{name}-config-{hash}`: the immutable content-addressed config ConfigMap.
pub(crate) fn config_map(cinder: &str, content_hash: &str) -> String {
    format!("{cinder}-config-{}", short_hash(content_hash))
}
/// The base name of a volume backend's projection Secrets: `{name}-backend-{backend}`.
pub fn backend_secret_base(cinder: &str, backend: &str) -> String {
    format!("{cinder}-backend-{backend}")
}
/// `{base}-{hash}`: one content-hashed projection Secret of a backend or the backup target.
pub(crate) fn projection_secret(base: &str, content_hash: &str) -> String {
    format!("{base}-{}", short_hash(content_hash))
}
/// The base name of the backup target's projection Secrets: `{name}-backup-backend`.
pub(crate) fn backup_backend_secret_base(cinder: &str) -> String {
    format!("{cinder}-backup-backend")
}

fn short_hash(h: &str) -> &str {
    let end = h
        .char_indices()
        .nth(CONTENT_HASH_LEN)
        .map_or(h.len(), |(i, _)| i);
    &h[..end]
}

/// The host identity of a volume service in the registry: `<cinder>@<backend>`.
pub fn volume_service_host(cinder: &str, backend: &str) -> String {
    format!("{cinder}@{backend}")
}

/// Label of a Secret that registers a target cluster: `cinder.openstack.c5c3.io/target-cluster=<name>`
/// in the operator's lease namespace (or the Cinder's namespace), with the kubeconfig under
/// `crate::target_cluster::TARGET_CLUSTER_KUBECONFIG_KEY`.
pub const TARGET_CLUSTER_LABEL: &str = "cinder.openstack.c5c3.io/target-cluster";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_object_names() {
        assert_eq!(db_connection_secret("c"), "c-db-connection");
        assert_eq!(transport_url_secret("c"), "c-transport-url");
        assert_eq!(db_sync_job("c"), "c-db-sync");
        assert_eq!(db_expand_job("c"), "c-db-expand");
        assert_eq!(db_migrate_job("c"), "c-db-migrate");
        assert_eq!(db_contract_job("c"), "c-db-contract");
        assert_eq!(scheduler_deployment("c"), "c-scheduler");
        assert_eq!(volume_deployment("c", "nfs1"), "c-volume-nfs1");
        assert_eq!(backup_deployment("c"), "c-backup");
        assert_eq!(db_purge_cronjob("c"), "c-db-purge");
        assert_eq!(service_remove_job("c", "nfs1"), "c-nfs1-service-remove");
        assert_eq!(volume_service_host("c", "nfs1"), "c@nfs1");
        assert_eq!(api_endpoint("c", "ns"), "http://c-api.ns.svc:8776");
    }

    #[test]
    fn content_addressed_names_use_a_short_prefix_of_the_hash() {
        assert_eq!(config_map("c", "0123456789abcdef"), "c-config-0123456789");
        assert_eq!(
            projection_secret(&backend_secret_base("c", "b"), "abcdef0123456789"),
            "c-backend-b-abcdef0123"
        );
        assert_eq!(config_map("c", "abc"), "c-config-abc");
    }

    #[test]
    fn labels_carry_instance_and_component() {
        let l = component_labels("c", Component::DbPurge);
        assert_eq!(l[LABEL_INSTANCE], "c");
        assert_eq!(l[LABEL_COMPONENT], "db-purge");
        assert_eq!(l[LABEL_MANAGED_BY], "cinder-operator");
    }
}
