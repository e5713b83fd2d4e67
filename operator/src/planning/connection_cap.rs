//! The MariaDB `max_user_connections` cap sized for a Cinder's own topology, and the rollout
//! strategies and counts that keep what runs inside it:
//!
//! ```text
//! (apiPods + 1) x uwsgiProcesses x uwsgiThreads x 2
//!   + 2 x (schedulerReplicas + volumeDeployments + 1)
//!   + 2
//! ```
//!
//! `apiPods` is the autoscaling ceiling when an HPA owns the count; the `+ 1` beside it is the
//! rolling-update surge, which the API Deployment is pinned to ([`API_ROLLOUT`]: `maxSurge` 1).
//! The single writers never surge: the scheduler and the backup service roll with `maxSurge` 0
//! ([`SINGLE_WRITER_ROLLOUT`]), every volume service with Recreate ([`VOLUME_ROLLOUT`]).
//! `volumeDeployments` counts the volume Deployments that run ([`volume_deployments`]), not
//! only the backends projected this pass. The `+ 1` in the second line is the backup service;
//! the last `+ 2` is headroom for one database Job (schema, service-remove or purge, which run
//! one at a time per database) overlapping the fleet.

use crate::crd::CinderSpec;
use k8s_openapi::api::apps::v1::{DeploymentStrategy, RollingUpdateDeployment};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeSet;

/// Database connections of one single-writer process, and of one database Job.
pub(crate) const PAIR: i64 = 2;

/// How a workload's Deployment replaces its pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rollout {
    /// Every old pod goes before a new one starts.
    Recreate,
    /// A rolling update starting at most this many pods over the replica count (`maxSurge`);
    /// with 0, one pod at a time goes first (`maxUnavailable` 1), else none does
    /// (`maxUnavailable` 0).
    Surge(i32),
}

/// The API's rollout: one pod over the count, the `+ 1` of the cap.
pub(crate) const API_ROLLOUT: Rollout = Rollout::Surge(1);
/// The scheduler's and the backup service's rollout: never over the count.
pub(crate) const SINGLE_WRITER_ROLLOUT: Rollout = Rollout::Surge(0);
/// A volume service's rollout: one writer per backend, never two.
pub(crate) const VOLUME_ROLLOUT: Rollout = Rollout::Recreate;

impl Rollout {
    /// The Deployment strategy of this rollout.
    pub(crate) fn strategy(self) -> DeploymentStrategy {
        match self {
            Rollout::Recreate => DeploymentStrategy {
                type_: Some("Recreate".to_string()),
                ..Default::default()
            },
            Rollout::Surge(surge) => DeploymentStrategy {
                type_: Some("RollingUpdate".to_string()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(IntOrString::Int(surge)),
                    max_unavailable: Some(IntOrString::Int(i32::from(surge == 0))),
                }),
            },
        }
    }
}

/// `value` of a `maxSurge` / `maxUnavailable` field for `replicas` (a percentage rounded up,
/// as the Deployment controller resolves `maxSurge`); `default` when unset or unreadable.
#[cfg(test)]
fn resolve_up(value: Option<&IntOrString>, replicas: i64, default: i64) -> i64 {
    match value {
        None => default,
        Some(IntOrString::Int(n)) => i64::from(*n).max(0),
        Some(IntOrString::String(s)) => s
            .strip_suffix('%')
            .and_then(|p| p.parse::<i64>().ok())
            .map_or(default, |p| (replicas * p.max(0) + 99) / 100),
    }
}

/// The most pods a Deployment of `replicas` runs at once while it rolls under `strategy`, as
/// the Deployment controller does it: `replicas` under Recreate, `replicas + maxSurge` under a
/// rolling update (unset: the default 25 %, rounded up). The connection budget's tests hold
/// the cap against it for the Deployments the steps write.
#[cfg(test)]
pub(crate) fn rollout_peak(replicas: i32, strategy: Option<&DeploymentStrategy>) -> i64 {
    let replicas = i64::from(replicas).max(0);
    match strategy {
        Some(s) if s.type_.as_deref() == Some("Recreate") => replicas,
        _ => {
            let surge = strategy
                .and_then(|s| s.rolling_update.as_ref())
                .and_then(|r| r.max_surge.as_ref());
            replicas + resolve_up(surge, replicas, (replicas * 25 + 99) / 100)
        }
    }
}

