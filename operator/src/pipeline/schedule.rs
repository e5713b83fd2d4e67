//! When a Cinder's pass may run, decided in one place (the registry's [`super::Admit`], which owns
//! the two parts here): its back-off after a failure ([`Backoffs`]) and a reconcile slot
//! ([`Admission`]); the third rule, the gap between two passes of one Cinder, is
//! [`super::MIN_PASS_GAP`].
//!
//! ## Back-off
//!
//! Per-object exponential back-off of failed reconciles: the n-th failure in a row of one object
//! (the reconcile returned an error, or a step of its pass failed) is retried after the n-th
//! delay of its own [`crate::requeue::backoff`] (backon's exponential back-off), through the
//! project's jitter, and a watch event that arrives before then does not bring the retry
//! forward unless the object's generation changed (a spec edit is acted on at once; a child's
//! status change or the object's own status write is not a reason to repeat a failing write). A
//! successful reconcile resets the object's count and its delays. A fault on one object does not
//! speed up or slow down any other.
//!
//! [`Backoffs`] is the pure bookkeeping. Its owners are actors: the pipelines registry keeps the
//! Cinders', and [`crate::pipeline::backoff_actor::BackoffActor`] the satellites'.
//!
//! ## Admission
//!
//! Which Cinders may reconcile: at most `--max-concurrent-reconciles` at once, the oldest Cinder
//! first. The registry actor ([`super::Pipelines`]) owns the one [`Admission`].
//!
//! A Cinder that cannot run now does not wait inside kube-runtime's runner: the runner polls
//! every reconcile in flight on each wake-up, so a thousand waiting reconciles cost a thousand
//! polls per event. Its reconcile returns at once and the Cinder joins the queue here. When a
//! slot frees, the first Cinder in the queue is granted it and woken (reconciled again at once);
//! its next reconcile takes the slot. A grant not taken within the grant's lifetime (the Cinder
//! was deleted, or this replica lost its shard) goes to the next in the queue.
//!
//! The queue is ordered by rank, the Cinder's creation time: a Cinder created earlier goes
//! first. When a fleet is created at once, the oldest Cinders then run their passes back to back
//! and become Ready one after the other, instead of every Cinder advancing one pass per turn of
//! the queue and all becoming Ready at the end; a Cinder waiting for a roll-out is polled every
//! 10 s, so the fewer Cinders are half-way at once, the fewer passes the fleet costs. A queued
//! Cinder's events and requeues coalesce into the one pass it is granted. The cost: under a
//! backlog that the older Cinders alone keep up (each asks again only after its requeue
//! interval), a newer Cinder waits until they are through.
//!
//! The Cinder controller itself runs without a limit of its own: kube-runtime's runner, once at
//! its limit, keeps the due reconciles in a hash set and takes them in hash order, so under a
//! sustained backlog which objects wait is left to chance.

use crate::requeue::{backoff, jittered};
use backon::ExponentialBackoff;
use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;
use std::time::{Duration, Instant};

/// How long a granted slot is kept for the Cinder it was granted to.
pub const GRANT_LIFETIME: Duration = Duration::from_secs(10);

/// The answer to a Cinder that asks to reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// A slot is the caller's: it reconciles now and gives the slot back with
    /// [`Admission::release`].
    Run,
    /// The Cinder is queued (or already was): it is woken when a slot is granted to it.
    Wait,
}

/// The reconcile slots, the Cinders queued for one (`K` names a Cinder, `R` ranks it: the lower
/// rank goes first) and the slots granted but not yet taken.
#[derive(Debug)]
pub struct Admission<K, R> {
    /// The most reconciles at once (0: no limit).
    limit: usize,
    /// Slots taken or granted.
    running: usize,
    /// Queued Cinders in rank order.
    waiting: BTreeSet<(R, K)>,
    /// The rank each queued Cinder was queued with.
    queued: HashMap<K, R>,
    /// Granted slots with the instant each lapses.
    granted: HashMap<K, Instant>,
    lifetime: Duration,
}

