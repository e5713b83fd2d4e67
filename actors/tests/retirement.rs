//! Actors of absent resources retire when idle and are re-created on demand; requests racing a
//! retirement are re-resolved, and exclusive locks stay exclusive across generations.

mod support;

use cinder_actors::CoordinatorHandle;
use cinder_actors::query::*;
use serde_json::json;
use std::cell::Cell;
use std::rc::Rc;
use support::*;

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
    if c.peek("node", "ghost").is_none() {
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
