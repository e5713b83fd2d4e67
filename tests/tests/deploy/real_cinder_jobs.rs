//! The commands of the service-remove and migrate Jobs run with the real `cinder-manage` and
//! `cinder-status` of each release (tests/real-cinder/setup.sh), against a SQLite schema that
//! the release's own `cinder-manage db sync` created, and what the operator makes of their exit
//! codes:
//!
//! - `cinder-manage service remove cinder-volume <host>` exits 0 when it removed the row and
//!   also when there was none, 1 on a database error, 2 when it could not read its
//!   configuration; the detach releases the backend on 0 only;
//! - `cinder-status upgrade check` exits 0, 1 or 2 with a report, 255 when a check raised (here
//!   a database without the schema); the wrapper passes 0–2 on as success with the real code
//!   in the termination message and fails on 255.

use cinder_e2e::real_cinder::{Root, prepared_roots};
use cinder_operator::planning::config::ENV_DB_CONNECTION;
use cinder_operator::planning::detach::{DetachAction, DetachingBackend, plan_detach};
use cinder_operator::planning::job::JobState;
use cinder_operator::planning::upgrade_check::{interpret, parse_exit_code};
use cinder_operator::steps::database::jobs::{TERMINATION_MESSAGE_PATH, UPGRADE_CHECK_SCRIPT};
use cinder_operator::steps::volume_services::detach::service_remove_command;
use std::path::Path;
use std::process::Output;

/// Runs `cinder-manage db sync` of `root` into `<dir>/<name>.db`; its DSN.
fn synced_sqlite(root: &Root, dir: &Path, name: &str) -> String {
    let dsn = format!("sqlite:///{}/{name}.db", dir.display());
    let out = root
        .command("cinder-manage", dir)
        .args(["db", "sync"])
        .env(ENV_DB_CONNECTION, &dsn)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} db sync: {}",
        root.release,
        String::from_utf8_lossy(&out.stderr)
    );
    dsn
}

fn run(root: &Root, dir: &Path, argv: &[String], dsn: &str) -> Output {
    root.command(&argv[0], dir)
        .args(&argv[1..])
        .env(ENV_DB_CONNECTION, dsn)
        .output()
        .unwrap()
}

/// The live `cinder-volume` rows of `host` (the real `cinder-manage service list`).
fn listed(root: &Root, dir: &Path, dsn: &str, host: &str) -> bool {
    let out = run(
        root,
        dir,
        &["cinder-manage", "service", "list"].map(String::from),
        dsn,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.starts_with("cinder-volume") && l.split_whitespace().nth(1) == Some(host))
}

