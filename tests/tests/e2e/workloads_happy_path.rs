//! The workload lane end to end with one NFS backend: every lane condition through DBPurgeReady
//! True with their documented reasons, status.volumeServices, the volume Deployment (replicas 1,
//! Recreate, the NFS export mounted), the API Service on 8776 with its PDB (maxUnavailable 1, so a one-replica API never blocks a drain),
//! status.endpoint, the purge CronJob on "1 0 * * *" running `db purge 30`, and no backup
//! Deployment without a backup target.

use cinder_e2e::database_helpers::*;
use cinder_e2e::workload_helpers::*;
use cinder_e2e::*;
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_nfs_backend_brings_every_lane_condition_up() {
    let h = Harness::start().await.unwrap();
    cinder_with_nfs(&h.client, "wl", "nfs1", serde_json::json!({}))
        .await
        .unwrap();

    for (type_, reason) in [
        ("SchedulerReady", "SchedulerReady"),
        ("VolumeServicesReady", "AllVolumeServicesReady"),
        ("BackupServiceReady", "BackupNotConfigured"),
        ("DeploymentReady", "DeploymentReady"),
        ("DBPurgeReady", "DBPurgeScheduled"),
    ] {
        wait_cinder_condition(&h.client, "wl", type_, "True", reason)
            .await
            .unwrap();
    }

    let status = cinder_status(&h.client, "wl").await;
    assert_eq!(status.volume_services.len(), 1);
    assert_eq!(status.volume_services[0].backend, "nfs1");
    assert_eq!(status.volume_services[0].host, "wl@nfs1");
    assert_eq!(
        status.endpoint.as_deref(),
        Some("http://wl-api.cinder-e2e.svc:8776")
    );

    // The scheduler: a Deployment and nothing else.
    assert!(deployment(&h.client, "wl-scheduler").await.is_some());
    assert!(
        h.api::<Service>()
            .get_opt("wl-scheduler")
            .await
            .unwrap()
            .is_none()
    );

    // The volume service: replicas 1, Recreate, the export mounted, the backend label.
    let volume = deployment(&h.client, "wl-volume-nfs1").await.unwrap();
    assert_eq!(volume.spec.replicas, Some(1));
    assert_eq!(
        volume
            .spec
            .strategy
            .as_ref()
            .and_then(|s| s.type_.as_deref()),
        Some("Recreate")
    );
    let pod = volume.spec.template.spec.clone().unwrap();
    let nfs = pod
        .volumes
        .unwrap_or_default()
        .into_iter()
        .find_map(|v| v.nfs)
        .expect("an nfs volume");
    assert_eq!(
        (nfs.server.as_str(), nfs.path.as_str()),
        ("nfs.example", "/exports/cinder")
    );
    let annotations = template_annotations(&h.client, "wl-volume-nfs1").await;
    assert_eq!(
        annotations
            .get("cinder.c5c3.io/installed-release")
            .map(String::as_str),
        Some("2026.1")
    );
    assert!(annotations.contains_key("cinder.c5c3.io/db-connection-hash"));
    assert!(annotations.contains_key("cinder.c5c3.io/transport-url-hash"));

    // The API: Service on 8776, PDB maxUnavailable 1.
    let svc = h.api::<Service>().get("wl-api").await.unwrap();
    let port = &svc.spec.unwrap().ports.unwrap()[0];
    assert_eq!(port.port, 8776);
    let pdb = h.api::<PodDisruptionBudget>().get("wl-api").await.unwrap();
    let pdb_spec = pdb.spec.unwrap();
    assert_eq!(pdb_spec.max_unavailable, Some(IntOrString::Int(1)));
    assert_eq!(pdb_spec.min_available, None);

    // The purge CronJob.
    let cj = h.api::<CronJob>().get("wl-db-purge").await.unwrap();
    assert_eq!(cj.spec.schedule, "1 0 * * *");
    assert_eq!(cj.spec.concurrency_policy.as_deref(), Some("Forbid"));
    let job = cj.spec.job_template.spec.unwrap();
    assert_eq!(job.active_deadline_seconds, Some(3600));
    let command = job.template.spec.unwrap().containers[0]
        .command
        .clone()
        .unwrap();
    assert_eq!(command.join(" "), "cinder-manage db purge 30");

    // No backup target: no backup Deployment.
    assert!(deployment(&h.client, "wl-backup").await.is_none());
    h.stop().await.unwrap();
}
