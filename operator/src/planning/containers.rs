//! The probes and the resources of each workload container.
//!
//! Probes: the API answers `GET /healthcheck` on its port (oslo.middleware's healthcheck, which
//! touches neither the database nor the bus): a startup probe gives it up to five minutes to load,
//! then readiness every 10 s and liveness every 15 s. The RPC services (scheduler, volume,
//! backup) take their work off the bus and serve no port. Their readiness is what Cinder itself
//! records of them: `python3 /etc/cinder/health_check.py <the service's command line>`
//! ([`HEALTH_CHECK_SCRIPT`], rendered into the config ConfigMap) reads the service's own rows of
//! the `services` table and fails when one is missing, disabled or its heartbeat is older than
//! `service_down_time`, as `cinder-manage service list` shows it `XXX`. A Python start and one
//! database connection cost about 0.15 s of CPU, so it runs every [`HEALTH_CHECK_PERIOD`] s
//! (about 1 % of a core per pod), with a timeout that covers a start on a busy node. Their
//! liveness stays the cheap exec check that the service process is PID 1 of the container and
//! not a zombie (`/proc` only): a service that Cinder records as down is reported, not
//! restarted in a loop (a driver that cannot reach its storage would not recover by it).
//!
//! Resources: `spec.<component>.resources` when given, else the defaults below (memory limits,
//! no CPU limit, so a busy process is never throttled below its request):
//!
//! | component | CPU request | memory request | memory limit |
//! |---|---|---|---|
//! | api | 250m | 512Mi | 1Gi |
//! | scheduler | 100m | 256Mi | 512Mi |
//! | volume | 100m | 256Mi | 1Gi |
//! | backup | 100m | 512Mi | 2Gi |

