//! Refusals: each returns its typed error (with its code) and takes no lock.

use crate::support::*;
use cinder_actors::Kind;
use cinder_actors::query::*;
use cinder_actors::{CoordinatorHandle, LockError, LockedEntry, Op};
use serde_json::json;

async fn cache() -> CoordinatorHandle {
    let c = CoordinatorHandle::start_standard();
    c.load(Kind::Backend, "b1", json!({"name": "n1"}))
        .await
        .unwrap();
    c.load(Kind::Backend, "b2", json!({"name": "n2"}))
        .await
        .unwrap();
    c.load(Kind::Node, "node1", json!({})).await.unwrap();
    c.load(Kind::Volume, "v1", json!({"backend": "b1"}))
        .await
        .unwrap();
    c.load(Kind::Volume, "v2", json!({"backend": "b1"}))
        .await
        .unwrap();
    c
}

#[actix::test]
async fn two_non_list_ops_of_one_kind_in_one_query() {
    let c = cache().await;
    let err = c
        .lock(vec![query([read_volume("v1"), upsert_volume("v2", "b1")])])
        .await
        .unwrap_err();
    assert!(
        matches!(err, LockError::DuplicateOperation { query: 0, .. }),
        "{err}"
    );
    assert_eq!(err.code(), "duplicate_operation");
    assert!(err.to_string().contains("volume"));
    assert_nothing_held(&c).await;
}

#[actix::test]
async fn two_lists_of_one_kind_in_one_query() {
    let c = cache().await;
    let err = c
        .lock(vec![query([
            list_volumes(),
            list_volumes_for_backend("b1"),
            upsert_node("node1"),
        ])])
        .await
        .unwrap_err();
    assert_eq!(err.code(), "duplicate_operation");
    assert_nothing_held(&c).await;
}

#[actix::test]
async fn nested_lock_sorting_before_last_lock_held() {
    let c = cache().await;
    let outer = c
        .lock(vec![query([upsert_volume("v1", "")])])
        .await
        .unwrap();
    let before = c.inspect().await.unwrap().busy().len();
    let err = outer
        .nested_lock(vec![query([upsert_backend("b2", "", "")])])
        .await
        .unwrap_err();
    assert_eq!(err.code(), "would_deadlock");
    assert!(
        err.to_string().contains("backend") && err.to_string().contains("volume"),
        "{err}"
    );
    // v2 sorts after v1, but the node sorts before: the whole nested call is refused.
    let err = outer
        .nested_lock(vec![
            query([upsert_volume("v2", "")]),
            query([read_node("node1")]),
        ])
        .await
        .unwrap_err();
    assert_eq!(err.code(), "would_deadlock");
    let snap = c.inspect().await.unwrap();
    assert_eq!(
        snap.busy().len(),
        before,
        "the refused nested lock took nothing"
    );
    assert!(
        !snap
            .resources
            .iter()
            .any(|r| r.id == "v2" && !r.holders.is_empty())
    );
    outer.unlock().await;
    assert_nothing_held(&c).await;
}

#[actix::test]
async fn nested_read_to_write_upgrade() {
    let c = cache().await;
    let outer = c.lock(vec![query([read_node("node1")])]).await.unwrap();
    let err = outer
        .nested_lock(vec![query([upsert_node("node1")])])
        .await
        .unwrap_err();
    assert_eq!(
        err,
        LockError::LockUpgrade {
            op: Op::Upsert,
            kind: "node".into(),
            id: "node1".into()
        }
    );
    outer.unlock().await;
    assert_nothing_held(&c).await;
}

#[actix::test]
async fn new_key_in_nested_lock() {
    let c = cache().await;
    let outer = c.lock(vec![query([read_node("node1")])]).await.unwrap();
    let err = outer
        .nested_lock(vec![query([upsert_backend("b1", "", "renamed")])])
        .await
        .unwrap_err();
    assert_eq!(err.code(), "key_update_in_nested");
    outer.unlock().await;
    assert_nothing_held(&c).await;
}

