//! The `Cinder` custom resource: one OpenStack Cinder deployment (API, scheduler, one volume
//! service per backend, backup service, database and purge), and its status.

use super::common::{ClusterRef, NamedRef, SecretRef, SecretStoreRef};
use super::resource::{cinder_resource, status_with_conditions};
use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::api::networking::v1::{NetworkPolicyEgressRule, NetworkPolicyIngressRule};
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

cinder_resource! {
    /// The desired state of a Cinder deployment.
    kind = "Cinder", plural = "cinders", shortname = "cdr", status = "CinderStatus",
    kube(
        // The name limit of `crate::names::MAX_CINDER_NAME_LEN` (a test holds the two
        // together); the cause names the field rather than the object's root.
        validation = Rule::new("self.metadata.name.size() <= 43")
            .message("metadata.name must be at most 43 characters")
            .field_path(".metadata.name"),
        // The Secret the operator writes beside the workloads (`crate::names::service_user_secret`)
        // cannot be the credential Secret it reads on the same cluster.
        validation = Rule::new(
            "has(self.spec.targetClusterRef) || self.spec.serviceUser.secretRef.name != self.metadata.name + '-service-user'"
        )
            .message("spec.serviceUser.secretRef.name must not name <name>-service-user, the Secret the operator writes for this Cinder")
            .field_path(".spec.serviceUser.secretRef.name"),
        // Nor can the database and messaging credential Secrets be the ones it derives from them
        // beside the workloads (`crate::names::db_connection_secret`, `transport_url_secret`).
        validation = Rule::new(
            "has(self.spec.targetClusterRef) || !has(self.spec.database.secretRef) || self.spec.database.secretRef.name != self.metadata.name + '-db-connection'"
        )
            .message("spec.database.secretRef.name must not name <name>-db-connection, the Secret the operator writes for this Cinder")
            .field_path(".spec.database.secretRef.name"),
        validation = Rule::new(
            "has(self.spec.targetClusterRef) || !has(self.spec.messaging.secretRef) || self.spec.messaging.secretRef.name != self.metadata.name + '-transport-url'"
        )
            .message("spec.messaging.secretRef.name must not name <name>-transport-url, the Secret the operator writes for this Cinder")
            .field_path(".spec.messaging.secretRef.name"),
        printcolumn(
            name = "Release",
            type_ = "string",
            json_path = ".status.installedRelease"
        ),
        printcolumn(name = "Endpoint", type_ = "string", json_path = ".status.endpoint"),
    )
    pub struct CinderSpec {
        /// The OpenStack release this Cinder runs, `YYYY.1` or `YYYY.2` (e.g. `2026.1`). Bumping it
        /// by one step runs the expand-migrate-contract upgrade.
        #[schemars(regex(pattern = r"^\d{4}\.[12]$"))]
        pub open_stack_release: String,
        /// The Cinder container image every workload and Job runs.
        pub image: ImageSpec,
        /// The MariaDB database Cinder keeps its state in.
        pub database: DatabaseSpec,
        /// The RabbitMQ broker of Cinder's RPC.
        pub messaging: MessagingSpec,
        /// The Keystone service user Cinder authenticates as.
        pub service_user: ServiceUserSpec,
        /// The Keystone endpoint the service user authenticates against (`http(s)://…`).
        #[schemars(regex(pattern = r"^https?://"), length(min = 8, max = 2048))]
        pub keystone_endpoint: String,
        /// The Keystone region of the endpoints Cinder uses and registers (`RegionOne` when unset).
        #[serde(default = "default_region")]
        #[schemars(length(min = 1, max = 255))]
        pub region: String,
        /// The cinder-api Deployment.
        #[serde(default)]
        pub api: ApiSpec,
        /// The cinder-scheduler Deployment.
        #[serde(default)]
        pub scheduler: SchedulerSpec,
        /// Settings shared by the volume services (one Deployment per attached CinderBackend).
        #[serde(default)]
        pub volume: VolumeSpec,
        /// Settings of the backup service (runs when a CinderBackupBackend is attached).
        #[serde(default)]
        pub backup: BackupSpec,
        /// The recurring purge of soft-deleted database rows.
        #[serde(default)]
        pub db_purge: DbPurgeSpec,
        /// Expose the API through a Gateway API HTTPRoute.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub gateway: Option<GatewaySpec>,
        /// Restrict traffic with a NetworkPolicy (egress derived, ingress given here, never empty).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub network_policy: Option<NetworkPolicySpec>,
        /// Let a HorizontalPodAutoscaler own the API replica count.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub autoscaling: Option<AutoscalingSpec>,
        /// VerticalPodAutoscalers for the API, scheduler, volume and backup Deployments. Under an
        /// HPA the API's VPA controls memory only, so the two never act on the same CPU.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub vertical_autoscaling: Option<VerticalAutoscalingSpec>,
        /// Overlay on the rendered cinder.conf: section → key → value. The reserved section `policy`
        /// (rule → check string) renders policy.yaml instead.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        pub extra_config: BTreeMap<String, BTreeMap<String, String>>,
        /// The external-secrets store the credential Secrets come from.
        #[serde(default)]
        pub secret_store_ref: SecretStoreRef,
        /// Project the workloads onto a registered target cluster instead of this one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub target_cluster_ref: Option<NamedRef>,
    }
}

