//! The process model of the workloads and the database connections each process holds, which
//! the connection cap ([`super::connection_cap`]) budgets for:
//!
//! - the API runs under uWSGI (`api-uwsgi.ini`): `spec.api.uwsgi.processes` worker processes of
//!   `spec.api.uwsgi.threads` threads each; every process loads `cinder.conf` and `api.conf`,
//!   whose oslo.db pool (`max_pool_size` + `max_overflow` = 2 x threads) holds the two
//!   connections per thread the cap counts;
//! - the scheduler, every cinder-volume and the backup service are single processes whose
//!   `cinder.conf` pool (`max_pool_size = 1`, `max_overflow = 1`) holds their pair.
//!
//! No `osapi_volume_workers` is rendered: the API never forks one worker per CPU.

use super::ini::IniDoc;
use crate::crd::CinderSpec;
use crate::names;

/// Where the config ConfigMap is mounted in every pod (every process reads its files there).
pub(crate) const CONFIG_DIR: &str = "/etc/cinder";
/// The uWSGI config of the API, in the config ConfigMap.
pub(crate) const API_UWSGI_INI: &str = "api-uwsgi.ini";
/// The API's cinder.conf overlay (its oslo.db pool), in the config ConfigMap.
pub(crate) const API_CONF: &str = "api.conf";
/// The WSGI application of cinder-api.
pub(crate) const API_WSGI_MODULE: &str = "cinder.wsgi.api:application";
/// Pooled connections of a single-writer service process (scheduler, volume, backup).
pub(crate) const SINGLE_WRITER_POOL_SIZE: i64 = 1;
/// Overflow connections of a single-writer service process.
pub(crate) const SINGLE_WRITER_MAX_OVERFLOW: i64 = 1;

/// The API's workers: processes and threads per pod (at least one each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ApiWorkers {
    pub processes: i64,
    pub threads: i64,
}

impl ApiWorkers {
    pub(crate) fn of(spec: &CinderSpec) -> Self {
        ApiWorkers {
            processes: i64::from(spec.api.uwsgi.processes).max(1),
            threads: i64::from(spec.api.uwsgi.threads).max(1),
        }
    }

    /// oslo.db `max_pool_size` of one API process: one pooled connection per thread.
    pub(crate) fn pool_size(self) -> i64 {
        self.threads
    }

    /// oslo.db `max_overflow` of one API process: the second connection of each thread.
    pub(crate) fn max_overflow(self) -> i64 {
        self.threads
    }
}

/// The command of the API container.
pub(crate) fn api_command() -> Vec<String> {
    vec![
        "uwsgi".to_string(),
        "--ini".to_string(),
        format!("{CONFIG_DIR}/{API_UWSGI_INI}"),
    ]
}

/// The uWSGI config of the API: the spec's processes and threads, serving the API port.
pub(crate) fn api_uwsgi_ini(spec: &CinderSpec) -> IniDoc {
    let w = ApiWorkers::of(spec);
    let mut d = IniDoc::new();
    let mut set = |k: &str, v: String| d.set("uwsgi", k, v);
    set("master", "true".into());
    set("http-socket", format!(":{}", names::API_PORT));
    set("module", API_WSGI_MODULE.into());
    set(
        "pyargv",
        format!("--config-file {CONFIG_DIR}/cinder.conf --config-file {CONFIG_DIR}/{API_CONF}"),
    );
    set("processes", w.processes.to_string());
    set("threads", w.threads.to_string());
    set("enable-threads", "true".into());
    set("lazy-apps", "true".into());
    set("need-app", "true".into());
    set("die-on-term", "true".into());
    set("buffer-size", "65535".into());
    // A plain http-socket answers HTTP/1.1 without `Connection: close` and closes the
    // connection only once the application's response is closed; a client that reuses the
    // connection (keystoneauth's pool: the version document, then the request) meanwhile gets a
    // reset. The header makes clients open a connection per request; keep-alive (http11-socket)
    // would hold one of the few synchronous workers per idle client connection.
    set("add-header", "Connection: close".into());
    d
}

