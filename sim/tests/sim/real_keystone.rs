//! A real Keystone ([`KeystoneServer`]) on a real MariaDB server: the admin that
//! `keystone-manage bootstrap` made and the service user it was started with both get a token
//! from the real identity API, a wrong password gets Keystone's 401, a registered service shows
//! in the catalog, and dropping the server leaves none of its processes (uwsgi's master and
//! workers) nor its port.
//!
//! Needs root (MariaDB runs as root here), the Debian mariadb-server (tests/real-cinder/setup.sh)
//! and the Keystone venv (tests/real-cinder/keystone-setup.sh): without them it says so and
//! passes, except under `CI=true`.

use crate::common::{is_root, runs_unless_missing};
use cinder_sim::real_servers::keystone::http_status;
use cinder_sim::real_servers::{KeystoneOptions, KeystoneServer, MariaDbServer};

/// The service user's password here (a test value of this module's own).
const SERVICE_PASSWORD: &str = "sim-keystone-test-password";

fn prerequisites(test: &str) -> bool {
    let missing = if !is_root() {
        Some("MariaDB runs as root here")
    } else if !MariaDbServer::available() {
        Some("mariadb-server is not installed: run tests/real-cinder/setup.sh")
    } else if !KeystoneServer::available() {
        Some("the Keystone venv is not prepared: run tests/real-cinder/keystone-setup.sh")
    } else {
        None
    };
    runs_unless_missing(test, missing)
}

/// `openstack ARGS` of the Keystone venv as `user` of `project` with `password`: its stdout, or
/// `Err` with its stderr (no password is in either: it travels in the environment).
fn openstack(
    keystone: &KeystoneServer,
    user: &str,
    project: &str,
    password: &str,
    args: &[&str],
) -> Result<String, String> {
    let out = keystone
        .openstack()
        .env("OS_AUTH_URL", keystone.url())
        .env("OS_IDENTITY_API_VERSION", "3")
        .env("OS_USERNAME", user)
        .env("OS_PASSWORD", password)
        .env("OS_PROJECT_NAME", project)
        .env("OS_USER_DOMAIN_NAME", "Default")
        .env("OS_PROJECT_DOMAIN_NAME", "Default")
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// The pids of the processes in process group `group`.
fn group_members(group: u32) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // pid (comm) state ppid pgrp ...: the fields after the command's closing parenthesis.
        let Some((_, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        if rest.split_whitespace().nth(2) == Some(group.to_string().as_str()) {
            pids.push(pid);
        }
    }
    pids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_keystone_on_a_real_mariadb_issues_tokens_and_stops_leaving_no_process() {
    if !prerequisites("a_real_keystone_on_a_real_mariadb") {
        return;
    }
    let (db, keystone) = tokio::task::spawn_blocking(|| {
        let db = MariaDbServer::start(100).unwrap();
        let opts = KeystoneOptions {
            service_password: SERVICE_PASSWORD.to_owned(),
            ..KeystoneOptions::default()
        };
        let started = std::time::Instant::now();
        let keystone = KeystoneServer::start(&db, &opts).unwrap();
        eprintln!(
            "Keystone up in {:.1} s on port {}",
            started.elapsed().as_secs_f64(),
            keystone.port()
        );
        (db, keystone)
    })
    .await
    .unwrap();
    let pid = keystone.pid().unwrap();
    let port = keystone.port();
    let members = group_members(pid);
    assert!(
        members.len() >= 3,
        "uwsgi's master and two workers lead and fill group {pid}: {members:?}"
    );
    // Keystone's tables are on the given server, in its own database.
    let tables = db
        .sql("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'keystone'")
        .await
        .unwrap();
    assert!(tables.trim().parse::<u32>().unwrap() > 30, "{tables}");

    let keystone = std::sync::Arc::new(keystone);
    let k = std::sync::Arc::clone(&keystone);
    tokio::task::spawn_blocking(move || {
        let admin = k.admin_password().to_owned();
        let user_id = openstack(
            &k,
            "admin",
            "admin",
            &admin,
            &["token", "issue", "-f", "value", "-c", "user_id"],
        )
        .expect("a token for the admin");
        assert!(!user_id.trim().is_empty());
        let project = openstack(
            &k,
            "cinder",
            "service",
            SERVICE_PASSWORD,
            &["token", "issue", "-f", "value", "-c", "project_id"],
        )
        .expect("a token for the service user on its project");
        let service_id = openstack(
            &k,
            "admin",
            "admin",
            &admin,
            &["project", "show", "service", "-f", "value", "-c", "id"],
        )
        .unwrap();
        assert_eq!(
            project.trim(),
            service_id.trim(),
            "the token is scoped to project service"
        );
        let roles = openstack(
            &k,
            "admin",
            "admin",
            &admin,
            &[
                "role",
                "assignment",
                "list",
                "--user",
                "cinder",
                "--project",
                "service",
                "--names",
                "-f",
                "value",
                "-c",
                "Role",
            ],
        )
        .unwrap();
        let mut roles: Vec<&str> = roles.lines().collect();
        roles.sort_unstable();
        assert_eq!(roles, ["admin", "service"]);

        let wrong = openstack(
            &k,
            "cinder",
            "service",
            "not-the-password",
            &["token", "issue", "-f", "value", "-c", "id"],
        )
        .expect_err("a wrong password is refused");
        assert!(wrong.contains("HTTP 401"), "{wrong}");

        k.register_service(
            "block-storage",
            "cinderv3",
            "RegionOne",
            "http://192.0.2.1:8776/v3",
        )
        .unwrap();
        // Registering again points the same endpoints at the new URL.
        k.register_service(
            "block-storage",
            "cinderv3",
            "RegionOne",
            "http://192.0.2.2:8776/v3",
        )
        .unwrap();
        let urls = openstack(
            &k,
            "cinder",
            "service",
            SERVICE_PASSWORD,
            &[
                "endpoint",
                "list",
                "--service",
                "block-storage",
                "-f",
                "value",
                "-c",
                "Interface",
                "-c",
                "URL",
            ],
        )
        .unwrap();
        let mut urls: Vec<&str> = urls.lines().collect();
        urls.sort_unstable();
        assert_eq!(
            urls,
            [
                "admin http://192.0.2.2:8776/v3",
                "internal http://192.0.2.2:8776/v3",
                "public http://192.0.2.2:8776/v3"
            ]
        );
    })
    .await
    .unwrap();

    let keystone = std::sync::Arc::into_inner(keystone).unwrap();
    let stopping = std::time::Instant::now();
    tokio::task::spawn_blocking(move || drop(keystone))
        .await
        .unwrap();
    eprintln!(
        "Keystone stopped in {:.1} s",
        stopping.elapsed().as_secs_f64()
    );
    assert_eq!(
        group_members(pid),
        Vec::<u32>::new(),
        "nothing of uwsgi is left"
    );
    assert_eq!(
        http_status(port, "/v3"),
        None,
        "nothing answers on its port"
    );
    tokio::task::spawn_blocking(move || drop(db)).await.unwrap();
}
