//! Lock contexts: a NestedLock goes through the guard it extends (so its context is the phase's
//! own, unchanged, and the phase holds its locks: the compile-time checks are the doc-tests of
//! `coordinator/guard.rs`), only through the newest phase of its transaction; a context presented
//! to `lock_from` that was altered, built by hand or issued by another coordinator is refused with
//! its code, and takes no lock; unlocking an outer phase ends the nested phases still on it.

use crate::support::*;
use cinder_actors::Kind;
use cinder_actors::query::*;
use cinder_actors::{CoordinatorHandle, LockContext, LockMode, Priority};
use serde_json::json;

async fn cache(c: &CoordinatorHandle) {
    c.load(Kind::Backend, "b1", json!({"name": "n1"}))
        .await
        .unwrap();
    c.load(Kind::Volume, "v1", json!({"backend": "b1"}))
        .await
        .unwrap();
}

#[actix::test]
async fn an_altered_context_is_refused() {
    let c = CoordinatorHandle::start_standard();
    cache(&c).await;
    let outer = c.lock(vec![query([read_backend("b1")])]).await.unwrap();
    // A context claiming a write the phase never took is not the one the coordinator issued.
    let mut forged = outer.context().clone();
    forged
        .held
        .insert(("backend".to_string(), "b1".to_string()), LockMode::Write);
    let err = c
        .lock_from(
            Some(&forged),
            vec![query([upsert_node("n1")])],
            Priority::Default,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "foreign_context", "{err}");
    // The genuine context is the transaction's: refused as held, and the guard still extends it.
    let err = c
        .lock_from(
            Some(outer.context()),
            vec![query([upsert_node("n1")])],
            Priority::Default,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "lock_while_held", "{err}");
    let nested = outer
        .nested_lock(vec![query([upsert_volume("v1", "b1")])])
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
        .lock_from(
            Some(&LockContext::default()),
            vec![query([upsert_volume("v1", "b1")])],
            Priority::Default,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "foreign_context", "{err}");

    let theirs = other
        .lock(vec![query([upsert_backend("b1", "", "")])])
        .await
        .unwrap();
    let err = c
        .lock_from(
            Some(theirs.context()),
            vec![query([upsert_volume("v1", "b1")])],
            Priority::Default,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "foreign_context", "{err}");
    theirs.unlock().await;
    assert_nothing_held(&c).await;
    assert_nothing_held(&other).await;
}

async fn three_volumes(c: &CoordinatorHandle) {
    cache(c).await;
    for v in ["v2", "v3"] {
        c.load(Kind::Volume, v, json!({"backend": "b1"}))
            .await
            .unwrap();
    }
}

fn holders_of(snap: &cinder_actors::CoordinatorSnapshot, kind: &str, id: &str) -> Vec<u64> {
    snap.resources
        .iter()
        .find(|r| r.kind == kind && r.id == id)
        .map(|r| r.holders.clone())
        .unwrap_or_default()
}

#[actix::test]
async fn only_the_newest_context_extends_a_transaction() {
    let c = CoordinatorHandle::start_standard();
    three_volumes(&c).await;
    let a = c.lock(vec![query([read_backend("b1")])]).await.unwrap();
    let b = a
        .nested_lock(vec![query([upsert_volume("v3", "b1")])])
        .await
        .unwrap();
    // Through the older context, v1 would sort after A's last lock but before B's (v3): another
    // transaction holding v1 and waiting for v3 would deadlock with this one.
    let err = a
        .nested_lock(vec![query([upsert_volume("v1", "b1")])])
        .await
        .unwrap_err();
    assert_eq!(err.code(), "stale_context", "{err}");
    assert!(err.to_string().contains("newest"), "{err}");
    let snap = c.inspect().await.unwrap();
    assert!(
        holders_of(&snap, "volume", "v1").is_empty(),
        "a refused lock took v1"
    );
    // The newest context still extends it, in order.
    let d = b
        .nested_lock(vec![query([upsert_snapshot("v3", "s3")])])
        .await
        .unwrap();
    // Once the newer phases are unlocked, the older context is the newest again.
    d.unlock().await;
    let err = a
        .nested_lock(vec![query([upsert_volume("v1", "b1")])])
        .await
        .unwrap_err();
    assert_eq!(err.code(), "stale_context", "B still extends A: {err}");
    b.unlock().await;
    let e = a
        .nested_lock(vec![query([upsert_volume("v1", "b1")])])
        .await
        .unwrap();
    e.unlock().await;
    a.unlock().await;
    assert_nothing_held(&c).await;
}

