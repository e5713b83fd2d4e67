//! What the client tests share: finding kubectl, running it against a cluster with its own
//! cache directory, and a cluster with its controllers off plus a kubectl for it.

use cinder_sim::controllers::ControllersConfig;
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::process::Command;

pub fn kubectl_path() -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("kubectl"))
            .find(|p| p.is_file())
    })
}

pub struct Kubectl {
    pub bin: PathBuf,
    pub kubeconfig: PathBuf,
    pub cache: PathBuf,
}

pub struct Out {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Kubectl {
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.env("KUBECONFIG", &self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args);
        c
    }

    pub async fn run(&self, args: &[&str]) -> Out {
        let out = tokio::time::timeout(Duration::from_secs(120), self.cmd(args).output())
            .await
            .expect("kubectl finished")
            .expect("kubectl ran");
        Out {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into(),
            stderr: String::from_utf8_lossy(&out.stderr).into(),
        }
    }

    pub async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(out.ok, "kubectl {args:?} failed: {}", out.stderr);
        out.stdout
    }
}

/// The minor version of the kubectl client.
async fn client_minor(bin: &Path) -> Option<u32> {
    let out = Command::new(bin)
        .args(["version", "--client", "-o", "json"])
        .output()
        .await
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let minor = v["clientVersion"]["minor"].as_str()?;
    minor.trim_end_matches('+').parse().ok()
}

pub fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

/// A cluster with its controllers off and a kubectl ≥ 1.27 for it (with a temporary directory
/// for files and kubectl's cache); None, after printing why, when no such kubectl is on PATH.
pub async fn cluster_and_kubectl() -> Option<(EmbeddedCluster, Kubectl, tempfile::TempDir)> {
    cluster_and_kubectl_with(ClusterConfig {
        controllers: ControllersConfig::all_off(),
        ..ClusterConfig::default()
    })
    .await
}

/// A cluster with the simulated controllers `controllers` and a kubectl ≥ 1.27 for it, as
/// [`cluster_and_kubectl`].
pub async fn cluster_with_controllers_and_kubectl(
    controllers: ControllersConfig,
) -> Option<(EmbeddedCluster, Kubectl, tempfile::TempDir)> {
    cluster_and_kubectl_with(ClusterConfig {
        controllers,
        ..ClusterConfig::default()
    })
    .await
}

/// Like [`cluster_and_kubectl`], for a cluster started with `config`.
pub async fn cluster_and_kubectl_with(
    config: ClusterConfig,
) -> Option<(EmbeddedCluster, Kubectl, tempfile::TempDir)> {
    let Some(bin) = kubectl_path() else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "no kubectl on PATH (.ci/run installs one)"
        );
        println!("skipped: no kubectl on PATH (CI installs one)");
        return None;
    };
    match client_minor(&bin).await {
        Some(minor) if minor >= 27 => {}
        other => {
            println!("skipped: kubectl ≥ 1.27 needed (found minor version {other:?})");
            return None;
        }
    }
    let c = EmbeddedCluster::start(config).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let k = Kubectl {
        bin,
        kubeconfig: c.kubeconfig_path().to_path_buf(),
        cache: dir.path().join("cache"),
    };
    Some((c, k, dir))
}
