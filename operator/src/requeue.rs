//! The requeue intervals of the pipeline and the jittered form every periodic requeue goes
//! through (±10 %, so that many Cinders requeued together spread out).

use std::time::Duration;

/// After a finalizer add, and after the RollingUpdate → Contracting flip.
pub const REQUEUE_NEXT_PASS: Duration = Duration::from_secs(1);
/// Deployment readiness polling, every workload step's rollout wait, each stage of a detach.
pub const REQUEUE_DEPLOYMENT_POLLING: Duration = Duration::from_secs(10);
/// Secret-store and credential gates, derived-Secret steps, an unresolvable target cluster, the
/// satellite controllers' projection backstop.
pub const REQUEUE_SECRET_POLLING: Duration = Duration::from_secs(15);
/// The MariaDB gate, the db-sync wait and the config wait.
pub const REQUEUE_DATABASE_WAIT: Duration = Duration::from_secs(30);
/// The expand, migrate and contract phase Jobs.
pub const REQUEUE_UPGRADE_WAIT: Duration = Duration::from_secs(30);
/// A failed /healthcheck probe retries after this.
pub const HEALTH_CHECK_RETRY: Duration = Duration::from_secs(10);
/// A passing /healthcheck probe is reused within this TTL.
pub const PROBE_CACHE_TTL: Duration = Duration::from_secs(30);

/// The named intervals, so a caller can say which one it means (and a metric can label it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Requeue {
    RequeueNextPass,
    RequeueDeploymentPolling,
    RequeueSecretPolling,
    RequeueDatabaseWait,
    RequeueUpgradeWait,
    HealthCheckRetry,
}

impl Requeue {
    /// The nominal interval.
    pub fn interval(self) -> Duration {
        match self {
            Requeue::RequeueNextPass => REQUEUE_NEXT_PASS,
            Requeue::RequeueDeploymentPolling => REQUEUE_DEPLOYMENT_POLLING,
            Requeue::RequeueSecretPolling => REQUEUE_SECRET_POLLING,
            Requeue::RequeueDatabaseWait => REQUEUE_DATABASE_WAIT,
            Requeue::RequeueUpgradeWait => REQUEUE_UPGRADE_WAIT,
            Requeue::HealthCheckRetry => HEALTH_CHECK_RETRY,
        }
    }

    /// The interval through [`cinder_lease::jitter`]: uniform in `[0.9 d, 1.1 d]`.
    pub fn jittered(self) -> Duration {
        jittered(self.interval())
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Requeue::RequeueNextPass => "RequeueNextPass",
            Requeue::RequeueDeploymentPolling => "RequeueDeploymentPolling",
            Requeue::RequeueSecretPolling => "RequeueSecretPolling",
            Requeue::RequeueDatabaseWait => "RequeueDatabaseWait",
            Requeue::RequeueUpgradeWait => "RequeueUpgradeWait",
            Requeue::HealthCheckRetry => "HealthCheckRetry",
        }
    }
}

/// The retry after the first failure in a row of one thing (a reconcile, a marker write).
pub const BACKOFF_BASE: Duration = Duration::from_secs(1);
/// The longest retry interval after failures in a row.
pub const BACKOFF_CEILING: Duration = Duration::from_secs(30);

/// The nominal retry after `failures` failures in a row (>= 1): `BACKOFF_BASE * 2^(n-1)`, at
/// most [`BACKOFF_CEILING`].
pub fn backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    BACKOFF_BASE
        .saturating_mul(1 << doublings)
        .min(BACKOFF_CEILING)
}

/// Any periodic requeue delay through the project's one jitter function.
pub fn jittered(d: Duration) -> Duration {
    cinder_lease::jitter(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_intervals() {
        let cases = [
            (Requeue::RequeueNextPass, 1),
            (Requeue::RequeueDeploymentPolling, 10),
            (Requeue::RequeueSecretPolling, 15),
            (Requeue::RequeueDatabaseWait, 30),
            (Requeue::RequeueUpgradeWait, 30),
            (Requeue::HealthCheckRetry, 10),
        ];
        for (requeue, secs) in cases {
            assert_eq!(requeue.interval(), Duration::from_secs(secs), "{requeue:?}");
        }
        assert_eq!(PROBE_CACHE_TTL, Duration::from_secs(30));
    }

    #[test]
    fn jittered_stays_within_ten_percent() {
        for r in [
            Requeue::RequeueNextPass,
            Requeue::RequeueSecretPolling,
            Requeue::RequeueUpgradeWait,
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
