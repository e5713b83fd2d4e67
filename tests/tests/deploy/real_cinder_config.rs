//! What the operator renders for the sample Cinder (deploy/samples: an NFS and an RBD volume
//! backend, an NFS backup target, and an RBD backup target beside it), held against the real
//! Cinder of each supported release (the roots of tests/real-cinder/setup.sh):
//!
//! - every oslo.config file a service loads (cinder.conf, api.conf, scheduler.conf, each
//!   backend's and the backup target's fragment) and the `OS_<GROUP>__<OPTION>` environment
//!   pass that release's `oslo-config-validator` (no unknown option, no deprecated one), and no
//!   option that is required without a default is left unset for a group the files use;
//! - the DSN, the transport URL and the service-user password read back through the real
//!   oslo.config, SQLAlchemy, oslo.messaging's rabbit driver and kombu as exactly the
//!   credentials they were built from, with `$`, `@`, `:`, `/`, `?`, `#` and `%` in them;
//! - the API's paste application loads from the ConfigMap's files alone and answers
//!   /healthcheck 200, its resource filters load, and rootwrap finds the filters where the
//!   volume and backup pods mount them; and the API pod's own command, uWSGI with the rendered
//!   `api-uwsgi.ini` over the ConfigMap bound at /etc/cinder (private mount and network
//!   namespaces), answers /healthcheck 200 with the spec's worker processes;
//! - the files of cinder's `etc/cinder/` the ConfigMap carries are the release's own.

use cinder_e2e::deploy_helpers::repo_root;
use cinder_e2e::real_cinder::{OptionData, Root, ini_keys, prepared_roots};
use cinder_operator::crd::{Cinder, CinderBackend, CinderBackupBackend, CinderBackupBackendSpec};
use cinder_operator::planning::backend_projection::{
    BACKEND_CONF_KEY, BACKUP_CONF_KEY, project_backend, project_backup_backend,
};
use cinder_operator::planning::config::{
    CINDER_ETC_FILES, ENV_AUTHTOKEN_PASSWORD, ENV_DB_CONNECTION, ENV_TRANSPORT_URL,
    ROOTWRAP_FILTERS_KEY, render_config,
};
use cinder_operator::planning::connection_urls::{
    BrokerEndpoint, DbEndpoint, oslo_config_literal, pymysql_dsn, rabbit_transport_url,
};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const DB_USER: &str = "cinder";
const DB_PASSWORD: &str = "db$pa:ss/w@rd?#%41";
const BROKER_USER: &str = "c@in:der";
const BROKER_PASSWORD: &str = "mq$p@ss:w?rd#%2F";
const SERVICE_PASSWORD: &str = "ks$pa$$word${x}";

fn samples() -> (Cinder, Vec<CinderBackend>, CinderBackupBackend) {
    let dir = repo_root().join("deploy/samples");
    let cinder: Cinder =
        serde_norway::from_str(&std::fs::read_to_string(dir.join("40-cinder.yaml")).unwrap())
            .unwrap();
    let text = std::fs::read_to_string(dir.join("50-backends.yaml")).unwrap();
    let mut backends = Vec::new();
    let mut backup = None;
    for doc in serde_norway::Deserializer::from_str(&text) {
        let v = serde_norway::Value::deserialize(doc).unwrap();
        match v["kind"].as_str() {
            Some("CinderBackend") => backends.push(serde_norway::from_value(v).unwrap()),
            Some("CinderBackupBackend") => backup = Some(serde_norway::from_value(v).unwrap()),
            other => panic!("unexpected {other:?} in 50-backends.yaml"),
        }
    }
    (cinder, backends, backup.unwrap())
}

