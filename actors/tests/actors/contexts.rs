//! Lock contexts: a NestedLock accepts only the unchanged context of a phase that still holds its
//! locks; a context that was unlocked, altered, built by hand or issued by another coordinator is
//! refused with its code, and takes no lock.

use crate::support::*;
use cinder_actors::query::*;
use cinder_actors::{CoordinatorHandle, LockContext, LockError, LockMode};
use serde_json::json;

async fn cache(c: &CoordinatorHandle) {
    c.load("backend", "b1", json!({"name": "n1"}))
        .await
        .unwrap();
    c.load("volume", "v1", json!({"backend": "b1"}))
        .await
        .unwrap();
}

#[actix::test]
async fn a_context_reused_after_unlock_is_refused() {
    let c = CoordinatorHandle::start_standard();
    cache(&c).await;
    let outer = c
        .lock(vec![query([upsert_backend("b1", "", "")])])
        .await
        .unwrap();
    let context = outer.context.clone();
    outer.unlock().await;
    let err = c
        .nested_lock(&context, vec![query([upsert_volume("v1", "b1")])])
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::ReleasedContext { .. }), "{err:?}");
    assert_eq!(err.code(), "released_context");
    assert_nothing_held(&c).await;
}

#[actix::test]
async fn an_altered_context_is_refused() {
    let c = CoordinatorHandle::start_standard();
    cache(&c).await;
    let outer = c.lock(vec![query([read_backend("b1")])]).await.unwrap();
    // Claiming a write the phase never took would let the nested lock skip the backend's lock.
    let mut forged = outer.context.clone();
    forged
        .held
        .insert(("backend".to_string(), "b1".to_string()), LockMode::Write);
    let err = c
        .nested_lock(&forged, vec![query([upsert_backend("b1", "", "")])])
        .await
        .unwrap_err();
    assert_eq!(err.code(), "foreign_context", "{err}");
    // The genuine context still works.
    let nested = c
        .nested_lock(&outer.context, vec![query([upsert_volume("v1", "b1")])])
        .await
        .unwrap();
    nested.unlock().await;
    outer.unlock().await;
    assert_nothing_held(&c).await;
}

#[actix::test]
async fn a_context_built_by_hand_or_from_another_coordinator_is_refused() {
    let c = CoordinatorHandle::start_standard();
    let other = CoordinatorHandle::start_standard();
    cache(&c).await;
    cache(&other).await;
    let err = c
        .nested_lock(
            &LockContext::default(),
            vec![query([upsert_volume("v1", "b1")])],
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "foreign_context", "{err}");

    let theirs = other
        .lock(vec![query([upsert_backend("b1", "", "")])])
        .await
        .unwrap();
    let err = c
        .nested_lock(&theirs.context, vec![query([upsert_volume("v1", "b1")])])
        .await
        .unwrap_err();
    assert_eq!(err.code(), "foreign_context", "{err}");
    theirs.unlock().await;
    assert_nothing_held(&c).await;
    assert_nothing_held(&other).await;
}
