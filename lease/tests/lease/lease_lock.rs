//! The eleven behaviours of the reference Lease lock, against the embedded cluster.

use crate::common::*;
use cinder_lease::{
    Acquired, HeldLease, HolderIdentity, LeaseError, LeaseLock, LeaseSettings, Released,
};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::PostParams;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renew_period_not_shorter_than_the_duration_is_rejected() {
    let cluster = cluster().await;
    let id = HolderIdentity::generate();
    for renew in [Duration::from_secs(3), Duration::from_secs(4)] {
        let settings = LeaseSettings {
            duration: Duration::from_secs(3),
            renew_period: Some(renew),
        };
        let err = LeaseLock::new(cluster.client().await, NS, "db", id.clone(), &settings)
            .expect_err("renew period >= duration is rejected");
        assert!(matches!(err, LeaseError::InvalidSettings(_)), "{err}");
    }
    let ok = LeaseSettings {
        duration: Duration::from_secs(3),
        renew_period: Some(Duration::from_millis(2999)),
    };
    assert!(LeaseLock::new(cluster.client().await, NS, "db", id, &ok).is_ok());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_on_a_missing_lease_creates_it_with_holder_and_duration() {
    let cluster = cluster().await;
    let me = HolderIdentity::generate();
    let lock = lock(&cluster, "cinder-db", &me, &LeaseSettings::default()).await;
    assert!(read(&cluster, lock.name()).await.is_none());
    assert_eq!(lock.acquire().await.unwrap(), Acquired::Created);
    let lease = read(&cluster, lock.name()).await.expect("created");
    let spec = spec(&lease);
    assert_eq!(spec.holder_identity.as_deref(), Some(me.as_str()));
    assert_eq!(spec.lease_duration_seconds, Some(15));
    assert_eq!(spec.lease_transitions, Some(0));
    assert!(spec.acquire_time.is_some() && spec.renew_time.is_some());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_holder_acquiring_again_succeeds() {
    let cluster = cluster().await;
    let me = HolderIdentity::generate();
    let lock = lock(&cluster, "cinder-db", &me, &LeaseSettings::default()).await;
    lock.acquire().await.unwrap();
    let before = spec(&read(&cluster, lock.name()).await.unwrap());
    assert_eq!(lock.acquire().await.unwrap(), Acquired::Reacquired);
    let after = spec(&read(&cluster, lock.name()).await.unwrap());
    assert_eq!(after.holder_identity.as_deref(), Some(me.as_str()));
    assert_eq!(after.lease_transitions, before.lease_transitions);
    assert_eq!(after.acquire_time, before.acquire_time);
    assert!(after.renew_time.unwrap().0 > before.renew_time.unwrap().0);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_on_a_fresh_lease_held_by_another_is_refused() {
    let cluster = cluster().await;
    let (a, b) = (HolderIdentity::generate(), HolderIdentity::generate());
    let lock_a = lock(&cluster, "cinder-db", &a, &LeaseSettings::default()).await;
    let lock_b = lock(&cluster, "cinder-db", &b, &LeaseSettings::default()).await;
    lock_a.acquire().await.unwrap();
    let before = read(&cluster, lock_a.name()).await.unwrap();
    match lock_b.acquire().await {
        Err(LeaseError::Held { holder, .. }) => assert_eq!(holder, a.as_str()),
        other => panic!("expected Held, got {other:?}"),
    }
    let after = read(&cluster, lock_a.name()).await.unwrap();
    assert_eq!(rv(&after), rv(&before), "a refused acquire writes nothing");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_is_taken_over() {
    let cluster = cluster().await;
    let b = HolderIdentity::generate();
    let lock_b = lock(&cluster, "cinder-db", &b, &LeaseSettings::default()).await;
    // A Lease left by a crashed replica: renewed a minute ago, 15 s duration.
    let stale = Timestamp::now() - SignedDuration::from_secs(60);
    let api: Api<Lease> = Api::namespaced(cluster.client().await, NS);
    api.create(
        &PostParams::default(),
        &Lease {
            metadata: ObjectMeta {
                name: Some(lock_b.name().to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some("crashed-replica".into()),
                lease_duration_seconds: Some(15),
                acquire_time: Some(MicroTime(stale)),
                renew_time: Some(MicroTime(stale)),
                lease_transitions: Some(4),
                ..LeaseSpec::default()
            }),
        },
    )
    .await
    .unwrap();
    let before_takeover = Timestamp::now();
    assert_eq!(
        lock_b.acquire().await.unwrap(),
        Acquired::TakenOver {
            previous_holder: "crashed-replica".into()
        }
    );
    let spec = spec(&read(&cluster, lock_b.name()).await.unwrap());
    assert_eq!(spec.holder_identity.as_deref(), Some(b.as_str()));
    assert_eq!(spec.lease_transitions, Some(5));
    assert!(spec.acquire_time.unwrap().0 >= before_takeover);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_by_the_owner_clears_the_holder() {
    let cluster = cluster().await;
    let me = HolderIdentity::generate();
    let lock = lock(&cluster, "cinder-db", &me, &LeaseSettings::default()).await;
    lock.acquire().await.unwrap();
    assert_eq!(lock.release().await.unwrap(), Released::Released);
    let spec = spec(&read(&cluster, lock.name()).await.unwrap());
    assert_eq!(spec.holder_identity, None);
    // Free again: anyone can take it at once.
    let other = HolderIdentity::generate();
    let lock_other =
        crate::common::lock(&cluster, "cinder-db", &other, &LeaseSettings::default()).await;
    assert_eq!(lock_other.acquire().await.unwrap(), Acquired::Free);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_writes_refused_on_a_free_lease_the_next_acquire_is_one_put() {
    let cluster = cluster().await;
    let me = HolderIdentity::generate();
    let lock = lock(&cluster, "cinder-db", &me, &LeaseSettings::default())
        .await
        .with_conflict_backoff(Duration::from_millis(50));
    lock.acquire().await.unwrap();
    assert_eq!(lock.release().await.unwrap(), Released::Released);
    // The API server refuses every Lease write with a 409 although nobody else holds it.
    cluster
        .faults()
        .add_error_rule(cinder_sim::ErrorRule::always(
            Some("update"),
            Some("leases"),
            409,
        ));
    match lock.acquire().await {
        Err(LeaseError::Held { holder, .. }) => assert!(holder.contains("concurrent"), "{holder}"),
        other => panic!("expected Held, got {other:?}"),
    }
    cluster.faults().clear();
    cluster.clear_requests();
    // The read that named no winner is the base of the next acquire: no second GET.
    assert_eq!(lock.acquire().await.unwrap(), Acquired::Free);
    let verbs: Vec<_> = cluster
        .requests()
        .into_iter()
        .filter(|r| r.resource == "leases")
        .map(|r| r.verb)
        .collect();
    assert_eq!(verbs, ["update"], "one PUT");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_by_a_non_owner_changes_nothing() {
    let cluster = cluster().await;
    let (a, b) = (HolderIdentity::generate(), HolderIdentity::generate());
    let lock_a = lock(&cluster, "cinder-db", &a, &LeaseSettings::default()).await;
    let lock_b = lock(&cluster, "cinder-db", &b, &LeaseSettings::default()).await;
    lock_a.acquire().await.unwrap();
    let before = read(&cluster, lock_a.name()).await.unwrap();
    assert_eq!(
        lock_b.release().await.unwrap(),
        Released::NotHolder {
            holder: Some(a.to_string())
        }
    );
    let after = read(&cluster, lock_a.name()).await.unwrap();
    assert_eq!(rv(&after), rv(&before));
    assert_eq!(spec(&after).holder_identity.as_deref(), Some(a.as_str()));
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_of_a_missing_lease_changes_nothing() {
    let cluster = cluster().await;
    let me = HolderIdentity::generate();
    let lock = lock(&cluster, "cinder-db", &me, &LeaseSettings::default()).await;
    assert_eq!(lock.release().await.unwrap(), Released::Missing);
    assert!(read(&cluster, lock.name()).await.is_none());
    let writes = cluster
        .requests()
        .iter()
        .filter(|r| r.resource == "leases" && r.name == lock.name() && r.verb != "get")
        .count();
    assert_eq!(writes, 0);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_moves_renew_time_forward() {
    let cluster = cluster().await;
    let me = HolderIdentity::generate();
    let lock = lock(&cluster, "cinder-db", &me, &LeaseSettings::default()).await;
    lock.acquire().await.unwrap();
    let before = spec(&read(&cluster, lock.name()).await.unwrap());
    lock.renew().await.unwrap();
    let after = spec(&read(&cluster, lock.name()).await.unwrap());
    assert!(after.renew_time.unwrap().0 > before.renew_time.unwrap().0);
    assert_eq!(after.acquire_time, before.acquire_time);
    assert_eq!(after.holder_identity, before.holder_identity);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_by_a_non_owner_fails() {
    let cluster = cluster().await;
    let (a, b) = (HolderIdentity::generate(), HolderIdentity::generate());
    let lock_a = lock(&cluster, "cinder-db", &a, &LeaseSettings::default()).await;
    let lock_b = lock(&cluster, "cinder-db", &b, &LeaseSettings::default()).await;
    lock_a.acquire().await.unwrap();
    let before = read(&cluster, lock_a.name()).await.unwrap();
    match lock_b.renew().await {
        Err(LeaseError::NotHolder { holder, .. }) => {
            assert_eq!(holder.as_deref(), Some(a.as_str()))
        }
        other => panic!("expected NotHolder, got {other:?}"),
    }
    assert_eq!(
        rv(&read(&cluster, lock_a.name()).await.unwrap()),
        rv(&before)
    );
    // Renewal of a missing Lease fails too.
    let lock_c = lock(&cluster, "other-device", &b, &LeaseSettings::default()).await;
    assert!(matches!(
        lock_c.renew().await,
        Err(LeaseError::Missing { .. })
    ));
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_stops_renewal() {
    let cluster = cluster().await;
    let me = HolderIdentity::generate();
    let settings = LeaseSettings {
        duration: Duration::from_secs(2),
        renew_period: Some(Duration::from_millis(200)),
    };
    let lock = Arc::new(lock(&cluster, "cinder-db", &me, &settings).await);
    let held = HeldLease::acquire(lock.clone()).await.unwrap();
    let first = spec(&read(&cluster, lock.name()).await.unwrap()).renew_time;
    // The background task renews.
    eventually("a background renewal", || async {
        spec(&read(&cluster, lock.name()).await.unwrap()).renew_time != first
    })
    .await;
    assert_eq!(held.release().await.unwrap(), Released::Released);
    let released = read(&cluster, lock.name()).await.unwrap();
    assert_eq!(spec(&released).holder_identity, None);
    cluster.clear_requests();
    // Absence check: ten renew periods without any Lease request.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(lease_requests(&cluster), 0, "no renewal after release");
    assert_eq!(
        rv(&read(&cluster, lock.name()).await.unwrap()),
        rv(&released)
    );
    cluster.shutdown().await;
}
