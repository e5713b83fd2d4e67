//! The real Kubernetes control plane under the tests: it owns finding the multicall binary that
//! `tests/control-plane/build.sh` built (it builds nothing), running its `start` command as a
//! child process (etcd, kube-apiserver, kube-controller-manager and kube-scheduler on loopback,
//! each a child of that one), reading the admin kubeconfig it writes, and stopping it by its pid
//! on drop: `start` stops its components and removes its own temporary directory, and its
//! components die with it if it is killed (their parent-death signal).

use anyhow::{Context as _, bail};
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The environment variable naming the binary (overrides [`DEFAULT_BINARY`]).
pub const BINARY_ENV: &str = "CINDER_CONTROL_PLANE_BIN";
/// Where `tests/control-plane/build.sh` links the binary it built or found cached.
pub const DEFAULT_BINARY: &str = "/var/tmp/cinder-control-plane/cinder-control-plane";
/// How long `start` may take to report ready on a loaded 2-core machine (it allows each
/// component 180 s itself).
const START_TIMEOUT: Duration = Duration::from_secs(300);
/// How long `start` has to stop its components before it is killed (each gets 15 s).
const STOP_GRACE: Duration = Duration::from_secs(70);

/// The control-plane binary: `$CINDER_CONTROL_PLANE_BIN` when set, else [`DEFAULT_BINARY`];
/// `None` when that file does not exist.
pub fn binary() -> Option<PathBuf> {
    let path = std::env::var_os(BINARY_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_BINARY));
    path.is_file().then_some(path)
}

/// What a real-control-plane test does without the binary: `Ok(None)` (the caller prints a
/// SKIPPED line and returns) outside CI, an error under `CI=true`, where
/// `.ci/run` has built it and its absence is a failure.
pub fn binary_for_test(test: &str) -> anyhow::Result<Option<PathBuf>> {
    if let Some(bin) = binary() {
        return Ok(Some(bin));
    }
    let wanted = std::env::var_os(BINARY_ENV)
        .map(|p| PathBuf::from(p).display().to_string())
        .unwrap_or_else(|| DEFAULT_BINARY.to_string());
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        bail!(
            "{test}: the control-plane binary {wanted} is missing (tests/control-plane/build.sh builds it)"
        );
    }
    println!(
        "SKIPPED {test}: no control-plane binary at {wanted} (run tests/control-plane/build.sh)"
    );
    Ok(None)
}

/// One running control plane; dropping it stops it.
pub struct RealControlPlane {
    child: Child,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    started_in: Duration,
}

impl RealControlPlane {
    /// Runs `<bin> start` with the admin kubeconfig and the logs in a fresh temporary directory
    /// and waits until it prints `export KUBECONFIG=` (every component healthy).
    pub async fn start(bin: &Path) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("cinder-real-cluster-")
            .tempdir()?;
        let kubeconfig = dir.path().join("admin.kubeconfig");
        let stdout_path = dir.path().join("start.out");
        let stderr_path = dir.path().join("start.err");
        let child = Command::new(bin)
            .arg("start")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--log-dir")
            .arg(dir.path().join("logs"))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout_path)?)
            .stderr(std::fs::File::create(&stderr_path)?)
            .spawn()
            .with_context(|| format!("running {} start", bin.display()))?;
        let began = Instant::now();
        let mut plane = RealControlPlane {
            child,
            dir,
            kubeconfig,
            started_in: Duration::ZERO,
        };
        loop {
            let out = std::fs::read_to_string(&stdout_path).unwrap_or_default();
            if out.lines().any(|l| l.starts_with("export KUBECONFIG=")) {
                plane.started_in = began.elapsed();
                return Ok(plane);
            }
            if let Some(status) = plane.child.try_wait()? {
                bail!(
                    "{} start exited {status} before it was ready:\n{}",
                    bin.display(),
                    std::fs::read_to_string(&stderr_path).unwrap_or_default()
                );
            }
            if began.elapsed() > START_TIMEOUT {
                bail!(
                    "{} start not ready after {START_TIMEOUT:?}:\n{}",
                    bin.display(),
                    std::fs::read_to_string(&stderr_path).unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The admin kubeconfig (user in group system:masters).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// How long `start` took until every component was healthy.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// The components' log folder (`<component>.log`), for a failing test's message.
    pub fn log_dir(&self) -> PathBuf {
        self.dir.path().join("logs")
    }

    /// What `start` printed on stderr: its ready line and each component's pid and RSS.
    pub fn start_report(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("start.err")).unwrap_or_default()
    }

    /// The temporary directory `start` reported (`start: temporary directory DIR`), which it
    /// removes when it stops.
    pub fn start_dir(&self) -> Option<PathBuf> {
        self.start_report()
            .lines()
            .find_map(|l| l.strip_prefix("start: temporary directory "))
            .map(PathBuf::from)
    }

    /// A client with the admin kubeconfig's identity.
    pub async fn client(&self) -> anyhow::Result<Client> {
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig)?;
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
        Ok(Client::try_from(config)?)
    }

    /// The pid of the `start` process.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for RealControlPlane {
    /// SIGTERM to `start` by its pid, which stops its components and removes its temporary
    /// directory; SIGKILL after [`STOP_GRACE`] (its components then die with it, and the
    /// directory is removed here).
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A killed `start` cannot remove its temporary directory.
        if let Some(dir) = self.start_dir() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
