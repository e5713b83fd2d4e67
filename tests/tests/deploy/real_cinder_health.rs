//! Service health from what real Cinder records of its services: the samples of
//! `run --embedded --real-cinder` (tests/real-cinder/samples) on the real Cinder of each release,
//! a real MariaDB and a real RabbitMQ (as in `real_cinder_convergence`), then:
//!
//! - for a while after the scheduler is ready, the `services` table as the real services keep it
//!   (`disabled`, `frozen`, `active_backend_id`, `updated_at` against `service_down_time`) is
//!   printed beside the conditions, and each RPC service's condition agrees with its row: a row
//!   whose heartbeat is older than `service_down_time` (Cinder's own `is_up`, what
//!   `cinder-manage service list` shows `XXX`) has its condition False, naming the service;
//! - the scheduler's heartbeat stopped (its process SIGSTOPped, found through its pod's memory
//!   cgroup, so no other test's process is touched) turns SchedulerReady False with a message
//!   naming `cinder-scheduler on cinder` and saying it is down, and SIGCONT turns it True again;
//! - the scheduler's row disabled (as `openstack volume service set --disable` writes it) turns
//!   SchedulerReady False naming the service as disabled, and enabled again True.
//!
//! Needs root, the roots and the Debian servers: without them it says so and passes, except
//! under `CI=true`, where it fails.

use cinder_e2e::real_cinder::Root;
use cinder_e2e::real_cinder_cluster::{
    CINDER, ManifestEdit, RABBIT_USER, RealCinderCluster, RealCinderOptions, SAMPLES_NS,
    http_status, real_cinder_roots,
};
use cinder_sim::real_servers::{MariaDbServer, RabbitMqServer};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use std::time::{Duration, Instant};

/// Cinder's `service_down_time` default (the samples do not change it).
const SERVICE_DOWN_TIME: i64 = 60;

/// The condition `kind` of the Cinder: (status, reason, message).
async fn condition(client: &kube::Client, kind: &str) -> Option<(String, String, String)> {
    cinder_e2e::waiting::cinder_conditions_in(client, SAMPLES_NS, CINDER)
        .await
        .into_iter()
        .find(|c| c.type_ == kind)
        .map(|c| (c.status, c.reason, c.message))
}

async fn conditions_line(client: &kube::Client) -> String {
    cinder_e2e::waiting::cinder_conditions_in(client, SAMPLES_NS, CINDER)
        .await
        .iter()
        .filter(|c| {
            [
                "Ready",
                "DatabaseReady",
                "SchedulerReady",
                "VolumeServicesReady",
                "BackupServiceReady",
            ]
            .contains(&c.type_.as_str())
        })
        .map(|c| format!("{}={}/{}: {}", c.type_, c.status, c.reason, c.message))
        .collect::<Vec<_>>()
        .join("\n    ")
}

/// Waits up to `within` for condition `kind` to have `status` with a message containing
/// `needle`; what it last was when it does not.
async fn wait_for(
    client: &kube::Client,
    kind: &str,
    status: &str,
    needle: &str,
    within: Duration,
) -> Result<(String, String, String), String> {
    let started = Instant::now();
    let mut last = None;
    while started.elapsed() < within {
        last = condition(client, kind).await;
        if let Some(c) = &last
            && c.0 == status
            && c.2.contains(needle)
        {
            eprintln!(
                "[{:>4} s] {kind}={}/{}: {}",
                started.elapsed().as_secs(),
                c.0,
                c.1,
                c.2
            );
            return Ok(c.clone());
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    Err(format!(
        "{kind} did not become {status} with {needle:?} within {} s; last {last:?}",
        within.as_secs()
    ))
}

/// Waits up to `within` for SchedulerReady to be True.
async fn scheduler_ready(
    client: &kube::Client,
    within: Duration,
) -> Result<(String, String, String), String> {
    wait_for(client, "SchedulerReady", "True", "", within).await
}

/// The services rows: (binary, host, disabled, frozen, active_backend_id, age of the heartbeat
/// in seconds on the server's clock, None without one).
async fn services(db: &MariaDbServer) -> Vec<(String, String, bool, bool, String, Option<i64>)> {
    let sql = "SELECT `binary`, host, disabled, frozen, IFNULL(active_backend_id, '-'), \
               IFNULL(TIMESTAMPDIFF(SECOND, updated_at, UTC_TIMESTAMP()), -1) \
               FROM cinder.services WHERE deleted = 0 ORDER BY `binary`, host";
    db.sql(sql)
        .await
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let age: i64 = f.get(5)?.parse().ok()?;
            Some((
                f[0].to_owned(),
                f[1].to_owned(),
                f[2] == "1",
                f[3] == "1",
                f[4].to_owned(),
                (age >= 0).then_some(age),
            ))
        })
        .collect()
}