/// The volume Deployments the cap counts: one per backend that is projected (being deleted or
/// not) or whose volume Deployment still exists (a backend waiting for its key keeps its
/// Deployment running; a backend being detached keeps it until the detach deletes it),
/// counted once per backend.
pub(crate) fn volume_deployments<'a>(
    projected: impl IntoIterator<Item = &'a str>,
    running: impl IntoIterator<Item = &'a str>,
) -> usize {
    projected
        .into_iter()
        .chain(running)
        .collect::<BTreeSet<_>>()
        .len()
}

/// The cap for `spec` with `volume_deployments` volume Deployments ([`volume_deployments`]).
pub fn connection_cap(spec: &CinderSpec, volume_deployments: usize) -> i64 {
    let api_pods = match &spec.autoscaling {
        Some(a) => i64::from(a.max_replicas),
        None => i64::from(spec.api.replicas),
    }
    .max(0);
    let processes = i64::from(spec.api.uwsgi.processes).max(1);
    let threads = i64::from(spec.api.uwsgi.threads).max(1);
    let scheduler = i64::from(spec.scheduler.replicas).max(0);
    let volumes = i64::try_from(volume_deployments).unwrap_or(i64::MAX / 4);
    (api_pods + 1) * processes * threads * 2 + PAIR * (scheduler + volumes + 1) + PAIR
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::cinder::AutoscalingSpec;

    fn spec() -> CinderSpec {
        crate::test_fixtures::cinder().spec
    }

    #[test]
    fn default_topology_is_22() {
        assert_eq!(connection_cap(&spec(), 0), 22);
    }

    #[test]
    fn two_backends_is_26() {
        assert_eq!(connection_cap(&spec(), 2), 26);
    }

    #[test]
    fn hpa_ceiling_replaces_the_replica_count() {
        let mut s = spec();
        s.autoscaling = Some(AutoscalingSpec {
            min_replicas: 2,
            max_replicas: 10,
            target_cpu_utilization: 80,
        });
        // (10 + 1) x 2 x 1 x 2 + 2 x (1 + 0 + 1) + 2
        assert_eq!(connection_cap(&s, 0), 44 + 4 + 2);
    }

    #[test]
    fn threads_and_processes_multiply() {
        let mut s = spec();
        s.api.uwsgi.processes = 4;
        s.api.uwsgi.threads = 2;
        s.scheduler.replicas = 2;
        assert_eq!(connection_cap(&s, 1), 4 * 4 * 2 * 2 + 2 * (2 + 1 + 1) + 2);
    }

    #[test]
    fn the_peak_of_a_rollout_follows_the_strategy_as_the_controller_does() {
        let rolling = |surge: IntOrString| DeploymentStrategy {
            type_: Some("RollingUpdate".into()),
            rolling_update: Some(RollingUpdateDeployment {
                max_surge: Some(surge),
                max_unavailable: None,
            }),
        };
        // The default 25 % rounds up: one extra pod from 1 to 4 replicas, three at 10.
        assert_eq!(rollout_peak(1, None), 2);
        assert_eq!(rollout_peak(3, None), 4);
        assert_eq!(rollout_peak(10, None), 13);
        assert_eq!(
            rollout_peak(10, Some(&rolling(IntOrString::String("50%".into())))),
            15
        );
        assert_eq!(rollout_peak(10, Some(&rolling(IntOrString::Int(1)))), 11);
        assert_eq!(rollout_peak(3, Some(&VOLUME_ROLLOUT.strategy())), 3);
        assert_eq!(rollout_peak(10, Some(&API_ROLLOUT.strategy())), 11);
        assert_eq!(rollout_peak(1, Some(&SINGLE_WRITER_ROLLOUT.strategy())), 1);
        let pinned = SINGLE_WRITER_ROLLOUT.strategy().rolling_update.unwrap();
        assert_eq!(pinned.max_unavailable, Some(IntOrString::Int(1)));
        let api = API_ROLLOUT.strategy().rolling_update.unwrap();
        assert_eq!(api.max_unavailable, Some(IntOrString::Int(0)));
    }

    #[test]
    fn running_volume_deployments_count_once_per_backend() {
        // Projected: a, b (b being deleted); running: b, c (c waits for its key).
        assert_eq!(volume_deployments(["a", "b"], ["b", "c"]), 3);
        assert_eq!(volume_deployments([], ["c"]), 1);
        assert_eq!(volume_deployments(["a"], []), 1);
    }
}
