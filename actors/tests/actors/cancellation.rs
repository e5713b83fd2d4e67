//! A Lock cancelled while it waits never keeps a lock: the grant it was queued for is given back,
//! whether the holder released before or after the cancellation.

use crate::support::*;
use cinder_actors::CoordinatorHandle;
use cinder_actors::Kind;
use cinder_actors::query::*;
use serde_json::json;

#[actix::test]
async fn a_cancelled_waiter_never_keeps_the_lock() {
    cancelled_waiter(CoordinatorHandle::start_standard()).await;
}

#[actix::test]
async fn a_cancelled_waiter_never_keeps_the_lock_on_two_arbiters() {
    cancelled_waiter(coordinator_on(2)).await;
}

async fn cancelled_waiter(c: CoordinatorHandle) {
    c.load(Kind::Node, "n", json!({})).await.unwrap();
    for round in 0..40 {
        let holder = c.lock(vec![query([upsert_node("n")])]).await.unwrap();
        let waiter = {
            let c = c.clone();
            tokio::task::spawn_local(async move {
                let l = c.lock(vec![query([upsert_node("n")])]).await.unwrap();
                l.unlock().await;
            })
        };
        wait_for_waiters(&c, "node", "n", 1).await;
        if round % 2 == 0 {
            // Cancelled before the grant: the queued request goes away.
            waiter.abort();
            let _ = waiter.await;
            holder.unlock().await;
        } else {
            // Granted (delivered to the waiting task) before the task is cancelled.
            holder.unlock().await;
            waiter.abort();
            let _ = waiter.await;
        }
        assert_nothing_held(&c).await;
    }
    // The lock is still usable.
    let l = c.lock(vec![query([upsert_node("n")])]).await.unwrap();
    assert!(l.results()[0].node.read.as_deref().is_some());
    l.unlock().await;
    assert_nothing_held(&c).await;
}
