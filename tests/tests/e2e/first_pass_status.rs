//! The pass that adds the Cinder finalizer writes the status too (every exit path does): a new
//! Cinder's first stored status, with the finalizer already on, carries observedGeneration and
//! Ready False (NotAllReady) before any step reported a sub-condition. Seen through a watch, so
//! no version in between is missed.

use cinder_e2e::*;
use cinder_operator::crd::Cinder;
use futures::StreamExt;
use kube::Api;
use kube::runtime::watcher;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_finalizer_pass_writes_the_status_skeleton() {
    let h = Harness::start().await.unwrap();
    let api: Api<Cinder> = h.api();
    let mut versions = Box::pin(watcher::watch_object(api, "fresh"));
    // No credentials: the Secrets step gates, so the later passes add SecretsReady only.
    create_cinder(&h.client, "fresh", serde_json::json!({}))
        .await
        .unwrap();
    let first = tokio::time::timeout(EVENTUALLY, async {
        while let Some(next) = versions.next().await {
            let Ok(Some(cinder)) = next else { continue };
            if let Some(status) = cinder.status.clone().filter(|s| !s.conditions.is_empty()) {
                return (cinder, status);
            }
        }
        panic!("the watch ended");
    })
    .await
    .expect("a status within the wait");
    let (cinder, status) = first;
    assert!(
        cinder
            .metadata
            .finalizers
            .unwrap_or_default()
            .iter()
            .any(|f| f == "cinder.openstack.c5c3.io/finalizer"),
        "the status came before the finalizer"
    );
    let types: Vec<&str> = status.conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(
        types,
        vec!["Ready"],
        "the first status came from a step pass"
    );
    assert_eq!(status.observed_generation, cinder.metadata.generation);
    let ready = &status.conditions[0];
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "NotAllReady")
    );
    h.stop().await.unwrap();
}
