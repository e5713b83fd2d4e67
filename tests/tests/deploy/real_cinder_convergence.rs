//! The first convergence on real parts: the operator (in-process) on an embedded cluster whose
//! only node is a process node, the Cinder image of each supported release in turn mapped to that
//! release's real Cinder root (tests/real-cinder/setup.sh), the mariadb-operator fixture on a
//! real MariaDB server and the sample's broker a real RabbitMQ, both reached by the pods through
//! their Services. The samples of `run --embedded --real-cinder` (tests/real-cinder/samples: the
//! deploy/samples Cinder with one API replica of one uWSGI process, so the 2-core machine holds
//! it, the RBD backend and an RBD backup target; no NFS parts, as there is no NFS server here and
//! a kubelet cannot mount the NFS backend's export, so that backend's pod would stay
//! ContainerCreating with FailedMount and the steps after VolumeServices would wait for it) are
//! applied at each release. Then:
//!
//! - the schema Jobs ran the real `cinder-manage db sync`: `cinder-manage db version` on the
//!   server is the release's alembic head;
//! - the API answers `/healthcheck` through its Service's ClusterIP;
//! - the real `cinder-manage service list` has the scheduler, `cinder-volume` on host
//!   `cinder@ceph` and `cinder-backup`, each registered by its real process (the RBD drivers
//!   cannot reach a Ceph cluster: what the services then report is printed);
//! - the Cinder reaches Ready, and the time from applying the samples is printed;
//! - the Cinder user's connections on the server (sampled every 2 s during the convergence and
//!   after it) stay within its MAX_USER_CONNECTIONS, and no service logs MySQL error 1226.
//!
//! Needs root, the roots and the Debian servers: without them it says so and passes, except
//! under `CI=true`, where it fails.

use cinder_e2e::deploy_helpers::repo_root;
use cinder_e2e::real_cinder::{Root, prepared_roots, roots_dir};
use cinder_e2e::test_env::NS;
use cinder_e2e::{Harness, HarnessConfig};
use cinder_operator::crd::Cinder;
use cinder_operator::planning::config::ENV_DB_CONNECTION;
use cinder_sim::agent::ImageMap;
use cinder_sim::controllers::Switch;
use cinder_sim::real_servers::{MariaDbServer, RabbitMqServer, expose};
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, ListParams};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SAMPLES_NS: &str = "openstack";
const CINDER: &str = "cinder";
/// The sample store's values (sim/fixtures/run-embedded/10-secret-store.yaml).
const DB_PASSWORD: &str = "sample-db-password-0c1d";
const RABBIT_USER: &str = "cinder";
const RABBIT_PASSWORD: &str = "sample-rabbit-password-93b4";
const RABBIT_VHOST: &str = "cinder";
/// How long the whole convergence may take on a busy 2-core machine.
const CONVERGENCE: Duration = Duration::from_secs(20 * 60);

fn missing() -> Option<String> {
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root {
        return Some("process nodes and the service proxy need root".into());
    }
    if !MariaDbServer::available() || !RabbitMqServer::available() {
        return Some(
            "mariadb-server or rabbitmq-server is missing: run tests/real-cinder/setup.sh".into(),
        );
    }
    None
}