#[actix::test]
async fn key_collision() {
    let c = cache().await;
    let err = c
        .lock(vec![query([upsert_backend("b2", "", "n1")])])
        .await
        .unwrap_err();
    assert_eq!(
        err,
        LockError::KeyExists {
            kind: "backend".into(),
            key: "n1".into(),
            owner: "b1".into(),
            id: "b2".into()
        }
    );
    assert_nothing_held(&c).await;

    // A rename under the key lock works, and a commit that would collide is refused.
    let l = c
        .lock(vec![query([upsert_backend("", "n2", "n3")])])
        .await
        .unwrap();
    assert_eq!(l.held()[0], step("write", "key:backend", "n3"));
    let b = &l.results()[0].backend;
    assert_eq!(b.id(), "b2");
    let err = b.upsert(json!({"name": "n1"})).await.unwrap_err();
    assert_eq!(err.code(), "key_exists");
    b.upsert(json!({"name": "n3"})).await.unwrap();
    l.unlock().await;
    let l = c
        .lock(vec![query([read_backend_by_name("n3")])])
        .await
        .unwrap();
    assert_eq!(l.results()[0].backend.id(), "b2");
    l.unlock().await;
    assert_nothing_held(&c).await;
}

#[actix::test]
async fn list_only_nested_keeps_last_lock_held() {
    let c = cache().await;
    let outer = c
        .lock(vec![query([upsert_volume("v2", "")])])
        .await
        .unwrap();
    let last = Some(LockedEntry {
        op: Op::Upsert,
        kind: "volume".into(),
        id: "v2".into(),
    });
    assert_eq!(outer.context().last_lock_held, last);
    let lists = outer
        .nested_lock(vec![query([list_backends(), list_nodes()])])
        .await
        .unwrap();
    assert!(lists.held().is_empty());
    assert_eq!(lists.context().last_lock_held, last);
    assert_eq!(lists.results()[0].backends.len(), 2);
    let iread = lists
        .nested_lock(vec![query([inconsistent_read_backend("b2")])])
        .await
        .unwrap();
    assert_eq!(iread.context().last_lock_held, last);
    assert!(iread.results()[0].backend.read.as_deref().is_some());
    // A later out-of-order nested lock is still refused.
    let err = iread
        .nested_lock(vec![query([upsert_volume("v1", "")])])
        .await
        .unwrap_err();
    assert_eq!(err.code(), "would_deadlock");
    outer.unlock().await;
    assert_nothing_held(&c).await;
}

#[actix::test]
async fn missing_owner_and_unknown_kind() {
    let c = cache().await;
    let err = c
        .lock(vec![query([upsert_volume("new", "")])])
        .await
        .unwrap_err();
    assert_eq!(err.code(), "not_found");
    let err = c
        .lock(vec![query([cinder_actors::Subquery::read("gadget", "g")])])
        .await
        .unwrap_err();
    assert_eq!(err.code(), "unknown_kind");
    assert_nothing_held(&c).await;
}

#[actix::test]
async fn commits_through_a_kind_the_query_did_not_ask_for_or_its_operation_forbids() {
    let c = cache().await;
    let l = c.lock(vec![query([read_volume("v1")])]).await.unwrap();
    let r = &l.results()[0];
    assert_eq!(r.volume.op(), Some(Op::Read));
    assert_eq!(r.volume.id(), "v1");
    // The backend is locked (a synthetic read) but the query did not ask for it: no result.
    assert_eq!(r.backend.op(), None);
    assert!(r.backend.read.is_none() && r.snapshot.read.is_none());
    let err = r.snapshot.upsert(json!({})).await.unwrap_err();
    assert_eq!(err.code(), "not_asked", "{err}");
    assert!(err.to_string().contains("snapshot"), "{err}");
    let err = r.backend.reserve_capacity(1).await.unwrap_err();
    assert_eq!(err.code(), "not_asked", "{err}");
    let err = r.volume.delete().await.unwrap_err();
    assert_eq!(err.code(), "wrong_operation", "{err}");
    // A working copy is plain data: a clone edited changes nothing in the result or the cache.
    let mut copy = r.volume.read.clone().unwrap();
    copy["edited"] = json!(true);
    assert!(r.volume.read.as_ref().unwrap().get("edited").is_none());
    assert!(
        c.peek(Kind::Volume, "v1")
            .await
            .unwrap()
            .get("edited")
            .is_none()
    );
    l.unlock().await;
    assert_nothing_held(&c).await;
}