#[actix::test]
async fn unlocking_the_outer_phase_ends_forgotten_nested_ones() {
    let c = CoordinatorHandle::start_standard();
    three_volumes(&c).await;
    let outer = c
        .lock(vec![query([upsert_backend("b1", "", "")])])
        .await
        .unwrap();
    let txn = outer.context().txn;
    let nested = outer
        .nested_lock(vec![query([upsert_volume("v1", "b1")])])
        .await
        .unwrap();
    let deeper = nested
        .nested_lock(vec![query([upsert_volume("v2", "b1")])])
        .await
        .unwrap();
    let before = c.inspect().await.unwrap();
    assert_eq!(holders_of(&before, "volume", "v1"), vec![txn]);
    assert_eq!(holders_of(&before, "volume", "v2"), vec![txn]);
    // The borrow rules keep the nested guards from outliving the outer one; a guard that is
    // forgotten (never unlocked, never dropped) must not leave its locks behind either.
    let nested_txn = nested.context().txn;
    std::mem::forget(deeper);
    std::mem::forget(nested);
    outer.unlock().await;
    // The nested phases claimed the backend the transaction no longer holds: they are ended with
    // the outer phase, and their locks released with it.
    assert_eq!(nested_txn, txn);
    let after = c.inspect().await.unwrap();
    assert!(after.transactions.is_empty(), "{:?}", after.transactions);
    assert_nothing_held(&c).await;
    let other = c
        .lock(vec![query([upsert_volume("v1", "b1")])])
        .await
        .unwrap();
    let snap = c.inspect().await.unwrap();
    assert_eq!(holders_of(&snap, "volume", "v1"), vec![other.context().txn]);
    other.unlock().await;
    assert_nothing_held(&c).await;
}

#[actix::test]
async fn a_top_level_lock_from_a_transaction_that_holds_locks_is_refused() {
    let c = CoordinatorHandle::start_standard();
    three_volumes(&c).await;
    let outer = c
        .lock(vec![query([upsert_volume("v2", "b1")])])
        .await
        .unwrap();
    // v1 sorts before v2: a second Lock from this transaction could wait for v1 while v1's holder
    // waits for v2.
    let err = c
        .lock_from(
            Some(outer.context()),
            vec![query([upsert_volume("v1", "b1")])],
            Priority::Default,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "lock_while_held", "{err}");
    assert!(err.to_string().contains("NestedLock"), "{err}");
    // Through a newer phase's context as well.
    let nested = outer
        .nested_lock(vec![query([upsert_snapshot("v2", "s2")])])
        .await
        .unwrap();
    let err = c
        .lock_from(
            Some(nested.context()),
            vec![query([upsert_node("n1")])],
            Priority::Default,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "lock_while_held", "{err}");
    let snap = c.inspect().await.unwrap();
    assert!(
        holders_of(&snap, "volume", "v1").is_empty(),
        "a refused lock took v1"
    );
    assert_eq!(snap.transactions.len(), 2, "{:?}", snap.transactions);
    let nested_context = nested.context().clone();
    nested.unlock().await;
    // The nested phase is gone, the outer one still holds v2.
    let err = c
        .lock_from(
            Some(&nested_context),
            vec![query([upsert_volume("v1", "b1")])],
            Priority::Default,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "lock_while_held", "{err}");
    let context = outer.context().clone();
    outer.unlock().await;
    // Once unlocked, the transaction holds nothing: the Lock is a new transaction.
    let again = c
        .lock_from(
            Some(&context),
            vec![query([upsert_volume("v1", "b1")])],
            Priority::Default,
        )
        .await
        .unwrap();
    assert_ne!(again.context().txn, context.txn);
    again.unlock().await;
    // A context no coordinator issued is refused as such.
    let err = c
        .lock_from(
            Some(&LockContext::default()),
            vec![query([upsert_node("n1")])],
            Priority::Default,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "foreign_context", "{err}");
    assert_nothing_held(&c).await;
}
