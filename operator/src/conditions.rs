//! Condition types and reasons of the Cinder and its satellites, event reasons and the
//! `metav1.Condition` update semantics (the aggregate `Ready` over the steps' conditions is
//! `crate::pipeline::ready`).
//!
//! `lastTransitionTime` changes only when a condition's status changes; reason, message and
//! `observedGeneration` are refreshed in place.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Condition types.
pub mod kind {
    pub const READY: &str = "Ready";
    pub const SECRETS_READY: &str = "SecretsReady";
    pub const BACKENDS_READY: &str = "BackendsReady";
    pub const BACKUP_BACKEND_READY: &str = "BackupBackendReady";
    pub const DATABASE_READY: &str = "DatabaseReady";
    pub const SCHEDULER_READY: &str = "SchedulerReady";
    pub const VOLUME_SERVICES_READY: &str = "VolumeServicesReady";
    pub const BACKUP_SERVICE_READY: &str = "BackupServiceReady";
    pub const DEPLOYMENT_READY: &str = "DeploymentReady";
    pub const CINDER_API_READY: &str = "CinderAPIReady";
    pub const HPA_READY: &str = "HPAReady";
    pub const VPA_READY: &str = "VPAReady";
    pub const NETWORK_POLICY_READY: &str = "NetworkPolicyReady";
    pub const HTTP_ROUTE_READY: &str = "HTTPRouteReady";
    pub const DB_PURGE_READY: &str = "DBPurgeReady";
    pub const EXTRA_CONFIG_HEALTHY: &str = "ExtraConfigHealthy";
    /// Satellites: the referenced key Secret exists (or no Secret is needed).
    pub const CREDENTIALS_READY: &str = "CredentialsReady";
    /// Satellites: the parent Cinder's workloads mount this satellite's rendered section.
    pub const CONFIG_PROJECTED: &str = "ConfigProjected";
}

