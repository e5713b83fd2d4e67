//! Per-object exponential backoff of failed reconciles: the n-th failure in a row of one object
//! is retried after `BASE * 2^(n-1)`, at most [`CEILING`], through the project's jitter; a
//! successful reconcile resets the object's count. A fault on one object does not speed up or
//! slow down any other.

use crate::requeue::jittered;
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// The retry after the first failure.
pub const BASE: Duration = Duration::from_secs(1);
/// The longest retry interval.
pub const CEILING: Duration = Duration::from_secs(30);

/// The nominal retry after `failures` failures in a row (>= 1).
pub fn interval(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    BASE.saturating_mul(1 << doublings).min(CEILING)
}

/// The failure counts of the objects that are failing (keyed by `namespace/name`).
#[derive(Debug, Default)]
pub struct Backoffs {
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoffs {
    /// Counts a failure of `key`; returns the jittered retry interval.
    pub fn failed(&self, key: String) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        let n = failures.entry(key).or_default();
        *n = n.saturating_add(1);
        jittered(interval(*n))
    }

    /// Forgets the failures of `key` (its reconcile succeeded, or the object is gone).
    pub fn succeeded(&self, key: &str) {
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        failures.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_per_failure_up_to_the_ceiling() {
        let secs: Vec<u64> = (1..=8).map(|n| interval(n).as_secs()).collect();
        assert_eq!(secs, vec![1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(interval(u32::MAX), CEILING);
    }

    #[test]
    fn a_success_resets_one_object_only() {
        let b = Backoffs::default();
        for _ in 0..5 {
            b.failed("ns/a".into());
        }
        b.failed("ns/b".into());
        b.succeeded("ns/b");
        let a = b.failed("ns/a".into());
        assert!(a >= Duration::from_secs_f64(30.0 * 0.9), "{a:?}");
        let fresh = b.failed("ns/b".into());
        assert!(fresh <= Duration::from_secs_f64(1.1), "{fresh:?}");
    }
}