/// The pid of the process running `binary` in pod `pod_uid`'s containers (its memory cgroup
/// `pod<uid>` names the pod, so no other test's process matches).
fn pod_process(pod_uid: &str, binary: &str) -> Option<u32> {
    let wanted = format!("/pod{pod_uid}/");
    std::fs::read_dir("/proc")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
                .is_ok_and(|c| c.lines().any(|l| l.contains(&wanted)))
        })
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                String::from_utf8_lossy(&c)
                    .split('\0')
                    .any(|a| a.ends_with(binary))
            })
        })
        .min()
}

fn signal(pid: u32, signal: &str) {
    let ok = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {signal} {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_conditions_follow_what_real_cinder_records() {
    let test = "service_conditions_follow_what_real_cinder_records";
    let Some(roots) = real_cinder_roots(test) else {
        return;
    };
    for root in &roots {
        health(root).await;
    }
}

/// The shared real-Cinder set-up (`RealCinderCluster`) at `root`'s release, the Cinder's spec
/// changed by `patch`.
struct Setup {
    cluster: RealCinderCluster,
}

impl Setup {
    async fn start(
        root: &Root,
        patch: impl Fn(&mut serde_json::Value) + Send + Sync + 'static,
    ) -> Setup {
        eprintln!("== {} (cinder {})", root.release, root.cinder);
        let edit: ManifestEdit = Box::new(move |m| {
            if m.gvk.kind == "Cinder" {
                patch(&mut m.object.data["spec"]);
            }
        });
        let opts = RealCinderOptions {
            edit: Some(edit),
            ..RealCinderOptions::default()
        };
        let cluster = RealCinderCluster::start(root, opts).await.unwrap();
        Setup { cluster }
    }

    /// Stops everything it started; panics with `outcome`'s error after.
    async fn stop(self, release: &str, outcome: Result<(), String>) {
        eprintln!(
            "conditions at the end:\n    {}",
            conditions_line(&self.cluster.client).await
        );
        self.cluster.stop().await.unwrap();
        if let Err(e) = outcome {
            panic!("{release}: {e}");
        }
    }
}

async fn health(root: &Root) {
    let setup = Setup::start(root, |_| {}).await;
    let outcome = faults(&setup.cluster.client, &setup.cluster.db).await;
    setup.stop(root.release, outcome).await;
}

/// What the services table says and what the conditions say, then the scheduler's faults.
async fn faults(client: &kube::Client, db: &MariaDbServer) -> Result<(), String> {
    scheduler_ready(client, Duration::from_secs(15 * 60)).await?;
    // Past service_down_time after the services started, with a line every 20 s.
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_secs(20)).await;
        eprintln!("services (binary, host, disabled, frozen, active_backend_id, heartbeat age):");
        for row in services(db).await {
            eprintln!("    {row:?}");
        }
        eprintln!("    {}", conditions_line(client).await);
    }
    // Each RPC service's condition agrees with its row.
    for (binary, kind) in [
        ("cinder-scheduler", "SchedulerReady"),
        ("cinder-volume", "VolumeServicesReady"),
        ("cinder-backup", "BackupServiceReady"),
    ] {
        let rows: Vec<_> = services(db)
            .await
            .into_iter()
            .filter(|r| r.0 == binary)
            .collect();
        let Some(row) = rows.first() else {
            return Err(format!("no {binary} row"));
        };
        let up = !row.2 && row.5.is_some_and(|age| age <= SERVICE_DOWN_TIME);
        let name = format!("{binary} on {}", row.1);
        // A probe period and a pass may stand between the row and the condition.
        let expect = if up {
            wait_for(client, kind, "True", "", Duration::from_secs(90)).await
        } else {
            wait_for(client, kind, "False", &name, Duration::from_secs(90)).await
        };
        expect.map_err(|e| format!("{name} is {}: {e}", if up { "up" } else { "down" }))?;
    }

    // The scheduler's heartbeat stops.
    let pods: Api<Pod> = Api::namespaced(client.clone(), SAMPLES_NS);
    let scheduler = pods
        .list(&ListParams::default().labels("app.kubernetes.io/component=scheduler"))
        .await
        .map_err(|e| e.to_string())?
        .items
        .into_iter()
        .find(|p| p.metadata.deletion_timestamp.is_none())
        .ok_or("no scheduler pod")?;
    let uid = scheduler.metadata.uid.clone().unwrap_or_default();
    let pid = pod_process(&uid, "cinder-scheduler").ok_or("no cinder-scheduler process")?;
    eprintln!("SIGSTOP cinder-scheduler (pid {pid})");
    signal(pid, "-STOP");
    let stopped = wait_for(
        client,
        "SchedulerReady",
        "False",
        "cinder-scheduler on cinder is down",
        Duration::from_secs(240),
    )
    .await;
    eprintln!("SIGCONT cinder-scheduler (pid {pid})");
    signal(pid, "-CONT");
    stopped?;
    scheduler_ready(client, Duration::from_secs(180)).await?;

    // Its row disabled, then enabled again.
    let set = |disabled: bool| {
        format!(
            "UPDATE cinder.services SET disabled = {}, disabled_reason = {} \
             WHERE deleted = 0 AND `binary` = 'cinder-scheduler'",
            i32::from(disabled),
            if disabled { "'health test'" } else { "NULL" }
        )
    };
    db.sql(&set(true)).await?;
    let disabled = wait_for(
        client,
        "SchedulerReady",
        "False",
        "cinder-scheduler on cinder is disabled (health test)",
        Duration::from_secs(180),
    )
    .await;
    db.sql(&set(false)).await?;
    disabled?;
    scheduler_ready(client, Duration::from_secs(180)).await?;
    Ok(())
}

