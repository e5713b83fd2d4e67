//! The MariaDB `max_user_connections` cap sized for a Cinder's own topology:
//!
//! ```text
//! (apiPods + 1) x uwsgiProcesses x uwsgiThreads x 2
//!   + 2 x (schedulerReplicas + volumeDeployments + 1)
//!   + 2
//! ```
//!
//! `apiPods` is the autoscaling ceiling when an HPA owns the count; the `+ 1` beside it is the
//! rolling-update surge; the `+ 1` in the second line is the backup service; the last `+ 2` is
//! headroom for a migration Job.

use crate::crd::CinderSpec;

/// The cap for `spec` with `volume_deployments` projected backends.
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
    (api_pods + 1) * processes * threads * 2 + 2 * (scheduler + volumes + 1) + 2
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
}
