//! Priorities through the actors (High before Default; ageing lets Default through) and interior
//! mutation of a read-held backend by concurrent transactions.

use crate::support::*;
use cinder_actors::Kind;
use cinder_actors::query::*;
use cinder_actors::{CoordinatorConfig, CoordinatorHandle, Priority, Schema};
use serde_json::json;
use std::time::Duration;
use tokio::sync::mpsc;

/// Holds node `n` for write, queues one Default waiter then five High waiters, releases, and
/// returns the order in which the waiters got the lock.
async fn grant_order(age_step: Duration) -> Vec<&'static str> {
    let c = CoordinatorHandle::start(
        Schema::standard(),
        CoordinatorConfig {
            age_step,
            ..CoordinatorConfig::default()
        },
    );
    c.load(Kind::Node, "n", json!({})).await.unwrap();
    let holder = c.lock(vec![query([upsert_node("n")])]).await.unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let names: [&'static str; 6] = ["default", "high1", "high2", "high3", "high4", "high5"];
    for (i, name) in names.into_iter().enumerate() {
        let (c2, tx) = (c.clone(), tx.clone());
        let prio = if i == 0 {
            Priority::Default
        } else {
            Priority::High
        };
        actix::spawn(async move {
            let l = c2
                .lock_with(vec![query([upsert_node("n")])], prio)
                .await
                .unwrap();
            tx.send(name).unwrap();
            l.unlock().await;
        });
        wait_for_waiters(&c, "node", "n", i + 1).await;
    }
    holder.unlock().await;
    let mut order = Vec::new();
    for _ in names {
        order.push(rx.recv().await.unwrap());
    }
    order
}

#[actix::test]
async fn high_waiter_queued_after_default_is_granted_first() {
    let order = grant_order(Duration::from_secs(3600)).await;
    assert_eq!(
        order,
        vec!["high1", "high2", "high3", "high4", "high5", "default"]
    );
}

#[actix::test]
async fn ageing_lets_default_through_high_contention() {
    // With an (extremely) short age step, the Default waiter has aged to High by the time the lock
    // is released, and being the earliest arrival it goes first.
    let order = grant_order(Duration::from_nanos(1)).await;
    assert_eq!(
        order,
        vec!["default", "high1", "high2", "high3", "high4", "high5"]
    );
}

#[actix::test]
async fn interior_mutation_on_read_held_backend_serializes() {
    let c = CoordinatorHandle::start_standard();
    c.load(
        Kind::Backend,
        "b",
        json!({"name": "b", "capacityBytes": 100}),
    )
    .await
    .unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    // Twenty transactions read-hold the backend at once and each reserves 5 bytes.
    let gate = c.lock(vec![query([read_backend("b")])]).await.unwrap();
    for i in 0..20 {
        let (c2, tx) = (c.clone(), tx.clone());
        actix::spawn(async move {
            let l = c2
                .lock(vec![query([
                    read_backend("b"),
                    upsert_volume(&format!("v{i}"), "b"),
                ])])
                .await
                .unwrap();
            let r = l.results()[0].backend.reserve_capacity(5).await;
            tx.send(r.map(|_| ())).unwrap();
            l.unlock().await;
        });
    }
    for _ in 0..20 {
        rx.recv().await.unwrap().unwrap();
    }
    // All of them ran while the gate still read-held the backend.
    let b = &gate.results()[0].backend;
    assert_eq!(
        c.peek(Kind::Backend, "b").await.unwrap()["reservedBytes"],
        100
    );
    let err = b.reserve_capacity(1).await.unwrap_err();
    assert_eq!(err.code(), "mutation_refused");
    assert_eq!(b.release_capacity(10).await.unwrap()["reservedBytes"], 90);
    gate.unlock().await;
    // Without a lock, a mutation is refused.
    let free = c
        .lock(vec![query([inconsistent_read_backend("b")])])
        .await
        .unwrap();
    assert_eq!(
        free.results()[0]
            .backend
            .reserve_capacity(1)
            .await
            .unwrap_err()
            .code(),
        "wrong_operation"
    );
    assert_nothing_held(&c).await;
}
