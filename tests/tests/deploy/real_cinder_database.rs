//! The schema Jobs' commands of each release on a real MariaDB (the embedded cluster's starter,
//! `cinder_sim::real_servers`),
//! with the DSN the operator renders for a user whose password carries `$`, `:`, `/`, `@`, `?`,
//! `#` and `%`, and the user's MAX_USER_CONNECTIONS as the mariadb-operator's User sets it:
//!
//! - `cinder-manage db sync` of each release brings an empty database to that release's
//!   alembic head (`cinder-manage db version`), and `cinder-status upgrade check` through the
//!   migrate Job's wrapper answers a severity of 0-2;
//! - the upgrade 2026.1 -> 2026.2 as the phase Jobs run it: cinder 28's sync, then cinder 29's
//!   expand (db sync), migrate (upgrade check) and contract (online data migrations).

use cinder_e2e::real_cinder::{Root, prepared_roots};
use cinder_operator::planning::config::ENV_DB_CONNECTION;
use cinder_operator::planning::connection_urls::{DbEndpoint, pymysql_dsn};
use cinder_operator::planning::upgrade_check::parse_exit_code;
use cinder_operator::steps::database::jobs::{SchemaJob, TERMINATION_MESSAGE_PATH};
use cinder_sim::real_servers::MariaDbServer as MariaDb;
use cinder_sim::real_servers::mariadb::{quote_identifier, quote_string};
use std::path::Path;
use std::time::{Duration, Instant};

const PASSWORD: &str = "db$pa:ss/w@rd?#%41";

/// Runs `job`'s command of `root` with `dsn`; (exit code, stdout + stderr, the termination
/// message the migrate wrapper wrote, wall time).
fn run_job(
    root: &Root,
    dir: &Path,
    job: SchemaJob,
    dsn: &str,
) -> (Option<i32>, String, Option<String>, Duration) {
    let message = dir.join(format!("termination-{}", root.release));
    let _ = std::fs::remove_file(&message);
    let argv: Vec<String> = job
        .command()
        .into_iter()
        .map(|w| w.replace(TERMINATION_MESSAGE_PATH, message.to_str().unwrap()))
        .collect();
    let started = Instant::now();
    let out = root
        .command(&argv[0], dir)
        .args(&argv[1..])
        .env(ENV_DB_CONNECTION, dsn)
        .output()
        .unwrap();
    let took = started.elapsed();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.status.code(),
        text,
        std::fs::read_to_string(&message).ok(),
        took,
    )
}

fn version(root: &Root, dir: &Path, dsn: &str) -> String {
    let out = root
        .command("cinder-manage", dir)
        .args(["db", "version"])
        .env(ENV_DB_CONNECTION, dsn)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn head(root: &Root, dir: &Path) -> String {
    let heads = root.probe(dir, &["alembic-head"], &[]).unwrap();
    let heads = heads.as_array().unwrap();
    assert_eq!(heads.len(), 1, "{}: {heads:?}", root.release);
    heads[0].as_str().unwrap().to_string()
}

/// `CREATE DATABASE`, and a user of it with `MAX_USER_CONNECTIONS 20` granted all on it, as
/// the mariadb-operator's Database, User and Grant do; the DSN the operator renders for it.
fn database(db: &MariaDb, name: &str) -> String {
    let user = format!("u_{name}");
    let (database, account) = (quote_identifier(name), quote_string(&user));
    db.sql_blocking(&format!(
        "CREATE DATABASE {database}; \
         CREATE USER {account}@'%' IDENTIFIED BY {password} WITH MAX_USER_CONNECTIONS 20; \
         GRANT ALL PRIVILEGES ON {database}.* TO {account}@'%';",
        password = quote_string(PASSWORD),
    ))
    .unwrap();
    pymysql_dsn(
        &DbEndpoint {
            host: "127.0.0.1".into(),
            port: db.port(),
            database: name.into(),
        },
        &user,
        PASSWORD,
    )
    .unwrap()
    .expose()
    .to_string()
}

#[test]
fn each_release_syncs_to_its_head_and_29_upgrades_28_on_a_real_mariadb() {
    let Some(roots) = prepared_roots("each_release_syncs_to_its_head_on_a_real_mariadb") else {
        return;
    };
    if !MariaDb::available() {
        let why = "mariadb-server is not installed: run tests/real-cinder/setup.sh";
        assert!(std::env::var_os("CI").is_none(), "{why}");
        eprintln!("skipping: {why}");
        return;
    }
    let db = MariaDb::start(100).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    for root in &roots {
        let name = format!("cinder_{}", root.release.replace('.', "_"));
        let dsn = database(&db, &name);
        let (code, log, _, took) = run_job(root, dir, SchemaJob::DbSync, &dsn);
        assert_eq!(code, Some(0), "{} db sync: {log}", root.release);
        let head = head(root, dir);
        assert_eq!(version(root, dir, &dsn), head, "{}", root.release);
        let (code, log, message, _) = run_job(root, dir, SchemaJob::Migrate, &dsn);
        assert_eq!(code, Some(0), "{} upgrade check: {log}", root.release);
        let severity = message.as_deref().and_then(parse_exit_code);
        assert!(
            matches!(severity, Some(0..=2)),
            "{}: {severity:?}\n{log}",
            root.release
        );
        println!(
            "{} (cinder {}): db sync of an empty database on MariaDB {:.1} s, at head {head}; \
             upgrade check exits {severity:?}",
            root.release,
            root.cinder,
            took.as_secs_f64()
        );
    }

    // The upgrade as the phases run it, on one database.
    let [old, new] = [&roots[0], &roots[1]];
    let dsn = database(&db, "cinder_upgrade");
    let (code, log, _, _) = run_job(old, dir, SchemaJob::DbSync, &dsn);
    assert_eq!(code, Some(0), "2026.1 db sync: {log}");
    let mut took = Vec::new();
    for phase in SchemaJob::PHASES {
        let (code, log, message, t) = run_job(new, dir, phase, &dsn);
        assert_eq!(code, Some(0), "2026.2 {phase:?}: {log}");
        if phase == SchemaJob::Migrate {
            let severity = message.as_deref().and_then(parse_exit_code);
            assert!(matches!(severity, Some(0..=2)), "{severity:?}\n{log}");
        }
        took.push(format!("{phase:?} {:.1} s", t.as_secs_f64()));
    }
    assert_eq!(version(new, dir, &dsn), head(new, dir));
    println!("upgrade 2026.1 -> 2026.2 on MariaDB: {}", took.join(", "));
    // No connection of the Cinder users outlives the commands.
    let left = db
        .sql_blocking("SELECT COUNT(*) FROM information_schema.processlist WHERE user LIKE 'u\\_%'")
        .unwrap();
    assert_eq!(left.trim(), "0");
}