/// A scheduler over its memory limit: the samples with `spec.scheduler.resources.limits.memory`
/// at 48Mi on the newest release. cinder-scheduler's Python outgrows it while it imports, the
/// memory cgroup's OOM killer ends it, and the container restarts into CrashLoopBackOff:
/// SchedulerReady is False and says so ("container scheduler is CrashLoopBackOff after N
/// restart(s), its last run ended OOMKilled (exit code 137)"). The limit raised back to the
/// default (512Mi), the scheduler runs and SchedulerReady turns True.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_over_its_memory_limit_is_reported_oom_killed() {
    let test = "a_scheduler_over_its_memory_limit_is_reported_oom_killed";
    let Some(roots) = real_cinder_roots(test) else {
        return;
    };
    let root = roots.last().expect("a release");
    let setup = Setup::start(root, |spec| {
        spec["scheduler"]["resources"] = serde_json::json!({
            "requests": {"cpu": "100m", "memory": "32Mi"},
            "limits": {"memory": "48Mi"},
        });
    })
    .await;
    let outcome = oom(&setup.cluster.client).await;
    setup.stop(root.release, outcome).await;
}

async fn oom(client: &kube::Client) -> Result<(), String> {
    wait_for(
        client,
        "SchedulerReady",
        "False",
        "OOMKilled (exit code 137)",
        Duration::from_secs(10 * 60),
    )
    .await?;
    let cinders: Api<cinder_operator::crd::Cinder> = Api::namespaced(client.clone(), SAMPLES_NS);
    let patch = serde_json::json!({"spec": {"scheduler": {"resources": {
        "requests": {"cpu": "100m", "memory": "256Mi"},
        "limits": {"memory": "512Mi"},
    }}}});
    cinders
        .patch(
            CINDER,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .map_err(|e| e.to_string())?;
    eprintln!("the scheduler's memory limit raised to 512Mi");
    scheduler_ready(client, Duration::from_secs(10 * 60))
        .await
        .map(drop)
}

/// An API worker SIGKILLed: the samples' API (one uWSGI process of one thread) on the newest
/// release, its worker (the uWSGI master's child in the API pod's memory cgroup) killed. The
/// master respawns a worker (a new pid), `/healthcheck` through the API Service answers 200 again
/// (the time without an answer is printed), and the container is not restarted (its liveness
/// probe, 4 failures 15 s apart, never fired): restartCount stays 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_worker_killed_is_respawned_by_uwsgi() {
    let test = "an_api_worker_killed_is_respawned_by_uwsgi";
    let Some(roots) = real_cinder_roots(test) else {
        return;
    };
    let root = roots.last().expect("a release");
    let setup = Setup::start(root, |_| {}).await;
    let outcome = api_worker(&setup.cluster.client).await;
    setup.stop(root.release, outcome).await;
}

