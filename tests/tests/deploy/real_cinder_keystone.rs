//! "Try it as a user" on real parts: the shared real-Cinder set-up at 2026.2 with a real
//! Keystone (`RealCinderOptions::keystone`: keystone 30.0.0 of 2026.2 on the cluster's MariaDB,
//! reached by the pods as `keystone.openstack.svc:5000`, the sample Cinder's keystoneEndpoint
//! pointed there, its service user `cinder` with the sample store's password, the Cinder API
//! registered in the catalog at its Service's ClusterIP). Once the Cinder is Ready, the real
//! `openstack` client (python-openstackclient) run from the host as that user shows:
//!
//! - `openstack volume service list` lists cinder-scheduler, cinder-volume on host
//!   `cinder@ceph` and cinder-backup (the API's keystonemiddleware validated the token with
//!   Keystone, the API read the services table; the states are printed, not asserted: they
//!   depend on the storage behind the RBD drivers);
//! - `openstack volume list` answers an empty list (the API reads the volumes table), each of
//!   five times (the client's version discovery and request one after the other on a pooled
//!   connection: the API's uWSGI says `Connection: close`, so none is sent on a closing one);
//! - a wrong password gets Keystone's 401, and the API answers 401 to a bogus token and to no
//!   token at all, while `/healthcheck` (no authentication) answers 200.
//!
//! Needs root, the roots, the Debian servers (tests/real-cinder/setup.sh) and the Keystone venv
//! (tests/real-cinder/keystone-setup.sh): without them it says so and passes, except under
//! `CI=true`, where it fails.

use cinder_e2e::real_cinder_cluster::{
    RealCinderCluster, RealCinderOptions, http_status, real_cinder_roots,
};
use cinder_e2e::real_keystone::{openstack, openstack_with, pod_url};
use cinder_sim::real_servers::KeystoneServer;
use serde_json::Value;
use std::time::{Duration, Instant};

/// How long the convergence may take on a busy 2-core machine.
const CONVERGENCE: Duration = Duration::from_secs(20 * 60);
/// How long the services may take to show in the API's list once the Cinder is Ready.
const LISTED: Duration = Duration::from_secs(120);
/// How many times `openstack volume list` runs.
const VOLUME_LISTS: usize = 5;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openstack_client_lists_the_volume_services_through_a_real_keystone() {
    let test = "the_openstack_client_lists_the_volume_services_through_a_real_keystone";
    let Some(roots) = real_cinder_roots(test) else {
        return;
    };
    if !KeystoneServer::available() {
        let why = "the Keystone venv is not prepared: run tests/real-cinder/keystone-setup.sh";
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{test}: {why} (CI=true: not skipped)");
        }
        eprintln!("skipping {test}: {why}");
        return;
    }
    let root = roots
        .iter()
        .find(|r| r.release == "2026.2")
        .expect("the 2026.2 root");
    let cluster = RealCinderCluster::start(
        root,
        RealCinderOptions {
            keystone: true,
            ..RealCinderOptions::default()
        },
    )
    .await
    .unwrap();
    let checked = check(&cluster).await;
    if checked.is_err() {
        for (pod, log) in cluster.pod_logs().await.unwrap_or_default() {
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            eprintln!("--- {pod} (last lines)");
            for line in tail.iter().rev() {
                eprintln!("  {line}");
            }
        }
    }
    cluster.stop().await.unwrap();
    checked.unwrap();
}

/// Whether `rows` (`openstack volume service list -f json`) holds every service of the samples.
fn all_listed(rows: &[Value]) -> bool {
    let has = |binary: &str, host: Option<&str>| {
        rows.iter()
            .any(|r| r["Binary"] == binary && host.is_none_or(|h| r["Host"].as_str() == Some(h)))
    };
    has("cinder-scheduler", None)
        && has("cinder-volume", Some("cinder@ceph"))
        && has("cinder-backup", None)
}

async fn check(cluster: &RealCinderCluster) -> anyhow::Result<()> {
    let keystone = cluster.keystone.as_ref().expect("the set-up's Keystone");
    let api = cluster
        .api_url
        .clone()
        .expect("the Cinder API's catalog URL");
    let cinder = cluster.cinder().await?;
    assert_eq!(cinder.spec.keystone_endpoint, pod_url());
    let ready = cluster.wait_ready(CONVERGENCE).await?;
    eprintln!(
        "Ready {} s after the samples were applied; the catalog names the API at {api}",
        ready.as_secs()
    );

    // The services through the API, authenticated by the real Keystone.
    let since = Instant::now();
    let rows = loop {
        let out = openstack(keystone, &["volume", "service", "list", "-f", "json"]).await?;
        let rows: Vec<Value> = serde_json::from_str(&out)?;
        if all_listed(&rows) || since.elapsed() > LISTED {
            break rows;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    };
    eprintln!("openstack volume service list:");
    for r in &rows {
        eprintln!(
            "  {:<18} {:<14} {:<6} {:<9} {:<5} {}",
            r["Binary"].as_str().unwrap_or_default(),
            r["Host"].as_str().unwrap_or_default(),
            r["Zone"].as_str().unwrap_or_default(),
            r["Status"].as_str().unwrap_or_default(),
            r["State"].as_str().unwrap_or_default(),
            r["Updated At"].as_str().unwrap_or_default()
        );
    }
    assert!(
        all_listed(&rows),
        "cinder-scheduler, cinder-volume on cinder@ceph and cinder-backup listed: {rows:?}"
    );

    // A request that reads the volumes table through the API, several times: the client sends
    // the version discovery and the request one after the other, and each of them answers.
    for _ in 0..VOLUME_LISTS {
        let volumes: Vec<Value> =
            serde_json::from_str(&openstack(keystone, &["volume", "list", "-f", "json"]).await?)?;
        assert_eq!(volumes, Vec::<Value>::new(), "no volume yet");
    }
    eprintln!("openstack volume list, {VOLUME_LISTS} times: []");

    // Refusals: Keystone's for a wrong password, the API's for a bogus token and for none.
    let wrong = openstack_with(keystone, "not-the-password", &["volume", "list"])
        .await
        .expect_err("a wrong password is refused");
    assert!(format!("{wrong}").contains("HTTP 401"), "{wrong}");
    let status = |token: Option<&'static str>| {
        let url = format!("{api}/volumes");
        async move {
            let headers: Vec<String> = token
                .map(|t| format!("X-Auth-Token: {t}"))
                .into_iter()
                .collect();
            http_status(&url, &headers, Duration::from_secs(20))
                .await
                .expect("curl")
        }
    };
    assert_eq!(
        status(Some("bogus-token-0000")).await,
        "401",
        "a bogus token"
    );
    assert_eq!(status(None).await, "401", "no token");
    assert_eq!(
        cluster.api_health().await?,
        "200",
        "/healthcheck needs no token"
    );
    eprintln!("wrong password: Keystone 401; bogus token and no token: API 401");
    Ok(())
}
