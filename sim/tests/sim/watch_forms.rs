//! Watches of one kind asking for different forms each see a change in their own form, however
//! many watches share the event's encodings: the whole object (two watches), metadata only, and
//! through a label selector the change makes the object enter (ADDED).

use crate::common::server_only;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use std::time::Duration;

/// The next event of a watch (60 s at most: the machine may be loaded).
async fn next<T>(
    events: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<T>>> + Unpin),
) -> WatchEvent<T> {
    match tokio::time::timeout(Duration::from_secs(60), events.next()).await {
        Ok(Some(Ok(event))) => event,
        other => panic!("no watch event: {:?}", other.map(|e| e.map(|r| r.is_ok()))),
    }
}

#[tokio::test]
async fn watches_in_different_forms_each_get_their_own_line() {
    let c = server_only().await;
    let api: Api<ConfigMap> = Api::default_namespaced(c.client().await);
    let cm: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "shared", "labels": {"app": "a"}}, "data": {"k": "v"}}),
    )
    .unwrap();
    let created = api.create(&PostParams::default(), &cm).await.unwrap();
    let rv = created.resource_version().unwrap();
    let params = WatchParams::default().timeout(120);
    // each watch is subscribed once its answer's head arrives, so all see the change live
    let mut whole = api.watch(&params, &rv).await.unwrap().boxed();
    let mut whole_again = api.watch(&params, &rv).await.unwrap().boxed();
    let mut metadata = api.watch_metadata(&params, &rv).await.unwrap().boxed();
    let mut selected = api
        .watch(&params.clone().labels("app=b"), &rv)
        .await
        .unwrap()
        .boxed();
    let patch = Patch::Merge(json!({"metadata": {"labels": {"app": "b"}}}));
    api.patch("shared", &PatchParams::default(), &patch)
        .await
        .unwrap();
    for events in [&mut whole, &mut whole_again] {
        match next(events).await {
            WatchEvent::Modified(o) => {
                assert_eq!(o.labels()["app"], "b");
                assert_eq!(o.data.unwrap()["k"], "v");
            }
            other => panic!("expected MODIFIED, got {other:?}"),
        }
    }
    match next(&mut metadata).await {
        WatchEvent::Modified(o) => {
            assert_eq!(o.types.unwrap().kind, "PartialObjectMetadata");
            assert_eq!(o.metadata.labels.unwrap()["app"], "b");
        }
        other => panic!("expected MODIFIED, got {other:?}"),
    }
    match next(&mut selected).await {
        WatchEvent::Added(o) => assert_eq!(o.data.unwrap()["k"], "v"),
        other => panic!("expected ADDED (the object enters the selector), got {other:?}"),
    }
}
