//! The `cinder-operator run` binary: `--embedded` with free ports starts, prints
//! `export KUBECONFIG=`, the endpoint URLs and progress until every sample is Ready, serves the
//! endpoints, and exits 0 on SIGTERM; bad and out-of-range flags exit 2; bad or unreachable
//! kubeconfigs, a busy port and a non-loopback admin address without `--admin-auth` exit 1; each
//! with one line on stderr. `cinder-operator sim` with fault flags fails about the configured
//! share of requests, and its `/sim/faults` endpoint reads and changes the settings.

use crate::support::*;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_cinder-operator");

fn temp_path(what: &str) -> PathBuf {
    std::env::temp_dir().join(format!("cinder-run-test-{}-{what}", uuid::Uuid::new_v4()))
}

/// Runs the binary to completion; returns (exit code, stdout, stderr).
fn run_to_end(args: &[&str], envs: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_remove("RUST_LOG")
        .env_remove("KUBERNETES_SERVICE_HOST");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_one_line(stderr: &str, contains: &str) {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "exactly one line on stderr, got: {stderr:?}"
    );
    assert!(
        lines[0].contains(contains),
        "{:?} should mention {contains:?}",
        lines[0]
    );
}

const FREE_PORTS: [&str; 6] = [
    "--metrics-bind",
    "127.0.0.1:0",
    "--probe-bind",
    "127.0.0.1:0",
    "--admin-bind",
    "127.0.0.1:0",
];

fn address_after(line: &str, prefix: &str) -> SocketAddr {
    let rest = line
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("{line:?} starts with {prefix:?}"))
        .trim_start();
    let hostport = rest
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap();
    hostport
        .parse()
        .unwrap_or_else(|e| panic!("{hostport:?}: {e}"))
}

struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    /// Waits (up to 120 s) for a stdout line satisfying `f`.
    fn wait_line(&mut self, what: &str, f: impl Fn(&str) -> bool) -> String {
        self.wait_line_for(Duration::from_secs(120), what, f)
    }

    /// Waits up to `limit` for a stdout line satisfying `f`.
    fn wait_line_for(&mut self, limit: Duration, what: &str, f: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            match self.lines.recv_timeout(Duration::from_millis(200)) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if f(&line) {
                        return line;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        panic!("no stdout line for {what}; saw: {:#?}", self.seen);
    }

    fn rest_of_stdout(&mut self) -> Vec<String> {
        let mut rest = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            rest.push(line);
        }
        rest
    }
}

fn spawn(args: &[&str]) -> Running {
    let mut child = Command::new(BIN)
        .args(args)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary starts");
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    std::thread::spawn(move || {
        let mut sink = String::new();
        let _ = stderr.read_to_string(&mut sink);
        eprint!("{sink}");
    });
    Running {
        child,
        lines,
        seen: Vec::new(),
    }
}

fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the operator did not exit within 90 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_run_prints_kubeconfig_serves_and_exits_0_on_sigterm() {
    let kubeconfig = temp_path("kubeconfig");
    let samples = samples_dir();
    let mut args = vec!["run", "--embedded", "--sim-port", "0", "--kubeconfig-out"];
    let kubeconfig_arg = kubeconfig.display().to_string();
    let samples_arg = samples.display().to_string();
    args.push(&kubeconfig_arg);
    args.extend(["--samples", &samples_arg]);
    args.extend(FREE_PORTS);
    let mut run = spawn(&args);

    let export = run.wait_line("export KUBECONFIG=", |l| {
        l.starts_with("export KUBECONFIG=")
    });
    assert_eq!(
        export,
        format!("export KUBECONFIG={}", kubeconfig.display())
    );
    let written = std::fs::read_to_string(&kubeconfig).unwrap();
    assert!(written.contains("server: http://127.0.0.1:"), "{written}");
    let metrics = address_after(
        &run.wait_line("metrics URL", |l| l.starts_with("metrics:")),
        "metrics:",
    );
    let probes = address_after(
        &run.wait_line("probe URLs", |l| l.starts_with("probes:")),
        "probes:",
    );
    let admin = address_after(
        &run.wait_line("admin URLs", |l| l.starts_with("admin:")),
        "admin:",
    );
    run.wait_line("progress of the sample Cinder", |l| {
        l.starts_with("Cinder openstack/cinder ") && l.contains("SecretsReady=")
    });

    assert_eq!(get(probes, "/healthz").await.status, 200);
    let m = get(metrics, "/metrics").await;
    assert_eq!(m.status, 200);
    parse_openmetrics(&m.body).unwrap_or_else(|e| panic!("{e}\n{}", m.body));
    let page = get(admin, "/").await;
    assert_eq!(page.status, 200);
    assert_no_secret("the admin HTML view", &page.body, &sample_secret_values());

    // The simulated cluster runs the database Jobs and rolls out the Deployments: every sample
    // ends Ready (a generous bound: this waits on simulated controllers on a loaded machine).
    run.wait_line_for(Duration::from_secs(300), "every sample Ready", |l| {
        l.starts_with("every sample is Ready")
    });
    let cinder_line = run
        .seen
        .iter()
        .rev()
        .find(|l| l.starts_with("Cinder openstack/cinder "))
        .cloned()
        .unwrap_or_default();
    assert!(
        cinder_line.contains("Ready=True(AllReady)"),
        "{cinder_line}"
    );

    let pid = run.child.id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(killed.success());
    let status = wait_exit(&mut run.child);
    assert_eq!(
        status.code(),
        Some(0),
        "exit status after SIGTERM: {status:?}"
    );
    let rest = run.rest_of_stdout();
    assert!(rest.iter().any(|l| l == "stopped"), "{rest:?}");
    let _ = std::fs::remove_file(&kubeconfig);
}

