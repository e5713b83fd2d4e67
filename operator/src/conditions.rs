//! Condition types and reasons of the Cinder and its satellites, event reasons and the
//! `metav1.Condition` update semantics (the aggregate `Ready` over the steps' conditions is
//! `crate::pipeline::ready`).
//!
//! `lastTransitionTime` changes only when a condition's status changes; reason, message and
//! `observedGeneration` are refreshed in place.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Condition types.
pub mod kind {
    pub(crate) const READY: &str = "Ready";
    pub const SECRETS_READY: &str = "SecretsReady";
    pub(crate) const BACKENDS_READY: &str = "BackendsReady";
    pub(crate) const BACKUP_BACKEND_READY: &str = "BackupBackendReady";
    pub const DATABASE_READY: &str = "DatabaseReady";
    pub(crate) const SCHEDULER_READY: &str = "SchedulerReady";
    pub(crate) const VOLUME_SERVICES_READY: &str = "VolumeServicesReady";
    pub(crate) const BACKUP_SERVICE_READY: &str = "BackupServiceReady";
    pub(crate) const DEPLOYMENT_READY: &str = "DeploymentReady";
    pub const CINDER_API_READY: &str = "CinderAPIReady";
    pub(crate) const HPA_READY: &str = "HPAReady";
    pub(crate) const VPA_READY: &str = "VPAReady";
    pub(crate) const NETWORK_POLICY_READY: &str = "NetworkPolicyReady";
    pub const HTTP_ROUTE_READY: &str = "HTTPRouteReady";
    pub(crate) const DB_PURGE_READY: &str = "DBPurgeReady";
    pub(crate) const EXTRA_CONFIG_HEALTHY: &str = "ExtraConfigHealthy";
    /// Satellites: the referenced key Secret exists (or no Secret is needed).
    pub(crate) const CREDENTIALS_READY: &str = "CredentialsReady";
    /// Satellites: the parent Cinder's workloads mount this satellite's rendered section.
    pub(crate) const CONFIG_PROJECTED: &str = "ConfigProjected";
}

