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

async fn three_volumes(c: &CoordinatorHandle) {
    cache(c).await;
    for v in ["v2", "v3"] {
        c.load("volume", v, json!({"backend": "b1"})).await.unwrap();
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
    let b = c
        .nested_lock(&a.context, vec![query([upsert_volume("v3", "b1")])])
        .await
        .unwrap();
    // Through the older context, v1 would sort after A's last lock but before B's (v3): another
    // transaction holding v1 and waiting for v3 would deadlock with this one.
    let err = c
        .nested_lock(&a.context, vec![query([upsert_volume("v1", "b1")])])
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
    let d = c
        .nested_lock(&b.context, vec![query([upsert_snapshot("v3", "s3")])])
        .await
        .unwrap();
    // Once the newer phases are unlocked, the older context is the newest again.
    d.unlock().await;
    let err = c
        .nested_lock(&a.context, vec![query([upsert_volume("v1", "b1")])])
        .await
        .unwrap_err();
    assert_eq!(err.code(), "stale_context", "B still extends A: {err}");
    b.unlock().await;
    let e = c
        .nested_lock(&a.context, vec![query([upsert_volume("v1", "b1")])])
        .await
        .unwrap();
    e.unlock().await;
    a.unlock().await;
    assert_nothing_held(&c).await;
}

#[actix::test]
async fn unlocking_the_outer_phase_ends_the_nested_one_first() {
    let c = CoordinatorHandle::start_standard();
    three_volumes(&c).await;
    let outer = c
        .lock(vec![query([upsert_backend("b1", "", "")])])
        .await
        .unwrap();
    let txn = outer.context.txn;
    let nested = c
        .nested_lock(&outer.context, vec![query([upsert_volume("v1", "b1")])])
        .await
        .unwrap();
    let deeper = c
        .nested_lock(&nested.context, vec![query([upsert_volume("v2", "b1")])])
        .await
        .unwrap();
    let before = c.inspect().await.unwrap();
    assert_eq!(holders_of(&before, "volume", "v1"), vec![txn]);
    assert_eq!(holders_of(&before, "volume", "v2"), vec![txn]);
    outer.unlock().await;
    // The nested contexts claimed the backend the transaction no longer holds: they are ended
    // with the outer phase, and their locks released with it.
    for ctx in [&nested.context, &deeper.context] {
        let err = c
            .nested_lock(ctx, vec![query([upsert_snapshot("v2", "s2")])])
            .await
            .unwrap_err();
        assert_eq!(err.code(), "released_context", "{err}");
    }
    let after = c.inspect().await.unwrap();
    assert!(after.transactions.is_empty(), "{:?}", after.transactions);
    assert_nothing_held(&c).await;
    // Another transaction takes v1 while the old nested guard is still alive; committing through
    // the old nested result is refused, and dropping the old guard releases nothing of the new one.
    let other = c
        .lock(vec![query([upsert_volume("v1", "b1")])])
        .await
        .unwrap();
    let err = nested.results[0]
        .get("volume")
        .unwrap()
        .upsert(json!({"backend": "b1", "late": true}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "not_held", "{err}");
    drop(deeper);
    drop(nested);
    let snap = c.inspect().await.unwrap();
    assert_eq!(holders_of(&snap, "volume", "v1"), vec![other.context.txn]);
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
            Some(&outer.context),
            vec![query([upsert_volume("v1", "b1")])],
            cinder_actors::Priority::Default,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "lock_while_held", "{err}");
    assert!(err.to_string().contains("NestedLock"), "{err}");
    // Through a newer phase's context as well.
    let nested = c
        .nested_lock(&outer.context, vec![query([upsert_snapshot("v2", "s2")])])
        .await
        .unwrap();
    let err = c
        .lock_from(
            Some(&nested.context),
            vec![query([upsert_node("n1")])],
            cinder_actors::Priority::Default,
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
    let nested_context = nested.context.clone();
    nested.unlock().await;
    // The nested phase is gone, the outer one still holds v2.
    let err = c
        .lock_from(
            Some(&nested_context),
            vec![query([upsert_volume("v1", "b1")])],
            cinder_actors::Priority::Default,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "lock_while_held", "{err}");
    let context = outer.context.clone();
    outer.unlock().await;
    // Once unlocked, the transaction holds nothing: the Lock is a new transaction.
    let again = c
        .lock_from(
            Some(&context),
            vec![query([upsert_volume("v1", "b1")])],
            cinder_actors::Priority::Default,
        )
        .await
        .unwrap();
    assert_ne!(again.context.txn, context.txn);
    again.unlock().await;
    // A context no coordinator issued is refused as such.
    let err = c
        .lock_from(
            Some(&LockContext::default()),
            vec![query([upsert_node("n1")])],
            cinder_actors::Priority::Default,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "foreign_context", "{err}");
    assert_nothing_held(&c).await;
}