use crate::crd::CinderSpec;
use crate::names::{self, Component};
use k8s_openapi::api::core::v1::{ExecAction, HTTPGetAction, Probe, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The API's health endpoint.
pub(crate) const HEALTHCHECK_PATH: &str = "/healthcheck";
/// Where the RPC services' health check is: the config ConfigMap's
/// [`HEALTH_CHECK_KEY`](super::config::HEALTH_CHECK_KEY) under
/// [`CONFIG_DIR`](super::process_model::CONFIG_DIR).
pub(crate) const HEALTH_CHECK_SCRIPT: &str = "/etc/cinder/health_check.py";
/// How often the RPC services' readiness runs the health check, in seconds.
pub(crate) const HEALTH_CHECK_PERIOD: i32 = 15;

/// The default (CPU request, memory request, memory limit) of `component`.
pub(crate) fn default_resources(
    component: Component,
) -> Option<(&'static str, &'static str, &'static str)> {
    match component {
        Component::Api => Some(("250m", "512Mi", "1Gi")),
        Component::Scheduler => Some(("100m", "256Mi", "512Mi")),
        Component::Volume => Some(("100m", "256Mi", "1Gi")),
        Component::Backup => Some(("100m", "512Mi", "2Gi")),
        _ => None,
    }
}

/// The resources of `component`'s container: the spec's, else the default.
pub(crate) fn resources(spec: &CinderSpec, component: Component) -> Option<ResourceRequirements> {
    let given = match component {
        Component::Api => spec.api.resources.as_ref(),
        Component::Scheduler => spec.scheduler.resources.as_ref(),
        Component::Volume => spec.volume.resources.as_ref(),
        Component::Backup => spec.backup.resources.as_ref(),
        _ => None,
    };
    if let Some(r) = given {
        return Some(r.clone());
    }
    let (cpu, memory, memory_limit) = default_resources(component)?;
    let q = |s: &str| Quantity(s.to_string());
    Some(ResourceRequirements {
        requests: Some(
            [
                ("cpu".to_string(), q(cpu)),
                ("memory".to_string(), q(memory)),
            ]
            .into(),
        ),
        limits: Some([("memory".to_string(), q(memory_limit))].into()),
        ..Default::default()
    })
}

/// The probes of `component`'s container running `command` (the service's command line):
/// (startup, readiness, liveness).
pub(crate) fn probes(
    component: Component,
    command: &[String],
) -> (Option<Probe>, Option<Probe>, Option<Probe>) {
    match component {
        Component::Api => {
            let check = |period: i32, failures: i32| Probe {
                http_get: Some(HTTPGetAction {
                    path: Some(HEALTHCHECK_PATH.to_string()),
                    port: IntOrString::Int(names::API_PORT),
                    ..Default::default()
                }),
                period_seconds: Some(period),
                timeout_seconds: Some(5),
                failure_threshold: Some(failures),
                ..Default::default()
            };
            // Startup: up to five minutes to load; then readiness and liveness.
            (Some(check(10, 30)), Some(check(10, 3)), Some(check(15, 4)))
        }
        Component::Scheduler | Component::Volume | Component::Backup => {
            // Registered and heartbeating within 10 s of its start (report_interval); down is
            // reported after two failed checks.
            let readiness = Probe {
                exec: Some(ExecAction {
                    command: Some(health_check(command)),
                }),
                initial_delay_seconds: Some(10),
                period_seconds: Some(HEALTH_CHECK_PERIOD),
                timeout_seconds: Some(20),
                failure_threshold: Some(2),
                ..Default::default()
            };
            let liveness = Probe {
                exec: Some(ExecAction {
                    command: Some(process_check(component)),
                }),
                period_seconds: Some(30),
                timeout_seconds: Some(5),
                failure_threshold: Some(3),
                ..Default::default()
            };
            (None, Some(readiness), Some(liveness))
        }
        _ => (None, None, None),
    }
}

/// The readiness check of an RPC service started with `command`: [`HEALTH_CHECK_SCRIPT`] with
/// the service's binary name and config arguments.
pub(crate) fn health_check(command: &[String]) -> Vec<String> {
    let mut out = vec!["python3".to_string(), HEALTH_CHECK_SCRIPT.to_string()];
    let mut rest = command.iter();
    if let Some(binary) = rest.next() {
        out.push(binary.rsplit('/').next().unwrap_or(binary).to_string());
    }
    out.extend(rest.cloned());
    out
}

/// The exec check of an RPC service: PID 1 runs `cinder-<service>` and is not a zombie.
fn process_check(component: Component) -> Vec<String> {
    let binary = format!("cinder-{}", component.as_str());
    vec![
        "/bin/sh".to_string(),
        "-c".to_string(),
        format!(
            "tr '\\0' ' ' < /proc/1/cmdline | grep -q '{binary}' && ! grep -q '^State:.*Z' /proc/1/status"
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> CinderSpec {
        let mut s = crate::test_fixtures::cinder().spec;
        s.volume.resources = Some(ResourceRequirements {
            requests: Some(
                [
                    ("cpu".to_string(), Quantity("2".into())),
                    ("memory".to_string(), Quantity("4Gi".into())),
                ]
                .into(),
            ),
            ..Default::default()
        });
        s
    }

    #[test]
    fn every_service_has_requests_the_spec_overrides() {
        let s = spec();
        for c in [Component::Api, Component::Scheduler, Component::Backup] {
            let r = resources(&s, c).unwrap();
            let requests = r.requests.unwrap();
            assert!(requests.contains_key("cpu") && requests.contains_key("memory"));
            assert!(r.limits.unwrap().contains_key("memory"));
        }
        let volume = resources(&s, Component::Volume).unwrap();
        assert_eq!(volume.requests.unwrap()["memory"], Quantity("4Gi".into()));
        assert!(resources(&s, Component::DbSync).is_none());
    }

    #[test]
    fn the_api_probes_its_healthcheck_and_the_rpc_services_what_cinder_records() {
        let (startup, readiness, liveness) = probes(Component::Api, &[]);
        for p in [startup, readiness, liveness] {
            let get = p.unwrap().http_get.unwrap();
            assert_eq!(get.path.as_deref(), Some("/healthcheck"));
            assert_eq!(get.port, IntOrString::Int(8776));
        }
        for c in [Component::Scheduler, Component::Volume, Component::Backup] {
            let binary = format!("cinder-{}", c.as_str());
            let command: Vec<String> = [binary.as_str(), "--config-dir", "/etc/x"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            let (startup, readiness, liveness) = probes(c, &command);
            assert!(startup.is_none());
            let readiness = readiness.unwrap();
            assert_eq!(
                readiness.exec.unwrap().command.unwrap(),
                [
                    "python3",
                    "/etc/cinder/health_check.py",
                    binary.as_str(),
                    "--config-dir",
                    "/etc/x"
                ],
                "the service's rows, read with the service's own config"
            );
            assert_eq!(readiness.period_seconds, Some(HEALTH_CHECK_PERIOD));
            let liveness = liveness.unwrap().exec.unwrap().command.unwrap().join(" ");
            assert!(liveness.contains(&binary), "{liveness}");
            assert!(!liveness.contains("python"), "{liveness}");
        }
    }

    #[test]
    fn the_health_check_is_where_the_config_map_puts_it() {
        assert_eq!(
            HEALTH_CHECK_SCRIPT,
            format!(
                "{}/{}",
                super::super::process_model::CONFIG_DIR,
                super::super::config::HEALTH_CHECK_KEY
            )
        );
        assert_eq!(
            health_check(&["/usr/bin/cinder-backup".to_string()]),
            ["python3", HEALTH_CHECK_SCRIPT, "cinder-backup"]
        );
    }

    #[test]
    fn the_process_check_passes_for_its_service_and_fails_for_another() {
        // Run against this test process: PID 1 of the check is rewritten to our own PID.
        let me = std::process::id();
        let own = std::fs::read("/proc/self/cmdline").unwrap();
        let own = String::from_utf8_lossy(&own).replace('\0', " ");
        let name = own
            .split(' ')
            .next()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap()
            .to_string();
        for (binary, expect) in [(name.as_str(), true), ("cinder-nothing-like-it", false)] {
            let script = process_check(Component::Volume)[2]
                .replace("cinder-volume", binary)
                .replace("/proc/1/", &format!("/proc/{me}/"));
            let ok = std::process::Command::new("/bin/sh")
                .args(["-c", &script])
                .status()
                .unwrap()
                .success();
            assert_eq!(ok, expect, "{script}");
        }
    }
}