/// The pids of `pod_uid`'s processes whose command line holds `word`, with their parents.
fn pod_processes(pod_uid: &str, word: &str) -> Vec<(u32, u32)> {
    let wanted = format!("/pod{pod_uid}/");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
                .is_ok_and(|c| c.lines().any(|l| l.contains(&wanted)))
        })
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(word))
        })
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let ppid = stat
                .rsplit(')')
                .next()?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some((pid, ppid))
        })
        .collect()
}

async fn healthcheck(ip: &str) -> String {
    http_status(
        &format!("http://{ip}:8776/healthcheck"),
        &[],
        Duration::from_secs(3),
    )
    .await
    .unwrap_or_default()
}

async fn api_worker(client: &kube::Client) -> Result<(), String> {
    wait_for(
        client,
        "DeploymentReady",
        "True",
        "",
        Duration::from_secs(15 * 60),
    )
    .await?;
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(client.clone(), SAMPLES_NS);
    let ip = services
        .get("cinder-api")
        .await
        .map_err(|e| e.to_string())?
        .spec
        .and_then(|s| s.cluster_ip)
        .ok_or("no ClusterIP")?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), SAMPLES_NS);
    let api = pods
        .list(&ListParams::default().labels("app.kubernetes.io/component=api"))
        .await
        .map_err(|e| e.to_string())?
        .items
        .into_iter()
        .find(|p| p.metadata.deletion_timestamp.is_none())
        .ok_or("no API pod")?;
    let name = api.metadata.name.clone().unwrap_or_default();
    let uid = api.metadata.uid.clone().unwrap_or_default();
    let uwsgi = pod_processes(&uid, "uwsgi");
    let pids: Vec<u32> = uwsgi.iter().map(|(p, _)| *p).collect();
    // A worker: a uwsgi process whose parent is a uwsgi process of the pod.
    let workers: Vec<u32> = uwsgi
        .iter()
        .filter(|(_, parent)| pids.contains(parent))
        .map(|(p, _)| *p)
        .collect();
    eprintln!("uwsgi processes (pid, parent): {uwsgi:?}; workers {workers:?}");
    let worker = *workers.first().ok_or("no uWSGI worker in the API pod")?;
    eprintln!("/healthcheck before: {}", healthcheck(&ip).await);
    signal(worker, "-KILL");
    let killed = Instant::now();
    let mut failed = 0;
    let mut back = None;
    while killed.elapsed() < Duration::from_secs(120) {
        let code = healthcheck(&ip).await;
        if code == "200" {
            back = Some(killed.elapsed());
            break;
        }
        failed += 1;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let back = back.ok_or("/healthcheck did not answer 200 within 120 s of the kill")?;
    let respawned: Vec<u32> = pod_processes(&uid, "uwsgi")
        .iter()
        .filter(|(p, parent)| pids.contains(parent) && *p != worker)
        .map(|(p, _)| *p)
        .collect();
    eprintln!(
        "/healthcheck 200 again {:.1} s after the kill ({failed} requests without 200); \
         new worker(s) {respawned:?}",
        back.as_secs_f64()
    );
    if respawned.is_empty() {
        return Err("uWSGI started no new worker".into());
    }
    // Past a liveness period or two: the container was not restarted.
    tokio::time::sleep(Duration::from_secs(40)).await;
    let restarts = pods
        .get(&name)
        .await
        .map_err(|e| e.to_string())?
        .status
        .and_then(|s| s.container_statuses)
        .and_then(|c| c.first().map(|c| c.restart_count))
        .unwrap_or(-1);
    eprintln!("API container restarts: {restarts}");
    if restarts != 0 {
        return Err(format!("the API container restarted {restarts} time(s)"));
    }
    Ok(())
}

