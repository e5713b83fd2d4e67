//! 10 000 concurrent transactions of random queries, on one arbiter and on two, including nested
//! locks that try inverted orders (refused, never deadlocked); transfers between volume counters
//! under write locks keep the total constant.

use crate::support::*;
use cinder_actors::Kind;
use cinder_actors::query::*;
use cinder_actors::{CoordinatorHandle, LockError, Query};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use std::time::Duration;

const VOLUMES: usize = 24;
const START: i64 = 100;

#[derive(Debug, Clone)]
enum Txn {
    Transfer {
        from: usize,
        to: usize,
        amount: i64,
    },
    NestedTransfer {
        first: usize,
        second: usize,
        amount: i64,
    },
    InvertedNested {
        held: usize,
        backend: usize,
    },
    ReadAndList {
        v: usize,
        node: usize,
    },
    Publish {
        v: usize,
        node: usize,
    },
    Reserve {
        backend: usize,
    },
}

fn vol(i: usize) -> String {
    format!("v{i:02}")
}

fn counter(v: &serde_json::Value) -> i64 {
    v["counter"].as_i64().unwrap()
}

async fn transfer_in(
    c: &CoordinatorHandle,
    queries: Vec<Query>,
    amount: i64,
) -> Result<(), LockError> {
    let l = c.lock(queries).await?;
    let (a, b) = (&l.results()[0].volume, &l.results()[1].volume);
    let (mut va, mut vb) = (a.read.clone().unwrap(), b.read.clone().unwrap());
    va["counter"] = json!(counter(&va) - amount);
    vb["counter"] = json!(counter(&vb) + amount);
    a.upsert(va).await?;
    b.upsert(vb).await?;
    l.unlock().await;
    Ok(())
}

/// Returns whether a nested lock was refused.
async fn run(c: CoordinatorHandle, t: Txn) -> Result<bool, LockError> {
    match t {
        Txn::Transfer { from, to, amount } => {
            transfer_in(
                &c,
                vec![
                    query([upsert_volume(&vol(from), "")]),
                    query([upsert_volume(&vol(to), "")]),
                ],
                amount,
            )
            .await?;
        }
        Txn::NestedTransfer {
            first,
            second,
            amount,
        } => {
            // Lock one volume, then the other in a nested lock: refused when it sorts before.
            let outer = c
                .lock(vec![query([upsert_volume(&vol(first), "")])])
                .await?;
            match outer
                .nested_lock(vec![query([upsert_volume(&vol(second), "")])])
                .await
            {
                Ok(inner) => {
                    let (a, b) = (&outer.results()[0].volume, &inner.results()[0].volume);
                    let (mut va, mut vb) = (a.read.clone().unwrap(), b.read.clone().unwrap());
                    va["counter"] = json!(counter(&va) - amount);
                    vb["counter"] = json!(counter(&vb) + amount);
                    a.upsert(va).await?;
                    b.upsert(vb).await?;
                    inner.unlock().await;
                    outer.unlock().await;
                }
                Err(e) => {
                    // Refused when the volume, or its backend's synthetic read, sorts before the held volume.
                    assert!(
                        second < first || second % 3 != first % 3,
                        "only inverted orders are refused: {e}"
                    );
                    assert_eq!(e.code(), "would_deadlock");
                    outer.unlock().await;
                    return Ok(true);
                }
            }
        }
        Txn::InvertedNested { held, backend } => {
            let outer = c.lock(vec![query([upsert_volume(&vol(held), "")])]).await?;
            let err = outer
                .nested_lock(vec![query([upsert_backend(
                    &format!("b{backend}"),
                    "",
                    "",
                )])])
                .await
                .unwrap_err();
            // The held volume's backend is read-held: writing it would be an upgrade.
            let code = if backend == held % 3 {
                "lock_upgrade"
            } else {
                "would_deadlock"
            };
            assert_eq!(err.code(), code);
            drop(outer); // released by the guard's drop
            return Ok(true);
        }
        Txn::ReadAndList { v, node } => {
            let l = c
                .lock(vec![
                    query([read_volume(&vol(v)), list_volumes()]),
                    query([read_node(&format!("n{node}"))]),
                ])
                .await?;
            assert!(l.results()[0].volume.read.as_deref().is_some());
            assert_eq!(l.results()[0].volumes.len(), VOLUMES);
            l.unlock().await;
        }
        Txn::Publish { v, node } => {
            let l = c
                .lock(vec![
                    query([upsert_volume_publication(&vol(v), &format!("n{node}"))]),
                    query([list_volume_publications()]),
                ])
                .await?;
            let p = &l.results()[0].volume_publication;
            p.upsert(json!({"volume": vol(v), "node": format!("n{node}")}))
                .await?;
            l.unlock().await;
        }
        Txn::Reserve { backend } => {
            let l = c
                .lock(vec![query([read_backend(&format!("b{backend}"))])])
                .await?;
            l.results()[0].backend.reserve_capacity(1).await?;
            l.unlock().await;
        }
    }
    Ok(false)
}

