//! The purge stays inside the connection cap's one-Job headroom: a db-sync due while a purge Job
//! runs waits for it, and while a database Job runs the `{name}-db-purge` CronJob is suspended,
//! then written back as `spec.dbPurge` says. No purge run overlaps a database Job run in the
//! simulator's run record.

use cinder_e2e::database_helpers::*;
use cinder_e2e::workload_helpers::*;
use cinder_e2e::*;
use cinder_operator::crd::Cinder;
use cinder_sim::controllers::PodOutcome;
use cinder_sim::controllers::config::JobRule;
use k8s_openapi::api::batch::v1::CronJob;
use kube::Api;
use kube::api::{Patch, PatchParams};
use std::time::Duration;

async fn suspended(client: &kube::Client) -> Option<bool> {
    let api: Api<CronJob> = Api::namespaced(client.clone(), NS);
    api.get_opt("pf-db-purge").await.ok()??.spec.suspend
}

async fn set_tag(client: &kube::Client, tag: &str) {
    let api: Api<Cinder> = Api::namespaced(client.clone(), NS);
    let patch = serde_json::json!({"spec": {"image": {"tag": tag}}});
    api.patch("pf", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_and_a_database_job_never_run_together() {
    let h = Harness::start().await.unwrap();
    let controllers = h.cluster.controllers().unwrap();
    controllers.update_config(|c| {
        let purge = regex::Regex::new(r"-db-purge-[0-9]+$").unwrap();
        c.jobs.rules.insert(
            0,
            JobRule::new(purge, PodOutcome::success()).with_delay(Duration::from_secs(4)),
        );
    });
    cinder_with_nfs(&h.client, "pf", "nfs1", serde_json::json!({}))
        .await
        .unwrap();
    eventually("the purge CronJob, not suspended", || async {
        (suspended(&h.client).await == Some(false)).then_some(())
    })
    .await
    .unwrap();
    job_rule(
        &h.cluster,
        "-db-sync",
        PodOutcome::success(),
        Duration::from_secs(3),
    )
    .unwrap();

    // 1. A purge runs; the db-sync an image change asks for waits for it.
    let purge = run_cronjob_now(&h.cluster, "pf-db-purge").await.unwrap();
    set_tag(&h.client, "2026.1-p1").await;
    let waiting = eventually("db-sync waiting for the purge", || async {
        let conditions = cinder_conditions(&h.client, "pf").await;
        let c = conditions.iter().find(|c| c.type_ == "DatabaseReady")?;
        c.message.contains(&purge).then(|| c.clone())
    })
    .await
    .unwrap();
    assert_eq!(waiting.status, "False", "{waiting:?}");
    wait_cinder_condition(&h.client, "pf", "DatabaseReady", "True", "DatabaseSynced")
        .await
        .unwrap();

    // 2. A db-sync runs; the CronJob is suspended meanwhile and written back after.
    set_tag(&h.client, "2026.1-p2").await;
    eventually("the purge CronJob suspended during db-sync", || async {
        (suspended(&h.client).await == Some(true)).then_some(())
    })
    .await
    .unwrap();
    wait_cinder_condition(&h.client, "pf", "DatabaseReady", "True", "DatabaseSynced")
        .await
        .unwrap();
    eventually("the purge CronJob unsuspended after db-sync", || async {
        (suspended(&h.client).await == Some(false)).then_some(())
    })
    .await
    .unwrap();

    let mut runs = database_job_runs(&h.cluster, "pf");
    let syncs = runs.len();
    runs.extend(
        controllers
            .job_runs()
            .into_iter()
            .filter(|r| r.namespace == NS && r.name.starts_with("pf-db-purge-")),
    );
    assert!(syncs >= 3 && runs.len() > syncs, "{runs:?}");
    assert_eq!(overlapping(&runs), Vec::<(String, String)>::new());
    h.stop().await.unwrap();
}