/// One service process: the oslo.config files it loads, in order, and its environment.
struct Process {
    name: String,
    files: Vec<(String, String)>,
    env: Vec<(&'static str, String)>,
}

/// What the operator renders for the samples, as the processes load it.
fn processes() -> (BTreeMap<String, String>, Vec<Process>) {
    let (cinder, backends, backup) = samples();
    let name = cinder.metadata.name.clone().unwrap();
    let config = render_config(&name, &cinder.spec).unwrap().data;
    let dsn = pymysql_dsn(
        &DbEndpoint {
            host: "mariadb.openstack.svc".into(),
            port: 3306,
            database: "cinder".into(),
        },
        DB_USER,
        DB_PASSWORD,
    )
    .unwrap();
    let broker =
        BrokerEndpoint::parse("rabbitmq.openstack.svc", Some("5672"), Some("cinder")).unwrap();
    let url = rabbit_transport_url(&broker, BROKER_USER, BROKER_PASSWORD).unwrap();
    let rpc_env = vec![
        (ENV_DB_CONNECTION, dsn.expose().to_string()),
        (ENV_TRANSPORT_URL, url.expose().to_string()),
    ];
    let conf = |key: &str| (key.to_string(), config[key].clone());
    let mut api_env = rpc_env.clone();
    api_env.push((
        ENV_AUTHTOKEN_PASSWORD,
        oslo_config_literal(SERVICE_PASSWORD),
    ));
    let mut out = vec![
        Process {
            name: "api".into(),
            files: vec![conf("cinder.conf"), conf("api.conf")],
            env: api_env,
        },
        Process {
            name: "scheduler".into(),
            files: vec![conf("cinder.conf"), conf("scheduler.conf")],
            env: rpc_env.clone(),
        },
    ];
    let mut host_env = rpc_env.clone();
    host_env.push(("OS_DEFAULT__HOST", name.clone()));
    for b in &backends {
        let bname = b.metadata.name.clone().unwrap();
        let p = project_backend(&name, &bname, &b.spec, Some("AQDkey==")).unwrap();
        out.push(Process {
            name: format!("volume-{bname}"),
            files: vec![
                conf("cinder.conf"),
                (
                    format!("{bname}-{BACKEND_CONF_KEY}"),
                    p.data[BACKEND_CONF_KEY].clone(),
                ),
            ],
            env: host_env.clone(),
        });
    }
    let rbd_backup: CinderBackupBackendSpec = serde_norway::from_str(
        "{cinderRef: {name: cinder}, type: RBD, rbd: {pool: backups, user: cinder-backup, \
         monitors: ['192.0.2.10:6789'], keySecretRef: {name: ceph-cinder-key, key: key}}, \
         compression: zlib}",
    )
    .unwrap();
    for (what, spec) in [("nfs", &backup.spec), ("rbd", &rbd_backup)] {
        let p = project_backup_backend(&name, "backup", spec, Some("AQDkey==")).unwrap();
        out.push(Process {
            name: format!("backup-{what}"),
            files: vec![
                conf("cinder.conf"),
                (
                    format!("backup-{what}-{BACKUP_CONF_KEY}"),
                    p.data[BACKUP_CONF_KEY].clone(),
                ),
            ],
            env: rpc_env.clone(),
        });
    }
    (config, out)
}

/// `text` with every section but DEFAULT renamed `backend_defaults`: a volume backend's
/// section (`[nfs]`, `[ceph]`) takes exactly the options cinder registers under
/// `[backend_defaults]`, and the option data knows no group of a backend's name.
fn backend_sections_as_defaults(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.starts_with('[') && l != "[DEFAULT]" {
                "[backend_defaults]".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// The environment as the INI file oslo.config reads it as (`OS_<GROUP>__<OPTION>`).
fn env_as_ini(env: &[(&str, String)]) -> String {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (k, _) in env {
        let (group, option) = k
            .strip_prefix("OS_")
            .and_then(|r| r.split_once("__"))
            .unwrap_or_else(|| panic!("{k} is no OS_<GROUP>__<OPTION> variable"));
        let group = if group == "DEFAULT" {
            group.to_string()
        } else {
            group.to_lowercase()
        };
        // The validator reads a file; the value's characters are no part of what it checks.
        groups
            .entry(group)
            .or_default()
            .push(format!("{} = x", option.to_lowercase()));
    }
    groups
        .into_iter()
        .map(|(g, lines)| format!("[{g}]\n{}\n", lines.join("\n")))
        .collect()
}

/// One file of a process as validated: its name, where it was written, its text.
type CheckedFile = (String, PathBuf, String);

/// Every finding of `root` on `procs` (empty when all pass).
fn findings(root: &Root, data: &OptionData, procs: &[Process], dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let authtoken: Vec<String> = serde_json::from_value(
        root.probe(dir, &["authtoken-options", "password"], &[])
            .unwrap(),
    )
    .unwrap();
    let required = data.required_without_default();
    // Each process's files as validated, written once each.
    let mut checked: Vec<(String, Vec<CheckedFile>)> = Vec::new();
    for p in procs {
        let env_file = (format!("{}-env.conf", p.name), env_as_ini(&p.env));
        let mut files = Vec::new();
        for (file, text) in p.files.iter().chain(std::iter::once(&env_file)) {
            let text = if file.ends_with(BACKEND_CONF_KEY) {
                backend_sections_as_defaults(text)
            } else {
                text.clone()
            };
            let path = dir.join(format!("{}-{}", root.release, file));
            std::fs::write(&path, &text).unwrap();
            files.push((file.clone(), path, text));
        }
        checked.push((p.name.clone(), files));
    }
    let mut paths: Vec<PathBuf> = checked
        .iter()
        .flat_map(|(_, f)| f.iter().map(|(_, p, _)| p.clone()))
        .collect();
    paths.sort();
    paths.dedup();
    let verdicts: BTreeMap<PathBuf, Result<(), String>> = root
        .validate_files(data, &paths, dir)
        .unwrap()
        .into_iter()
        .collect();
    for (name, files) in &checked {
        let mut set: Vec<(String, String)> = Vec::new();
        for (file, path, text) in files {
            if let Err(log) = &verdicts[path] {
                out.push(format!("{} {name}: {file}: {log}", root.release));
            }
            for (group, key) in ini_keys(text) {
                // oslo-config-validator reports renamed options only; one the release
                // deprecates for removal is as much a finding.
                if data
                    .option(&group, &key)
                    .and_then(|o| o.get("deprecated_for_removal"))
                    .and_then(|d| d.as_bool())
                    == Some(true)
                {
                    out.push(format!(
                        "{} {name}: {file}: [{group}] {key} is deprecated for removal",
                        root.release
                    ));
                }
                set.push((group, key));
            }
        }
        // keystonemiddleware registers the auth plugin's options at run time, and the
        // validator skips [keystone_authtoken]: they are checked against the plugin.
        for (group, key) in &set {
            if group == "keystone_authtoken"
                && !authtoken.contains(key)
                && data.option(group, key).is_none()
            {
                out.push(format!(
                    "{} {name}: [keystone_authtoken] {key} is neither keystonemiddleware's nor the password plugin's",
                    root.release
                ));
            }
        }
        for (group, option) in &required {
            let used = group == "DEFAULT" || set.iter().any(|(g, _)| g == group);
            if used && !set.iter().any(|(g, k)| g == group && k == option) {
                out.push(format!(
                    "{} {name}: required option [{group}] {option} is not set",
                    root.release
                ));
            }
        }
    }
    out
}

#[test]
fn every_rendered_config_passes_the_oslo_config_validator_of_each_release() {
    let Some(roots) = prepared_roots("every_rendered_config_passes_the_oslo_config_validator")
    else {
        return;
    };
    let (_, procs) = processes();
    let dir = tempfile::tempdir().unwrap();
    let mut all = Vec::new();
    for root in &roots {
        let data = root.option_data(dir.path()).unwrap();
        assert!(data.has_group("backend_defaults") && data.has_group("oslo_messaging_rabbit"));
        let mut found = findings(root, &data, &procs, dir.path());
        // The command itself agrees, on cinder.conf.
        let conf = dir.path().join(format!("{}-cinder.conf", root.release));
        if let Err(log) = root.validate(&data, &conf, dir.path()) {
            found.push(format!(
                "{}: oslo-config-validator on cinder.conf: {log}",
                root.release
            ));
        }
        println!(
            "{} (cinder {}): {} processes, {} files validated, {} findings",
            root.release,
            root.cinder,
            procs.len(),
            procs.iter().map(|p| p.files.len() + 1).sum::<usize>(),
            found.len()
        );
        all.extend(found);
    }
    assert!(all.is_empty(), "{}", all.join("\n"));
}

#[test]
fn the_validator_run_catches_an_option_a_release_lacks() {
    // The check above can fail: a file with an option no namespace registers, and one that
    // only an older release knows, are findings.
    let Some(roots) = prepared_roots("the_validator_run_catches_an_option_a_release_lacks") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for root in &roots {
        let data = root.option_data(dir.path()).unwrap();
        let bad = vec![Process {
            name: "bad".into(),
            files: vec![(
                "bad.conf".into(),
                "[DEFAULT]\nno_such_option = 1\n[oslo_messaging_rabbit]\nheartbeat_in_pthread = false\n"
                    .into(),
            )],
            env: vec![],
        }];
        let found = findings(root, &data, &bad, dir.path());
        let text = found.join("\n");
        assert!(text.contains("no_such_option"), "{}: {text}", root.release);
        // 2026.1's oslo.messaging 17 deprecates it (a fatal warning), 2026.2's 18 has none.
        assert!(
            text.contains("heartbeat_in_pthread"),
            "{}: {text}",
            root.release
        );
    }
}

#[test]
fn credentials_read_back_through_real_oslo_config_sqlalchemy_and_kombu() {
    let Some(roots) = prepared_roots("credentials_read_back_through_real_oslo_config") else {
        return;
    };
    let (config, procs) = processes();
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("cinder.conf");
    std::fs::write(&conf, &config["cinder.conf"]).unwrap();
    let api = procs.iter().find(|p| p.name == "api").unwrap();
    let env: Vec<(&str, &str)> = api.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    for root in &roots {
        let got = root
            .probe(dir.path(), &["env", conf.to_str().unwrap()], &env)
            .unwrap();
        assert_eq!(got.get("error"), None, "{}: {got}", root.release);
        assert_eq!(got["database"]["username"], DB_USER, "{}", root.release);
        assert_eq!(got["database"]["password"], DB_PASSWORD, "{}", root.release);
        assert_eq!(got["database"]["host"], "mariadb.openstack.svc");
        assert_eq!(got["database"]["database"], "cinder");
        assert_eq!(
            got["transport"]["username"], BROKER_USER,
            "{}",
            root.release
        );
        assert_eq!(
            got["transport"]["password"], BROKER_PASSWORD,
            "{}",
            root.release
        );
        assert_eq!(got["transport"]["host"], "rabbitmq.openstack.svc");
        assert_eq!(got["transport"]["port"], 5672);
        assert_eq!(got["transport"]["vhost"], "cinder");
        assert_eq!(
            got["authtoken_password"], SERVICE_PASSWORD,
            "{}",
            root.release
        );

        // Delivered as it is, a password with `$` is not what the API reads.
        let mut raw = env.clone();
        raw.retain(|(k, _)| *k != ENV_AUTHTOKEN_PASSWORD);
        raw.push((ENV_AUTHTOKEN_PASSWORD, SERVICE_PASSWORD));
        let got = root
            .probe(dir.path(), &["env", conf.to_str().unwrap()], &raw)
            .unwrap();
        assert!(
            got.get("error").is_some() || got["authtoken_password"] != SERVICE_PASSWORD,
            "{}: {got}",
            root.release
        );
        // And a broker password with `/`, however it is encoded, never reaches kombu intact:
        // the operator refuses it (connection_urls::rabbit_transport_url).
        let slash = format!(
            "rabbit://cinder:{}@rabbitmq.openstack.svc:5672/cinder",
            "a%2Fb"
        );
        let mut bad = env.clone();
        bad.retain(|(k, _)| *k != ENV_TRANSPORT_URL);
        bad.push((ENV_TRANSPORT_URL, &slash));
        let got = root
            .probe(dir.path(), &["env", conf.to_str().unwrap()], &bad)
            .unwrap();
        assert!(
            got.get("error").is_some() || got["transport"]["password"] != "a/b",
            "{}: {got}",
            root.release
        );
        let broker = BrokerEndpoint::parse("rmq", None, Some("cinder")).unwrap();
        assert!(rabbit_transport_url(&broker, "cinder", "a/b").is_err());
    }
}

/// Runs `cinder-manage db sync` of `root` into a fresh SQLite file of `dir`; its DSN.
fn synced_sqlite(root: &Root, dir: &Path) -> String {
    let dsn = format!("sqlite:///{}/{}.db", dir.display(), root.release);
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

#[test]
fn the_api_loads_from_the_configmap_alone_and_answers_healthcheck() {
    let Some(roots) = prepared_roots("the_api_loads_from_the_configmap_alone") else {
        return;
    };
    let (config, _) = processes();
    let dir = tempfile::tempdir().unwrap();
    for root in &roots {
        // The ConfigMap as the API pod sees it at /etc/cinder, and the volume pods' filters.
        let etc = dir.path().join(format!("etc-{}", root.release));
        std::fs::create_dir_all(etc.join("rootwrap-filters")).unwrap();
        for (file, text) in &config {
            std::fs::write(etc.join(file), text).unwrap();
        }
        std::fs::write(
            etc.join("rootwrap-filters").join(ROOTWRAP_FILTERS_KEY),
            &config[ROOTWRAP_FILTERS_KEY],
        )
        .unwrap();
        let dsn = synced_sqlite(root, dir.path());
        let env = [(ENV_DB_CONNECTION, dsn.as_str())];
        let got = root
            .probe(dir.path(), &["api", etc.to_str().unwrap()], &env)
            .unwrap();
        assert_eq!(got.get("error"), None, "{}: {got}", root.release);
        assert_eq!(got["healthcheck"], 200, "{}: {got}", root.release);
        assert!(
            got["volume_filters"]
                .as_array()
                .is_some_and(|f| f.iter().any(|x| x == "status")),
            "{}: {got}",
            root.release
        );
        assert!(
            got["filters_path"]
                .as_array()
                .is_some_and(|p| p.iter().any(|x| x == "/usr/share/cinder/rootwrap")),
            "{}: {got}",
            root.release
        );
        assert_eq!(got["nfs_mount_filter"], "mount", "{}: {got}", root.release);

        // Without api-paste.ini beside cinder.conf the real loader stops, as the API did when
        // the ConfigMap hid the image's copy.
        std::fs::remove_file(etc.join("api-paste.ini")).unwrap();
        let got = root
            .probe(dir.path(), &["api", etc.to_str().unwrap()], &env)
            .unwrap();
        assert!(
            got["error"]
                .as_str()
                .is_some_and(|e| e.contains("ConfigNotFound")),
            "{}: {got}",
            root.release
        );
    }
}

#[test]
fn the_cinder_etc_files_the_configmap_carries_are_each_release_s_own() {
    let Some(roots) = prepared_roots("the_cinder_etc_files_are_each_release_s_own") else {
        return;
    };
    for root in &roots {
        let etc = root.dir.join("etc/cinder");
        for (file, content) in CINDER_ETC_FILES {
            let shipped = if file == ROOTWRAP_FILTERS_KEY {
                etc.join("rootwrap.d").join(file)
            } else {
                etc.join(file)
            };
            let shipped = std::fs::read_to_string(&shipped)
                .unwrap_or_else(|e| panic!("{}: {}: {e}", root.release, shipped.display()));
            assert_eq!(shipped, content, "{}: {file}", root.release);
        }
        let filters: Vec<_> = std::fs::read_dir(etc.join("rootwrap.d"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(filters, [ROOTWRAP_FILTERS_KEY], "{}", root.release);
    }
}

/// Runs in private mount and network namespaces: `/etc` and `/var/lib` under throwaway
/// overlays, the ConfigMap's files bound read-only at `/etc/cinder` as the pod mounts them, then
/// the API's container command (`uwsgi --ini /etc/cinder/api-uwsgi.ini`) until /healthcheck
/// answers; prints the answer and the uWSGI master's worker count, and stops uWSGI by its pid.
const API_POD: &str = r#"set -eu
T="$1"
mount --make-rprivate /
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$T/etc-up,workdir=$T/etc-work" /etc
mount -t overlay overlay -o "lowerdir=/var/lib,upperdir=$T/var-up,workdir=$T/var-work" /var/lib
mkdir -p /etc/cinder /var/lib/cinder/tmp
mount --bind "$T/cm" /etc/cinder
mount -o remount,bind,ro /etc/cinder
ip link set lo up
uwsgi --ini /etc/cinder/api-uwsgi.ini > "$T/api.log" 2>&1 &
pid=$!
code=none
i=0
while [ $i -lt 480 ]; do
  code=$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8776/healthcheck || true)
  [ "$code" = 200 ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.25
  i=$((i + 1))
done
workers=$(pgrep -c -P "$pid" || true)
echo "healthcheck=$code workers=$workers"
kill -TERM "$pid" 2>/dev/null || true
wait "$pid" || true
"#;

#[test]
fn the_api_pod_runs_its_command_on_the_configmap_and_answers_healthcheck() {
    let Some(roots) = prepared_roots("the_api_pod_runs_its_command_on_the_configmap") else {
        return;
    };
    let (cinder, _, _) = samples();
    let workers = cinder.spec.api.uwsgi.processes.max(1);
    let (config, _) = processes();
    let dir = tempfile::tempdir().unwrap();
    for root in &roots {
        let t = dir.path().join(root.release);
        for d in ["etc-up", "etc-work", "var-up", "var-work", "cm"] {
            std::fs::create_dir_all(t.join(d)).unwrap();
        }
        for (file, text) in &config {
            std::fs::write(t.join("cm").join(file), text).unwrap();
        }
        let dsn = synced_sqlite(root, dir.path());
        // The image's environment: its Python is the root's (uWSGI reads UWSGI_VIRTUALENV as
        // its `virtualenv` option); the pod's: the DSN (no broker or Keystone is contacted to
        // answer /healthcheck).
        let out = root
            .command("unshare", dir.path())
            .args(["-m", "-n", "sh", "-c", API_POD, "api-pod"])
            .arg(&t)
            .env("UWSGI_VIRTUALENV", &root.dir)
            .env(ENV_DB_CONNECTION, &dsn)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let log = std::fs::read_to_string(t.join("api.log")).unwrap_or_default();
        assert!(
            stdout.contains("healthcheck=200"),
            "{}: {stdout}{}\n{log}",
            root.release,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains(&format!("workers={workers}")),
            "{}: {stdout}",
            root.release
        );
        println!(
            "{} (cinder {}): {}",
            root.release,
            root.cinder,
            stdout.trim()
        );
    }
}