/// Condition reasons, grouped by the condition that carries them.
pub mod reason {
    // Ready
    pub const ALL_READY: &str = "AllReady";
    pub const NOT_ALL_READY: &str = "NotAllReady";
    /// The operator's own: the spec fails a check the CRD schema states but the API server did
    /// not enforce.
    pub const INVALID_SPEC: &str = "InvalidSpec";
    // SecretsReady
    pub const SECRETS_AVAILABLE: &str = "SecretsAvailable";
    pub const TARGET_CLUSTER_UNAVAILABLE: &str = "TargetClusterUnavailable";
    pub const SECRET_STORE_NOT_READY: &str = "SecretStoreNotReady";
    pub const CLUSTER_SECRET_STORE_UNSUPPORTED: &str = "ClusterSecretStoreUnsupported";
    pub const WAITING_FOR_DB_CREDENTIALS: &str = "WaitingForDBCredentials";
    pub const WAITING_FOR_SERVICE_USER_CREDENTIALS: &str = "WaitingForServiceUserCredentials";
    pub const WAITING_FOR_MESSAGING_CREDENTIALS: &str = "WaitingForMessagingCredentials";
    pub const CONFIG_ERROR: &str = "ConfigError";
    // BackendsReady
    pub const ALL_BACKENDS_PROJECTED: &str = "AllBackendsProjected";
    pub const NO_BACKENDS: &str = "NoBackends";
    pub const WAITING_FOR_BACKENDS: &str = "WaitingForBackends";
    // BackupBackendReady
    pub const BACKUP_BACKEND_PROJECTED: &str = "BackupBackendProjected";
    pub const NO_BACKUP_BACKEND: &str = "NoBackupBackend";
    pub const WAITING_FOR_BACKUP_BACKEND: &str = "WaitingForBackupBackend";
    pub const MULTIPLE_BACKUP_BACKENDS: &str = "MultipleBackupBackends";
    // DatabaseReady
    pub const DATABASE_SYNCED: &str = "DatabaseSynced";
    pub const CLUSTER_NOT_READY: &str = "ClusterNotReady";
    pub const WAITING_FOR_DATABASE: &str = "WaitingForDatabase";
    pub const WAITING_FOR_CONFIG: &str = "WaitingForConfig";
    pub const IMAGE_RELEASE_MISMATCH: &str = "ImageReleaseMismatch";
    pub const DB_SYNC_FAILED: &str = "DBSyncFailed";
    pub const DB_SYNC_IN_PROGRESS: &str = "DBSyncInProgress";
    pub const VERSION_PARSE_ERROR: &str = "VersionParseError";
    pub const DOWNGRADE_NOT_SUPPORTED: &str = "DowngradeNotSupported";
    pub const UPGRADE_PATH_INVALID: &str = "UpgradePathInvalid";
    pub const UPGRADE_TARGET_CHANGED: &str = "UpgradeTargetChanged";
    pub const EXPAND_IN_PROGRESS: &str = "ExpandInProgress";
    pub const MIGRATE_IN_PROGRESS: &str = "MigrateInProgress";
    pub const UPGRADE_ROLLING_UPDATE: &str = "UpgradeRollingUpdate";
    pub const CONTRACT_IN_PROGRESS: &str = "ContractInProgress";
    pub const EXPAND_FAILED: &str = "ExpandFailed";
    pub const MIGRATE_FAILED: &str = "MigrateFailed";
    pub const CONTRACT_FAILED: &str = "ContractFailed";
    // SchedulerReady
    pub const SCHEDULER_READY: &str = "SchedulerReady";
    pub const WAITING_FOR_SCHEDULER: &str = "WaitingForScheduler";
    // VolumeServicesReady
    pub const ALL_VOLUME_SERVICES_READY: &str = "AllVolumeServicesReady";
    pub const WAITING_FOR_VOLUME_SERVICES: &str = "WaitingForVolumeServices";
    pub const SERVICE_REMOVE_JOB_FAILED: &str = "ServiceRemoveJobFailed";
    // BackupServiceReady
    pub const BACKUP_SERVICE_READY: &str = "BackupServiceReady";
    pub const BACKUP_NOT_CONFIGURED: &str = "BackupNotConfigured";
    pub const WAITING_FOR_BACKUP_SERVICE: &str = "WaitingForBackupService";
    // DeploymentReady
    pub const DEPLOYMENT_READY: &str = "DeploymentReady";
    pub const WAITING_FOR_DEPLOYMENT: &str = "WaitingForDeployment";
    // CinderAPIReady
    pub const API_HEALTHY: &str = "APIHealthy";
    pub const API_UNHEALTHY: &str = "APIUnhealthy";
    pub const ENDPOINT_NOT_READY: &str = "EndpointNotReady";
    pub const HEALTH_CHECK_TIMEOUT: &str = "HealthCheckTimeout";
    pub const CONNECTION_FAILED: &str = "ConnectionFailed";
    pub const HEALTH_CHECK_FAILED: &str = "HealthCheckFailed";
    // HPAReady
    pub const HPA_READY: &str = "HPAReady";
    pub const HPA_NOT_REQUIRED: &str = "HPANotRequired";
    // VPAReady
    pub const VPA_READY: &str = "VPAReady";
    pub const VPA_NOT_REQUIRED: &str = "VPANotRequired";
    pub const VPA_NOT_INSTALLED: &str = "VPANotInstalled";
    pub const CAPABILITY_PROBE_FAILED: &str = "CapabilityProbeFailed";
    pub const VPA_ERROR: &str = "VPAError";
    // NetworkPolicyReady
    pub const NETWORK_POLICY_READY: &str = "NetworkPolicyReady";
    pub const NETWORK_POLICY_NOT_REQUIRED: &str = "NetworkPolicyNotRequired";
    /// `spec.networkPolicy.ingress` is empty: refused fail-closed, nothing is applied.
    pub const EMPTY_INGRESS: &str = "EmptyIngress";
    /// The broker port the egress opens is not resolved yet (TransportURLSecret step).
    pub const BROKER_PORT_UNKNOWN: &str = "BrokerPortUnknown";
    // HTTPRouteReady
    pub const HTTP_ROUTE_ACCEPTED: &str = "HTTPRouteAccepted";
    pub const HTTP_ROUTE_NOT_REQUIRED: &str = "HTTPRouteNotRequired";
    pub const HTTP_ROUTE_NOT_ACCEPTED: &str = "HTTPRouteNotAccepted";
    pub const GATEWAY_API_NOT_INSTALLED: &str = "GatewayAPINotInstalled";
    // DBPurgeReady
    pub const DB_PURGE_SCHEDULED: &str = "DBPurgeScheduled";
    pub const DB_PURGE_SUSPENDED: &str = "DBPurgeSuspended";
    pub const DB_PURGE_JOB_FAILED: &str = "DBPurgeJobFailed";
    // ExtraConfigHealthy
    pub const NO_OWNED_KEYS_OVERRIDDEN: &str = "NoOwnedKeysOverridden";
    pub const OWNED_KEYS_OVERRIDDEN: &str = "OwnedKeysOverridden";
    /// A step returned an error (HPAReady / NetworkPolicyReady: "errors propagate").
    pub const RECONCILE_ERROR: &str = "ReconcileError";
    // CredentialsReady, ConfigProjected and Ready of the satellites
    pub const CREDENTIALS_AVAILABLE: &str = "CredentialsAvailable";
    pub const WAITING_FOR_CREDENTIALS: &str = "WaitingForCredentials";
    pub const PROJECTED: &str = "Projected";
    pub const WAITING_FOR_PROJECTION: &str = "WaitingForProjection";
    /// CredentialsReady=False while the parent Cinder does not exist.
    pub const WAITING_FOR_PARENT: &str = "WaitingForParent";
}