#[actix::test]
async fn many_concurrent_transactions_keep_the_invariant() {
    random_transactions(CoordinatorHandle::start_standard(), 10_000).await;
}

#[actix::test]
async fn many_concurrent_transactions_keep_the_invariant_on_two_arbiters() {
    random_transactions(coordinator_on(2), 10_000).await;
}

async fn random_transactions(c: CoordinatorHandle, count: usize) {
    for b in 0..3 {
        c.load(
            Kind::Backend,
            &format!("b{b}"),
            json!({"name": format!("backend-{b}")}),
        )
        .await
        .unwrap();
    }
    for n in 0..4 {
        c.load(Kind::Node, &format!("n{n}"), json!({}))
            .await
            .unwrap();
    }
    for i in 0..VOLUMES {
        c.load(
            Kind::Volume,
            &vol(i),
            json!({"backend": format!("b{}", i % 3), "counter": START}),
        )
        .await
        .unwrap();
    }
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let txns: Vec<Txn> = (0..count)
        .map(|_| {
            let a = rng.random_range(0..VOLUMES);
            let mut b = rng.random_range(0..VOLUMES);
            if a == b {
                b = (b + 1) % VOLUMES;
            }
            let amount = rng.random_range(1..10);
            match rng.random_range(0..10) {
                0..=3 => Txn::Transfer {
                    from: a,
                    to: b,
                    amount,
                },
                4..=5 => Txn::NestedTransfer {
                    first: a,
                    second: b,
                    amount,
                },
                6 => Txn::InvertedNested {
                    held: a,
                    backend: rng.random_range(0..3),
                },
                7 => Txn::ReadAndList {
                    v: a,
                    node: rng.random_range(0..4),
                },
                8 => Txn::Publish {
                    v: a,
                    node: rng.random_range(0..4),
                },
                _ => Txn::Reserve {
                    backend: rng.random_range(0..3),
                },
            }
        })
        .collect();
    let expected_refusals = txns
        .iter()
        .filter(|t| match t {
            Txn::NestedTransfer { first, second, .. } => second < first || second % 3 != first % 3,
            Txn::InvertedNested { .. } => true,
            _ => false,
        })
        .count();
    let reserves = txns
        .iter()
        .filter(|t| matches!(t, Txn::Reserve { .. }))
        .count();

    let handles: Vec<_> = txns
        .into_iter()
        .map(|t| actix::spawn(run(c.clone(), t)))
        .collect();
    // A deadlock would hang here; the generous bound turns it into a failure instead.
    let all = tokio::time::timeout(Duration::from_secs(600), futures::future::join_all(handles))
        .await
        .expect("all transactions finish (no deadlock)");
    let mut refusals = 0;
    for r in all {
        if r.unwrap().unwrap() {
            refusals += 1;
        }
    }
    assert_eq!(refusals, expected_refusals);

    let mut total: i64 = 0;
    for i in 0..VOLUMES {
        total += counter(&c.peek(Kind::Volume, &vol(i)).await.unwrap());
    }
    assert_eq!(total, START * VOLUMES as i64, "transfers conserve the sum");
    let mut reserved: u64 = 0;
    for b in 0..3 {
        reserved += c.peek(Kind::Backend, &format!("b{b}")).await.unwrap()["reservedBytes"]
            .as_u64()
            .unwrap_or(0);
    }
    assert_eq!(reserved, reserves as u64);
    eventually("every lock released", || {
        let c = c.clone();
        async move {
            let s = c.inspect().await.unwrap();
            s.busy().is_empty() && s.transactions.is_empty()
        }
    })
    .await;
}
