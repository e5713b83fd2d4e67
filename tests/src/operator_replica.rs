//! One operator replica of a benchmark: the benchmark's own binary re-run as
//! `<bench> operator run ...` ([`run_if_replica`] is the child's side) against the management
//! cluster's kubeconfig, its endpoints read from its stdout, its resident memory and CPU time
//! from /proc, its passes from the admin endpoint's `/pipelines` and its metrics from
//! `/metrics`. Shared by `fleetbench` and `soakbench`.

use anyhow::{Context as _, bail};
use cinder_operator::pipeline::PipelineRecord;
use clap::Parser as _;
use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

/// Clock ticks per second of /proc/<pid>/stat (USER_HZ, 100 on Linux).
const TICKS_PER_SECOND: u64 = 100;

/// A running replica.
pub struct Replica {
    child: Child,
    pid: u32,
    admin: String,
    probes: String,
    metrics: String,
}

/// The operator's options a replica runs with.
pub struct ReplicaOptions {
    pub kube_qps: f32,
    pub kube_burst: u32,
    pub max_concurrent_reconciles: u16,
    /// `--shards`, when sharded.
    pub shards: Option<u32>,
}

/// `http://host:port` at the start of the first word after `label` on a line.
fn url_after(line: &str, label: &str) -> Option<String> {
    let rest = line.strip_prefix(label)?.trim_start();
    let url = rest.split_whitespace().next()?;
    let url = url.strip_prefix("http://")?;
    Some(url.split('/').next()?.to_string())
}

impl Replica {
    /// Starts a replica against `kubeconfig` and waits until it says where its endpoints are.
    pub async fn start(kubeconfig: &Path, options: &ReplicaOptions) -> anyhow::Result<Replica> {
        Self::start_with(kubeconfig, options, &[]).await
    }

    /// [`Self::start`] with `extra` arguments after the options' own.
    pub async fn start_with(
        kubeconfig: &Path,
        options: &ReplicaOptions,
        extra: &[&str],
    ) -> anyhow::Result<Replica> {
        let exe = std::env::current_exe().context("cannot find this executable")?;
        let shards = options
            .shards
            .map(|s| vec!["--shards".to_string(), s.to_string()])
            .unwrap_or_default();
        let mut child = Command::new(exe)
            .args([
                "operator",
                "run",
                // The embedded cluster's Service names do not resolve on this host.
                "--health-check-through-api-server",
                "--metrics-bind",
                "127.0.0.1:0",
                "--probe-bind",
                "127.0.0.1:0",
                "--admin-bind",
                "127.0.0.1:0",
                "--log-level",
                "error",
                "--kube-qps",
                &options.kube_qps.to_string(),
                "--kube-burst",
                &options.kube_burst.to_string(),
                "--max-concurrent-reconciles",
                &options.max_concurrent_reconciles.to_string(),
            ])
            .args(shards)
            .args(extra)
            .env("KUBECONFIG", kubeconfig)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context("cannot start an operator replica")?;
        let pid = child.id().context("the replica has no pid")?;
        let stdout = child.stdout.take().context("the replica has no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let (mut admin, mut probes, mut metrics) = (None, None, None);
        let found = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await? {
                if let Some(u) = url_after(&line, "admin:") {
                    admin = Some(u);
                }
                if let Some(u) = url_after(&line, "probes:") {
                    probes = Some(u);
                }
                if let Some(u) = url_after(&line, "metrics:") {
                    metrics = Some(u);
                }
                if admin.is_some() && probes.is_some() && metrics.is_some() {
                    break;
                }
            }
            anyhow::Ok(())
        })
        .await;
        let (Ok(Ok(())), Some(admin), Some(probes), Some(metrics)) =
            (found, admin, probes, metrics)
        else {
            bail!("the replica did not print its admin, probe and metrics endpoints within 60 s");
        };
        // Keep draining stdout so the replica never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Replica {
            child,
            pid,
            admin,
            probes,
            metrics,
        })
    }

    /// Waits until `/readyz` answers 200.
    pub async fn wait_ready(&self, within: Duration) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Ok((200, _)) = http_get(&self.probes, "/readyz").await {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                bail!("the replica was not ready within {within:?}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Resident memory (bytes).
    pub fn rss_bytes(&self) -> anyhow::Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))?;
        let kb = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .context("no VmRSS in /proc/<pid>/status")?;
        Ok(kb * 1024)
    }

    /// User plus system CPU time so far.
    pub fn cpu(&self) -> anyhow::Result<Duration> {
        stat_cpu(&format!("/proc/{}/stat", self.pid))
    }

    /// User plus system CPU time so far of the replica's thread named `name` (the operator's
    /// actor thread is `cinder-actors`).
    pub fn thread_cpu(&self, name: &str) -> anyhow::Result<Duration> {
        let tasks = format!("/proc/{}/task", self.pid);
        for task in std::fs::read_dir(&tasks)? {
            let dir = task?.path();
            let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
            if comm.trim_end() == name {
                return stat_cpu(&dir.join("stat").to_string_lossy());
            }
        }
        bail!("the replica has no thread named {name}")
    }

    /// The shards the replica holds (its admin `/shards`).
    pub async fn held_shards(&self) -> anyhow::Result<Vec<u32>> {
        let (status, body) = http_get(&self.admin, "/shards").await?;
        if status != 200 {
            bail!("/shards answered {status}");
        }
        #[derive(serde::Deserialize)]
        struct View {
            held: Vec<u32>,
        }
        let view: View = serde_json::from_slice(&body).context("/shards has no list `held`")?;
        Ok(view.held)
    }

    /// The replica's pipeline records.
    pub async fn pipelines(&self) -> anyhow::Result<Vec<PipelineRecord>> {
        #[derive(serde::Deserialize)]
        struct View {
            pipelines: Vec<PipelineRecord>,
            total: usize,
        }
        // By pages: a fleet's whole view is above the admin endpoint's response limit.
        const PAGE: usize = 20;
        let mut records = Vec::new();
        loop {
            let path = format!("/pipelines?offset={}&limit={PAGE}", records.len());
            let (status, body) = http_get(&self.admin, &path).await?;
            if status != 200 {
                bail!("{path} answered {status}");
            }
            let view: View = serde_json::from_slice(&body)
                .context("/pipelines is not an object with a list of pipeline records")?;
            let done = view.pipelines.is_empty();
            records.extend(view.pipelines);
            if done || records.len() >= view.total {
                return Ok(records);
            }
        }
    }

    /// The replica's `/metrics` page (OpenMetrics text).
    pub async fn metrics_text(&self) -> anyhow::Result<String> {
        let (status, body) = http_get(&self.metrics, "/metrics").await?;
        if status != 200 {
            bail!("/metrics answered {status}");
        }
        Ok(String::from_utf8_lossy(&body).into_owned())
    }

    /// Ends the replica with SIGTERM and waits for its orderly shutdown (SIGKILL after `grace`).
    pub async fn stop(mut self, grace: Duration) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status();
        if tokio::time::timeout(grace, self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// The child's side of [`Replica::start`]: when this process was started as
/// `<bench> operator run ...`, runs the operator's `run` subcommand with those arguments and
/// returns its exit status; `None` for the benchmark itself. `bench` names the program in
/// error lines.
pub fn run_if_replica(bench: &str) -> Option<ExitCode> {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) != Some("operator") {
        return None;
    }
    let cli = match cinder_operator::cli::Cli::try_parse_from(
        std::iter::once("cinder-operator".to_string()).chain(argv[2..].iter().cloned()),
    ) {
        Ok(cli) => cli,
        Err(e) => {
            eprintln!(
                "{bench} operator: {}",
                cinder_operator::cli::one_line_error(&e)
            );
            return Some(ExitCode::from(2));
        }
    };
    Some(match cli.command {
        cinder_operator::cli::Command::Run(run) => cinder_operator::cmd_run::run(&run),
        _ => {
            eprintln!("{bench} operator: only the run subcommand starts a replica");
            ExitCode::from(2)
        }
    })
}