/// Condition reasons, grouped by the condition that carries them.
pub mod reason {
    // Ready
    pub(crate) const ALL_READY: &str = "AllReady";
    pub(crate) const NOT_ALL_READY: &str = "NotAllReady";
    /// The operator's own: the spec fails a check the CRD schema states but the API server did
    /// not enforce.
    pub(crate) const INVALID_SPEC: &str = "InvalidSpec";
    // SecretsReady
    pub const SECRETS_AVAILABLE: &str = "SecretsAvailable";
    pub(crate) const TARGET_CLUSTER_UNAVAILABLE: &str = "TargetClusterUnavailable";
    pub(crate) const SECRET_STORE_NOT_READY: &str = "SecretStoreNotReady";
    pub(crate) const CLUSTER_SECRET_STORE_UNSUPPORTED: &str = "ClusterSecretStoreUnsupported";
    pub(crate) const WAITING_FOR_DB_CREDENTIALS: &str = "WaitingForDBCredentials";
    pub(crate) const WAITING_FOR_SERVICE_USER_CREDENTIALS: &str =
        "WaitingForServiceUserCredentials";
    pub(crate) const WAITING_FOR_MESSAGING_CREDENTIALS: &str = "WaitingForMessagingCredentials";
    pub const CONFIG_ERROR: &str = "ConfigError";
    // BackendsReady
    pub(crate) const ALL_BACKENDS_PROJECTED: &str = "AllBackendsProjected";
    pub(crate) const NO_BACKENDS: &str = "NoBackends";
    pub(crate) const WAITING_FOR_BACKENDS: &str = "WaitingForBackends";
    // BackupBackendReady
    pub(crate) const BACKUP_BACKEND_PROJECTED: &str = "BackupBackendProjected";
    pub(crate) const NO_BACKUP_BACKEND: &str = "NoBackupBackend";
    pub(crate) const WAITING_FOR_BACKUP_BACKEND: &str = "WaitingForBackupBackend";
    pub(crate) const MULTIPLE_BACKUP_BACKENDS: &str = "MultipleBackupBackends";
    // DatabaseReady
    pub const DATABASE_SYNCED: &str = "DatabaseSynced";
    pub(crate) const CLUSTER_NOT_READY: &str = "ClusterNotReady";
    pub const WAITING_FOR_DATABASE: &str = "WaitingForDatabase";
    pub(crate) const WAITING_FOR_CONFIG: &str = "WaitingForConfig";
    pub(crate) const IMAGE_RELEASE_MISMATCH: &str = "ImageReleaseMismatch";
    pub(crate) const DB_SYNC_FAILED: &str = "DBSyncFailed";
    pub(crate) const DB_SYNC_IN_PROGRESS: &str = "DBSyncInProgress";
    pub(crate) const VERSION_PARSE_ERROR: &str = "VersionParseError";
    pub(crate) const DOWNGRADE_NOT_SUPPORTED: &str = "DowngradeNotSupported";
    pub(crate) const UPGRADE_PATH_INVALID: &str = "UpgradePathInvalid";
    pub(crate) const UPGRADE_TARGET_CHANGED: &str = "UpgradeTargetChanged";
    pub(crate) const EXPAND_IN_PROGRESS: &str = "ExpandInProgress";
    pub(crate) const MIGRATE_IN_PROGRESS: &str = "MigrateInProgress";
    pub(crate) const UPGRADE_ROLLING_UPDATE: &str = "UpgradeRollingUpdate";
    pub(crate) const CONTRACT_IN_PROGRESS: &str = "ContractInProgress";
    pub(crate) const EXPAND_FAILED: &str = "ExpandFailed";
    pub(crate) const MIGRATE_FAILED: &str = "MigrateFailed";
    pub(crate) const CONTRACT_FAILED: &str = "ContractFailed";
    // SchedulerReady
    pub(crate) const SCHEDULER_READY: &str = "SchedulerReady";
    pub(crate) const WAITING_FOR_SCHEDULER: &str = "WaitingForScheduler";
    // VolumeServicesReady
    pub(crate) const ALL_VOLUME_SERVICES_READY: &str = "AllVolumeServicesReady";
    pub(crate) const WAITING_FOR_VOLUME_SERVICES: &str = "WaitingForVolumeServices";
    pub(crate) const SERVICE_REMOVE_JOB_FAILED: &str = "ServiceRemoveJobFailed";
    // BackupServiceReady
    pub(crate) const BACKUP_SERVICE_READY: &str = "BackupServiceReady";
    pub(crate) const BACKUP_NOT_CONFIGURED: &str = "BackupNotConfigured";
    pub(crate) const WAITING_FOR_BACKUP_SERVICE: &str = "WaitingForBackupService";
    // DeploymentReady
    pub(crate) const DEPLOYMENT_READY: &str = "DeploymentReady";
    pub(crate) const WAITING_FOR_DEPLOYMENT: &str = "WaitingForDeployment";
    // CinderAPIReady
    pub(crate) const API_HEALTHY: &str = "APIHealthy";
    pub const API_UNHEALTHY: &str = "APIUnhealthy";
    pub(crate) const ENDPOINT_NOT_READY: &str = "EndpointNotReady";
    pub(crate) const HEALTH_CHECK_TIMEOUT: &str = "HealthCheckTimeout";
    pub(crate) const CONNECTION_FAILED: &str = "ConnectionFailed";
    pub(crate) const HEALTH_CHECK_FAILED: &str = "HealthCheckFailed";
    // HPAReady
    pub(crate) const HPA_READY: &str = "HPAReady";
    pub(crate) const HPA_NOT_REQUIRED: &str = "HPANotRequired";
    // VPAReady
    pub(crate) const VPA_READY: &str = "VPAReady";
    pub(crate) const VPA_NOT_REQUIRED: &str = "VPANotRequired";
    pub(crate) const VPA_NOT_INSTALLED: &str = "VPANotInstalled";
    pub(crate) const CAPABILITY_PROBE_FAILED: &str = "CapabilityProbeFailed";
    pub(crate) const VPA_ERROR: &str = "VPAError";
    // NetworkPolicyReady
    pub(crate) const NETWORK_POLICY_READY: &str = "NetworkPolicyReady";
    pub(crate) const NETWORK_POLICY_NOT_REQUIRED: &str = "NetworkPolicyNotRequired";
    /// `spec.networkPolicy.ingress` is empty: refused fail-closed, nothing is applied.
    pub(crate) const EMPTY_INGRESS: &str = "EmptyIngress";
    /// The broker port the egress opens is not resolved yet (TransportURLSecret step).
    pub(crate) const BROKER_PORT_UNKNOWN: &str = "BrokerPortUnknown";
    // HTTPRouteReady
    pub(crate) const HTTP_ROUTE_ACCEPTED: &str = "HTTPRouteAccepted";
    pub const HTTP_ROUTE_NOT_REQUIRED: &str = "HTTPRouteNotRequired";
    pub(crate) const HTTP_ROUTE_NOT_ACCEPTED: &str = "HTTPRouteNotAccepted";
    pub(crate) const GATEWAY_API_NOT_INSTALLED: &str = "GatewayAPINotInstalled";
    // DBPurgeReady
    pub(crate) const DB_PURGE_SCHEDULED: &str = "DBPurgeScheduled";
    pub(crate) const DB_PURGE_SUSPENDED: &str = "DBPurgeSuspended";
    pub(crate) const DB_PURGE_JOB_FAILED: &str = "DBPurgeJobFailed";
    // ExtraConfigHealthy
    pub(crate) const NO_OWNED_KEYS_OVERRIDDEN: &str = "NoOwnedKeysOverridden";
    pub(crate) const OWNED_KEYS_OVERRIDDEN: &str = "OwnedKeysOverridden";
    /// A step returned an error (HPAReady / NetworkPolicyReady: "errors propagate").
    pub(crate) const RECONCILE_ERROR: &str = "ReconcileError";
    // CredentialsReady, ConfigProjected and Ready of the satellites
    pub(crate) const CREDENTIALS_AVAILABLE: &str = "CredentialsAvailable";
    pub(crate) const WAITING_FOR_CREDENTIALS: &str = "WaitingForCredentials";
    pub(crate) const PROJECTED: &str = "Projected";
    pub(crate) const WAITING_FOR_PROJECTION: &str = "WaitingForProjection";
    /// CredentialsReady=False while the parent Cinder does not exist.
    pub(crate) const WAITING_FOR_PARENT: &str = "WaitingForParent";
}

