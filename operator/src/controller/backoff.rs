//! Per-object exponential back-off of failed reconciles: the n-th failure in a row of one object
//! (the reconcile returned an error, or a step of its pass failed) is retried after
//! [`crate::requeue::backoff`], through the project's jitter, and a watch event that arrives
//! before then does not bring the retry forward unless the object's generation changed (a spec
//! edit is acted on at once; a child's status change or the object's own status write is not a
//! reason to repeat a failing write). A successful reconcile resets the object's count. A fault
//! on one object does not speed up or slow down any other.
//!
//! [`Backoffs`] is the pure bookkeeping. Its owners are actors: the pipelines registry keeps the
//! Cinders' (its [`crate::pipeline::Admit`] is the one place that decides when a Cinder's pass
//! runs), and [`BackoffActor`] keeps the satellites'.

use crate::requeue::{backoff, jittered};
use actix::prelude::*;
use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// One failing object: its failures in a row, the generation that failed and when to retry.
#[derive(Clone, Copy, Debug)]
struct Failing {
    failures: u32,
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
        let entry = self.failing.entry(key).or_insert(Failing {
            failures: 0,
            generation,
            retry_at: now,
        });
        entry.failures = entry.failures.saturating_add(1);
        let wait = jittered(backoff(entry.failures));
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

/// The actor that owns the satellites' [`Backoffs`] (keyed `kind/namespace/name`).
#[derive(Default)]
pub struct BackoffActor {
    backoffs: Backoffs<String>,
}

impl Actor for BackoffActor {
    type Context = Context<Self>;
}

/// How long a reconcile of the object at this generation still waits for its retry.
#[derive(Message)]
#[rtype(result = "Option<Duration>")]
pub struct Holding {
    pub key: String,
    pub generation: Option<i64>,
}

/// A reconcile of the object failed at this generation: when is it retried?
#[derive(Message)]
#[rtype(result = "Retry")]
pub struct Failed {
    pub key: String,
    pub generation: Option<i64>,
}

/// A reconcile of the object succeeded (or the object is gone): its count is reset.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Succeeded(pub String);

impl Handler<Holding> for BackoffActor {
    type Result = Option<Duration>;

    fn handle(&mut self, msg: Holding, _ctx: &mut Self::Context) -> Self::Result {
        self.backoffs
            .holding(&msg.key, msg.generation, Instant::now())
    }
}

impl Handler<Failed> for BackoffActor {
    type Result = MessageResult<Failed>;

    fn handle(&mut self, msg: Failed, _ctx: &mut Self::Context) -> Self::Result {
        MessageResult(
            self.backoffs
                .failed(msg.key, msg.generation, Instant::now()),
        )
    }
}

impl Handler<Succeeded> for BackoffActor {
    type Result = ();

    fn handle(&mut self, msg: Succeeded, _ctx: &mut Self::Context) {
        self.backoffs.succeeded(&msg.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_per_failure_up_to_the_ceiling() {
        let secs: Vec<u64> = (1..=8).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(secs, vec![1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(backoff(u32::MAX), crate::requeue::BACKOFF_CEILING);
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

    #[actix::test]
    async fn the_actor_counts_holds_and_resets() {
        let actor = BackoffActor::default().start();
        let key = || "CinderBackend/ns/b".to_string();
        let hold = |generation| Holding {
            key: key(),
            generation,
        };
        assert_eq!(actor.send(hold(Some(1))).await.unwrap(), None);
        let retry = actor
            .send(Failed {
                key: key(),
                generation: Some(1),
            })
            .await
            .unwrap();
        assert_eq!(retry.failures, 1);
        assert!(actor.send(hold(Some(1))).await.unwrap().is_some());
        assert_eq!(actor.send(hold(Some(2))).await.unwrap(), None);
        actor.send(Succeeded(key())).await.unwrap();
        assert_eq!(actor.send(hold(Some(1))).await.unwrap(), None);
    }
}