impl<K: Clone + Eq + Hash + Ord, R: Clone + Ord> Admission<K, R> {
    /// At most `limit` reconciles at once (0 admits every one at once); a granted slot lapses
    /// after `lifetime`.
    pub fn new(limit: usize, lifetime: Duration) -> Self {
        Admission {
            limit,
            running: 0,
            waiting: BTreeSet::new(),
            queued: HashMap::new(),
            granted: HashMap::new(),
            lifetime,
        }
    }

    /// Whether a limit applies (without one nothing is ever queued or granted).
    pub fn limited(&self) -> bool {
        self.limit > 0
    }

    /// `key` asks to reconcile: it runs when a slot was granted to it, or when one is free and
    /// nobody is queued; otherwise it is queued with `rank` (once, however often it asks).
    pub fn ask(&mut self, key: &K, rank: R) -> Asked {
        if self.limit == 0 {
            self.running += 1;
            return Asked::Run;
        }
        if self.granted.remove(key).is_some() {
            return Asked::Run;
        }
        if self.queued.contains_key(key) {
            return Asked::Wait;
        }
        if self.running < self.limit && self.queued.is_empty() {
            self.running += 1;
            return Asked::Run;
        }
        self.queued.insert(key.clone(), rank.clone());
        self.waiting.insert((rank, key.clone()));
        Asked::Wait
    }

    /// A reconcile gave its slot back; returns the Cinders granted a slot (to be woken).
    pub fn release(&mut self, now: Instant) -> Vec<K> {
        self.running = self.running.saturating_sub(1);
        self.grant(now)
    }

    /// Takes back the grants that lapsed by `now`; returns the Cinders granted their slots.
    pub fn expire(&mut self, now: Instant) -> Vec<K> {
        let before = self.granted.len();
        self.granted.retain(|_, lapses| *lapses > now);
        self.running = self.running.saturating_sub(before - self.granted.len());
        self.grant(now)
    }

    /// `key` is gone (deleted): it leaves the queue, and a slot granted to it goes to the next.
    pub fn forget(&mut self, key: &K, now: Instant) -> Vec<K> {
        if let Some(rank) = self.queued.remove(key) {
            self.waiting.remove(&(rank, key.clone()));
        }
        if self.granted.remove(key).is_some() {
            self.running = self.running.saturating_sub(1);
        }
        self.grant(now)
    }

    /// Grants the free slots to the first-ranked queued Cinders.
    fn grant(&mut self, now: Instant) -> Vec<K> {
        let mut woken = Vec::new();
        while self.running < self.limit {
            let Some((_, next)) = self.waiting.pop_first() else {
                break;
            };
            self.queued.remove(&next);
            self.running += 1;
            self.granted.insert(next.clone(), now + self.lifetime);
            woken.push(next);
        }
        woken
    }

    /// Slots taken or granted.
    pub fn running(&self) -> usize {
        self.running
    }

    /// Cinders queued for a slot.
    pub fn waiting(&self) -> usize {
        self.queued.len()
    }
}

/// One failing object: its failures in a row, its next delays, the generation that failed and
/// when to retry.
#[derive(Debug)]
struct Failing {
    failures: u32,
    delays: ExponentialBackoff,
    generation: Option<i64>,
    retry_at: Instant,
}

/// When a failed object is retried, and how many failures in a row it has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    pub after: Duration,
    pub failures: u32,
}

/// The failure counts of the objects that are failing, keyed by `K`.
#[derive(Debug)]
pub struct Backoffs<K> {
    failing: HashMap<K, Failing>,
}

impl<K> Default for Backoffs<K> {
    fn default() -> Self {
        Backoffs {
            failing: HashMap::new(),
        }
    }
}

