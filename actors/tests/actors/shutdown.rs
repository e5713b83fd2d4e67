//! Shutdown: while the root write is held, consistent locks wait; lists and inconsistent reads
//! proceed; in-flight locks are waited for.

use crate::support::*;
use cinder_actors::Kind;
use cinder_actors::query::*;
use cinder_actors::{CoordinatorHandle, LockMode};
use serde_json::json;

#[actix::test]
async fn root_write_blocks_consistent_locks_only() {
    root_write_blocks(CoordinatorHandle::start_standard()).await;
}

#[actix::test]
async fn root_write_blocks_consistent_locks_only_on_two_arbiters() {
    root_write_blocks(coordinator_on(2)).await;
}

async fn root_write_blocks(c: CoordinatorHandle) {
    c.load(Kind::Node, "n1", json!({"a": 1})).await.unwrap();
    c.load(Kind::Node, "n2", json!({"a": 2})).await.unwrap();

    let inflight = c.lock(vec![query([upsert_node("n1")])]).await.unwrap();

    // Shutdown waits for the in-flight lock.
    let sc = c.clone();
    let (shut_tx, mut shut_rx) = tokio::sync::oneshot::channel();
    actix::spawn(async move {
        let g = sc.shutdown().await;
        let _ = shut_tx.send(g);
    });
    wait_for_waiters(&c, "root", ".", 1).await;
    assert!(
        shut_rx.try_recv().is_err(),
        "shutdown must wait for in-flight locks"
    );
    // Inspection shows who holds what and what the shutdown waits on.
    let snap = c.inspect().await.unwrap();
    let waiting: Vec<_> = snap
        .transactions
        .iter()
        .filter_map(|t| t.waiting_on.as_ref().map(|w| (t.what, w.lock.clone())))
        .collect();
    assert_eq!(waiting, vec![("shutdown", step("write", "root", "."))]);
    let holder = snap.transactions.iter().find(|t| t.what == "lock").unwrap();
    assert_eq!(
        holder.held,
        vec![step("read", "root", "."), step("write", "node", "n1")]
    );
    let json = serde_json::to_value(&snap).unwrap();
    assert_eq!(json["transactions"].as_array().map(Vec::len), Some(2));
    assert!(
        json["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["kind"] == "root" && r["mode"] == "read")
    );

    // A new consistent lock queues behind the shutdown.
    let lc = c.clone();
    let (lock_tx, mut lock_rx) = tokio::sync::oneshot::channel();
    actix::spawn(async move {
        let l = lc.lock(vec![query([read_node("n2")])]).await;
        let _ = lock_tx.send(l);
    });
    wait_for_waiters(&c, "root", ".", 2).await;

    // Lists and inconsistent reads proceed.
    let free = c
        .lock(vec![query([list_nodes(), inconsistent_read_node("n1")])])
        .await
        .unwrap();
    assert_eq!(free.results()[0].nodes.len(), 2);
    assert!(free.results()[0].node.read.as_deref().is_some());
    assert!(free.held().is_empty());

    // The in-flight lock finishes; shutdown gets the root write; the new lock still waits.
    inflight.unlock().await;
    let shutdown = (&mut shut_rx).await.unwrap().unwrap();
    let snap = c.inspect().await.unwrap();
    let root = snap.resources.iter().find(|r| r.kind == "root").unwrap();
    assert_eq!(root.mode, Some(LockMode::Write));
    assert_eq!(root.waiters.len(), 1);
    assert!(
        lock_rx.try_recv().is_err(),
        "consistent locks wait while the root write is held"
    );
    let during = c
        .lock(vec![query([list_nodes(), inconsistent_read_node("n2")])])
        .await
        .unwrap();
    assert_eq!(during.results()[0].node.read.as_deref().unwrap()["a"], 2);

    // Releasing the shutdown lets the waiting lock through.
    shutdown.release().await;
    let l = lock_rx.await.unwrap().unwrap();
    assert_eq!(l.results()[0].node.read.as_deref().unwrap()["a"], 2);
    l.unlock().await;
    assert_nothing_held(&c).await;
}

#[actix::test]
async fn a_stopped_coordinator_answers_shutting_down() {
    stopped_coordinator(CoordinatorHandle::start_standard()).await;
}

#[actix::test]
async fn a_stopped_coordinator_answers_shutting_down_on_two_arbiters() {
    stopped_coordinator(coordinator_on(2)).await;
}

async fn stopped_coordinator(c: CoordinatorHandle) {
    c.load(Kind::Node, "n1", json!({})).await.unwrap();
    let g = c.shutdown().await.unwrap();
    g.release().await;
    c.stop().await;
    eventually("the coordinator stopped", || {
        let c = c.clone();
        async move { c.inspect().await.is_err() }
    })
    .await;
    let err = c.lock(vec![query([read_node("n1")])]).await.unwrap_err();
    assert_eq!(err.code(), "shutting_down");
    assert_eq!(c.shutdown().await.unwrap_err().code(), "shutting_down");
}
