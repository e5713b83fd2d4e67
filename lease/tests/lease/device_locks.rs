//! The device-lock service against the embedded cluster: two replicas contending, takeover after a
//! crash, a lost holder, Lease traffic independent of the number of in-process waiters, bounded
//! waiting under High-priority contention, device + resource locks in one Lock call, inspection.

use crate::common::*;
use cinder_actors::query::{query, upsert_backend};
use cinder_lease::{DeviceLockError, HolderIdentity, LeaseSettings, Priority, lease_name};
use cinder_sim::EmbeddedCluster;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use rand::Rng;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SHORT: Duration = Duration::from_millis(5);

fn long_lease() -> LeaseSettings {
    // Renewal every 100 s: no renewal happens during these tests, so Lease calls are exact.
    LeaseSettings {
        duration: Duration::from_secs(300),
        renew_period: None,
    }
}

/// Who holds each device right now, as seen from outside both replicas.
#[derive(Default)]
struct Recorder {
    holders: Mutex<HashMap<String, String>>,
    violations: Mutex<Vec<String>>,
}

impl Recorder {
    fn enter(&self, device: &str, who: &str) {
        let mut h = self.holders.lock().unwrap();
        if let Some(other) = h.insert(device.to_owned(), who.to_owned()) {
            self.violations
                .lock()
                .unwrap()
                .push(format!("{device}: {who} entered while {other} held it"));
        }
    }