/// Event reasons (besides the condition reasons a transition event carries).
pub mod event_reason {
    pub const UPGRADE_PHASE_STARTED: &str = "UpgradePhaseStarted";
    pub const UPGRADE_PHASE_FINISHED: &str = "UpgradePhaseFinished";
    pub const JOB_STARTED: &str = "JobStarted";
    pub const JOB_SUCCEEDED: &str = "JobSucceeded";
    pub const JOB_FAILED: &str = "JobFailed";
    pub const DEVICE_TAKEN_OVER: &str = "DeviceTakenOver";
    pub const UPGRADE_CHECK_COMPLETED: &str = "UpgradeCheckCompleted";
    pub const UPGRADE_CHECK_WARNINGS: &str = "UpgradeCheckWarnings";
    pub const SERVICE_REMOVED: &str = "ServiceRemoved";
    pub const SERVICE_REMOVE_SKIPPED: &str = "ServiceRemoveSkipped";
    pub const FINALIZING_DATABASE: &str = "FinalizingDatabase";
    pub const DATABASE_FINALIZED: &str = "DatabaseFinalized";
    /// A cleanup under the finalizer failed (the API error says why); it is retried.
    pub const FINALIZATION_FAILED: &str = "FinalizationFailed";
    pub const REMOTE_CHILDREN_ABANDONED: &str = "RemoteChildrenAbandoned";
    pub const DB_PURGE_JOB_FAILED: &str = "DBPurgeJobFailed";
    /// The HPA reports AbleToScale or ScalingActive False (metrics missing, …): a Warning that
    /// leaves HPAReady True (the API serves at its current replica count).
    pub const HPA_SCALING_INACTIVE: &str = "HPAScalingInactive";
    /// A Cinder's reconcile failed several times in a row outside its steps (status write,
    /// finalizer add, target resolution, pipeline unavailable, finalize).
    pub const RECONCILE_FAILED: &str = "ReconcileFailed";
}

/// A condition as a step reports it (before it is stamped with time and generation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cond {
    pub type_: &'static str,
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}