/// The API's overlay of cinder.conf: its oslo.db pool.
pub(crate) fn api_conf(spec: &CinderSpec) -> IniDoc {
    let w = ApiWorkers::of(spec);
    let mut d = IniDoc::new();
    d.set("database", "max_pool_size", w.pool_size().to_string());
    d.set("database", "max_overflow", w.max_overflow().to_string());
    d
}

/// Sets the single-writer pool in `cinder_conf`.
pub(crate) fn set_single_writer_pool(cinder_conf: &mut IniDoc) {
    cinder_conf.set(
        "database",
        "max_pool_size",
        SINGLE_WRITER_POOL_SIZE.to_string(),
    );
    cinder_conf.set(
        "database",
        "max_overflow",
        SINGLE_WRITER_MAX_OVERFLOW.to_string(),
    );
}

#[cfg(test)]
mod tests {
    use super::super::config::render_config;
    use super::super::connection_cap::connection_cap;
    use crate::crd::CinderSpec;
    use crate::crd::cinder::AutoscalingSpec;
    use std::collections::BTreeMap;

    fn spec() -> CinderSpec {
        crate::test_fixtures::cinder().spec
    }

    /// `section.key` of a rendered INI file.
    fn value(files: &BTreeMap<String, String>, file: &str, section: &str, key: &str) -> i64 {
        let mut current = "";
        for line in files[file].lines() {
            if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                current = s;
            } else if let Some((k, v)) = line.split_once(" = ")
                && current == section
                && k == key
            {
                return v.parse().unwrap();
            }
        }
        panic!("{file} has no {section}.{key}");
    }

    /// The connections the rendered config lets the fleet open, counted from the files.
    fn rendered_connections(spec: &CinderSpec, volumes: i64) -> i64 {
        let files = render_config("c", spec).unwrap().data;
        let processes = value(&files, "api-uwsgi.ini", "uwsgi", "processes");
        let api_per_process = value(&files, "api.conf", "database", "max_pool_size")
            + value(&files, "api.conf", "database", "max_overflow");
        let single_writer = value(&files, "cinder.conf", "database", "max_pool_size")
            + value(&files, "cinder.conf", "database", "max_overflow");
        let api_pods = spec
            .autoscaling
            .as_ref()
            .map_or(i64::from(spec.api.replicas), |a| i64::from(a.max_replicas));
        let scheduler = i64::from(spec.scheduler.replicas);
        (api_pods + 1) * processes * api_per_process + (scheduler + volumes + 1) * single_writer + 2
    }

    #[test]
    fn the_rendered_pools_and_workers_match_the_cap_for_three_topologies() {
        let default = spec();
        let mut hpa = spec();
        hpa.autoscaling = Some(AutoscalingSpec {
            min_replicas: 2,
            max_replicas: 10,
            target_cpu_utilization: 80,
        });
        let mut threaded = spec();
        threaded.api.uwsgi.processes = 4;
        threaded.api.uwsgi.threads = 3;
        for (what, s, volumes, cap) in [
            ("default", &default, 0, 22),
            ("two backends", &default, 2, 26),
            ("HPA with max 10", &hpa, 0, 50),
            (
                "4 processes x 3 threads, one backend",
                &threaded,
                1,
                4 * 4 * 3 * 2 + 6 + 2,
            ),
        ] {
            assert_eq!(connection_cap(s, volumes as usize), cap, "{what}: cap");
            assert_eq!(rendered_connections(s, volumes), cap, "{what}: rendered");
        }
    }

    #[test]
    fn the_api_runs_uwsgi_with_its_overlay_and_never_forks_per_cpu() {
        let files = render_config("c", &spec()).unwrap().data;
        let ini = &files["api-uwsgi.ini"];
        assert!(
            ini.contains("module = cinder.wsgi.api:application"),
            "{ini}"
        );
        assert!(ini.contains("http-socket = :8776"), "{ini}");
        assert!(ini.contains("add-header = Connection: close"), "{ini}");
        assert!(
            ini.contains(
                "pyargv = --config-file /etc/cinder/cinder.conf --config-file /etc/cinder/api.conf"
            ),
            "{ini}"
        );
        assert!(!files["cinder.conf"].contains("osapi_volume_workers"));
        assert_eq!(
            super::api_command(),
            ["uwsgi", "--ini", "/etc/cinder/api-uwsgi.ini"]
        );
    }
}
