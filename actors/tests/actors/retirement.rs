//! Actors of absent resources retire when idle and are re-created on demand; requests racing a
//! retirement are re-resolved, and exclusive locks stay exclusive across generations.

use crate::support::*;
use cinder_actors::CoordinatorHandle;
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
                let r = l.results[0].get("node").unwrap();
                if create {
                    r.upsert(json!({"by": i})).await.unwrap();
                } else if r.op == cinder_actors::Op::Delete && r.read.is_some() {
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
    if c.peek("node", "ghost").await.is_none() {
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
    c.load("node", "a", json!({})).await.unwrap();
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
    assert!(b.results[1].read("node").is_none());
    let snap = c.inspect().await.unwrap();
    let ghost = snap.resources.iter().find(|r| r.id == "ghost").unwrap();
    assert_eq!(ghost.holders, vec![b.context.txn]);
    b.results[1]
        .get("node")
        .unwrap()
        .upsert(json!({"x": 1}))
        .await
        .unwrap();
    b.unlock().await;
    assert_eq!(c.peek("node", "ghost").await.unwrap()["x"], 1);
    assert_nothing_held(&c).await;
}