/// A registered cinder-volume of `host`, as a starting service writes it.
fn register(root: &Root, dir: &Path, db: &Path, host: &str) {
    let script = "import sqlite3, sys, uuid\n\
        c = sqlite3.connect(sys.argv[1])\n\
        c.execute(\"INSERT INTO services (created_at, deleted, host, binary, topic, report_count, \
        disabled, availability_zone, uuid) VALUES (datetime('now'), 0, ?, 'cinder-volume', \
        'cinder-volume', 1, 0, 'nova', ?)\", (sys.argv[2], str(uuid.uuid4())))\n\
        c.commit()\n";
    let out = root
        .command("python", dir)
        .args(["-c", script])
        .arg(db)
        .arg(host)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether the detach, seeing the Job end with `code`, releases the backend.
fn releases(code: i32) -> bool {
    let job = if code == 0 {
        JobState::Succeeded
    } else {
        JobState::Failed {
            exit_code: Some(code),
        }
    };
    let plan = plan_detach(
        "cinder",
        &[DetachingBackend {
            name: "nfs".into(),
            has_finalizer: true,
            deployment_exists: false,
            pods_exist: false,
            job,
            job_uid: Some("uid".into()),
            job_of_earlier_backend: false,
            secrets: vec![],
        }],
    )
    .unwrap();
    plan.actions
        .iter()
        .any(|a| matches!(a, DetachAction::ReleaseFinalizer { .. }))
}

#[test]
fn service_remove_exits_as_real_cinder_manage_does_and_only_a_removal_releases_the_backend() {
    let Some(roots) = prepared_roots("service_remove_exits_as_real_cinder_manage_does") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let host = "cinder@nfs";
    let command = service_remove_command(host);
    for root in &roots {
        let name = format!("remove-{}", root.release);
        let dsn = synced_sqlite(root, dir, &name);
        register(root, dir, &dir.join(format!("{name}.db")), host);
        assert!(listed(root, dir, &dsn, host), "{}", root.release);

        // The registered service: removed, exit 0, the backend released.
        let out = run(root, dir, &command, &dsn);
        assert_eq!(out.status.code(), Some(0), "{}: {out:?}", root.release);
        assert!(!listed(root, dir, &dsn, host), "{}", root.release);
        assert!(releases(0));

        // Nothing left to remove: still exit 0 ("Host not found"), nothing is wrong.
        let out = run(root, dir, &command, &dsn);
        assert_eq!(out.status.code(), Some(0), "{}: {out:?}", root.release);
        assert!(String::from_utf8_lossy(&out.stdout).contains("Host not found"));

        // A database error (no schema): exit 1, the backend keeps its finalizer.
        let empty = format!("sqlite:///{}/empty-{}.db", dir.display(), root.release);
        let out = run(root, dir, &command, &empty);
        assert_eq!(out.status.code(), Some(1), "{}: {out:?}", root.release);
        assert!(!releases(1));

        // Exit 2 is cinder-manage's for a configuration it could not read: nothing was
        // removed, and the backend keeps its finalizer.
        let mut unreadable = vec![
            command[0].clone(),
            "--config-file".to_string(),
            dir.join("missing.conf").display().to_string(),
        ];
        unreadable.extend(command[1..].iter().cloned());
        register(root, dir, &dir.join(format!("{name}.db")), host);
        let out = run(root, dir, &unreadable, &dsn);
        assert_eq!(out.status.code(), Some(2), "{}: {out:?}", root.release);
        assert!(
            listed(root, dir, &dsn, host),
            "{}: nothing removed",
            root.release
        );
        assert!(
            !releases(2),
            "exit 2 removed nothing and must not release the backend"
        );
    }
}

#[test]
fn the_upgrade_check_wrapper_passes_real_severities_and_fails_on_an_exception() {
    let Some(roots) = prepared_roots("the_upgrade_check_wrapper_passes_real_severities") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    for root in &roots {
        let message = dir.join(format!("termination-{}", root.release));
        let script =
            UPGRADE_CHECK_SCRIPT.replace(TERMINATION_MESSAGE_PATH, message.to_str().unwrap());
        let argv = ["/bin/sh", "-c", script.as_str()].map(String::from);

        // At the release's schema: a report, a severity of 0-2, the Job succeeds.
        let dsn = synced_sqlite(root, dir, &format!("check-{}", root.release));
        let out = run(root, dir, &argv, &dsn);
        let code = parse_exit_code(&std::fs::read_to_string(&message).unwrap());
        assert_eq!(out.status.code(), Some(0), "{}: {out:?}", root.release);
        assert!(
            matches!(code, Some(0..=2)),
            "{}: {code:?}\n{}",
            root.release,
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("Upgrade Check Results"));
        println!(
            "{}: cinder-status upgrade check at the schema head exits {code:?}: {}",
            root.release,
            interpret(code).reason
        );

        // A database without the schema: the check raises, 255; the Job fails with it.
        let empty = format!("sqlite:///{}/none-{}.db", dir.display(), root.release);
        let out = run(root, dir, &argv, &empty);
        let code = parse_exit_code(&std::fs::read_to_string(&message).unwrap());
        assert_eq!(out.status.code(), Some(255), "{}: {out:?}", root.release);
        assert_eq!(code, Some(255));
        assert!(interpret(code).message.contains("raised an error"));
    }
}
