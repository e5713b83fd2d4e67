//! The lock coordinator's two worked examples (publishing a volume; a nested lock per volume)
//! carried out by the actors: merged order, acquisition order, results present / absent, reverse
//! release, and the lock context after each phase.

use crate::support::*;
use cinder_actors::Kind;
use cinder_actors::query::*;
use cinder_actors::{CoordinatorHandle, LockError, LockMode, LockedEntry, Op};
use serde_json::json;

fn held(c: &cinder_actors::LockContext) -> Vec<(String, String, LockMode)> {
    c.held
        .iter()
        .map(|((k, i), m)| (k.clone(), i.clone(), *m))
        .collect()
}

fn h(kind: &str, id: &str, m: LockMode) -> (String, String, LockMode) {
    (kind.to_string(), id.to_string(), m)
}

#[actix::test]
async fn first_example_publish_a_volume() {
    let c = CoordinatorHandle::start_standard();
    c.load(Kind::Backend, "backend1", json!({"name": "b1"}))
        .await
        .unwrap();
    c.load(Kind::Node, "node1", json!({})).await.unwrap();
    c.load(
        Kind::Volume,
        "volume1",
        json!({"backend": "backend1", "size": 1}),
    )
    .await
    .unwrap();

    let locked = c
        .lock(vec![
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
        .unwrap();

    assert_eq!(
        entries(&locked.plan().entries),
        vec![
            entry("read", "root", ".", None, true),
            entry("list", "volume", "", Some(0), false),
            entry("list", "volumePublication", "", Some(0), false),
            entry("upsert", "backend", "backend1", Some(1), false),
            entry("read", "backend", "backend1", Some(0), false),
            entry("read", "node", "node1", Some(0), true),
            entry("upsert", "volume", "volume1", Some(0), false),
            entry("read", "volume", "volume1", Some(0), true),
            entry("read", "volume", "volume1", Some(1), true),
            entry(
                "upsert",
                "volumePublication",
                "volume1.node1",
                Some(0),
                false
            ),
            entry("upsert", "snapshot", "snap1", Some(1), false),
        ]
    );
    let acquisition = vec![
        step("read", "root", "."),
        step("write", "backend", "backend1"),
        step("read", "node", "node1"),
        step("write", "volume", "volume1"),
        step("write", "volumePublication", "volume1.node1"),
        step("write", "snapshot", "snap1"),
    ];
    assert_eq!(locked.held(), acquisition);

    // Results: what the loaded objects hold (no publication yet, one volume).
    let (r0, r1) = (&locked.results()[0], &locked.results()[1]);
    assert!(r0.volume_publication.read.as_deref().is_none());
    assert_eq!(r0.volume_publications.len(), 0);
    assert_eq!(r0.volumes.len(), 1);
    assert!(r0.backend.read.as_deref().is_some());
    assert!(r1.backend.read.as_deref().is_some());
    assert_eq!(
        r0.volume.read.as_deref().map(|v| v["size"].clone()),
        Some(json!(1))
    );
    assert!(r1.snapshot.read.as_deref().is_none());
    assert!(r1.volume.op().is_none(), "synthetic reads set no result");
    assert!(r0.node.op().is_none(), "synthetic reads set no result");

    // Every held lock is visible through inspection, held by this transaction.
    let snap = c.inspect().await.unwrap();
    let busy: Vec<_> = snap
        .busy()
        .iter()
        .map(|r| (r.kind.clone(), r.id.clone(), r.mode, r.holders.clone()))
        .collect();
    assert_eq!(busy.len(), 6);
    assert!(
        busy.iter()
            .all(|(_, _, _, holders)| holders == &vec![locked.context().txn])
    );
    assert_eq!(snap.transactions.len(), 1);
    assert_eq!(snap.transactions[0].held, acquisition);

    // Mutating a copy changes nothing until it is committed through the result.
    let mut backend = r1.backend.read.as_deref().cloned().unwrap();
    backend["state"] = json!("unknown");
    assert!(
        c.peek(Kind::Backend, "backend1")
            .await
            .unwrap()
            .get("state")
            .is_none()
    );
    r1.backend.upsert(backend).await.unwrap();
    assert_eq!(
        c.peek(Kind::Backend, "backend1").await.unwrap()["state"],
        "unknown"
    );
    r0.volume_publication
        .upsert(json!({"volume": "volume1", "node": "node1"}))
        .await
        .unwrap();
    r1.snapshot
        .upsert(json!({"volume": "volume1", "name": "snap1"}))
        .await
        .unwrap();
    // A read result cannot upsert.
    let err = r0.backend.upsert(json!({})).await.unwrap_err();
    assert_eq!(err.code(), "wrong_operation");

    // The lock context: every held lock, lastLockHeld the snapshot upsert.
    assert_eq!(
        held(locked.context()),
        vec![
            h("backend", "backend1", LockMode::Write),
            h("node", "node1", LockMode::Read),
            h("snapshot", "snap1", LockMode::Write),
            h("volume", "volume1", LockMode::Write),
            h("volumePublication", "volume1.node1", LockMode::Write),
        ]
    );
    assert_eq!(
        locked.context().last_lock_held,
        Some(LockedEntry {
            op: Op::Upsert,
            kind: "snapshot".into(),
            id: "snap1".into()
        })
    );
    assert!(locked.context().holds_root);
    // A nested lock on something that sorts before the snapshot upsert is refused.
    let err = locked
        .nested_lock(vec![query([upsert_node("node2")])])
        .await
        .unwrap_err();
    assert_eq!(err.code(), "would_deadlock");
    // Locking the volume or the backend for write again is an error: they are held as writes.
    for q in [
        upsert_volume("volume1", ""),
        upsert_backend("backend1", "", ""),
    ] {
        let err = locked.nested_lock(vec![query([q])]).await.unwrap_err();
        assert_eq!(err.code(), "would_deadlock");
    }

    let mut release = acquisition.clone();
    release.reverse();
    assert_eq!(locked.unlock().await, release);
    assert_nothing_held(&c).await;
    assert_eq!(
        c.peek(Kind::VolumePublication, "volume1.node1")
            .await
            .unwrap()["node"],
        "node1"
    );
    assert_eq!(
        c.peek(Kind::Snapshot, "snap1").await.unwrap()["volume"],
        "volume1"
    );
}

#[actix::test]
async fn second_example_nested_lock_per_volume() {
    let c = CoordinatorHandle::start_standard();
    c.load(
        Kind::Backend,
        "backend1",
        json!({"name": "b1", "uuid": "u-1"}),
    )
    .await
    .unwrap();
    for v in ["volume1", "volume2", "volume3"] {
        c.load(Kind::Volume, v, json!({"backend": "backend1"}))
            .await
            .unwrap();
    }
    c.load(Kind::Volume, "other", json!({"backend": "backend2"}))
        .await
        .unwrap();

    // Phase A.
    let outer = c
        .lock(vec![query([
            list_volumes_for_backend("backend1"),
            upsert_backend("backend1", "", ""),
        ])])
        .await
        .unwrap();
    assert_eq!(
        entries(&outer.plan().entries),
        vec![
            entry("read", "root", ".", None, true),
            entry("list", "volume", "", Some(0), false),
            entry("upsert", "backend", "backend1", Some(0), false),
        ]
    );
    assert_eq!(
        outer.held(),
        vec![
            step("read", "root", "."),
            step("write", "backend", "backend1")
        ]
    );
    assert_eq!(
        held(outer.context()),
        vec![h("backend", "backend1", LockMode::Write)]
    );
    assert_eq!(
        outer.context().last_lock_held,
        Some(LockedEntry {
            op: Op::Upsert,
            kind: "backend".into(),
            id: "backend1".into()
        })
    );
    let backend = outer.results()[0].backend.read.as_deref().cloned().unwrap();
    let mut volumes: Vec<String> = outer.results()[0]
        .volumes
        .iter()
        .map(|l| l.id.clone())
        .collect();
    volumes.sort();
    assert_eq!(volumes, vec!["volume1", "volume2", "volume3"]);

    // Phase B: one query per volume.
    let nested = outer
        .nested_lock(
            volumes
                .iter()
                .map(|v| query([upsert_volume(v, "backend1")]))
                .collect(),
        )
        .await
        .unwrap();
    assert_eq!(
        nested.held(),
        vec![
            step("write", "volume", "volume1"),
            step("write", "volume", "volume2"),
            step("write", "volume", "volume3")
        ]
    );
    assert_eq!(
        nested
            .plan()
            .entries
            .iter()
            .filter(|e| e.kind == "root")
            .count(),
        0,
        "no second root read"
    );
    assert_eq!(
        held(nested.context()),
        vec![
            h("backend", "backend1", LockMode::Write),
            h("volume", "volume1", LockMode::Write),
            h("volume", "volume2", LockMode::Write),
            h("volume", "volume3", LockMode::Write),
        ]
    );
    assert_eq!(
        nested.context().last_lock_held,
        Some(LockedEntry {
            op: Op::Upsert,
            kind: "volume".into(),
            id: "volume3".into()
        })
    );
    for r in nested.results() {
        let vol = &r.volume;
        let mut copy = vol.read.clone().unwrap();
        copy["backendUUID"] = backend["uuid"].clone();
        vol.upsert(copy).await.unwrap();
    }

    // A third nested lock: the backend sorts before volume3 → refused; a snapshot sorts after → fine.
    let err = nested
        .nested_lock(vec![query([upsert_backend("backend1", "", "")])])
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::WouldDeadlock { .. }), "{err}");
    let third = nested
        .nested_lock(vec![query([upsert_snapshot("volume1", "s1")])])
        .await
        .unwrap();
    assert_eq!(third.held(), vec![step("write", "snapshot", "s1")]);
    assert_eq!(third.unlock().await, vec![step("write", "snapshot", "s1")]);

    // Unlock in two stages.
    assert_eq!(
        nested.unlock().await,
        vec![
            step("write", "volume", "volume3"),
            step("write", "volume", "volume2"),
            step("write", "volume", "volume1")
        ]
    );
    let snap = c.inspect().await.unwrap();
    let busy: Vec<_> = snap
        .busy()
        .iter()
        .map(|r| (r.kind.clone(), r.id.clone()))
        .collect();
    assert_eq!(
        busy,
        vec![
            ("backend".to_string(), "backend1".to_string()),
            ("root".to_string(), ".".to_string())
        ]
    );
    assert_eq!(
        outer.unlock().await,
        vec![
            step("write", "backend", "backend1"),
            step("read", "root", ".")
        ]
    );
    assert_nothing_held(&c).await;
    for v in ["volume1", "volume2", "volume3"] {
        assert_eq!(c.peek(Kind::Volume, v).await.unwrap()["backendUUID"], "u-1");
    }
    assert!(
        c.peek(Kind::Volume, "other")
            .await
            .unwrap()
            .get("backendUUID")
            .is_none()
    );
}

#[actix::test]
async fn dropped_guard_releases_its_locks() {
    let c = CoordinatorHandle::start_standard();
    c.load(Kind::Node, "n", json!({})).await.unwrap();
    {
        let locked = c.lock(vec![query([upsert_node("n")])]).await.unwrap();
        assert_eq!(locked.held().len(), 2);
    }
    let again = c.lock(vec![query([upsert_node("n")])]).await.unwrap();
    drop(again);
    eventually("locks released after drop", || {
        let c = c.clone();
        async move { c.inspect().await.unwrap().busy().is_empty() }
    })
    .await;
}

#[actix::test]
async fn deleted_resource_retires_and_comes_back_empty() {
    let c = CoordinatorHandle::start_standard();
    c.load(Kind::Node, "n", json!({"x": 1})).await.unwrap();
    let l = c.lock(vec![query([delete_node("n")])]).await.unwrap();
    l.results()[0].node.delete().await.unwrap();
    l.unlock().await;
    assert!(c.peek(Kind::Node, "n").await.is_none());
    eventually("node actor retired", || {
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
    let l = c.lock(vec![query([read_node("n")])]).await.unwrap();
    assert!(l.results()[0].node.read.as_deref().is_none());
}
