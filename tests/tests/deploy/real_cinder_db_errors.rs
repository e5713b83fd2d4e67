//! DatabaseReady with the real error of the real `cinder-manage db sync`: the samples of
//! `run --embedded --real-cinder` with `spec.database` a brownfield `host` whose server does not
//! run (a Service `cinder-db-down` whose endpoint is a loopback port nothing listens on, as a
//! stopped server leaves it), on the real Cinder of the newest release. The db-sync Job's pod
//! runs the real command, which gives up after oslo.db's retries (about 105 s) with PyMySQL's
//! error (`DBConnectionError: (pymysql.err.OperationalError) (2003, "Can't connect to MySQL
//! server on ...")`, or 2013 "Lost connection to MySQL server" where the service proxy accepted
//! the connection before finding nothing behind it). Then
//! DatabaseReady is False and its message quotes that error (from the failed pod's termination
//! message: the tail of its log), while the Job retries; it never says DatabaseSynced.
//!
//! Needs root and the roots (no MariaDB or RabbitMQ is started): without them it says so and
//! passes, except under `CI=true`, where it fails.

use cinder_e2e::deploy_helpers::repo_root;
use cinder_e2e::real_cinder::{prepared_roots, roots_dir};
use cinder_e2e::{Harness, HarnessConfig};
use cinder_sim::agent::ImageMap;
use cinder_sim::controllers::Switch;
use cinder_sim::real_servers::process::free_port;
use cinder_sim::real_servers::{MariaDbServer, expose};
use k8s_openapi::api::batch::v1::Job;
use kube::Api;
use std::sync::Arc;
use std::time::{Duration, Instant};

const SAMPLES_NS: &str = "openstack";
const CINDER: &str = "cinder";

