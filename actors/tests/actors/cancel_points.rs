//! Cancellation of a Lock at every await point: whenever the caller drops it, what it already holds
//! is released at once (not once it would have been granted everything), it never keeps the root
//! read (a shutdown after it is never stalled), and no lock stays held; on one arbiter and on two.

use crate::support::*;
use cinder_actors::Kind;
use cinder_actors::query::*;
use cinder_actors::{CoordinatorHandle, LockError, Locked};
use proptest::prelude::*;
use serde_json::json;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

async fn seeded(arbiters: usize) -> CoordinatorHandle {
    let c = coordinator_on(arbiters);
    c.load(Kind::Backend, "backend1", json!({"name": "b1"}))
        .await
        .unwrap();
    c.load(Kind::Node, "node1", json!({})).await.unwrap();
    c.load(Kind::Volume, "volume1", json!({"backend": "backend1"}))
        .await
        .unwrap();
    c
}

/// The reference design's first worked example: six locks, lists (a message to the coordinator after the grants).
fn example_one(
    c: &CoordinatorHandle,
) -> Pin<Box<dyn Future<Output = Result<Locked<'static>, LockError>>>> {
    let c = c.clone();
    Box::pin(async move {
        c.lock(vec![
            query([
                upsert_volume_publication("volume1", "node1"),
                list_volume_publications(),
                list_volumes(),
                read_backend(""),
                upsert_volume("volume1", ""),
            ]),
            query([
                upsert_backend("backend1", "", ""),
                upsert_snapshot("volume1", "snap1"),
            ]),
        ])
        .await
    })
}

/// Polls the Lock `polls` times, letting the actors run in between, then drops it (unless it
/// finished first: then it is unlocked).
async fn cancel_after(c: &CoordinatorHandle, polls: usize, contended: bool) {
    // A holder of the snapshot makes the Lock wait on its last lock while it holds the others.
    let holder = if contended {
        Some(
            c.lock(vec![query([upsert_snapshot("volume1", "snap1")])])
                .await
                .unwrap(),
        )
    } else {
        None
    };
    let mut lock = example_one(c);
    let mut finished = None;
    for _ in 0..polls {
        if let std::task::Poll::Ready(r) = futures::poll!(lock.as_mut()) {
            finished = Some(r.unwrap());
            break;
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    drop(lock);
    if let Some(locked) = finished {
        locked.unlock().await;
    }
    if let Some(holder) = holder {
        // While the holder still holds the snapshot, the cancelled Lock holds nothing: the root
        // has the holder's read alone, and the volume is free.
        let holder_txn = holder.context().txn;
        eventually("the cancelled lock released what it held", || {
            let c = c.clone();
            async move {
                let s = c.inspect().await.unwrap();
                s.resources
                    .iter()
                    .all(|r| r.holders.iter().all(|t| *t == holder_txn) && r.waiters.is_empty())
            }
        })
        .await;
        holder.unlock().await;
    }
    // The root read is not kept: a shutdown gets the root write.
    let shutdown = tokio::time::timeout(Duration::from_secs(60), c.shutdown())
        .await
        .expect("a shutdown is never stalled by a cancelled lock")
        .unwrap();
    shutdown.release().await;
    assert_nothing_held(c).await;
}

fn run_case(arbiters: usize, polls: usize, contended: bool) {
    actix::System::new().block_on(async move {
        let c = seeded(arbiters).await;
        cancel_after(&c, polls, contended).await;
        // Nothing left in the transaction table either.
        eventually("no phase left", || {
            let c = c.clone();
            async move { c.inspect().await.unwrap().transactions.is_empty() }
        })
        .await;
        c.stop().await;
    });
}

#[test]
fn every_cancel_point_on_one_arbiter() {
    for polls in 0..16 {
        run_case(1, polls, true);
        run_case(1, polls, false);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn any_cancel_point_releases_at_once(
        arbiters in 1usize..=2,
        polls in 0usize..40,
        contended in any::<bool>(),
    ) {
        run_case(arbiters, polls, contended);
    }
}
