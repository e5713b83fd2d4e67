//! docs/operations.md stays complete: every reason of the Cinder condition table has a
//! troubleshooting entry, and every metric family the operator exports is documented.

use cinder_e2e::deploy_helpers::{every_metric_family_text, repo_root};

/// The reasons of the Cinder condition table (True and False columns).
const TABLE_REASONS: &[&str] = &[
    "AllReady",
    "NotAllReady",
    "SecretsAvailable",
    "TargetClusterUnavailable",
    "SecretStoreNotReady",
    "ClusterSecretStoreUnsupported",
    "WaitingForDBCredentials",
    "WaitingForServiceUserCredentials",
    "WaitingForMessagingCredentials",
    "ConfigError",
    "AllBackendsProjected",
    "NoBackends",
    "WaitingForBackends",
    "BackupBackendProjected",
    "NoBackupBackend",
    "WaitingForBackupBackend",
    "MultipleBackupBackends",
    "DatabaseSynced",
    "ClusterNotReady",
    "WaitingForDatabase",
    "WaitingForConfig",
    "ImageReleaseMismatch",
    "DBSyncFailed",
    "DBSyncInProgress",
    "VersionParseError",
    "DowngradeNotSupported",
    "UpgradePathInvalid",
    "UpgradeTargetChanged",
    "ExpandInProgress",
    "MigrateInProgress",
    "UpgradeRollingUpdate",
    "ContractInProgress",
    "ExpandFailed",
    "MigrateFailed",
    "ContractFailed",
    "SchedulerReady",
    "WaitingForScheduler",
    "AllVolumeServicesReady",
    "WaitingForVolumeServices",
    "ServiceRemoveJobFailed",
    "BackupServiceReady",
    "BackupNotConfigured",
    "WaitingForBackupService",
    "DeploymentReady",
    "WaitingForDeployment",
    "APIHealthy",
    "APIUnhealthy",
    "EndpointNotReady",
    "HealthCheckTimeout",
    "ConnectionFailed",
    "HealthCheckFailed",
    "HPAReady",
    "HPANotRequired",
    "VPAReady",
    "VPANotRequired",
    "VPANotInstalled",
    "CapabilityProbeFailed",
    "EmptyIngress",
    "BrokerPortUnknown",
    "VPAError",
    "NetworkPolicyReady",
    "NetworkPolicyNotRequired",
    "HTTPRouteAccepted",
    "HTTPRouteNotRequired",
    "HTTPRouteNotAccepted",
    "GatewayAPINotInstalled",
    "DBPurgeScheduled",
    "DBPurgeSuspended",
    "DBPurgeJobFailed",
    "NoOwnedKeysOverridden",
    "OwnedKeysOverridden",
];

fn operations_doc() -> String {
    std::fs::read_to_string(repo_root().join("docs/operations.md")).unwrap()
}

#[test]
fn every_table_reason_has_a_troubleshooting_entry() {
    let doc = operations_doc();
    let (_, troubleshooting) = doc
        .split_once("## Troubleshooting by condition reason")
        .unwrap();
    let missing: Vec<&&str> = TABLE_REASONS
        .iter()
        .filter(|r| !troubleshooting.contains(&format!("`{r}`")))
        .collect();
    assert!(missing.is_empty(), "reasons without an entry: {missing:?}");
}

#[test]
fn every_exported_metric_is_documented() {
    let text = every_metric_family_text().unwrap();
    let doc = operations_doc();
    let (_, metrics_section) = doc.split_once("## Metrics").unwrap();
    let mut checked = 0;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (name, kind) = rest.split_once(' ').unwrap();
        let exposed = if kind == "counter" {
            format!("{name}_total")
        } else {
            name.to_string()
        };
        assert!(
            metrics_section.contains(&format!("`{exposed}` | {kind}")),
            "docs/operations.md does not document {exposed} ({kind})"
        );
        checked += 1;
    }
    assert!(checked >= 16, "only {checked} families exported");
}