fn default_region() -> String {
    "RegionOne".to_string()
}

/// The container image: a repository and exactly one of `tag` or `digest`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("oneOf" = [{"required": ["tag"]}, {"required": ["digest"]}]))]
#[x_kube(validation = Rule::new("has(self.tag) != has(self.digest)")
    .message("spec.image must set exactly one of tag and digest"))]
pub struct ImageSpec {
    /// The image repository, e.g. `registry.example.com/openstack/cinder`.
    #[schemars(length(min = 1, max = 512))]
    pub repository: String,
    /// A tag naming a release, e.g. `2026.1` or `2026.1-p1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    pub tag: Option<String>,
    /// A content digest, e.g. `sha256:…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-z0-9]+:[a-f0-9]{32,}$"))]
    pub digest: Option<String>,
}

impl ImageSpec {
    /// `repository:tag` or `repository@digest` (digest wins if both were set).
    pub fn reference(&self) -> String {
        match (&self.digest, &self.tag) {
            (Some(d), _) => format!("{}@{}", self.repository, d),
            (None, Some(t)) => format!("{}:{}", self.repository, t),
            (None, None) => self.repository.clone(),
        }
    }
}

fn default_database_name() -> String {
    "cinder".to_string()
}

/// The MariaDB database: a managed cluster (`clusterRef`) or a brownfield `host` + `port`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("oneOf" = [{"required": ["clusterRef"]}, {"required": ["host"]}]))]
#[x_kube(validation = Rule::new("has(self.clusterRef) != has(self.host)")
    .message("spec.database must set exactly one of clusterRef and host"))]
pub struct DatabaseSpec {
    /// A mariadb-operator MariaDB; the operator creates Database, User and Grant in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_ref: Option<ClusterRef>,
    /// A database server the operator does not manage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub host: Option<String>,
    /// Port of `host` (3306 when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,
    /// The schema name.
    #[serde(default = "default_database_name")]
    #[schemars(regex(pattern = r"^[A-Za-z0-9_]{1,64}$"))]
    pub database: String,
    /// Secret with keys `username` and `password`.
    pub secret_ref: SecretRef,
}

/// The RabbitMQ broker: a RabbitmqCluster (`clusterRef`) or a Secret holding the connection.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("oneOf" = [{"required": ["clusterRef"]}, {"required": ["secretRef"]}]))]
#[x_kube(validation = Rule::new("has(self.clusterRef) != has(self.secretRef)")
    .message("spec.messaging must set exactly one of clusterRef and secretRef"))]
pub struct MessagingSpec {
    /// A RabbitmqCluster; its `{name}-default-user` Secret supplies the connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_ref: Option<ClusterRef>,
    /// Secret with keys `username`, `password`, `host` and optionally `port` (5672) and `vhost`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretRef>,
}

fn default_service_username() -> String {
    "cinder".to_string()
}
fn default_project_name() -> String {
    "service".to_string()
}
fn default_domain_name() -> String {
    "Default".to_string()
}

/// The Keystone service user Cinder authenticates as.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceUserSpec {
    /// The Keystone user name (`cinder` when unset).
    #[serde(default = "default_service_username")]
    #[schemars(length(min = 1, max = 255))]
    pub username: String,
    /// The project the user is scoped to (`service` when unset).
    #[serde(default = "default_project_name")]
    #[schemars(length(min = 1, max = 255))]
    pub project_name: String,
    /// The domain of the user (`Default` when unset).
    #[serde(default = "default_domain_name")]
    #[schemars(length(min = 1, max = 255))]
    pub user_domain_name: String,
    /// The domain of the project (`Default` when unset).
    #[serde(default = "default_domain_name")]
    #[schemars(length(min = 1, max = 255))]
    pub project_domain_name: String,
    /// Secret with key `password`.
    pub secret_ref: SecretRef,
}