/// Event reasons (besides the condition reasons a transition event carries).
pub mod event_reason {
    pub(crate) const UPGRADE_PHASE_STARTED: &str = "UpgradePhaseStarted";
    pub(crate) const UPGRADE_PHASE_FINISHED: &str = "UpgradePhaseFinished";
    pub(crate) const JOB_STARTED: &str = "JobStarted";
    pub(crate) const JOB_SUCCEEDED: &str = "JobSucceeded";
    pub(crate) const JOB_FAILED: &str = "JobFailed";
    pub(crate) const DEVICE_TAKEN_OVER: &str = "DeviceTakenOver";
    pub(crate) const UPGRADE_CHECK_COMPLETED: &str = "UpgradeCheckCompleted";
    pub(crate) const UPGRADE_CHECK_WARNINGS: &str = "UpgradeCheckWarnings";
    pub(crate) const SERVICE_REMOVED: &str = "ServiceRemoved";
    pub(crate) const SERVICE_REMOVE_SKIPPED: &str = "ServiceRemoveSkipped";
    pub(crate) const FINALIZING_DATABASE: &str = "FinalizingDatabase";
    pub(crate) const DATABASE_FINALIZED: &str = "DatabaseFinalized";
    /// A cleanup under the finalizer failed (the API error says why); it is retried.
    pub(crate) const FINALIZATION_FAILED: &str = "FinalizationFailed";
    pub(crate) const REMOTE_CHILDREN_ABANDONED: &str = "RemoteChildrenAbandoned";
    pub(crate) const DB_PURGE_JOB_FAILED: &str = "DBPurgeJobFailed";
    /// The HPA reports AbleToScale or ScalingActive False (metrics missing, …): a Warning that
    /// leaves HPAReady True (the API serves at its current replica count).
    pub(crate) const HPA_SCALING_INACTIVE: &str = "HPAScalingInactive";
    /// A Cinder's reconcile failed several times in a row outside its steps (status write,
    /// finalizer add, target resolution, pipeline unavailable, finalize).
    pub(crate) const RECONCILE_FAILED: &str = "ReconcileFailed";
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
    pub(crate) fn new(
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
    pub(crate) fn status_str(&self) -> &'static str {
        if self.status { "True" } else { "False" }
    }
}

/// The condition of an optional child the spec does not ask for: True with `reason`, saying that
/// `field` is unset and, when `deleted`, that `object` was deleted.
pub(crate) fn not_required(
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
pub(crate) fn set_condition(
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
pub(crate) fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// True when the condition `type_` is set and `True`.
pub(crate) fn is_true(conditions: &[Condition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == "True")
}

/// The time `secs` seconds after the epoch, for tests that stamp conditions.
#[cfg(test)]
pub(crate) fn at(secs: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap())
}

#[cfg(test)]
mod tests {
    use super::*;

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