/// The prepared roots when `test` can run here: as root (process nodes, the service proxy), with
/// mariadb-server when `mariadb`. Otherwise `None` after a line saying why it is skipped, or a
/// panic under `CI=true`.
fn runnable(test: &str, mariadb: bool) -> Option<Vec<cinder_e2e::real_cinder::Root>> {
    let roots = prepared_roots(test)?;
    let root_user = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if root_user && (!mariadb || MariaDbServer::available()) {
        return Some(roots);
    }
    let why = "needs root and mariadb-server (tests/real-cinder/setup.sh)";
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: {why} (CI=true: not skipped)");
    }
    eprintln!("skipping {test}: {why}");
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_ready_quotes_the_real_error_of_an_unreachable_server() {
    let test = "database_ready_quotes_the_real_error_of_an_unreachable_server";
    let Some(roots) = runnable(test, false) else {
        return;
    };
    let root = roots.last().expect("a release");
    let release = root.release;
    eprintln!("== {release} (cinder {})", root.cinder);

    let mut config = HarnessConfig::default();
    config.cluster.service_proxy = true;
    config.cluster.controllers.nodes.count = 0;
    config.cluster.controllers.nodes.process = 1;
    config.cluster.process_runtime.images = ImageMap::with_real_cinder(&roots_dir());
    let harness = Harness::start_with(config).await.unwrap();
    let client = harness.client.clone();
    cinder_e2e::fixtures::create_namespace(&client, SAMPLES_NS)
        .await
        .unwrap();
    // A database server that is not running: its Service answers nothing on the port.
    let closed = free_port().unwrap();
    expose(&client, SAMPLES_NS, "cinder-db-down", 3306, closed)
        .await
        .unwrap();
    let mut manifests =
        cinder_operator::embedded::read_bootstrap(&repo_root().join("tests/real-cinder/samples"))
            .unwrap();
    for m in &mut manifests {
        if m.gvk.kind == "Cinder" {
            let spec = &mut m.object.data["spec"];
            spec["openStackRelease"] = release.into();
            spec["image"]["tag"] = release.into();
            spec["database"] = serde_json::json!({
                "host": format!("cinder-db-down.{SAMPLES_NS}.svc"),
                "port": 3306,
                "database": "cinder",
                "secretRef": {"name": "cinder-db-credentials"},
            });
        }
    }
    cinder_operator::embedded::apply(&client, &manifests)
        .await
        .unwrap();

    // Until DatabaseReady quotes the error, or a minute after the Job's first pod failed.
    let jobs: Api<Job> = Api::namespaced(client.clone(), SAMPLES_NS);
    let started = Instant::now();
    let mut first_failure: Option<Instant> = None;
    let mut last = String::new();
    let mut synced = false;
    let mut quoted = None;
    while started.elapsed() < Duration::from_secs(8 * 60)
        && first_failure.is_none_or(|t| t.elapsed() < Duration::from_secs(60))
    {
        let failed = jobs
            .get_opt("cinder-db-sync")
            .await
            .ok()
            .flatten()
            .and_then(|j| j.status?.failed)
            .unwrap_or(0);
        if failed > 0 && first_failure.is_none() {
            eprintln!(
                "[{:>4} s] the Job's first pod failed",
                started.elapsed().as_secs()
            );
            first_failure = Some(Instant::now());
        }
        let cs = cinder_e2e::waiting::cinder_conditions_in(&client, SAMPLES_NS, CINDER).await;
        if let Some(c) = cs.iter().find(|c| c.type_ == "DatabaseReady") {
            let line = format!("{}/{}: {}", c.status, c.reason, c.message);
            if line != last {
                eprintln!(
                    "[{:>4} s] DatabaseReady={line}",
                    started.elapsed().as_secs()
                );
                last = line;
            }
            synced |= c.status == "True" || c.reason == "DatabaseSynced";
            if c.status == "False" && c.message.contains("MySQL server") {
                quoted = Some((c.reason.clone(), c.message.clone()));
                break;
            }
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    harness.stop().await.unwrap();

    assert!(!synced, "DatabaseReady said the schema is synced");
    let (reason, message) = quoted.unwrap_or_else(|| {
        panic!("DatabaseReady never quoted the server's error; last: DatabaseReady={last}")
    });
    assert!(
        ["DBSyncInProgress", "DBSyncFailed"].contains(&reason.as_str()),
        "{reason}: {message}"
    );
    assert!(
        message.contains("(pymysql.err.OperationalError)") && message.contains("cinder-db-sync"),
        "the Job and PyMySQL's own error: {message}"
    );
}

/// The schema's tables and its alembic revision on `db` (0 and "" before the sync).
async fn schema(db: &MariaDbServer) -> (usize, String) {
    let tables = db
        .sql("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'cinder'")
        .await
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0);
    let version = db
        .sql("SELECT version_num FROM cinder.alembic_version")
        .await
        .unwrap_or_default()
        .trim()
        .to_owned();
    (tables, version)
}

/// mariadbd SIGKILLed while the real `cinder-manage db sync` of the db-sync Job creates the
/// schema (the samples on a real MariaDB, the newest release; no broker is needed before the
/// schema): DatabaseReady never says DatabaseSynced before the schema is at the release's alembic
/// head, and says what the failed attempt ended with. The server is started again on its data
/// directory; what the Job's retry does is printed (cinder's initial migration creates its
/// tables without `IF NOT EXISTS`, and MariaDB commits each CREATE TABLE: a retry over a
/// half-created schema may fail with "already exists"); if they do, once the Job failed the
/// schema is recreated empty and the Job deleted, as docs/operations.md tells an operator, and
/// the Cinder ends DatabaseSynced at the head.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mariadbd_killed_during_db_sync_is_never_reported_synced() {
    let test = "a_mariadbd_killed_during_db_sync_is_never_reported_synced";
    let Some(roots) = runnable(test, true) else {
        return;
    };
    let root = roots.last().expect("a release").clone();
    let release = root.release;
    eprintln!("== {release} (cinder {})", root.cinder);
    let dir = tempfile::tempdir().unwrap();
    let head = root.probe(dir.path(), &["alembic-head"], &[]).unwrap()[0]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let db = Arc::new(
        tokio::task::spawn_blocking(|| MariaDbServer::start(500))
            .await
            .unwrap()
            .unwrap(),
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
    cinder_e2e::fixtures::create_namespace(&client, SAMPLES_NS)
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
    cinder_operator::embedded::apply(&client, &manifests)
        .await
        .unwrap();
    let outcome = killed_during_sync(&client, &db, &head).await;
    eprintln!(
        "DatabaseReady at the end: {}",
        database_ready(&client).await.unwrap_or_default()
    );
    harness.stop().await.unwrap();
    drop(db);
    if let Err(e) = outcome {
        panic!("{release}: {e}");
    }
}

async fn database_ready(client: &kube::Client) -> Option<String> {
    cinder_e2e::waiting::cinder_conditions_in(client, SAMPLES_NS, CINDER)
        .await
        .into_iter()
        .find(|c| c.type_ == "DatabaseReady")
        .map(|c| format!("{}/{}: {}", c.status, c.reason, c.message))
}

async fn killed_during_sync(
    client: &kube::Client,
    db: &Arc<MariaDbServer>,
    head: &str,
) -> Result<(), String> {
    let started = Instant::now();
    // The sync under way: some of the schema's tables, no revision recorded yet.
    let at_kill = loop {
        let (tables, version) = schema(db).await;
        if tables > 3 && version.is_empty() {
            break (tables, version);
        }
        if !version.is_empty() || started.elapsed() > Duration::from_secs(10 * 60) {
            return Err(format!(
                "the sync was not caught under way ({tables} tables, revision {version:?})"
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let killer = Arc::clone(db);
    tokio::task::spawn_blocking(move || killer.kill())
        .await
        .map_err(|e| e.to_string())?;
    eprintln!(
        "[{:>4} s] mariadbd SIGKILLed with {} tables and no revision",
        started.elapsed().as_secs(),
        at_kill.0
    );
    // Down until the Job's pod failed and DatabaseReady said something of it (or 4 min).
    let jobs: Api<Job> = Api::namespaced(client.clone(), SAMPLES_NS);
    let failed_pods = || async {
        jobs.get_opt("cinder-db-sync")
            .await
            .ok()
            .flatten()
            .and_then(|j| j.status?.failed)
            .unwrap_or(0)
    };
    let mut last = String::new();
    let down = Instant::now();
    while down.elapsed() < Duration::from_secs(4 * 60) {
        let ready = database_ready(client).await.unwrap_or_default();
        if ready != last {
            eprintln!(
                "[{:>4} s] DatabaseReady={ready}",
                started.elapsed().as_secs()
            );
            last = ready.clone();
        }
        if ready.starts_with("True") || ready.contains("DatabaseSynced") {
            return Err(format!("synced while the server was down: {ready}"));
        }
        if failed_pods().await > 0 && down.elapsed() > Duration::from_secs(30) {
            break;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let restarter = Arc::clone(db);
    tokio::task::spawn_blocking(move || restarter.restart())
        .await
        .map_err(|e| e.to_string())??;
    eprintln!(
        "[{:>4} s] mariadbd started again ({} failed pod(s) so far)",
        started.elapsed().as_secs(),
        failed_pods().await
    );
    // The retries: never synced before the head; a retry that cannot complete the half-created
    // schema is recovered as an operator would.
    let mut recovered = false;
    let after = Instant::now();
    while after.elapsed() < Duration::from_secs(10 * 60) {
        let ready = database_ready(client).await.unwrap_or_default();
        let (tables, version) = schema(db).await;
        if ready != last {
            eprintln!(
                "[{:>4} s] DatabaseReady={ready} (schema: {tables} tables, revision {version:?})",
                started.elapsed().as_secs()
            );
            last = ready.clone();
        }
        if ready.starts_with("True") {
            if version != head {
                return Err(format!(
                    "DatabaseSynced with the schema at {version:?}, not {head}: {ready}"
                ));
            }
            eprintln!(
                "synced at the head {head} ({} recovery)",
                if recovered { "after a" } else { "without" }
            );
            return Ok(());
        }
        // Recovered once the Job failed: while it retries, an attempt running beside the
        // recreated schema (or the next Job's) would meet a half-created one again.
        if !recovered && ready.contains("already exists") && ready.contains("DBSyncFailed") {
            eprintln!(
                "the retries cannot complete the half-created schema and the Job failed: \
                 recreating it empty"
            );
            db.sql("DROP DATABASE cinder; CREATE DATABASE cinder")
                .await
                .map_err(|e| format!("recreating the schema: {e}"))?;
            let _ = jobs
                .delete("cinder-db-sync", &kube::api::DeleteParams::background())
                .await
                .map_err(|e| format!("deleting the failed Job: {e}"))?;
            recovered = true;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    Err(format!(
        "not synced within 10 min of the restart; last {last}"
    ))
}