fn default_api_replicas() -> i32 {
    3
}
fn default_uwsgi_processes() -> i32 {
    2
}
fn default_uwsgi_threads() -> i32 {
    1
}

/// The cinder-api Deployment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiSpec {
    /// The replica count; ignored while `spec.autoscaling` lets an HPA own it.
    #[serde(default = "default_api_replicas")]
    #[schemars(range(min = 0, max = 100))]
    pub replicas: i32,
    /// The uWSGI workers of each API pod.
    #[serde(default)]
    pub uwsgi: UwsgiSpec,
    /// Requests and limits of the cinder-api container (documented defaults when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

impl Default for ApiSpec {
    fn default() -> Self {
        ApiSpec {
            replicas: default_api_replicas(),
            uwsgi: UwsgiSpec::default(),
            resources: None,
        }
    }
}

/// uWSGI workers of each API pod.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UwsgiSpec {
    /// Worker processes per pod (2 when unset); each holds its own database connections.
    #[serde(default = "default_uwsgi_processes")]
    #[schemars(range(min = 1, max = 64))]
    pub processes: i32,
    /// Threads per worker process (1 when unset).
    #[serde(default = "default_uwsgi_threads")]
    #[schemars(range(min = 1, max = 64))]
    pub threads: i32,
}

impl Default for UwsgiSpec {
    fn default() -> Self {
        UwsgiSpec {
            processes: default_uwsgi_processes(),
            threads: default_uwsgi_threads(),
        }
    }
}

fn default_scheduler_replicas() -> i32 {
    1
}

/// The cinder-scheduler Deployment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchedulerSpec {
    /// The replica count (1 when unset).
    #[serde(default = "default_scheduler_replicas")]
    #[schemars(range(min = 0, max = 100))]
    pub replicas: i32,
    /// Requests and limits of the cinder-scheduler container (documented defaults when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

impl Default for SchedulerSpec {
    fn default() -> Self {
        SchedulerSpec {
            replicas: default_scheduler_replicas(),
            resources: None,
        }
    }
}

/// The volume services. Each is a single writer for its backend (one replica per backend).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSpec {
    /// Requests and limits of every cinder-volume container (documented defaults when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

/// The backup service (single writer; the target is the attached CinderBackupBackend).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupSpec {
    /// Requests and limits of the cinder-backup container (documented defaults when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

/// Default retention of soft-deleted rows, in days.
pub const DEFAULT_DB_PURGE_RETENTION_DAYS: i32 = 30;
/// Default schedule of the purge CronJob.
pub const DEFAULT_DB_PURGE_SCHEDULE: &str = "1 0 * * *";

fn default_retention_days() -> i32 {
    DEFAULT_DB_PURGE_RETENTION_DAYS
}
fn default_purge_schedule() -> String {
    DEFAULT_DB_PURGE_SCHEDULE.to_string()
}

/// The recurring `cinder-manage db purge <retentionDays>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DbPurgeSpec {
    /// Rows soft-deleted longer ago than this many days are purged (30 when unset).
    #[serde(default = "default_retention_days")]
    #[schemars(range(min = 1, max = 36500))]
    pub retention_days: i32,
    /// A five-field cron expression.
    #[serde(default = "default_purge_schedule")]
    #[schemars(regex(pattern = r"^(\S+\s+){4}\S+$"))]
    pub schedule: String,
    /// Stop scheduling purges (the CronJob is suspended; a running purge finishes).
    #[serde(default)]
    pub suspend: bool,
}

impl Default for DbPurgeSpec {
    fn default() -> Self {
        DbPurgeSpec {
            retention_days: default_retention_days(),
            schedule: default_purge_schedule(),
            suspend: false,
        }
    }
}

fn default_gateway_path() -> String {
    "/".to_string()
}

/// The Gateway the HTTPRoute attaches to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GatewayParentRef {
    /// The Gateway's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The Gateway's namespace (the Cinder's when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The listener of the Gateway to attach to (every listener when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section_name: Option<String>,
}