impl Cond {
    pub fn new(
        type_: &'static str,
        status: bool,
        reason: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Cond {
            type_,
            status,
            reason,
            message: message.into(),
        }
    }
    pub fn true_(type_: &'static str, reason: &'static str, message: impl Into<String>) -> Self {
        Cond::new(type_, true, reason, message)
    }
    pub fn false_(type_: &'static str, reason: &'static str, message: impl Into<String>) -> Self {
        Cond::new(type_, false, reason, message)
    }
    /// `"True"` / `"False"`, as metav1.Condition spells it.
    pub fn status_str(&self) -> &'static str {
        if self.status { "True" } else { "False" }
    }
}

/// The condition of an optional child the spec does not ask for: True with `reason`, saying that
/// `field` is unset and, when `deleted`, that `object` was deleted.
pub fn not_required(
    type_: &'static str,
    reason: &'static str,
    field: &str,
    object: &str,
    deleted: bool,
) -> Cond {
    let message = if deleted {
        format!("{field} is unset; {object} deleted")
    } else {
        format!("{field} is unset")
    };
    Cond::true_(type_, reason, message)
}

/// Sets `c` into `conditions` with metav1.Condition semantics and returns whether anything
/// changed. `lastTransitionTime` becomes `now` only for a new condition or a status change.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    c: &Cond,
    observed_generation: Option<i64>,
    now: &Time,
) -> bool {
    let status = c.status_str();
    match conditions.iter_mut().find(|x| x.type_ == c.type_) {
        Some(existing) => {
            let mut changed = false;
            if existing.status != status {
                existing.status = status.to_string();
                existing.last_transition_time = now.clone();
                changed = true;
            }
            if existing.reason != c.reason {
                existing.reason = c.reason.to_string();
                changed = true;
            }
            if existing.message != c.message {
                existing.message = c.message.clone();
                changed = true;
            }
            if existing.observed_generation != observed_generation {
                existing.observed_generation = observed_generation;
                changed = true;
            }
            changed
        }
        None => {
            conditions.push(Condition {
                type_: c.type_.to_string(),
                status: status.to_string(),
                reason: c.reason.to_string(),
                message: c.message.clone(),
                last_transition_time: now.clone(),
                observed_generation,
            });
            true
        }
    }
}

/// The condition of type `type_`, if set.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// True when the condition `type_` is set and `True`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn at(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    #[test]
    fn transition_time_changes_only_with_status() {
        let mut cs = Vec::new();
        assert!(set_condition(
            &mut cs,
            &Cond::false_(kind::DATABASE_READY, reason::WAITING_FOR_DATABASE, "a"),
            Some(1),
            &at(10)
        ));
        assert_eq!(cs[0].last_transition_time, at(10));
        // Same status, new reason and generation: updated in place, time kept.
        assert!(set_condition(
            &mut cs,
            &Cond::false_(kind::DATABASE_READY, reason::DB_SYNC_IN_PROGRESS, "b"),
            Some(2),
            &at(20)
        ));
        assert_eq!(cs[0].last_transition_time, at(10));
        assert_eq!(cs[0].reason, "DBSyncInProgress");
        assert_eq!(cs[0].observed_generation, Some(2));
        // Status flip: time moves.
        assert!(set_condition(
            &mut cs,
            &Cond::true_(kind::DATABASE_READY, reason::DATABASE_SYNCED, "c"),
            Some(2),
            &at(30)
        ));
        assert_eq!(cs[0].last_transition_time, at(30));
        assert_eq!(cs[0].status, "True");
        // Identical: no change reported.
        assert!(!set_condition(
            &mut cs,
            &Cond::true_(kind::DATABASE_READY, reason::DATABASE_SYNCED, "c"),
            Some(2),
            &at(40)
        ));
        assert_eq!(cs[0].last_transition_time, at(30));
        assert_eq!(cs.len(), 1);
    }
}
