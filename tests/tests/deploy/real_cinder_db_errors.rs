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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_ready_quotes_the_real_error_of_an_unreachable_server() {
    let test = "database_ready_quotes_the_real_error_of_an_unreachable_server";
    let Some(roots) = prepared_roots(test) else {
        return;
    };
    let root_user = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root_user {
        let why = "process nodes and the service proxy need root";
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{test}: {why} (CI=true: not skipped)");
        }
        eprintln!("skipping {test}: {why}");
        return;
    }
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