    fn exit(&self, device: &str) {
        self.holders.lock().unwrap().remove(device);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_never_hold_one_device_at_once() {
    let cluster = cluster().await;
    let replicas = [
        replica(&cluster, "replica-a", LeaseSettings::default(), SHORT, None).await,
        replica(&cluster, "replica-b", LeaseSettings::default(), SHORT, None).await,
    ];
    let devices: Vec<String> = (0..20).map(|i| format!("device-{i}")).collect();
    let recorder = Arc::new(Recorder::default());
    let (workers_per_replica, rounds_per_worker) = (8, 125); // 2 x 8 x 125 = 2 000 rounds
    let busy_answers = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for (r, locks) in replicas.iter().enumerate() {
        for w in 0..workers_per_replica {
            let (locks, devices, recorder, busy) = (
                locks.clone(),
                devices.clone(),
                recorder.clone(),
                busy_answers.clone(),
            );
            tasks.push(tokio::spawn(async move {
                let who = format!("replica-{r}/worker-{w}");
                for _ in 0..rounds_per_worker {
                    let (device, priority, hold_us) = {
                        let mut rng = rand::rng();
                        let priority = match rng.random_range(0..3) {
                            0 => Priority::High,
                            1 => Priority::Default,
                            _ => Priority::Baseline,
                        };
                        (
                            devices[rng.random_range(0..devices.len())].clone(),
                            priority,
                            rng.random_range(0..2_000u64),
                        )
                    };
                    let mut attempts = 0;
                    loop {
                        attempts += 1;
                        assert!(attempts < 100_000, "{who}: {device} never acquired");
                        match locks.lock(&device, priority).await {
                            Ok(guard) => {
                                recorder.enter(&device, &who);
                                tokio::time::sleep(Duration::from_micros(hold_us)).await;
                                recorder.exit(&device);
                                guard.release().await;
                                break;
                            }
                            Err(DeviceLockError::DeviceBusy { retry_after, .. }) => {
                                busy.fetch_add(1, Ordering::Relaxed);
                                tokio::time::sleep(retry_after).await;
                            }
                            Err(e) => panic!("{who}: {e}"),
                        }
                    }
                }
            }));
        }
    }
    for t in tasks {
        t.await.expect("worker finished");
    }
    let violations = recorder.violations.lock().unwrap().clone();
    assert!(violations.is_empty(), "two holders at once: {violations:?}");
    let holds: u64 = replicas.iter().map(|r| r.metrics().holds.get()).sum();
    assert_eq!(holds, 2_000, "every round acquired exactly once");
    // All Leases are released at the end.
    for d in &devices {
        if let Some(lease) = read(&cluster, &lease_name(d)).await {
            assert_eq!(spec(&lease).holder_identity, None, "{d} still held");
        }
    }
    eprintln!(
        "busy answers: {}, lease requests: {}",
        busy_answers.load(Ordering::Relaxed),
        lease_requests(&cluster)
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_holder_is_taken_over_after_its_lease_expires_and_not_before() {
    let cluster = cluster().await;
    let settings = LeaseSettings::with_duration(Duration::from_secs(3));
    let a = replica(&cluster, "replica-a", settings.clone(), SHORT, None).await;
    let b = replica(
        &cluster,
        "replica-b",
        settings,
        Duration::from_millis(100),
        None,
    )
    .await;
    let device = "rbd-ceph-mon-1";
    let guard = a.lock(device, Priority::High).await.unwrap();
    guard.abandon().await; // crash: no more renewals, no release
    let crashed = spec(&read(&cluster, &lease_name(device)).await.unwrap());
    assert_eq!(
        crashed.holder_identity.as_deref(),
        Some(a.identity().as_str())
    );
    let expiry = crashed.renew_time.clone().unwrap().0 + SignedDuration::from_secs(3);

    let mut refused = Vec::new();
    let guard_b = loop {
        let started = Timestamp::now();
        match b.lock(device, Priority::High).await {
            Ok(g) => break g,
            Err(DeviceLockError::DeviceBusy {
                holder,
                retry_after,
                ..
            }) => {
                assert_eq!(holder, a.identity().as_str());
                let (lo, hi) = (Duration::from_millis(90), Duration::from_millis(110));
                assert!(
                    retry_after >= lo && retry_after <= hi,
                    "{retry_after:?} is not jitter(100 ms)"
                );
                // Refused only while the Lease was fresh.
                assert!(
                    started <= expiry,
                    "refused at {started} after expiry {expiry}"
                );
                refused.push(started);
                assert!(refused.len() < 10_000, "never taken over");
                tokio::time::sleep(retry_after).await;
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert!(
        !refused.is_empty(),
        "the fresh Lease was refused first (3 s window)"
    );
    let taken = spec(&read(&cluster, &lease_name(device)).await.unwrap());
    assert_eq!(
        taken.holder_identity.as_deref(),
        Some(b.identity().as_str())
    );
    assert!(
        taken.acquire_time.unwrap().0 >= expiry,
        "taken over only after renewTime + leaseDurationSeconds"
    );
    assert_eq!(taken.lease_transitions, Some(1));
    assert_eq!(b.metrics().takeovers.get(), 1);
    assert_eq!(guard_b.taken_over_from(), Some(a.identity().as_str()));
    guard_b.release().await;
    // The next lock finds the Lease released: nothing is taken over.
    let again = b.lock(device, Priority::High).await.unwrap();
    assert_eq!(again.taken_over_from(), None);
    again.release().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_whose_renewal_keeps_failing_reports_the_lock_lost() {
    let cluster = cluster().await;
    let settings = LeaseSettings::with_duration(Duration::from_secs(2));
    let a = replica(&cluster, "replica-a", settings, SHORT, None).await;
    let guard = a.lock("nfs-server-1", Priority::Default).await.unwrap();
    assert!(!guard.is_lost());
    cluster
        .faults()
        .add_error_rule(cinder_sim::ErrorRule::always(
            Some("update"),
            Some("leases"),
            500,
        ));
    tokio::time::timeout(Duration::from_secs(60), guard.lost())
        .await
        .expect("lost within a minute");
    assert!(guard.is_lost());
    assert_eq!(a.metrics().lost.get(), 1);
    cluster.faults().clear();
    guard.release().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_in_process_waiters_cost_no_more_lease_calls_than_one() {
    let cluster = cluster().await;
    let locks = replica(&cluster, "replica-a", long_lease(), SHORT, None).await;

    // One waiter.
    cluster.clear_requests();
    let guard = locks.lock("db-one", Priority::Default).await.unwrap();
    guard.release().await;
    let one = lease_requests(&cluster);
    assert!(one > 0);

    // A holder and fifty waiters queued behind it.
    cluster.clear_requests();
    let holder = locks.lock("db-fifty", Priority::High).await.unwrap();
    let after_acquire = lease_requests(&cluster);
    let served = Arc::new(AtomicUsize::new(0));
    let mut waiters = Vec::new();
    for _ in 0..50 {
        let (locks, served) = (locks.clone(), served.clone());
        waiters.push(tokio::spawn(async move {
            let guard = locks.lock("db-fifty", Priority::Default).await.unwrap();
            served.fetch_add(1, Ordering::SeqCst);
            guard.release().await;
        }));
    }
    eventually("fifty waiters queued in the device actor", || async {
        let snapshot = locks.inspect().await;
        snapshot
            .devices
            .iter()
            .any(|d| d.device == "db-fifty" && d.waiters.default.len() == 50)
    })
    .await;
    assert_eq!(
        lease_requests(&cluster),
        after_acquire,
        "no Lease call while waiting"
    );
    holder.release().await;
    for w in waiters {
        w.await.unwrap();
    }
    assert_eq!(served.load(Ordering::SeqCst), 50);
    let fifty = lease_requests(&cluster);
    assert!(
        fifty <= one,
        "51 holders made {fifty} Lease calls, one holder made {one}"
    );
    let lease = read(&cluster, &lease_name("db-fifty")).await.unwrap();
    assert_eq!(spec(&lease).holder_identity, None, "released at the end");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_waiter_is_served_within_the_bound_under_high_contention() {
    let cluster = cluster().await;
    let age_step = Duration::from_millis(50);
    let locks = replica(&cluster, "replica-a", long_lease(), SHORT, Some(age_step)).await;
    let device = "cinder-db";
    let high_workers = 4;
    let high_grants = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for _ in 0..high_workers {
        let (locks, grants, stop) = (locks.clone(), high_grants.clone(), stop.clone());
        workers.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let guard = locks.lock(device, Priority::High).await.unwrap();
                grants.fetch_add(1, Ordering::SeqCst);
                // Each hold lasts at least one ageing step.
                tokio::time::sleep(age_step).await;
                guard.release().await;
            }
        }));
    }
    eventually("sustained High contention", || async {
        high_grants.load(Ordering::SeqCst) >= 10
    })
    .await;
    for _ in 0..3 {
        let before = high_grants.load(Ordering::SeqCst);
        let guard = locks.lock(device, Priority::Default).await.unwrap();
        let overtaken = high_grants.load(Ordering::SeqCst) - before;
        guard.release().await;
        // Documented bound: the requests queued before it (at most one per other worker) plus
        // the grants during one ageing step (at most 2 when every hold lasts >= one step); +1
        // for a grant already made but not yet counted when `before` was read.
        assert!(
            overtaken <= high_workers + 2 + 1,
            "a Default waiter was overtaken by {overtaken} High grants"
        );
    }
    stop.store(true, Ordering::SeqCst);
    for w in workers {
        w.await.unwrap();
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_higher_waiter_is_served_before_older_lower_ones() {
    use cinder_lease::devices::{BACKEND_CHANGE_PRIORITY, DatabaseJob, retry_priority};
    let cluster = cluster().await;
    // Ageing effectively off: the order is the priorities' alone.
    let locks = replica(
        &cluster,
        "replica-a",
        long_lease(),
        SHORT,
        Some(Duration::from_secs(30)),
    )
    .await;
    let device = "nfs:nfs1";
    let holder = locks.lock(device, Priority::High).await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    // Queued oldest first: a Baseline request, a service-remove's first wait (Default), the
    // retry of a request refused at Default (raised), and a backend change (High).
    let waiters = [
        ("baseline", Priority::Baseline),
        ("service-remove", DatabaseJob::ServiceRemove.priority()),
        ("retry", retry_priority(Priority::Default)),
        ("backend-change", BACKEND_CHANGE_PRIORITY),
    ];
    let mut tasks = Vec::new();
    for (i, (who, priority)) in waiters.into_iter().enumerate() {
        let (l, order) = (locks.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let guard = l.lock(device, priority).await.unwrap();
            order.lock().unwrap().push(who);
            guard.release().await;
        }));
        eventually("the waiter queued", || async {
            locks
                .inspect()
                .await
                .devices
                .iter()
                .any(|d| d.waiters.len() == i + 1)
        })
        .await;
    }
    holder.release().await;
    for t in tasks {
        t.await.unwrap();
    }
    // Within High, FIFO: the retry queued before the backend change.
    assert_eq!(
        *order.lock().unwrap(),
        vec!["retry", "backend-change", "service-remove", "baseline"]
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_and_resource_locks_mix_in_one_lock_call_without_deadlock() {
    let cluster = cluster().await;
    let locks = replica(&cluster, "replica-a", long_lease(), SHORT, None).await;
    let coordinator = locks.coordinator().clone();
    let mut tasks = Vec::new();
    for i in 0..20 {
        let (locks, coordinator) = (locks.clone(), coordinator.clone());
        tasks.push(tokio::spawn(async move {
            if i % 2 == 0 {
                let guard = locks
                    .lock_with_queries(
                        "ceph-cluster",
                        Priority::High,
                        vec![query([upsert_backend("backend1", "", "")])],
                    )
                    .await
                    .unwrap();
                assert_eq!(guard.results().len(), 2);
                assert!(guard.results()[1].backend.op().is_some());
                guard.release().await;
            } else {
                // The backend alone, then the device nested after it is refused as out of order;
                // instead the coordinator orders both in one call.
                let backend = coordinator
                    .lock(vec![query([upsert_backend("backend1", "", "")])])
                    .await
                    .unwrap();
                tokio::task::yield_now().await;
                backend.unlock().await;
            }
        }));
    }
    tokio::time::timeout(Duration::from_secs(60), async {
        for t in tasks {
            t.await.unwrap();
        }
    })
    .await
    .expect("no deadlock");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_device_is_taken_nested_after_the_first_and_refused_out_of_order() {
    let cluster = cluster().await;
    let locks = replica(&cluster, "replica-a", long_lease(), SHORT, None).await;
    let outer = locks.lock("dev-b", Priority::Default).await.unwrap();
    // A device that sorts before the held one is refused, and takes nothing.
    let err = locks
        .nested_lock_with_queries(&outer, "dev-a", Priority::Default, Vec::new())
        .await
        .unwrap_err();
    match &err {
        DeviceLockError::Coordinator { source, .. } => {
            assert_eq!(source.code(), "would_deadlock", "{err}")
        }
        other => panic!("{other}"),
    }
    // One that sorts after is taken with its Lease, with a resource lock after it.
    let nested = locks
        .nested_lock_with_queries(
            &outer,
            "dev-c",
            Priority::Default,
            vec![query([upsert_backend("backend1", "", "")])],
        )
        .await
        .unwrap();
    assert_eq!(nested.device(), "dev-c");
    assert!(nested.results()[1].backend.op().is_some());
    let snap = locks.coordinator().inspect().await.unwrap();
    let held: Vec<_> = snap
        .resources
        .iter()
        .filter(|r| !r.holders.is_empty())
        .map(|r| r.id.as_str())
        .collect();
    assert!(
        held.contains(&"dev-b") && held.contains(&"dev-c") && !held.contains(&"dev-a"),
        "{held:?}"
    );
    // A second replica cannot take the nested device: its Lease is held.
    let other = replica(&cluster, "replica-b", long_lease(), SHORT, None).await;
    let busy = other.lock("dev-c", Priority::Default).await.unwrap_err();
    assert!(matches!(busy, DeviceLockError::DeviceBusy { .. }), "{busy}");
    nested.release().await;
    outer.release().await;
    // The refusal stands for the requests granted within `short_delay / 2` of it; a caller
    // retries after the `retry_after` it was given, and that retry reads the released Lease.
    let DeviceLockError::DeviceBusy { retry_after, .. } = busy else {
        unreachable!("matched above")
    };
    tokio::time::sleep(retry_after).await;
    let free = other.lock("dev-c", Priority::Default).await.unwrap();
    free.release().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspection_shows_holder_lease_and_waiters_by_priority() {
    let cluster = cluster().await;
    let locks = replica(&cluster, "replica-a", long_lease(), SHORT, None).await;
    let guard = locks.lock("nfs-10.0.0.5", Priority::High).await.unwrap();
    let mut waiters = Vec::new();
    for priority in [Priority::Baseline, Priority::Default, Priority::Default] {
        let locks = locks.clone();
        waiters.push(tokio::spawn(async move {
            locks
                .lock("nfs-10.0.0.5", priority)
                .await
                .unwrap()
                .release()
                .await;
        }));
    }
    eventually("three waiters queued", || async {
        locks
            .inspect()
            .await
            .devices
            .iter()
            .any(|d| d.waiters.len() == 3)
    })
    .await;
    let snapshot = locks.inspect().await;
    let d = &snapshot.devices[0];
    assert_eq!(d.device, "nfs-10.0.0.5");
    assert_eq!(d.holder.as_ref().unwrap().priority, Priority::High);
    assert_eq!(d.lease_name, lease_name("nfs-10.0.0.5"));
    let lease = d.lease.as_ref().unwrap();
    assert_eq!(lease.holder.as_deref(), Some(locks.identity().as_str()));
    assert!(lease.renew_time.is_some());
    assert!(d.lease_held_here);
    assert_eq!(
        (
            d.waiters.high.len(),
            d.waiters.default.len(),
            d.waiters.baseline.len()
        ),
        (0, 2, 1)
    );
    let json = serde_json::to_value(&snapshot).unwrap();
    assert_eq!(
        json["devices"][0]["lease"]["name"],
        lease_name("nfs-10.0.0.5")
    );
    guard.release().await;
    for w in waiters {
        w.await.unwrap();
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_answers_the_requests_that_follow_it_for_half_the_short_delay() {
    let cluster = cluster().await;
    let short = Duration::from_secs(2);
    let a = replica(&cluster, "replica-a", long_lease(), SHORT, None).await;
    let b = replica(&cluster, "replica-b", long_lease(), short, None).await;
    let device = "nfs:filer-shared";
    let guard = a.lock(device, Priority::Default).await.unwrap();
    cluster.clear_requests();
    let refused_at = Instant::now();
    // Twenty requests of replica b, one after the other: the first reads the Lease, the others
    // are answered from its refusal while it stands.
    for i in 0..20 {
        match b.lock(device, Priority::High).await {
            Err(DeviceLockError::DeviceBusy { holder, .. }) => {
                assert_eq!(holder, a.identity().as_str(), "request {i}");
            }
            other => panic!("request {i}: expected DeviceBusy, got {other:?}"),
        }
    }
    assert!(
        refused_at.elapsed() < short / 2,
        "the requests took too long"
    );
    assert_eq!(lease_requests(&cluster), 1, "one read for twenty refusals");
    // The holder lets go; a retry after the jittered delay reads the Lease and takes it.
    guard.release().await;
    tokio::time::sleep(jitter_low(short)).await;
    let taken = b
        .lock(device, Priority::High)
        .await
        .expect("taken on retry");
    taken.release().await;
    cluster.shutdown().await;
}

/// The shortest `jitter(d)` can be.
fn jitter_low(d: Duration) -> Duration {
    d.mul_f64(0.9)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_guard_releases_the_lease_and_the_in_process_lock() {
    let cluster = cluster().await;
    let a = replica(&cluster, "replica-a", long_lease(), SHORT, None).await;
    let b = replica(&cluster, "replica-b", long_lease(), SHORT, None).await;
    let guard = a.lock("nfs:filer-1", Priority::Default).await.unwrap();
    assert!(matches!(
        b.lock("nfs:filer-1", Priority::Default).await,
        Err(DeviceLockError::DeviceBusy { .. })
    ));
    drop(guard);
    // In process: the next local request is granted.
    let again = tokio::time::timeout(
        Duration::from_secs(60),
        a.lock("nfs:filer-1", Priority::Default),
    )
    .await
    .expect("in-process lock released")
    .unwrap();
    drop(again);
    // Across replicas: the Lease is released, so the other replica gets it.
    eventually("the other replica acquires after the drop", || async {
        match b.lock("nfs:filer-1", Priority::Default).await {
            Ok(g) => {
                g.release().await;
                true
            }
            Err(_) => false,
        }
    })
    .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_with_failing_lease_reads_and_creates_stays_exclusive() {
    let cluster = cluster().await;
    for verb in ["get", "create"] {
        cluster.faults().add_error_rule(cinder_sim::ErrorRule {
            verb: Some(verb.into()),
            resource: Some("leases".into()),
            user_agent: None,
            code: 500,
            probability: 0.2,
        });
    }
    let replicas = [
        replica(&cluster, "replica-a", LeaseSettings::default(), SHORT, None).await,
        replica(&cluster, "replica-b", LeaseSettings::default(), SHORT, None).await,
    ];
    let recorder = Arc::new(Recorder::default());
    let api_errors = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for (r, locks) in replicas.iter().enumerate() {
        for w in 0..4 {
            let (locks, recorder, api_errors) =
                (locks.clone(), recorder.clone(), api_errors.clone());
            tasks.push(tokio::spawn(async move {
                let who = format!("replica-{r}/worker-{w}");
                for round in 0..40 {
                    let device = format!("device-{}", (round + w) % 5);
                    let mut attempts = 0;
                    loop {
                        attempts += 1;
                        assert!(attempts < 100_000, "{who}: {device} never acquired");
                        match locks.lock(&device, Priority::Default).await {
                            Ok(guard) => {
                                recorder.enter(&device, &who);
                                tokio::task::yield_now().await;
                                recorder.exit(&device);
                                guard.release().await;
                                break;
                            }
                            Err(DeviceLockError::DeviceBusy { retry_after, .. }) => {
                                tokio::time::sleep(retry_after).await
                            }
                            Err(DeviceLockError::Lease(_)) => {
                                api_errors.fetch_add(1, Ordering::Relaxed);
                                tokio::time::sleep(SHORT).await
                            }
                            Err(e) => panic!("{who}: {e}"),
                        }
                    }
                }
            }));
        }
    }
    for t in tasks {
        t.await.expect("worker finished");
    }
    let violations = recorder.violations.lock().unwrap().clone();
    assert!(violations.is_empty(), "two holders at once: {violations:?}");
    assert!(
        api_errors.load(Ordering::Relaxed) > 0,
        "faults were injected"
    );
    let holds: u64 = replicas.iter().map(|r| r.metrics().holds.get()).sum();
    assert_eq!(holds, 320);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_waiters_never_leave_the_lease_held() {
    let cluster = cluster().await;
    let locks = replica(&cluster, "replica-a", long_lease(), SHORT, None).await;
    let other = replica(&cluster, "replica-b", long_lease(), SHORT, None).await;
    let device = "rbd:10.0.0.1:6789";
    for round in 0..30 {
        let holder = locks.lock(device, Priority::Default).await.unwrap();
        let waiter = {
            let locks = locks.clone();
            tokio::spawn(async move {
                let guard = locks.lock(device, Priority::Default).await.unwrap();
                guard.release().await;
            })
        };
        eventually("the waiter is pending", || async {
            locks.inspect().await.devices.iter().any(|d| d.pending == 1)
        })
        .await;
        // Release the holder while the waiter is cancelled: the Lease may be parked for the
        // waiter and then orphaned by the cancellation.
        if round % 2 == 0 {
            waiter.abort();
            holder.release().await;
        } else {
            let release = holder.release();
            waiter.abort();
            release.await;
        }
        let _ = waiter.await;
        // Nobody holds or waits in this replica: the Lease ends up free for the other replica.
        eventually("the other replica can take the device", || async {
            match other.lock(device, Priority::Default).await {
                Ok(g) => {
                    g.release().await;
                    true
                }
                Err(_) => false,
            }
        })
        .await;
    }
    let snapshot = locks.inspect().await;
    assert!(
        snapshot
            .devices
            .iter()
            .all(|d| d.holder.is_none() && d.pending == 0)
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_interrupted_half_way_never_clears_the_next_holders_lease() {
    let cluster = cluster().await;
    let a = replica(&cluster, "replica-a", long_lease(), SHORT, None).await;
    let device = "nfs:filer-race";
    let identity = a.identity().as_str().to_owned();
    for round in 0..20 {
        let guard = a.lock(device, Priority::Default).await.unwrap();
        // The release is interrupted after its first poll (the caller is cancelled half-way).
        let mut release = Box::pin(guard.release());
        let _ = futures::poll!(release.as_mut());
        drop(release);
        // The next in-process holder takes the device (and the Lease) right away.
        let next = tokio::time::timeout(Duration::from_secs(60), a.lock(device, Priority::Default))
            .await
            .expect("the in-process lock is released")
            .unwrap();
        // Whatever the interrupted release still does, the Lease stays the next holder's.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let lease = read(&cluster, &lease_name(device))
            .await
            .expect("lease exists");
        assert_eq!(
            spec(&lease).holder_identity.as_deref(),
            Some(identity.as_str()),
            "round {round}: the Lease of the holder was cleared by an earlier release"
        );
        assert!(!next.is_lost());
        next.release().await;
    }
    cluster.shutdown().await;
}

/// A replica whose idle devices are forgotten after `idle_grace`.
async fn replica_with_grace(
    cluster: &EmbeddedCluster,
    name: &str,
    idle_grace: Duration,
) -> cinder_lease::DeviceLocks {
    let mut config = cinder_lease::DeviceLocksConfig::new(NS);
    config.identity = HolderIdentity::for_pod(name);
    config.lease = long_lease();
    config.short_delay = SHORT;
    config.idle_grace = idle_grace;
    replica_with(cluster, config, None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devices_no_longer_locked_are_forgotten() {
    let cluster = cluster().await;
    let grace = Duration::from_millis(500);
    let locks = replica_with_grace(&cluster, "replica-a", grace).await;
    // Thirty devices locked and released one after the other, and one refused (held by another
    // replica): none of them is remembered once the idle grace has passed, in the directory or
    // the coordinator.
    for i in 0..30 {
        let guard = locks
            .lock(&format!("db:gone/{i}"), Priority::Default)
            .await
            .unwrap();
        guard.release().await;
    }
    let other = replica(&cluster, "replica-b", long_lease(), SHORT, None).await;
    let held = other.lock("db:taken", Priority::Default).await.unwrap();
    assert!(matches!(
        locks.lock("db:taken", Priority::Default).await,
        Err(DeviceLockError::DeviceBusy { .. })
    ));
    eventually("every idle device forgotten", || async {
        let devices = locks.inspect().await.devices;
        let resources = locks.coordinator().inspect().await.unwrap().resources;
        devices.is_empty() && resources.iter().all(|r| r.kind != "device")
    })
    .await;
    // A device locked again gets a fresh actor that works as before.
    let again = locks.lock("db:gone/3", Priority::High).await.unwrap();
    assert_eq!(locks.inspect().await.devices.len(), 1);
    again.release().await;
    held.release().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_locked_again_within_its_idle_grace_skips_the_get() {
    let cluster = cluster().await;
    // A grace no test run outlasts: the device keeps its actor between the two holds.
    let locks = replica_with_grace(&cluster, "replica-a", Duration::from_secs(600)).await;
    let lease_verbs = |cluster: &EmbeddedCluster| -> Vec<String> {
        cluster
            .requests()
            .iter()
            .filter(|r| r.resource == "leases")
            .map(|r| r.verb.clone())
            .collect()
    };
    cluster.clear_requests();
    locks
        .lock("db:again", Priority::High)
        .await
        .unwrap()
        .release()
        .await;
    assert_eq!(lease_verbs(&cluster), ["get", "create", "update"]);
    assert_eq!(
        locks.inspect().await.devices.len(),
        1,
        "kept within the grace"
    );

    // Acquired from the released copy: one PUT, one PUT to release.
    cluster.clear_requests();
    let guard = locks.lock("db:again", Priority::High).await.unwrap();
    assert_eq!(lease_verbs(&cluster), ["update"]);
    let lease = read(&cluster, &lease_name("db:again")).await.unwrap();
    assert_eq!(
        spec(&lease).holder_identity.as_deref(),
        Some(locks.identity().as_str())
    );
    cluster.clear_requests();
    guard.release().await;
    assert_eq!(lease_verbs(&cluster), ["update"]);

    // Another replica took the device meanwhile: the remembered copy is stale, its PUT gets a
    // 409, and the lock reads the Lease and reports the other holder.
    let other = replica(&cluster, "replica-b", long_lease(), SHORT, None).await;
    let held = other.lock("db:again", Priority::High).await.unwrap();
    cluster.clear_requests();
    let retry_after = match locks.lock("db:again", Priority::High).await {
        Err(DeviceLockError::DeviceBusy { retry_after, .. }) => retry_after,
        other => panic!("expected DeviceBusy, got {other:?}"),
    };
    assert_eq!(lease_verbs(&cluster), ["update", "get"]);
    held.release().await;

    // Released by the other replica: the retry, after `retry_after` like every caller's, reads
    // afresh, decides and takes it.
    tokio::time::sleep(retry_after).await;
    let guard = locks.lock("db:again", Priority::High).await.unwrap();
    assert!(!guard.is_lost());
    guard.release().await;
    cluster.shutdown().await;
}