/// `cinder-manage ARGS` of `root` against the server as the Cinder user.
fn cinder_manage(root: &Root, dir: &std::path::Path, port: u16, args: &[&str]) -> String {
    let dsn = format!("mysql+pymysql://cinder:{DB_PASSWORD}@127.0.0.1:{port}/cinder?charset=utf8");
    let out = root
        .command("cinder-manage", dir)
        .args(args)
        .env(ENV_DB_CONNECTION, dsn)
        .output()
        .expect("running cinder-manage");
    assert!(
        out.status.success(),
        "cinder-manage {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn pods_line(client: &kube::Client) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), SAMPLES_NS);
    let list = pods
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    list.iter()
        .map(|p| {
            let name = p.metadata.name.clone().unwrap_or_default();
            let status = p.status.as_ref();
            let phase = status.and_then(|s| s.phase.clone()).unwrap_or_default();
            let waiting: Vec<String> = status
                .and_then(|s| s.container_statuses.clone())
                .unwrap_or_default()
                .iter()
                .filter_map(|c| {
                    let w = c.state.as_ref()?.waiting.as_ref()?;
                    Some(format!(
                        "{}:{}",
                        c.name,
                        w.reason.clone().unwrap_or_default()
                    ))
                })
                .collect();
            format!(
                "{name}={phase}{}",
                if waiting.is_empty() {
                    String::new()
                } else {
                    format!("({})", waiting.join(","))
                }
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

async fn conditions_line(client: &kube::Client) -> String {
    cinder_e2e::waiting::cinder_conditions_in(client, SAMPLES_NS, CINDER)
        .await
        .iter()
        .map(|c| format!("{}={}/{}", c.type_, c.status, c.reason))
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_samples_converge_on_real_cinder_mariadb_and_rabbitmq() {
    let test = "the_samples_converge_on_real_cinder_mariadb_and_rabbitmq";
    let Some(roots) = prepared_roots(test) else {
        return;
    };
    if let Some(why) = missing() {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{test}: {why} (CI=true: not skipped)");
        }
        eprintln!("skipping {test}: {why}");
        return;
    }
    for root in &roots {
        converge(root).await;
    }
}

/// The samples at `root`'s release, from nothing to Ready and checked; everything stopped after.
async fn converge(root: &Root) {
    let release = root.release;
    eprintln!("== {release} (cinder {})", root.cinder);
    let started = Instant::now();
    let (db, broker) = tokio::join!(
        tokio::task::spawn_blocking(|| MariaDbServer::start(500)),
        tokio::task::spawn_blocking(RabbitMqServer::start),
    );
    let db = Arc::new(db.unwrap().unwrap());
    let broker = broker.unwrap().unwrap();
    let broker = tokio::task::spawn_blocking(move || {
        broker
            .add_user(RABBIT_USER, RABBIT_PASSWORD, RABBIT_VHOST)
            .map(|()| broker)
    })
    .await
    .unwrap()
    .unwrap();
    eprintln!(
        "real servers up after {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let mut config = HarnessConfig::default();
    config.cluster.service_proxy = true;
    config.cluster.controllers.nodes.count = 0;
    config.cluster.controllers.nodes.process = 1;
    config.cluster.controllers.mariadb.switch = Switch::on(Duration::from_millis(10));
    config.cluster.controllers.mariadb.real = Some(Arc::clone(&db));
    config.cluster.process_runtime.images = ImageMap::with_real_cinder(&roots_dir());
    let harness = Harness::start_with(config).await.unwrap();
    let client = harness.client.clone();

    // The broker's Service first: a pod's /etc/hosts names the Services there when it starts.
    cinder_e2e::fixtures::create_namespace(&client, SAMPLES_NS)
        .await
        .unwrap();
    expose(&client, SAMPLES_NS, "rabbitmq", 5672, broker.port())
        .await
        .unwrap();
    let mut manifests =
        cinder_operator::embedded::read_bootstrap(&repo_root().join("tests/real-cinder/samples"))
            .unwrap();
    for m in &mut manifests {
        if m.gvk.kind == "Cinder" {
            m.object.data["spec"]["openStackRelease"] = release.into();
            m.object.data["spec"]["image"]["tag"] = release.into();
        }
    }
    let applied = Instant::now();
    cinder_operator::embedded::apply(&client, &manifests)
        .await
        .unwrap();
    let cinder: Api<Cinder> = Api::namespaced(client.clone(), SAMPLES_NS);
    assert_eq!(
        cinder.get(CINDER).await.unwrap().spec.open_stack_release,
        release
    );

    // Until Ready (or the time is up), a line every 20 s; the Cinder user's connections on the
    // server sampled every 2 s.
    let connections = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'cinder'";
    let mut peak = 0usize;
    let mut last = Instant::now() - Duration::from_secs(60);
    let ready = loop {
        if let Ok(n) = db.sql(connections).await {
            peak = peak.max(n.trim().parse().unwrap_or(0));
        }
        let cs = cinder_e2e::waiting::cinder_conditions_in(&client, SAMPLES_NS, CINDER).await;
        if cs.iter().any(|c| c.type_ == "Ready" && c.status == "True") {
            break true;
        }
        if applied.elapsed() > CONVERGENCE {
            break false;
        }
        if last.elapsed() > Duration::from_secs(20) {
            eprintln!(
                "[{:>4} s] {}\n         pods: {}",
                applied.elapsed().as_secs(),
                conditions_line(&client).await,
                pods_line(&client).await
            );
            last = Instant::now();
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    let took = applied.elapsed();
    // Some more samples with everything up.
    for _ in 0..5 {
        if let Ok(n) = db.sql(connections).await {
            peak = peak.max(n.trim().parse().unwrap_or(0));
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let cap: usize = db
        .sql("SELECT max_user_connections FROM mysql.user WHERE User = 'cinder'")
        .await
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    eprintln!("connections of the Cinder user: peak {peak} (sampled every 2 s), cap {cap}");
    assert!(peak > 0 && peak <= cap, "peak {peak} within the cap {cap}");
    eprintln!(
        "after {:.1} s: ready={ready}\n  {}\n  pods: {}",
        took.as_secs_f64(),
        conditions_line(&client).await,
        pods_line(&client).await
    );
    let _ = NS;

    let dir = tempfile::tempdir().unwrap();
    let port = db.port();
    let (root2, dir2) = (root.clone(), dir.path().to_path_buf());
    let (version, services) = tokio::task::spawn_blocking(move || {
        (
            cinder_manage(&root2, &dir2, port, &["db", "version"]),
            cinder_manage(&root2, &dir2, port, &["service", "list"]),
        )
    })
    .await
    .unwrap();
    eprintln!(
        "cinder-manage db version: {}\ncinder-manage service list:\n{services}",
        version.trim()
    );
    let head = root.probe(dir.path(), &["alembic-head"], &[]).unwrap();
    assert_eq!(
        serde_json::Value::String(version.lines().last().unwrap_or_default().trim().to_owned()),
        head[0],
        "the schema is at {release}'s alembic head"
    );

    // The API through its Service's ClusterIP.
    let services_api: Api<Service> = Api::namespaced(client.clone(), SAMPLES_NS);
    let ip = services_api
        .get("cinder-api")
        .await
        .unwrap()
        .spec
        .unwrap()
        .cluster_ip
        .unwrap();
    let health = std::process::Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "10",
        ])
        .arg(format!("http://{ip}:8776/healthcheck"))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&health.stdout),
        "200",
        "GET /healthcheck through the Service"
    );

    let hosts: Vec<(&str, &str)> = services
        .lines()
        .skip(1)
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?, w.next()?))
        })
        .collect();
    for (binary, host) in [
        ("cinder-scheduler", "cinder"),
        ("cinder-volume", "cinder@ceph"),
        ("cinder-backup", "cinder"),
    ] {
        assert!(
            hosts.iter().any(|(b, h)| *b == binary && *h == host),
            "{binary} on {host} in:\n{services}"
        );
    }
    assert!(
        ready,
        "the Cinder reached Ready within {} s",
        CONVERGENCE.as_secs()
    );

    // What the RBD drivers do without a Ceph cluster: the services' own log lines about it.
    let pods: Api<Pod> = Api::namespaced(client.clone(), SAMPLES_NS);
    for pod in pods.list(&ListParams::default()).await.unwrap().items {
        let name = pod.metadata.name.clone().unwrap_or_default();
        if !(name.contains("-volume-") || name.contains("-backup-")) {
            continue;
        }
        let text = pods
            .logs(&name, &Default::default())
            .await
            .unwrap_or_default();
        let driver: Vec<&str> = text
            .lines()
            .filter(|l| l.contains(" ERROR ") || l.contains("Driver") || l.contains("driver"))
            .take(6)
            .collect();
        eprintln!("{name}:\n  {}", driver.join("\n  "));
        assert!(
            !text.contains("1226"),
            "{name} hit max_user_connections:\n{text}"
        );
    }

    harness.stop().await.unwrap();
    drop(db);
    tokio::task::spawn_blocking(move || drop(broker))
        .await
        .unwrap();
}