#[test]
fn bad_flags_exit_2_with_one_line() {
    let (code, _, stderr) = run_to_end(&["run", "--no-such-flag"], &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert_one_line(&stderr, "--no-such-flag");
    // Out of range: each names its flag.
    for (flag, value) in [
        ("--lease-duration", "0"),
        ("--lease-duration", "3601"),
        ("--kube-burst", "0"),
        ("--max-concurrent-reconciles", "0"),
    ] {
        let (code, _, stderr) = run_to_end(&["run", flag, value], &[]);
        assert_eq!(code, Some(2), "{flag} {value}: {stderr}");
        assert_one_line(&stderr, flag);
    }
}

#[test]
fn unreadable_kubeconfig_exits_1_with_one_line() {
    let path = temp_path("garbage.kubeconfig");
    std::fs::write(&path, "clusters: [").unwrap();
    let mut args = vec!["run"];
    args.extend(FREE_PORTS);
    let (code, _, stderr) = run_to_end(&args, &[("KUBECONFIG", path.to_str().unwrap())]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_one_line(&stderr, "cannot load a Kubernetes configuration");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn unreachable_api_server_exits_1_with_one_line() {
    // A port nothing listens on: bind one, note it, close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let path = temp_path("unreachable.kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{port}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user: {{}}\n"
        ),
    )
    .unwrap();
    let mut args = vec!["run"];
    args.extend(FREE_PORTS);
    let (code, _, stderr) = run_to_end(&args, &[("KUBECONFIG", path.to_str().unwrap())]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_one_line(&stderr, "cannot reach the Kubernetes API server");
    let _ = std::fs::remove_file(&path);
}

/// Runs `run --embedded` (the samples, a kubeconfig of its own) with `--metrics-bind metrics`,
/// `--admin-bind admin` and a free probe port, to its end; (exit code, stderr).
fn embedded_run_with_binds(metrics: &str, admin: &str) -> (Option<i32>, String) {
    let kubeconfig = temp_path("kubeconfig");
    let samples = samples_dir();
    let (code, _, stderr) = run_to_end(
        &[
            "run",
            "--embedded",
            "--kubeconfig-out",
            kubeconfig.to_str().unwrap(),
            "--samples",
            samples.to_str().unwrap(),
            "--metrics-bind",
            metrics,
            "--probe-bind",
            "127.0.0.1:0",
            "--admin-bind",
            admin,
        ],
        &[],
    );
    let _ = std::fs::remove_file(&kubeconfig);
    (code, stderr)
}

#[test]
fn busy_port_exits_1_with_one_line() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy_addr = busy.local_addr().unwrap().to_string();
    let (code, stderr) = embedded_run_with_binds(&busy_addr, "127.0.0.1:0");
    assert_eq!(code, Some(1), "{stderr}");
    assert_one_line(&stderr, "cannot listen for the metrics endpoint");
    drop(busy);
}

#[test]
fn a_non_loopback_admin_address_without_admin_auth_exits_1_with_one_line() {
    let (code, stderr) = embedded_run_with_binds("127.0.0.1:0", "0.0.0.0:0");
    assert_eq!(code, Some(1), "{stderr}");
    assert_one_line(
        &stderr,
        "refusing a non-loopback address without --admin-auth",
    );
}

#[test]
fn a_broken_sample_exits_1_naming_the_file_before_starting_anything() {
    let dir = temp_path("samples");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("broken.yaml"),
        "apiVersion: v1\nmetadata: {name: x}\n",
    )
    .unwrap();
    let mut args = vec!["run", "--embedded", "--samples", dir.to_str().unwrap()];
    args.extend(FREE_PORTS);
    let (code, stdout, stderr) = run_to_end(&args, &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_one_line(&stderr, "broken.yaml, document 0");
    assert!(!stdout.contains("export KUBECONFIG"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn leader_election_with_an_unreadable_kubeconfig_exits_1_with_one_line() {
    let path = temp_path("garbage-leader.kubeconfig");
    std::fs::write(&path, "clusters: [").unwrap();
    let mut args = vec!["run", "--leader-elect"];
    args.extend(FREE_PORTS);
    let (code, _, stderr) = run_to_end(&args, &[("KUBECONFIG", path.to_str().unwrap())]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_one_line(&stderr, "cannot load a Kubernetes configuration");
    let _ = std::fs::remove_file(&path);
}

/// Runs `run` (free ports) against `cluster` through its kubeconfig; (exit code, stderr).
async fn run_against(cluster: &cinder_sim::EmbeddedCluster) -> (Option<i32>, String) {
    let kubeconfig = cluster.kubeconfig_path().to_string_lossy().into_owned();
    tokio::task::spawn_blocking(move || {
        let mut args = vec!["run"];
        args.extend(FREE_PORTS);
        let (code, _, stderr) = run_to_end(&args, &[("KUBECONFIG", kubeconfig.as_str())]);
        (code, stderr)
    })
    .await
    .expect("the binary ran")
}

async fn cluster_with_kubeconfig(what: &str) -> cinder_sim::EmbeddedCluster {
    cinder_sim::EmbeddedCluster::start(cinder_sim::ClusterConfig {
        kubeconfig_path: Some(temp_path(what)),
        ..Default::default()
    })
    .await
    .expect("the embedded cluster starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_crd_exits_1_naming_it_and_how_to_install_it() {
    // The simulator serves the third-party CRDs but not the operator's own until installed.
    let cluster = cluster_with_kubeconfig("no-crds.kubeconfig").await;
    let (code, stderr) = run_against(&cluster).await;
    assert_eq!(code, Some(1), "{stderr}");
    assert_one_line(&stderr, "cinders.cinder.openstack.c5c3.io is not installed");
    assert_one_line(&stderr, "kubectl apply -k deploy/crds");
    let _ = std::fs::remove_file(cluster.kubeconfig_path());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_rbac_for_a_watched_kind_exits_1_naming_verb_and_resource() {
    let cluster = cluster_with_kubeconfig("no-rbac.kubeconfig").await;
    cinder_operator::embedded::install_crds(&cluster.client().await)
        .await
        .expect("the CRDs install");
    // What a real API server answers a service account without `list` on Secrets.
    cluster
        .faults()
        .add_error_rule(cinder_sim::faults::ErrorRule::always(
            Some("list"),
            Some("secrets"),
            403,
        ));
    let (code, stderr) = run_against(&cluster).await;
    assert_eq!(code, Some(1), "{stderr}");
    assert_one_line(&stderr, "may not list secrets cluster-wide");
    assert_one_line(&stderr, "grant the verbs list and watch on secrets");
    let _ = std::fs::remove_file(cluster.kubeconfig_path());
    cluster.shutdown().await;
}

/// `PUT path` with a JSON body (HTTP/1.1, Connection: close); the status code.
async fn put_json(addr: SocketAddr, path: &str, body: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!(
        "PUT {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.expect("read");
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status line")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_with_fault_flags_fails_the_configured_share() {
    let kubeconfig = temp_path("sim-kubeconfig");
    let path = kubeconfig.to_string_lossy().into_owned();
    let mut sim = spawn(&[
        "sim",
        "--port",
        "0",
        "--kubeconfig",
        &path,
        "--fault-error-rate",
        "0.25",
        "--fault-verbs",
        "create",
        "--fault-error-code",
        "500",
        "--fault-seed",
        "7",
    ]);
    let line = sim.wait_line("the listening line", |l| {
        l.starts_with("embedded cluster (simulator) listening on")
    });
    let addr = address_after(&line, "embedded cluster (simulator) listening on");

    let settings = get_json(addr, "/sim/faults").await;
    assert_eq!(settings["errors"][0]["verb"], "create");
    assert_eq!(settings["errors"][0]["probability"], 0.25);
    assert_eq!(settings["seed"], 7);

    let kc = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client, "default");
    let (total, mut failed) = (400, 0);
    for i in 0..total {
        let cm =
            serde_json::from_value(serde_json::json!({"metadata": {"name": format!("cm-{i}")}}))
                .unwrap();
        match api.create(&Default::default(), &cm).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 500 => failed += 1,
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
    // binomial(400, 0.25): mean 100, standard deviation about 8.7; 5 deviations either side
    println!("{failed} of {total} creates failed at --fault-error-rate 0.25");
    assert!(
        (57..=143).contains(&failed),
        "{failed} of {total} creates failed at rate 0.25"
    );
    // reads are not faulted
    api.list(&Default::default()).await.unwrap();

    assert_eq!(
        put_json(addr, "/sim/faults", r#"{"errors": []}"#).await,
        200
    );
    for i in 0..20 {
        let cm =
            serde_json::from_value(serde_json::json!({"metadata": {"name": format!("after-{i}")}}))
                .unwrap();
        api.create(&Default::default(), &cm).await.unwrap();
    }
    assert_eq!(
        put_json(addr, "/sim/faults", r#"{"watchDropProbability": 3}"#).await,
        400
    );

    let pid = sim.child.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(wait_exit(&mut sim.child).success());
    let _ = std::fs::remove_file(&kubeconfig);
}
