//! Reasons of the specification's condition table, each in the situation it names:
//! WaitingForDatabase while the MariaDB Database, User and Grant are not Ready;
//! WaitingForVolumeServices and WaitingForDeployment while a volume service's and then the
//! API's rollout does not finish; WaitingForBackupBackend and WaitingForBackupService while the
//! only backup target waits for its key Secret; VPAError when a VPA write fails and
//! CapabilityProbeFailed when the discovery of the VPA's API fails. (WaitingForScheduler:
//! `upgrade_lost_replace`; ConnectionFailed and HealthCheckFailed: the HealthCheck step's unit
//! tests.)

use cinder_e2e::database_helpers::*;
use cinder_e2e::group_helpers::*;
use cinder_e2e::*;
use cinder_sim::ErrorRule;

const AGENT: &str = "cinder-operator-reasons";

/// Whether the MariaDB `mariadb` reports Ready.
async fn mariadb_ready(client: &kube::Client) -> Option<()> {
    let m = mariadb_object(client, "MariaDB", "mariadb").await?;
    let conditions = m.data.pointer("/status/conditions")?.as_array()?.clone();
    conditions
        .iter()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
        .then_some(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_for_the_database_while_its_objects_are_not_ready() {
    let h = Harness::start().await.unwrap();
    database_environment(&h.client, "wdb").await.unwrap();
    eventually("MariaDB mariadb Ready", || mariadb_ready(&h.client))
        .await
        .unwrap();
    let controllers = h.cluster.controllers().unwrap();
    // The Database, User and Grant the operator creates stay not Ready.
    controllers.update_config(|c| c.mariadb.switch.enabled = false);
    create_cinder(&h.client, "wdb", serde_json::json!({}))
        .await
        .unwrap();
    let c = wait_cinder_condition(
        &h.client,
        "wdb",
        "DatabaseReady",
        "False",
        "WaitingForDatabase",
    )
    .await
    .unwrap();
    assert!(c.message.contains("to become Ready"), "{}", c.message);
    controllers.update_config(|c| c.mariadb.switch.enabled = true);
    wait_cinder_condition(&h.client, "wdb", "DatabaseReady", "True", "DatabaseSynced")
        .await
        .unwrap();
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_for_rollouts_that_do_not_finish() {
    let h = Harness::start().await.unwrap();
    let controllers = h.cluster.controllers().unwrap();
    controllers.update_config(|c| {
        c.deployments.held.insert("roll-volume-roll-nfs");
        c.deployments.held.insert("roll-api");
    });
    group_cinder(&h.client, "roll", serde_json::json!({}))
        .await
        .unwrap();
    let c = wait_cinder_condition(
        &h.client,
        "roll",
        "VolumeServicesReady",
        "False",
        "WaitingForVolumeServices",
    )
    .await
    .unwrap();
    assert!(c.message.contains("roll-volume-roll-nfs"), "{}", c.message);

    controllers.update_config(|c| {
        c.deployments.held.remove("roll-volume-roll-nfs");
    });
    let c = wait_cinder_condition(
        &h.client,
        "roll",
        "DeploymentReady",
        "False",
        "WaitingForDeployment",
    )
    .await
    .unwrap();
    assert!(
        c.message.contains("roll-api is rolling out"),
        "{}",
        c.message
    );
    wait_cinder_condition(
        &h.client,
        "roll",
        "VolumeServicesReady",
        "True",
        "AllVolumeServicesReady",
    )
    .await
    .unwrap();

    controllers.update_config(|c| {
        c.deployments.held.remove("roll-api");
    });
    wait_cinder_condition(
        &h.client,
        "roll",
        "DeploymentReady",
        "True",
        "DeploymentReady",
    )
    .await
    .unwrap();
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_target_waiting_for_its_key() {
    let h = Harness::start().await.unwrap();
    group_cinder(&h.client, "bk", serde_json::json!({}))
        .await
        .unwrap();
    create_raw::<cinder_operator::crd::CinderBackupBackend>(
        &h.client,
        serde_json::json!({
            "apiVersion": "cinder.openstack.c5c3.io/v1alpha1",
            "kind": "CinderBackupBackend",
            "metadata": {"name": "bk-ceph", "namespace": NS},
            "spec": {"cinderRef": {"name": "bk"}, "type": "RBD",
                "rbd": {"pool": "backups", "user": "cinder-backup",
                    "monitors": ["10.0.0.1:6789"], "keySecretRef": {"name": "bk-no-such-key"}}}
        }),
    )
    .await
    .unwrap();
    let c = wait_cinder_condition(
        &h.client,
        "bk",
        "BackupBackendReady",
        "False",
        "WaitingForBackupBackend",
    )
    .await
    .unwrap();
    assert!(c.message.contains("bk-ceph"), "{}", c.message);
    let c = wait_cinder_condition(
        &h.client,
        "bk",
        "BackupServiceReady",
        "False",
        "WaitingForBackupService",
    )
    .await
    .unwrap();
    assert!(
        c.message.contains("backup target bk-ceph is not projected"),
        "{}",
        c.message
    );
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vpa_write_and_discovery_failures_have_their_reasons() {
    let h = Harness::start_with(HarnessConfig {
        operator_user_agent: Some(AGENT.to_string()),
        ..HarnessConfig::default()
    })
    .await
    .unwrap();
    let failing = |verb: &str, resource: &str| ErrorRule {
        user_agent: Some(AGENT.to_string()),
        ..ErrorRule::always(Some(verb), Some(resource), 500)
    };
    // Every VPA write fails.
    h.cluster
        .faults()
        .add_error_rule(failing("patch", "verticalpodautoscalers"));
    group_cinder(
        &h.client,
        "vp",
        serde_json::json!({"verticalAutoscaling": {}}),
    )
    .await
    .unwrap();
    let c = wait_cinder_condition(&h.client, "vp", "VPAReady", "False", "VPAError")
        .await
        .unwrap();
    assert!(c.message.contains("VPA"), "{}", c.message);

    // The discovery of autoscaling.k8s.io/v1 fails: the operator cannot tell whether VPAs are
    // served.
    h.cluster.faults().update(|f| {
        f.errors.clear();
        f.errors.push(ErrorRule {
            user_agent: Some(AGENT.to_string()),
            // The simulator's verb for discovery documents.
            ..ErrorRule::always(Some("discovery"), None, 500)
        });
    });
    let c = wait_cinder_condition(
        &h.client,
        "vp",
        "VPAReady",
        "False",
        "CapabilityProbeFailed",
    )
    .await
    .unwrap();
    assert!(c.message.contains("autoscaling.k8s.io/v1"), "{}", c.message);

    h.cluster.faults().update(|f| f.errors.clear());
    wait_cinder_condition(&h.client, "vp", "VPAReady", "True", "VPAReady")
        .await
        .unwrap();
    h.stop().await.unwrap();
}
