//! A db-sync Job replaced while its pod runs (an image change: the Job is deleted with background
//! propagation, and its pod runs on through its grace period): the next db-sync Job is created
//! only once that pod has ended, so two `cinder-manage db sync` never run at once, and
//! DatabaseReady names the pod it waits for meanwhile.

use cinder_e2e::database_helpers::*;
use cinder_e2e::workload_helpers::*;
use cinder_e2e::*;
use cinder_operator::crd::Cinder;
use cinder_sim::controllers::PodOutcome;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use std::time::Duration;

async fn set_tag(client: &kube::Client, tag: &str) {
    let api: Api<Cinder> = Api::namespaced(client.clone(), NS);
    let patch = serde_json::json!({"spec": {"image": {"tag": tag}}});
    api.patch("rp", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// The db-sync pods of Cinder `rp`: (name, phase, Terminating).
async fn db_sync_pods(client: &kube::Client) -> Vec<(String, String, bool)> {
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    api.list(&ListParams::default().labels("app.kubernetes.io/component=db-sync"))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .map(|p| {
            let phase = p.status.and_then(|s| s.phase).unwrap_or_default();
            let terminating = p.metadata.deletion_timestamp.is_some();
            (p.metadata.name.unwrap_or_default(), phase, terminating)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_db_sync_starts_once_the_replaced_job_s_pod_ended() {
    let h = Harness::start().await.unwrap();
    let controllers = h.cluster.controllers().unwrap();
    // A grace second of 100 ms: a pod's default 30 s of Terminating last 3 s.
    controllers.update_config(|c| c.grace_second = Duration::from_millis(100));
    cinder_with_nfs(&h.client, "rp", "nfs1", serde_json::json!({}))
        .await
        .unwrap();

    // A db-sync that runs long, replaced by an image change while its pod runs.
    job_rule(
        &h.cluster,
        "-db-sync",
        PodOutcome::success(),
        Duration::from_secs(60),
    )
    .unwrap();
    set_tag(&h.client, "2026.1-p1").await;
    let first = eventually("the db-sync pod of 2026.1-p1 running", || async {
        db_sync_pods(&h.client)
            .await
            .into_iter()
            .find(|(_, phase, terminating)| phase == "Running" && !terminating)
            .map(|(name, ..)| name)
    })
    .await
    .unwrap();
    set_tag(&h.client, "2026.1-p2").await;

    // While the replaced pod is there (running, then Terminating), it is the only db-sync pod.
    let mut saw_terminating = false;
    let mut named = false;
    let waited = format!("waits for pod {first} of a database Job to end");
    let since = std::time::Instant::now();
    loop {
        let pods = db_sync_pods(&h.client).await;
        let Some(old) = pods.iter().find(|(name, ..)| *name == first) else {
            break;
        };
        saw_terminating |= old.2;
        let beside: Vec<_> = pods.iter().filter(|(name, ..)| *name != first).collect();
        assert!(beside.is_empty(), "db-sync pods beside {first}: {beside:?}");
        named |= cinder_conditions(&h.client, "rp")
            .await
            .iter()
            .any(|c| c.type_ == "DatabaseReady" && c.message.contains(&waited));
        assert!(
            since.elapsed() < Duration::from_secs(60),
            "{first} still there after 60 s: {old:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(saw_terminating, "{first} was never seen Terminating");
    assert!(named, "DatabaseReady never said that it {waited}");

    // Then the Job of 2026.1-p2 runs.
    eventually("the db-sync pod of 2026.1-p2", || async {
        db_sync_pods(&h.client)
            .await
            .into_iter()
            .find(|(name, ..)| *name != first)
    })
    .await
    .unwrap();
    h.stop().await.unwrap();
}