/// Expose the API through an HTTPRoute.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GatewaySpec {
    /// The Gateway the HTTPRoute attaches to.
    pub parent_ref: GatewayParentRef,
    /// The host name the route matches; the status endpoint becomes `https://<hostname><path>`.
    #[schemars(length(min = 1, max = 253))]
    pub hostname: String,
    /// The path prefix the route matches (`/` when unset).
    #[serde(default = "default_gateway_path")]
    #[schemars(regex(pattern = r"^/"))]
    pub path: String,
}

/// NetworkPolicy settings: ingress is given (an empty list is refused), egress is derived.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkPolicySpec {
    /// Who may reach the API pods (at least one rule).
    pub ingress: Vec<NetworkPolicyIngressRule>,
    /// Egress allowed beyond what the operator derives (database, broker, Keystone, storage, DNS).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_egress: Vec<NetworkPolicyEgressRule>,
}

fn default_target_cpu() -> i32 {
    80
}

/// A HorizontalPodAutoscaler for the API Deployment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.minReplicas <= self.maxReplicas")
    .message("spec.autoscaling.minReplicas must not exceed maxReplicas"))]
pub struct AutoscalingSpec {
    /// The fewest API replicas the HPA keeps.
    #[schemars(range(min = 1, max = 100))]
    pub min_replicas: i32,
    /// The most API replicas the HPA may set; the database connection cap counts with it.
    #[schemars(range(min = 1, max = 100))]
    pub max_replicas: i32,
    /// The average CPU utilisation (percent of requests) the HPA aims at (80 when unset).
    #[serde(default = "default_target_cpu", rename = "targetCPUUtilization")]
    #[schemars(range(min = 1, max = 100))]
    pub target_cpu_utilization: i32,
}

/// How the VPAs apply their recommendations (the VPA's `updatePolicy.updateMode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum VpaUpdateMode {
    /// Recommend only.
    Off,
    /// Set requests when pods are created.
    Initial,
    /// Evict pods to apply new requests.
    Recreate,
    /// The VPA's choice of the above (the default).
    #[default]
    Auto,
}

impl VpaUpdateMode {
    pub fn as_str(self) -> &'static str {
        match self {
            VpaUpdateMode::Off => "Off",
            VpaUpdateMode::Initial => "Initial",
            VpaUpdateMode::Recreate => "Recreate",
            VpaUpdateMode::Auto => "Auto",
        }
    }
}

/// VerticalPodAutoscalers for the workloads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerticalAutoscalingSpec {
    /// How the VPAs apply their recommendations (`Auto` when unset).
    #[serde(default)]
    pub update_mode: VpaUpdateMode,
}

/// The phases of a release upgrade (status.upgradePhase).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum UpgradePhase {
    Expanding,
    Migrating,
    RollingUpdate,
    Contracting,
}

impl UpgradePhase {
    /// Every phase, in the order an upgrade walks them.
    pub const ALL: [UpgradePhase; 4] = [
        UpgradePhase::Expanding,
        UpgradePhase::Migrating,
        UpgradePhase::RollingUpdate,
        UpgradePhase::Contracting,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            UpgradePhase::Expanding => "Expanding",
            UpgradePhase::Migrating => "Migrating",
            UpgradePhase::RollingUpdate => "RollingUpdate",
            UpgradePhase::Contracting => "Contracting",
        }
    }
}

/// One projected volume service.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeServiceStatus {
    /// The CinderBackend's name.
    pub backend: String,
    /// `<cinder>@<backend>`, the host identity in the service registry.
    pub host: String,
}

status_with_conditions! {
    /// The observed state of a Cinder.
    pub struct CinderStatus {
        /// `Ready` and one condition per pipeline step (SecretsReady, DatabaseReady, …), one per
        /// type.
        conditions,
        /// The URL of the Cinder API (the HTTPRoute's when a gateway is set, else the Service's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub endpoint: Option<String>,
        /// The release whose schema and services are fully rolled out.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub installed_release: Option<String>,
        /// The release an upgrade in progress moves to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub target_release: Option<String>,
        /// The phase of the upgrade in progress: Expanding, Migrating, RollingUpdate, Contracting.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub upgrade_phase: Option<UpgradePhase>,
        /// The volume services running, one per attached CinderBackend.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub volume_services: Vec<VolumeServiceStatus>,
    }
}
