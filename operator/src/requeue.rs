//! The requeue intervals of the pipeline and the jittered form every periodic requeue goes
//! through (±10 %, so that many Cinders requeued together spread out).

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use std::time::Duration;

/// After a finalizer add, and after the RollingUpdate → Contracting flip.
pub(crate) const REQUEUE_NEXT_PASS: Duration = Duration::from_secs(1);
/// Deployment readiness polling, every workload step's rollout wait, each stage of a detach.
pub(crate) const REQUEUE_DEPLOYMENT_POLLING: Duration = Duration::from_secs(10);
/// Secret-store and credential gates, derived-Secret steps, an unresolvable target cluster, the
/// satellite controllers' projection backstop.
pub(crate) const REQUEUE_SECRET_POLLING: Duration = Duration::from_secs(15);
/// The MariaDB gate, the db-sync wait and the config wait.
pub(crate) const REQUEUE_DATABASE_WAIT: Duration = Duration::from_secs(30);
/// The expand, migrate and contract phase Jobs.
pub(crate) const REQUEUE_UPGRADE_WAIT: Duration = Duration::from_secs(30);
/// A failed /healthcheck probe retries after this.
pub(crate) const HEALTH_CHECK_RETRY: Duration = Duration::from_secs(10);
/// A passing /healthcheck probe is reused within this TTL.
pub(crate) const PROBE_CACHE_TTL: Duration = Duration::from_secs(30);

/// The named intervals, so a caller can say which one it means (and a metric can label it).
// The variants carry the requeue constants' names of the specification, prefix included.
#[allow(clippy::enum_variant_names)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Requeue {
    RequeueNextPass,
    RequeueSecretPolling,
    RequeueDatabaseWait,
}

impl Requeue {
    /// The nominal interval.
    pub(crate) fn interval(self) -> Duration {
        match self {
            Requeue::RequeueNextPass => REQUEUE_NEXT_PASS,
            Requeue::RequeueSecretPolling => REQUEUE_SECRET_POLLING,
            Requeue::RequeueDatabaseWait => REQUEUE_DATABASE_WAIT,
        }
    }

    /// The interval through [`cinder_lease::jitter`]: uniform in `[0.9 d, 1.1 d]`.
    pub(crate) fn jittered(self) -> Duration {
        jittered(self.interval())
    }
}

/// The retry after the first failure in a row of one thing (a reconcile, a marker write).
pub(crate) const BACKOFF_BASE: Duration = Duration::from_secs(1);
/// The longest retry interval after failures in a row.
pub(crate) const BACKOFF_CEILING: Duration = Duration::from_secs(30);

/// The nominal retries after failures in a row of one thing (>= 1): `BACKOFF_BASE * 2^(n-1)`,
/// at most [`BACKOFF_CEILING`], never running out; its owner takes the next one per failure
/// and puts it through [`jittered`].
pub(crate) fn backoff() -> ExponentialBackoff {
    ExponentialBuilder::new()
        .with_min_delay(BACKOFF_BASE)
        .with_max_delay(BACKOFF_CEILING)
        .without_max_times()
        .build()
}

/// Any periodic requeue delay through the project's one jitter function.
pub(crate) fn jittered(d: Duration) -> Duration {
    cinder_lease::jitter(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_intervals() {
        let cases = [
            (Requeue::RequeueNextPass.interval(), 1),
            (REQUEUE_DEPLOYMENT_POLLING, 10),
            (Requeue::RequeueSecretPolling.interval(), 15),
            (Requeue::RequeueDatabaseWait.interval(), 30),
            (REQUEUE_UPGRADE_WAIT, 30),
            (HEALTH_CHECK_RETRY, 10),
        ];
        for (interval, secs) in cases {
            assert_eq!(interval, Duration::from_secs(secs), "{interval:?}");
        }
        assert_eq!(PROBE_CACHE_TTL, Duration::from_secs(30));
    }

    #[test]
    fn backoff_doubles_per_failure_up_to_the_ceiling_and_stays_there() {
        let secs: Vec<u64> = backoff().take(8).map(|d| d.as_secs()).collect();
        assert_eq!(secs, vec![1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(backoff().nth(10_000), Some(BACKOFF_CEILING));
    }

    #[test]
    fn jittered_stays_within_ten_percent() {
        for r in [
            Requeue::RequeueNextPass,
            Requeue::RequeueSecretPolling,
            Requeue::RequeueDatabaseWait,
        ] {
            for _ in 0..1000 {
                let d = r.jittered();
                assert!(
                    d >= r.interval().mul_f64(0.9) && d <= r.interval().mul_f64(1.1),
                    "{d:?}"
                );
            }
        }
    }
}
