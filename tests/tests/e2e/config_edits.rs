//! Config edits and the schema sync: an `extraConfig`, uWSGI or gateway edit renders a new config
//! ConfigMap and rolls the API onto it, and a rotated database password re-renders the DSN, yet
//! the finished `{name}-db-sync` Job stays (no second run, no DBSyncInProgress) and DatabaseReady
//! stays True; a new image does run the sync again.

use cinder_e2e::database_helpers::{cinder_events, database_job_runs};
use cinder_e2e::group_helpers::*;
use cinder_e2e::workload_helpers::*;
use cinder_e2e::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use kube::Api;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The config ConfigMap the API Deployment `{name}-api` mounts.
async fn api_config_map(h: &Harness, name: &str) -> Option<String> {
    let api: Api<Deployment> = h.api();
    let d = api.get_opt(&format!("{name}-api")).await.ok().flatten()?;
    d.spec
        .template
        .spec?
        .volumes?
        .into_iter()
        .find(|v| v.name == "config")?
        .config_map
        .map(|c| c.name)
}

fn db_sync_runs(h: &Harness, name: &str) -> Vec<String> {
    database_job_runs(&h.cluster, name)
        .into_iter()
        .filter(|r| r.name == format!("{name}-db-sync"))
        .map(|r| r.uid)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_edits_roll_the_api_but_do_not_rerun_the_schema_sync() {
    let h = Harness::start().await.unwrap();
    create_gateway(&h.client, "public").await.unwrap();
    cinder_with_nfs(&h.client, "ce", "nfs1", serde_json::json!({}))
        .await
        .unwrap();
    wait_cinder_condition(&h.client, "ce", "Ready", "True", "AllReady")
        .await
        .unwrap();
    let jobs: Api<Job> = h.api();
    let sync_uid = jobs.get("ce-db-sync").await.unwrap().metadata.uid;
    assert_eq!(db_sync_runs(&h, "ce").len(), 1);
    let in_progress_before = cinder_events(&h.client, "ce", "DBSyncInProgress")
        .await
        .len();

    // DatabaseReady is watched for a False while the edits roll out.
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (client, stop) = (h.client.clone(), stop.clone());
        tokio::spawn(async move {
            let mut seen = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let cs = cinder_conditions(&client, "ce").await;
                if let Some(c) = condition(&cs, "DatabaseReady").filter(|c| c.status != "True") {
                    seen.push(format!("{}: {}", c.reason, c.message));
                }
                if let Some(c) = condition(&cs, "Ready")
                    .filter(|c| c.status != "True" && c.message.contains("DatabaseReady"))
                {
                    seen.push(format!("Ready {}: {}", c.reason, c.message));
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            seen
        })
    };

    let edits = [
        (
            "extraConfig",
            serde_json::json!({"spec": {"extraConfig": {"DEFAULT": {"debug": "true"}}}}),
        ),
        (
            "uWSGI",
            serde_json::json!({"spec": {"api": {"uwsgi": {"processes": 3}}}}),
        ),
        (
            "gateway",
            serde_json::json!({"spec": {"gateway": {
                "parentRef": {"name": "public"},
                "hostname": "volume.example.org",
                "path": "/volume"
            }}}),
        ),
    ];
    for (what, patch) in edits {
        let before = api_config_map(&h, "ce")
            .await
            .expect("the API mounts a config");
        merge_patch_cinder(&h.client, "ce", patch).await.unwrap();
        eventually(
            &format!("the API mounts the config of the {what} edit"),
            || async { api_config_map(&h, "ce").await.filter(|cm| *cm != before) },
        )
        .await
        .unwrap();
        wait_cinder_condition(&h.client, "ce", "Ready", "True", "AllReady")
            .await
            .unwrap();
        assert_eq!(
            jobs.get("ce-db-sync").await.unwrap().metadata.uid,
            sync_uid,
            "the {what} edit replaced the db-sync Job"
        );
    }
    // A rotated database password: the same schema, no new run.
    let dsn = cinder_operator::names::db_connection_secret("ce");
    let before = secret_value(&h.client, &dsn, "connection").await.unwrap();
    put_secret(
        &h.client,
        "cinder-db",
        &[("username", "cinder"), ("password", "rotated-Pw-7")],
    )
    .await
    .unwrap();
    eventually("the DSN re-renders", || async {
        secret_value(&h.client, &dsn, "connection")
            .await
            .filter(|v| *v != before)
    })
    .await
    .unwrap();
    wait_cinder_condition(&h.client, "ce", "Ready", "True", "AllReady")
        .await
        .unwrap();
    assert_eq!(
        jobs.get("ce-db-sync").await.unwrap().metadata.uid,
        sync_uid,
        "the password rotation replaced the db-sync Job"
    );
    stop.store(true, Ordering::Relaxed);
    let flips = watcher.await.unwrap();
    assert_eq!(flips, Vec::<String>::new(), "DatabaseReady left True");
    assert_eq!(db_sync_runs(&h, "ce").len(), 1, "the schema sync ran again");
    assert_eq!(
        cinder_events(&h.client, "ce", "DBSyncInProgress")
            .await
            .len(),
        in_progress_before
    );

    // What the migration depends on does run it again: a new image.
    merge_patch_cinder(
        &h.client,
        "ce",
        serde_json::json!({"spec": {"image": {"tag": "2026.1-p1"}}}),
    )
    .await
    .unwrap();
    eventually("a second db-sync run for the new image", || async {
        (db_sync_runs(&h, "ce").len() == 2).then_some(())
    })
    .await
    .unwrap();
    wait_cinder_condition(&h.client, "ce", "DatabaseReady", "True", "DatabaseSynced")
        .await
        .unwrap();
    h.stop().await.unwrap();
}

/// The ConfigMaps labelled as Cinder `name`'s config.
async fn config_maps(h: &Harness, name: &str) -> Vec<String> {
    let api: Api<k8s_openapi::api::core::v1::ConfigMap> = h.api();
    let sel = format!("cinder.openstack.c5c3.io/config=true,app.kubernetes.io/instance={name}");
    api.list(&kube::api::ListParams::default().labels(&sel))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_keeps_the_config_map_a_running_job_mounts() {
    use cinder_sim::controllers::config::{JobRule, PodOutcome};
    let h = Harness::start().await.unwrap();
    cinder_with_nfs(&h.client, "sw", "nfs1", serde_json::json!({}))
        .await
        .unwrap();
    wait_cinder_condition(&h.client, "sw", "Ready", "True", "AllReady")
        .await
        .unwrap();
    // A purge run that lasts 15 s, mounting the config of the day it started.
    let pattern = regex::Regex::new(r"^sw-db-purge-[0-9]+$").unwrap();
    let rule =
        JobRule::new(pattern, PodOutcome::success()).with_delay(std::time::Duration::from_secs(15));
    h.cluster
        .controllers()
        .unwrap()
        .update_config(|c| c.jobs.rules.insert(0, rule));
    let old = api_config_map(&h, "sw").await.unwrap();
    let purge = cinder_e2e::workload_helpers::run_cronjob_now(&h.cluster, "sw-db-purge")
        .await
        .unwrap();

    merge_patch_cinder(
        &h.client,
        "sw",
        serde_json::json!({"spec": {"extraConfig": {"DEFAULT": {"debug": "true"}}}}),
    )
    .await
    .unwrap();
    eventually("the API mounts the new config", || async {
        api_config_map(&h, "sw").await.filter(|cm| *cm != old)
    })
    .await
    .unwrap();
    wait_cinder_condition(&h.client, "sw", "Ready", "True", "AllReady")
        .await
        .unwrap();
    let jobs: Api<Job> = h.api();
    let running = jobs.get(&purge).await.unwrap();
    assert!(
        cinder_operator::children::job_running(&running),
        "the purge Job ended before the check"
    );
    assert!(
        config_maps(&h, "sw").await.contains(&old),
        "the config the running purge Job {purge} mounts was swept"
    );
    // Once the run ended, nothing mounts it: the next sweep takes it.
    eventually("the old config swept after the run", || async {
        (!config_maps(&h, "sw").await.contains(&old)).then_some(())
    })
    .await
    .unwrap();
    h.stop().await.unwrap();
}
