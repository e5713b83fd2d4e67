//! Leader election on one Lease against the embedded cluster: one of two electors leads, the
//! other does not; after a crash of the leader (handle dropped, Lease not released) the other
//! takes over only once the Lease expired; after a graceful release it takes over before the old
//! Lease would have expired.

use crate::common::*;
use cinder_lease::{HolderIdentity, LeaderElector, LeaderHandle, LeaseSettings, Released};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use std::time::Duration;

const LEASE: &str = "cinder-operator-leader";

async fn elector(
    cluster: &cinder_sim::EmbeddedCluster,
    id: &HolderIdentity,
    settings: &LeaseSettings,
) -> LeaderHandle {
    LeaderElector::new(cluster.client().await, NS, id.clone(), settings)
        .expect("valid settings")
        .start()
}

fn time(t: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime>) -> Timestamp {
    t.expect("time set").0
}

/// Two electors; returns (leader, follower, leader id, follower id) once one leads and the other
/// has seen the leader's Lease.
async fn two_electors(
    cluster: &cinder_sim::EmbeddedCluster,
    settings: &LeaseSettings,
) -> (LeaderHandle, LeaderHandle, HolderIdentity, HolderIdentity) {
    let (a_id, b_id) = (HolderIdentity::generate(), HolderIdentity::generate());
    let a = elector(cluster, &a_id, settings).await;
    let b = elector(cluster, &b_id, settings).await;
    eventually("one elector leads", || async {
        a.is_leader() || b.is_leader()
    })
    .await;
    let (leader, follower, leader_id, follower_id) = if a.is_leader() {
        (a, b, a_id, b_id)
    } else {
        (b, a, b_id, a_id)
    };
    // The follower has tried at least once and seen the leader holding the Lease.
    eventually("the follower saw the leader's Lease", || async {
        follower
            .lock()
            .observed()
            .and_then(|o| o.holder)
            .is_some_and(|h| h == leader_id.as_str())
    })
    .await;
    assert!(leader.is_leader());
    assert!(!follower.is_leader(), "both electors lead");
    let lease = read(cluster, LEASE).await.expect("leader lease exists");
    assert_eq!(
        spec(&lease).holder_identity.as_deref(),
        Some(leader_id.as_str())
    );
    (leader, follower, leader_id, follower_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_leader_crashes_the_other_leads_once_the_lease_expired() {
    let cluster = cluster().await;
    let settings = LeaseSettings {
        duration: Duration::from_secs(3),
        renew_period: Some(Duration::from_secs(1)),
    };
    let (leader, follower, leader_id, follower_id) = two_electors(&cluster, &settings).await;
    // The follower stays a follower while the leader renews: several renewals pass.
    let first_renew = time(spec(&read(&cluster, LEASE).await.unwrap()).renew_time);
    eventually("the leader renewed twice", || async {
        let now = time(spec(&read(&cluster, LEASE).await.unwrap()).renew_time);
        now.duration_since(first_renew) >= SignedDuration::from_secs(2)
    })
    .await;
    assert!(!follower.is_leader() && leader.is_leader());

    // Crash: the leader stops renewing without releasing.
    drop(leader);
    let before = spec(&read(&cluster, LEASE).await.unwrap());
    let transitions = before.lease_transitions.unwrap_or(0);
    eventually("the follower becomes the leader", || async {
        follower.is_leader()
    })
    .await;
    let after = spec(&read(&cluster, LEASE).await.unwrap());
    assert_eq!(after.holder_identity.as_deref(), Some(follower_id.as_str()));
    assert_ne!(after.holder_identity.as_deref(), Some(leader_id.as_str()));
    assert_eq!(after.lease_transitions, Some(transitions + 1));
    // Taken over only after the crashed leader's Lease had expired (its last renewal plus the
    // Lease duration), never while it was still valid.
    let taken_over = time(after.acquire_time);
    let crashed_renew = time(before.renew_time);
    assert!(
        taken_over.duration_since(crashed_renew) > SignedDuration::from_secs(3),
        "taken over at {taken_over}, before the Lease renewed at {crashed_renew} expired"
    );
    assert_eq!(follower.release().await.unwrap(), Released::Released);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_graceful_release_the_other_leads_without_waiting_for_expiry() {
    let cluster = cluster().await;
    // A long Lease: a takeover by expiry would come only after 60 s.
    let settings = LeaseSettings {
        duration: Duration::from_secs(60),
        renew_period: Some(Duration::from_secs(1)),
    };
    let (leader, follower, _leader_id, follower_id) = two_electors(&cluster, &settings).await;
    let before = spec(&read(&cluster, LEASE).await.unwrap());
    assert_eq!(leader.release().await.unwrap(), Released::Released);
    eventually("the follower becomes the leader", || async {
        follower.is_leader()
    })
    .await;
    let after = spec(&read(&cluster, LEASE).await.unwrap());
    assert_eq!(after.holder_identity.as_deref(), Some(follower_id.as_str()));
    assert_eq!(
        after.lease_transitions,
        Some(before.lease_transitions.unwrap_or(0) + 1)
    );
    // Acquired while the released Lease would still have been valid: no wait for expiry.
    let acquired = time(after.acquire_time);
    assert!(
        acquired.duration_since(time(before.renew_time)) < SignedDuration::from_secs(60),
        "taken over at {acquired}, only after the released Lease's expiry"
    );
    assert_eq!(follower.release().await.unwrap(), Released::Released);
    let released = spec(&read(&cluster, LEASE).await.unwrap());
    assert_eq!(released.holder_identity, None);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_lease_has_the_plain_name_and_no_device_annotation() {
    let cluster = cluster().await;
    let id = HolderIdentity::generate();
    let leader = elector(
        &cluster,
        &id,
        &LeaseSettings::with_duration(Duration::from_secs(7)),
    )
    .await;
    leader.wait_for_leadership().await;
    let lease = read(&cluster, LEASE).await.expect("named exactly");
    assert_eq!(spec(&lease).lease_duration_seconds, Some(7));
    assert!(
        lease
            .metadata
            .annotations
            .unwrap_or_default()
            .keys()
            .all(|k| !k.contains("device"))
    );
    assert!(
        read(&cluster, &format!("cinder-device-{LEASE}"))
            .await
            .is_none()
    );
    assert!(
        LeaderElector::with_lease_name(
            cluster.client().await,
            NS,
            "Not_A_Name",
            id,
            &LeaseSettings::default()
        )
        .is_err()
    );
    leader.release().await.unwrap();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_renewals_fail_steps_down_and_campaigns_again() {
    let cluster = cluster().await;
    let settings = LeaseSettings {
        duration: Duration::from_secs(3),
        renew_period: Some(Duration::from_secs(1)),
    };
    let id = HolderIdentity::generate();
    let leader = elector(&cluster, &id, &settings).await;
    leader.wait_for_leadership().await;
    let mut leading = leader.subscribe();
    cluster
        .faults()
        .add_error_rule(cinder_sim::ErrorRule::always(
            Some("update"),
            Some("leases"),
            503,
        ));
    leading
        .wait_for(|l| !*l)
        .await
        .expect("the elector reports stepping down");
    assert!(!leader.is_leader());
    cluster.faults().clear();
    eventually("leading again once renewals work", || async {
        leader.is_leader()
    })
    .await;
    assert_eq!(leader.release().await.unwrap(), Released::Released);
    cluster.shutdown().await;
}
