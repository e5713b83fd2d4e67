//! The purge on real parts (the set-up of `real_cinder_convergence`), at 2026.1: once the
//! samples are Ready, two soft-deleted volume types are written into the real schema, one
//! deleted 400 days ago and one a day ago; then a Job is made from the `cinder-db-purge`
//! CronJob's template, as `kubectl create job --from=cronjob/cinder-db-purge` makes it. Shown:
//!
//! - the Job's real `cinder-manage db purge 30` removed the row older than the retention and
//!   kept the newer one, and DBPurgeReady is True (DBPurgeScheduled) after the Job succeeded;
//! - with a row lock held on `volume_types` across the next such Job, its purge waits out the
//!   lock timeout and the real cinder-manage exits non-zero: the Job fails and DBPurgeReady
//!   turns False (DBPurgeJobFailed).

use cinder_e2e::real_cinder_cluster::{
    CINDER, RealCinderCluster, RealCinderOptions, SAMPLES_NS, real_cinder_roots,
};
use cinder_operator::crd::Cinder;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, PostParams};
use kube::{Resource, ResourceExt};
use std::time::{Duration, Instant};

const CONVERGENCE: Duration = Duration::from_secs(20 * 60);
const PURGE: Duration = Duration::from_secs(5 * 60);
const OLD: &str = "5a0b6f2e-0000-4000-8000-000000000400";
const RECENT: &str = "5a0b6f2e-0000-4000-8000-000000000001";

/// A Job made from the CronJob's template, owned by it (as `kubectl create job --from`).
async fn job_from_cron_job(cluster: &RealCinderCluster, name: &str) -> Job {
    let crons: Api<CronJob> = Api::namespaced(cluster.client.clone(), SAMPLES_NS);
    let cron = crons.get("cinder-db-purge").await.unwrap();
    let template = cron.spec.job_template.clone();
    let meta = template.metadata.unwrap_or_default();
    let mut annotations = meta.annotations.unwrap_or_default();
    annotations.insert("cronjob.kubernetes.io/instantiate".into(), "manual".into());
    let job = Job {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(SAMPLES_NS.into()),
            labels: meta.labels,
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: CronJob::api_version(&()).into_owned(),
                kind: CronJob::kind(&()).into_owned(),
                name: cron.name_any(),
                uid: cron.uid().unwrap(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    };
    let jobs: Api<Job> = Api::namespaced(cluster.client.clone(), SAMPLES_NS);
    jobs.create(&PostParams::default(), &job).await.unwrap()
}

/// Waits until the Job `name` succeeded or failed; whether it succeeded.
async fn job_outcome(cluster: &RealCinderCluster, name: &str) -> bool {
    let jobs: Api<Job> = Api::namespaced(cluster.client.clone(), SAMPLES_NS);
    let since = Instant::now();
    loop {
        let status = jobs.get(name).await.unwrap().status.unwrap_or_default();
        if status.succeeded.unwrap_or(0) > 0 {
            return true;
        }
        if status.failed.unwrap_or(0) > 0 && status.active.unwrap_or(0) == 0 {
            return false;
        }
        assert!(
            since.elapsed() < PURGE,
            "Job {name} did not finish: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// DBPurgeReady (status, reason, message) once its observation is newer than `after`.
async fn db_purge_ready(cluster: &RealCinderCluster, want: &str) -> (String, String, String) {
    let api: Api<Cinder> = Api::namespaced(cluster.client.clone(), SAMPLES_NS);
    let since = Instant::now();
    loop {
        let c = api.get(CINDER).await.unwrap();
        if let Some(cond) = c
            .status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "DBPurgeReady"))
            && cond.status == want
        {
            return (
                cond.status.clone(),
                cond.reason.clone(),
                cond.message.clone(),
            );
        }
        assert!(
            since.elapsed() < PURGE,
            "DBPurgeReady never {want}: {}",
            cluster.conditions_line().await
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_purge_job_runs_the_real_purge() {
    let Some(roots) = real_cinder_roots("the_purge_job_runs_the_real_purge") else {
        return;
    };
    let cluster = RealCinderCluster::start(&roots[0], RealCinderOptions::default())
        .await
        .unwrap();
    cluster.wait_ready(CONVERGENCE).await.unwrap();
    let retention = cluster.cinder().await.unwrap().spec.db_purge.retention_days;
    assert_eq!(retention, 30);
    cluster
        .db
        .sql(&format!(
            "INSERT INTO cinder.volume_types (id, name, is_public, deleted, deleted_at, created_at) VALUES \
             ('{OLD}', 'deleted-400-days-ago', 1, 1, UTC_TIMESTAMP() - INTERVAL 400 DAY, UTC_TIMESTAMP() - INTERVAL 401 DAY), \
             ('{RECENT}', 'deleted-a-day-ago', 1, 1, UTC_TIMESTAMP() - INTERVAL 1 DAY, UTC_TIMESTAMP() - INTERVAL 2 DAY);"
        ))
        .await
        .unwrap();

    let job = job_from_cron_job(&cluster, "cinder-db-purge-manual-1").await;
    let command: Vec<String> = job
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .map(|p| {
            let c = &p.containers[0];
            c.command
                .iter()
                .chain(c.args.iter())
                .flatten()
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    eprintln!("the purge Job runs {command:?}");
    assert!(job_outcome(&cluster, "cinder-db-purge-manual-1").await);
    let left = cluster
        .db
        .sql("SELECT id FROM cinder.volume_types WHERE deleted = 1 ORDER BY id")
        .await
        .unwrap();
    assert_eq!(
        left.trim(),
        RECENT,
        "the real purge removed the row older than {retention} days and kept the newer one"
    );
    let (status, reason, message) = db_purge_ready(&cluster, "True").await;
    eprintln!("after the purge: DBPurgeReady {status} {reason}: {message}");
    assert_eq!(reason, "DBPurgeScheduled");

    // A row lock held across the purge: its DELETE waits out innodb_lock_wait_timeout (5 s
    // here) and the real cinder-manage exits non-zero; DBPurgeReady says so. (With the server
    // killed instead, the Job fails too, but DatabaseReady False ends the pipeline's lane
    // before the DBPurge step, and DBPurgeReady keeps its last value.)
    cluster
        .db
        .sql("SET GLOBAL innodb_lock_wait_timeout = 5")
        .await
        .unwrap();
    let mut holder = tokio::process::Command::new("/usr/bin/mariadb")
        .args([
            "--no-defaults",
            "-h",
            "127.0.0.1",
            "-u",
            "cinder",
            "-N",
            "-B",
        ])
        .arg(format!("--port={}", cluster.db.port()))
        .args([
            "-e",
            "START TRANSACTION; SELECT COUNT(*) FROM cinder.volume_types FOR UPDATE; \
             SELECT SLEEP(300);",
        ])
        .env("MYSQL_PWD", cinder_e2e::real_cinder_cluster::DB_PASSWORD)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let started = Instant::now();
    job_from_cron_job(&cluster, "cinder-db-purge-manual-2").await;
    let succeeded = job_outcome(&cluster, "cinder-db-purge-manual-2").await;
    let _ = holder.start_kill();
    let _ = holder.wait().await;
    assert!(!succeeded, "the purge failed on the held lock");
    let (status, reason, message) = db_purge_ready(&cluster, "False").await;
    eprintln!(
        "with a row lock held: the Job failed after {:.1} s; DBPurgeReady {status} {reason}: {message}",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(reason, "DBPurgeJobFailed");
    cluster.stop().await.unwrap();
}
