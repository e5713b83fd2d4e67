//! Actors of absent resources retire when idle and are re-created on demand; requests racing a
//! retirement are re-resolved, and exclusive locks stay exclusive across generations.

use crate::support::*;
use cinder_actors::CoordinatorHandle;
use cinder_actors::Kind;
use cinder_actors::query::*;
use serde_json::json;
use std::cell::Cell;
use std::rc::Rc;

#[actix::test]
async fn exclusive_across_retirements() {
    let c = CoordinatorHandle::start_standard();
    let inside = Rc::new(Cell::new(false));
    let overlaps = Rc::new(Cell::new(0u32));
    let mut handles = Vec::new();
    // Three workers, each looping: between iterations the lock is often idle while the node is
    // absent, so its actor retires and the next request races the retirement.
    for w in 0..3u32 {
        let (c, inside, overlaps) = (c.clone(), inside.clone(), overlaps.clone());
        handles.push(tokio::task::spawn_local(async move {
            for n in 0..100u32 {
                let i = w * 1000 + n;
                let (sq, create) = match (i + w) % 3 {
                    0 => (upsert_node("ghost"), true),
                    1 => (delete_node("ghost"), false),
                    _ => (upsert_node("ghost"), false),
                };
                let l = c.lock(vec![query([sq])]).await.unwrap();
                if inside.replace(true) {
                    overlaps.set(overlaps.get() + 1);
                }
                tokio::task::yield_now().await;
                let r = &l.results()[0].node;
                if create {
                    r.upsert(json!({"by": i})).await.unwrap();
                } else if r.op() == Some(cinder_actors::Op::Delete) && r.read.is_some() {
                    r.delete().await.unwrap();
                }
                tokio::task::yield_now().await;
                inside.set(false);
                l.unlock().await;
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    assert_eq!(
        overlaps.get(),
        0,
        "two transactions held the exclusive lock at once"
    );
    // Absent resources' actors retire once idle.
    if c.peek(Kind::Node, "ghost").await.is_none() {
        eventually("the ghost node's actor retired", || {
            let c = c.clone();
            async move {
                !c.inspect()
                    .await
                    .unwrap()
                    .resources
                    .iter()
                    .any(|r| r.kind == "node")
            }
        })
        .await;
    }
    assert_nothing_held(&c).await;
}

#[actix::test]
async fn a_lock_waiting_elsewhere_re_resolves_a_retired_actor() {
    let c = CoordinatorHandle::start_standard();
    c.load(Kind::Node, "a", json!({})).await.unwrap();
    let holder = c.lock(vec![query([upsert_node("a")])]).await.unwrap();
    // B resolves the actors of "a" and "ghost", then waits on "a".
    let (tx, rx) = tokio::sync::oneshot::channel();
    let cb = c.clone();
    actix::spawn(async move {
        let l = cb
            .lock(vec![
                query([upsert_node("a")]),
                query([upsert_node("ghost")]),
            ])
            .await;
        let _ = tx.send(l);
    });
    wait_for_waiters(&c, "node", "a", 1).await;
    // Meanwhile C locks the absent "ghost" and releases it: its actor retires.
    let l = c.lock(vec![query([upsert_node("ghost")])]).await.unwrap();
    l.unlock().await;
    eventually("the ghost's actor retired", || {
        let c = c.clone();
        async move {
            !c.inspect()
                .await
                .unwrap()
                .resources
                .iter()
                .any(|r| r.id == "ghost")
        }
    })
    .await;
    // When "a" is released, B asks the retired actor, is refused by its closed mailbox, and
    // re-resolves a new one.
    holder.unlock().await;
    let b = rx.await.unwrap().unwrap();
    assert!(b.results()[1].node.read.as_deref().is_none());
    let snap = c.inspect().await.unwrap();
    let ghost = snap.resources.iter().find(|r| r.id == "ghost").unwrap();
    assert_eq!(ghost.holders, vec![b.context().txn]);
    b.results()[1].node.upsert(json!({"x": 1})).await.unwrap();
    b.unlock().await;
    assert_eq!(c.peek(Kind::Node, "ghost").await.unwrap()["x"], 1);
    assert_nothing_held(&c).await;
}

fn has_actor(snap: &cinder_actors::CoordinatorSnapshot, id: &str) -> bool {
    snap.resources.iter().any(|r| r.id == id)
}

#[actix::test]
async fn actors_a_cancelled_lock_never_asked_retire() {
    let c = CoordinatorHandle::start_standard();
    c.load(Kind::Node, "a", json!({})).await.unwrap();
    let holder = c.lock(vec![query([upsert_node("a")])]).await.unwrap();
    // The Begin starts the actors of "a", "ghost1" and "ghost2"; the lock waits on "a" and is
    // cancelled there, before it asks the ghosts.
    let c2 = c.clone();
    let waiter = tokio::task::spawn_local(async move {
        let _ = c2
            .lock(vec![
                query([upsert_node("a")]),
                query([upsert_node("ghost1")]),
                query([upsert_node("ghost2")]),
            ])
            .await;
    });
    wait_for_waiters(&c, "node", "a", 1).await;
    let snap = c.inspect().await.unwrap();
    assert!(has_actor(&snap, "ghost1") && has_actor(&snap, "ghost2"));
    waiter.abort();
    let _ = waiter.await;
    eventually("the unasked actors retired", || {
        let c = c.clone();
        async move {
            let snap = c.inspect().await.unwrap();
            !has_actor(&snap, "ghost1") && !has_actor(&snap, "ghost2")
        }
    })
    .await;
    holder.unlock().await;
    assert_nothing_held(&c).await;
}

#[actix::test]
async fn actors_of_a_lock_refused_after_its_key_lock_retire() {
    let c = CoordinatorHandle::start_standard();
    c.load(Kind::Backend, "b1", json!({"name": "one"}))
        .await
        .unwrap();
    c.load(Kind::Backend, "b2", json!({"name": "two"}))
        .await
        .unwrap();
    // The rename's key lock is held by another transaction, which gives the name away meanwhile.
    let renaming = c
        .lock(vec![query([upsert_backend("b2", "", "taken")])])
        .await
        .unwrap();
    let c2 = c.clone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    actix::spawn(async move {
        let r = c2
            .lock(vec![
                query([upsert_backend("b1", "", "taken")]),
                query([upsert_node("ghost")]),
            ])
            .await;
        let _ = tx.send(r.map(|_| ()).map_err(|e| e.code()));
    });
    wait_for_waiters(&c, "key:backend", "taken", 1).await;
    assert!(has_actor(&c.inspect().await.unwrap(), "ghost"));
    renaming.results()[0]
        .backend
        .upsert(json!({"name": "taken"}))
        .await
        .unwrap();
    renaming.unlock().await;
    assert_eq!(rx.await.unwrap(), Err("key_exists"));
    eventually("the unasked node actor retired", || {
        let c = c.clone();
        async move { !has_actor(&c.inspect().await.unwrap(), "ghost") }
    })
    .await;
    assert_nothing_held(&c).await;
}
