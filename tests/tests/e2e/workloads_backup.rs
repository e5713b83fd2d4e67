//! The BackupService step end to end: with a backup target projected, `{name}-backup` mounts
//! the target's Secret and every NFS volume backend's export (BackupServiceReady); deleting the
//! target deletes the Deployment (BackupNotConfigured).

use cinder_e2e::workload_helpers::*;
use cinder_e2e::*;
use cinder_operator::crd::CinderBackupBackend;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_service_follows_the_backup_target() {
    let h = Harness::start().await.unwrap();
    cinder_with_nfs(&h.client, "bs", "nfs1", serde_json::json!({}))
        .await
        .unwrap();
    create_raw::<CinderBackupBackend>(
        &h.client,
        serde_json::json!({
            "apiVersion": "cinder.openstack.c5c3.io/v1alpha1",
            "kind": "CinderBackupBackend",
            "metadata": {"name": "target1", "namespace": NS},
            "spec": {"cinderRef": {"name": "bs"}, "type": "NFS", "nfs": {"server": "backup.example", "path": "/backups"}}
        }),
    )
    .await
    .unwrap();
    wait_cinder_condition(
        &h.client,
        "bs",
        "BackupServiceReady",
        "True",
        "BackupServiceReady",
    )
    .await
    .unwrap();
    let d = deployment(&h.client, "bs-backup").await.unwrap();
    let pod = d.spec.template.spec.unwrap();
    let volumes = pod.volumes.unwrap_or_default();
    let nfs: Vec<_> = volumes.iter().filter_map(|v| v.nfs.clone()).collect();
    assert_eq!(nfs.len(), 1, "the volume backend's export");
    assert_eq!(nfs[0].server, "nfs.example");
    let projected: Vec<String> = volumes
        .iter()
        .filter_map(|v| v.projected.as_ref())
        .flat_map(|p| p.sources.clone().unwrap_or_default())
        .filter_map(|s| s.secret.map(|s| s.name))
        .collect();
    assert!(
        projected
            .iter()
            .any(|n| n.starts_with("bs-backup-backend-")),
        "{projected:?}"
    );
    let command = pod.containers[0].command.clone().unwrap().join(" ");
    assert!(command.starts_with("cinder-backup"), "{command}");

    h.api::<CinderBackupBackend>()
        .delete("target1", &Default::default())
        .await
        .unwrap();
    wait_cinder_condition(
        &h.client,
        "bs",
        "BackupServiceReady",
        "True",
        "BackupNotConfigured",
    )
    .await
    .unwrap();
    eventually("the backup Deployment gone", || async {
        deployment(&h.client, "bs-backup")
            .await
            .is_none()
            .then_some(())
    })
    .await
    .unwrap();
    h.stop().await.unwrap();
}
