//! Per-object exponential backoff of failed reconciles: the n-th failure in a row of one object
//! (the reconcile returned an error, or a step of its pass failed) is retried after
//! [`crate::requeue::backoff`], through the project's jitter, and a watch event that arrives
//! before then does not bring the retry forward unless the object's generation changed (a spec
//! edit is acted on at once; a child's status change or the object's own status write is not a
//! reason to repeat a failing write). A successful reconcile resets the object's count. A fault
//! on one object does not speed up or slow down any other.

use crate::requeue::{backoff, jittered};
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// One failing object: its failures in a row, the generation that failed and when to retry.
#[derive(Clone, Copy, Debug)]
struct Failing {
    failures: u32,
    generation: Option<i64>,
    retry_at: Instant,
}

/// The failure counts of the objects that are failing (keyed by `namespace/name`).
#[derive(Debug, Default)]
pub struct Backoffs {
    failing: Mutex<HashMap<String, Failing>>,
}

impl Backoffs {
    /// Counts a failure of `key` at `generation`; returns the jittered retry interval.
    pub fn failed(&self, key: String, generation: Option<i64>) -> Duration {
        self.failed_at(key, generation, Instant::now())
    }

    fn failed_at(&self, key: String, generation: Option<i64>, now: Instant) -> Duration {
        let mut failing = self.failing.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = failing.entry(key).or_insert(Failing {
            failures: 0,
            generation,
            retry_at: now,
        });
        entry.failures = entry.failures.saturating_add(1);
        let wait = jittered(backoff(entry.failures));
        entry.generation = generation;
        entry.retry_at = now + wait;
        wait
    }

    /// How long a reconcile of `key` at `generation` still waits for its retry: `None` when the
    /// object is not failing, its retry time has come, or its generation changed since.
    pub fn holding(&self, key: &str, generation: Option<i64>) -> Option<Duration> {
        self.holding_at(key, generation, Instant::now())
    }

    fn holding_at(&self, key: &str, generation: Option<i64>, now: Instant) -> Option<Duration> {
        let failing = self.failing.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = failing.get(key)?;
        if entry.generation != generation {
            return None;
        }
        let left = entry.retry_at.saturating_duration_since(now);
        (!left.is_zero()).then_some(left)
    }

    /// How many failures in a row `key` has (0 when it is not failing).
    pub fn failures(&self, key: &str) -> u32 {
        let failing = self.failing.lock().unwrap_or_else(PoisonError::into_inner);
        failing.get(key).map_or(0, |f| f.failures)
    }

    /// Forgets the failures of `key` (its reconcile succeeded, or the object is gone).
    pub fn succeeded(&self, key: &str) {
        let mut failing = self.failing.lock().unwrap_or_else(PoisonError::into_inner);
        failing.remove(key);
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
        let b = Backoffs::default();
        for _ in 0..5 {
            b.failed("ns/a".into(), Some(1));
        }
        b.failed("ns/b".into(), Some(1));
        b.succeeded("ns/b");
        let a = b.failed("ns/a".into(), Some(1));
        assert!(a >= Duration::from_secs_f64(30.0 * 0.9), "{a:?}");
        let fresh = b.failed("ns/b".into(), Some(1));
        assert!(fresh <= Duration::from_secs_f64(1.1), "{fresh:?}");
        assert_eq!((b.failures("ns/a"), b.failures("ns/b")), (6, 1));
        b.succeeded("ns/a");
        assert_eq!(b.failures("ns/a"), 0);
    }

    #[test]
    fn an_early_reconcile_waits_unless_the_generation_changed() {
        let b = Backoffs::default();
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        assert_eq!(b.holding_at("ns/a", Some(3), t0), None, "not failing");
        let wait = b.failed_at("ns/a".into(), Some(3), t0);
        let left = b.holding_at("ns/a", Some(3), at(200)).expect("held");
        assert_eq!(left, wait - Duration::from_millis(200));
        assert_eq!(b.holding_at("ns/a", Some(4), at(200)), None, "a spec edit");
        assert_eq!(
            b.holding_at("ns/a", Some(3), at(1200)),
            None,
            "its time came"
        );
        assert_eq!(
            b.holding_at("ns/b", Some(3), at(200)),
            None,
            "another object"
        );
        b.succeeded("ns/a");
        assert_eq!(b.holding_at("ns/a", Some(3), at(200)), None);
    }
}
