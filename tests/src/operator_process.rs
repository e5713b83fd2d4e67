//! The operator binary as its own process against an embedded cluster, for the crash tests: the
//! program built with the tests (the `operator-under-test` binary of this package), started
//! through the cluster's kubeconfig with free ports and a pod name of its own (so its Lease
//! holder identity says which process it was), killed with SIGKILL, and restarted; plus the
//! seeded schedule of kill points.

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use rand::{Rng as _, SeedableRng as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// The operator program for the process tests: the `operator-under-test` binary of this package
/// (`cinder_operator::entry::main`), which cargo builds beside the test executables, with the
/// same features, before it runs an integration test of this package. A caller outside
/// `cargo test` (a benchmark run by `cargo run --bin`) gets it built on first use.
pub fn operator_binary() -> anyhow::Result<PathBuf> {
    static BINARY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BINARY
        .get_or_init(|| find_or_build().map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(anyhow::Error::msg)
}

/// The profile folder (`target/debug`) of this executable: a test executable lives in its
/// `deps/`, a binary in the folder itself.
fn profile_dir() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let parent = exe.parent().context("the executable has no folder")?;
    let dir = if parent.ends_with("deps") {
        parent.parent().context("deps/ has no parent")?
    } else {
        parent
    };
    Ok(dir.to_path_buf())
}

fn find_or_build() -> anyhow::Result<PathBuf> {
    let dir = profile_dir()?;
    let bin = dir.join(OPERATOR_BIN);
    if bin.is_file() {
        return Ok(bin);
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let target = dir.parent().context("the profile folder has no parent")?;
    let out = Command::new(&cargo)
        .args(["build", "-p", "cinder-e2e", "--bin", OPERATOR_BIN])
        .env("CARGO_TARGET_DIR", target)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .output()
        .context("running cargo build for the operator binary")?;
    anyhow::ensure!(
        out.status.success(),
        "cargo build --bin {OPERATOR_BIN} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    anyhow::ensure!(bin.is_file(), "{} was not built", bin.display());
    Ok(bin)
}

/// The binary of this package that is the operator program.
const OPERATOR_BIN: &str = "operator-under-test";

/// One running `cinder-operator run` process.
pub struct OperatorProcess {
    child: Child,
    /// Its pod name (`POD_NAME`): the prefix of its holder identity.
    pub pod: String,
    /// Where its stderr goes.
    pub log: PathBuf,
    /// Where its stdout goes (the endpoint addresses it prints).
    pub out: PathBuf,
}

impl OperatorProcess {
    /// Starts `cinder-operator run` against the cluster of `kubeconfig`, Leases in
    /// `lease_namespace`, `lease_duration_s` per Lease, logs at info into a file of `log_dir`.
    pub fn start(
        kubeconfig: &Path,
        pod: &str,
        lease_namespace: &str,
        lease_duration_s: u64,
        log_dir: &Path,
    ) -> anyhow::Result<OperatorProcess> {
        Self::start_with(
            kubeconfig,
            pod,
            lease_namespace,
            lease_duration_s,
            log_dir,
            &[],
        )
    }

    /// [`OperatorProcess::start`] with more `run` flags (e.g. `--shards 4`).
    pub fn start_with(
        kubeconfig: &Path,
        pod: &str,
        lease_namespace: &str,
        lease_duration_s: u64,
        log_dir: &Path,
        flags: &[&str],
    ) -> anyhow::Result<OperatorProcess> {
        let bin = operator_binary()?;
        let log = log_dir.join(format!("{pod}.log"));
        let stderr = std::fs::File::create(&log)?;
        let out = log_dir.join(format!("{pod}.out"));
        let stdout = std::fs::File::create(&out)?;
        let duration = lease_duration_s.to_string();
        let child = Command::new(bin)
            .args([
                "run",
                // The embedded cluster's Service names do not resolve on this host.
                "--health-check-through-api-server",
                "--metrics-bind",
                "127.0.0.1:0",
                "--probe-bind",
                "127.0.0.1:0",
                "--admin-bind",
                "127.0.0.1:0",
                "--lock-arbiters",
                "1",
                "--lease-duration",
                &duration,
                "--log-level",
                "info",
            ])
            .args(flags)
            .env("KUBECONFIG", kubeconfig)
            .env("POD_NAME", pod)
            .env("POD_NAMESPACE", lease_namespace)
            .env_remove("RUST_LOG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .context("starting the operator binary")?;
        Ok(OperatorProcess {
            child,
            pod: pod.to_string(),
            log,
            out,
        })
    }

    /// SIGKILL, then reaps it; when it died.
    pub fn kill(&mut self) -> anyhow::Result<DateTime<Utc>> {
        // An exited process is reaped by try_wait; killing it again is not an error to report.
        if self.child.try_wait()?.is_none() {
            self.child.kill()?;
        }
        self.child.wait()?;
        Ok(Utc::now())
    }

    /// The exit status when it already exited (a crash the test did not cause).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The address of the metrics endpoint it printed (`metrics: http[s]://host:port/metrics`),
    /// once it did.
    pub fn metrics_address(&self) -> Option<std::net::SocketAddr> {
        let text = std::fs::read_to_string(&self.out).ok()?;
        text.lines()
            .filter_map(|l| l.strip_prefix("metrics: "))
            .find_map(|rest| {
                let rest = rest
                    .strip_prefix("https://")
                    .or(rest.strip_prefix("http://"))?;
                rest.split('/').next()?.parse().ok()
            })
    }

    /// The last `lines` lines of its stderr.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The seed of a randomized test: `var` when set (to repeat a failure), else the clock.
pub fn seed_from_env(var: &str) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0)
        })
}

/// A count from the environment variable `var`, else `default`.
pub fn count_from_env(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

/// Seeded random delays before each kill, uniform in `[min, max]`.
pub struct KillSchedule {
    rng: rand::rngs::StdRng,
    min: Duration,
    max: Duration,
}

impl KillSchedule {
    pub fn new(seed: u64, min: Duration, max: Duration) -> KillSchedule {
        KillSchedule {
            rng: rand::rngs::StdRng::seed_from_u64(seed),
            min,
            max: max.max(min),
        }
    }

    /// How long to let the current process run before the next kill.
    pub fn next_delay(&mut self) -> Duration {
        let ms = self
            .rng
            .random_range(self.min.as_millis() as u64..=self.max.as_millis() as u64);
        Duration::from_millis(ms)
    }
}