impl<K: Eq + Hash> Backoffs<K> {
    /// Counts a failure of `key` at `generation` at `now`; returns the jittered retry.
    pub fn failed(&mut self, key: K, generation: Option<i64>, now: Instant) -> Retry {
        let entry = self.failing.entry(key).or_insert_with(|| Failing {
            failures: 0,
            delays: backoff(),
            generation,
            retry_at: now,
        });
        entry.failures = entry.failures.saturating_add(1);
        let nominal = entry
            .delays
            .next()
            .unwrap_or(crate::requeue::BACKOFF_CEILING);
        let wait = jittered(nominal);
        entry.generation = generation;
        entry.retry_at = now + wait;
        Retry {
            after: wait,
            failures: entry.failures,
        }
    }

    /// How long a reconcile of `key` at `generation` still waits at `now` for its retry: `None`
    /// when the object is not failing, its retry time has come, or its generation changed since.
    pub fn holding(&self, key: &K, generation: Option<i64>, now: Instant) -> Option<Duration> {
        let entry = self.failing.get(key)?;
        if entry.generation != generation {
            return None;
        }
        let left = entry.retry_at.saturating_duration_since(now);
        (!left.is_zero()).then_some(left)
    }

    /// How many failures in a row `key` has (0 when it is not failing).
    pub fn failures(&self, key: &K) -> u32 {
        self.failing.get(key).map_or(0, |f| f.failures)
    }