/// RabbitMQ stopped and started: the samples on the newest release; once the scheduler is ready,
/// the broker's application is stopped (`rabbitmqctl stop_app`: its listeners close and every
/// connection drops; the Erlang node stays) for 60 s, then started again. What the conditions
/// say meanwhile is printed; afterwards the Cinder user's connections are back on the broker (as
/// many as before; the services log at WARNING, so oslo.messaging's "Reconnected" line is not
/// in their logs) and SchedulerReady is True (the heartbeats go to the database, not the bus, so Cinder keeps
/// recording the services up while the bus is away).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_reconnect_after_rabbitmq_stopped_and_started() {
    let test = "services_reconnect_after_rabbitmq_stopped_and_started";
    let Some(roots) = real_cinder_roots(test) else {
        return;
    };
    let root = roots.last().expect("a release");
    let setup = Setup::start(root, |_| {}).await;
    let outcome = broker_restart(
        &setup.cluster.client,
        setup.cluster.broker().expect("the cluster's broker"),
    )
    .await;
    setup.stop(root.release, outcome).await;
}

/// The broker's client connections (one line each).
fn connections(broker: &RabbitMqServer) -> usize {
    broker
        .ctl(&["list_connections", "--no-table-headers", "user"], None)
        .map(|out| out.lines().filter(|l| l.trim() == RABBIT_USER).count())
        .unwrap_or(0)
}

async fn broker_restart(client: &kube::Client, broker: &RabbitMqServer) -> Result<(), String> {
    scheduler_ready(client, Duration::from_secs(15 * 60)).await?;
    let before = connections(broker);
    eprintln!("the services' connections to the broker: {before}");
    broker.ctl(&["stop_app"], None)?;
    eprintln!("rabbitmqctl stop_app");
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_secs(20)).await;
        eprintln!("    {}", conditions_line(client).await);
    }
    broker.ctl(&["start_app"], None)?;
    eprintln!("rabbitmqctl start_app");
    let started = Instant::now();
    loop {
        let now = connections(broker);
        if now >= before {
            eprintln!(
                "[{:>4} s] {now} connections again",
                started.elapsed().as_secs()
            );
            break;
        }
        if started.elapsed() > Duration::from_secs(180) {
            return Err(format!(
                "{now} of {before} connections back within 180 s of start_app"
            ));
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    scheduler_ready(client, Duration::from_secs(120))
        .await
        .map(drop)
}