/// A plain HTTP/1.0 GET: the status code and the body.
async fn http_get(addr: &str, path: &str) -> anyhow::Result<(u16, Vec<u8>)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("no end of the HTTP headers")?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .context("no HTTP status")?;
    Ok((status, raw[split + 4..].to_vec()))
}

/// A benchmark binary's `main`: the operator when started as a replica (see
/// [`run_if_replica`]); otherwise `bench` (which parses its own arguments) on a multi-thread
/// runtime, its report printed to stdout, an error as one line on stderr and status 1.
pub fn bench_main<F, Fut>(name: &str, bench: F) -> ExitCode
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<String>>,
{
    if let Some(status) = run_if_replica(name) {
        return status;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{name}: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(bench()) {
        Ok(report) => {
            print!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{name}: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// User plus system CPU time in a `/proc/.../stat` file (a process's or a thread's).
fn stat_cpu(path: &str) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(path)?;
    // The fields after the command name (which may hold spaces) start after the last ')'.
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok());
    let (Some(user), Some(system)) = (ticks(11), ticks(12)) else {
        bail!("unreadable {path}");
    };
    Ok(Duration::from_millis(
        (user + system) * 1000 / TICKS_PER_SECOND,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_read_from_the_startup_lines() {
        assert_eq!(
            url_after(
                "admin:   http://127.0.0.1:4242/ (HTML) http://127.0.0.1:4242/actors",
                "admin:"
            ),
            Some("127.0.0.1:4242".to_string())
        );
        assert_eq!(
            url_after(
                "probes:  http://127.0.0.1:99/healthz http://127.0.0.1:99/readyz",
                "probes:"
            ),
            Some("127.0.0.1:99".to_string())
        );
        assert_eq!(url_after("metrics: http://x/metrics", "admin:"), None);
    }
}