    /// Forgets the failures of `key` (its reconcile succeeded, or the object is gone).
    pub fn succeeded(&mut self, key: &K) {
        self.failing.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIFE: Duration = Duration::from_secs(10);

    type A = Admission<&'static str, u32>;

    /// A one-slot admission at `now` that `keys` asked in this order, all of equal rank (the
    /// first runs, the rest wait).
    fn one_slot_asked(keys: &[&'static str]) -> (Instant, A) {
        let mut a = A::new(1, LIFE);
        for k in keys {
            a.ask(k, 0);
        }
        (Instant::now(), a)
    }

    #[test]
    fn at_most_the_limit_run_and_the_rest_are_granted_by_rank() {
        let now = Instant::now();
        let mut a = A::new(2, LIFE);
        use Asked::*;
        let ranked = [("a", 5), ("b", 9), ("young", 8), ("old", 1), ("mid", 4)];
        let answers: Vec<Asked> = ranked.iter().map(|(k, r)| a.ask(k, *r)).collect();
        assert_eq!(answers, [Run, Run, Wait, Wait, Wait]);
        assert_eq!((a.running(), a.waiting()), (2, 3));
        assert_eq!(a.release(now), ["old"], "the oldest queued goes first");
        assert_eq!(a.ask(&"mid", 4), Wait, "mid is not granted yet");
        assert_eq!(a.ask(&"old", 1), Run, "old takes its grant");
        assert_eq!(a.release(now), ["mid"]);
        assert_eq!((a.running(), a.waiting()), (2, 1));
    }

    #[test]
    fn equal_ranks_go_in_key_order() {
        let (now, mut a) = one_slot_asked(&["x", "c", "b"]);
        assert_eq!(a.release(now), ["b"]);
    }

    #[test]
    fn a_queued_cinder_is_queued_once_and_a_newcomer_waits_behind_the_queue() {
        let now = Instant::now();
        let mut a = A::new(1, LIFE);
        assert_eq!(a.ask(&"a", 0), Asked::Run);
        assert_eq!(a.ask(&"b", 0), Asked::Wait);
        assert_eq!(a.ask(&"b", 0), Asked::Wait);
        assert_eq!(a.waiting(), 1);
        assert_eq!(a.release(now), ["b"]);
        // The slot is b's until it takes it or the grant lapses, whoever asks meanwhile.
        assert_eq!(a.ask(&"z", 0), Asked::Wait);
        assert_eq!(a.ask(&"b", 0), Asked::Run);
        assert_eq!(a.release(now), ["z"]);
    }

    #[test]
    fn a_grant_not_taken_lapses_to_the_next() {
        let (now, mut a) = one_slot_asked(&["a", "b", "c"]);
        assert_eq!(a.release(now), ["b"]);
        assert!(a.expire(now + LIFE / 2).is_empty(), "not yet lapsed");
        assert_eq!(a.expire(now + LIFE), ["c"]);
        assert_eq!(a.running(), 1);
        // b asks after its grant lapsed: it queues again.
        assert_eq!(a.ask(&"b", 0), Asked::Wait);
    }

    #[test]
    fn a_forgotten_cinder_leaves_the_queue_and_its_grant_goes_on() {
        let (now, mut a) = one_slot_asked(&["a", "b", "c", "d"]);
        assert!(a.forget(&"c", now).is_empty());
        assert_eq!(a.waiting(), 2);
        assert_eq!(a.release(now), ["b"]);
        assert_eq!(a.forget(&"b", now), ["d"], "c was forgotten, d is next");
        assert_eq!((a.running(), a.waiting()), (1, 0));
    }

    #[test]
    fn no_limit_admits_everyone() {
        let mut a = A::new(0, LIFE);
        for k in ["a", "b", "c", "a"] {
            assert_eq!(a.ask(&k, 0), Asked::Run);
        }
        assert_eq!(a.waiting(), 0);
        assert!(a.release(Instant::now()).is_empty());
    }

    #[test]
    fn each_failure_in_a_row_doubles_the_retry_up_to_the_ceiling() {
        let mut b = Backoffs::default();
        let now = Instant::now();
        let waits: Vec<Duration> = (0..8)
            .map(|_| b.failed("ns/a", Some(1), now).after)
            .collect();
        for (wait, nominal) in waits.iter().zip([1, 2, 4, 8, 16, 30, 30, 30]) {
            let nominal = Duration::from_secs(nominal);
            assert!(
                *wait >= nominal.mul_f64(0.9) && *wait <= nominal.mul_f64(1.1),
                "{waits:?}"
            );
        }
        assert_eq!(b.failures(&"ns/a"), 8);
    }

    #[test]
    fn a_success_resets_one_object_only() {
        let mut b = Backoffs::default();
        let now = Instant::now();
        for _ in 0..5 {
            b.failed("ns/a", Some(1), now);
        }
        b.failed("ns/b", Some(1), now);
        b.succeeded(&"ns/b");
        let a = b.failed("ns/a", Some(1), now);
        assert!(a.after >= Duration::from_secs_f64(30.0 * 0.9), "{a:?}");
        assert_eq!(a.failures, 6);
        let fresh = b.failed("ns/b", Some(1), now);
        assert!(fresh.after <= Duration::from_secs_f64(1.1), "{fresh:?}");
        assert_eq!((b.failures(&"ns/a"), b.failures(&"ns/b")), (6, 1));
        b.succeeded(&"ns/a");
        assert_eq!(b.failures(&"ns/a"), 0);
    }

    #[test]
    fn an_early_reconcile_waits_unless_the_generation_changed() {
        let mut b = Backoffs::default();
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        assert_eq!(b.holding(&"ns/a", Some(3), t0), None, "not failing");
        let wait = b.failed("ns/a", Some(3), t0).after;
        let left = b.holding(&"ns/a", Some(3), at(200)).expect("held");
        assert_eq!(left, wait - Duration::from_millis(200));
        assert_eq!(b.holding(&"ns/a", Some(4), at(200)), None, "a spec edit");
        assert_eq!(b.holding(&"ns/a", Some(3), at(1200)), None, "its time came");
        assert_eq!(b.holding(&"ns/b", Some(3), at(200)), None, "another object");
        b.succeeded(&"ns/a");
        assert_eq!(b.holding(&"ns/a", Some(3), at(200)), None);
    }
}
