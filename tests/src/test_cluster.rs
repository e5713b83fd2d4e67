//! The cluster an end-to-end scenario runs on, chosen by the environment variable
//! [`CLUSTER_ENV`]: the embedded cluster (unset or `embedded`, the default), or a real
//! Kubernetes control plane (`real`): tests/control-plane/'s kube-apiserver,
//! kube-controller-manager and kube-scheduler, with the simulated nodes and their kubelet and
//! the fixture controllers of the third-party kinds running beside it as its API clients
//! ([`ControllersConfig::beside_real_control_plane`]). A scenario gets the same admin
//! `client` either way; what only the embedded cluster has (fault injection, the request and
//! write records) is refused on the real one with a message naming it.

use crate::real_cluster::{self, RealControlPlane};
use anyhow::{Context as _, bail};
use cinder_sim::controllers::{ControllersConfig, ControllersHandle};
use cinder_sim::{ClusterConfig, EmbeddedCluster, FaultHandle, RequestRecord, WriteRecord};
use kube::Client;
use std::path::{Path, PathBuf};

/// The environment variable choosing the cluster: `real` or `embedded` (the default).
pub const CLUSTER_ENV: &str = "CINDER_E2E_CLUSTER";

/// Which cluster [`CLUSTER_ENV`] asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The embedded cluster (`cinder-sim`).
    Embedded,
    /// A real control plane (tests/control-plane/).
    Real,
}

impl Backend {
    /// What [`CLUSTER_ENV`] says; an unknown value is an error naming the accepted ones.
    pub fn from_env() -> anyhow::Result<Backend> {
        match std::env::var(CLUSTER_ENV).as_deref() {
            Err(_) | Ok("") | Ok("embedded") => Ok(Backend::Embedded),
            Ok("real") => Ok(Backend::Real),
            Ok(other) => bail!("{CLUSTER_ENV}={other:?}: expected \"real\" or \"embedded\""),
        }
    }
}

/// A real control plane with the simulated nodes, kubelet and fixture controllers against it.
pub struct RealCluster {
    plane: RealControlPlane,
    client: Client,
    controllers: Option<ControllersHandle>,
}

impl RealCluster {
    /// Starts the control plane from tests/control-plane/'s binary, installs the fixture
    /// CRDs `controllers.fixtures` selects, registers the simulated nodes and starts the
    /// controllers of `controllers` that a real control plane lacks (the rules and delays a
    /// test chose are kept).
    pub async fn start(controllers: ControllersConfig) -> anyhow::Result<RealCluster> {
        let Some(bin) = real_cluster::binary() else {
            bail!(
                "{CLUSTER_ENV}=real: no control-plane binary at ${} or {} (tests/control-plane/build.sh builds it)",
                real_cluster::BINARY_ENV,
                real_cluster::DEFAULT_BINARY
            );
        };
        let plane = RealControlPlane::start(&bin).await?;
        println!(
            "real control plane ready in {:.1} s (logs in {})",
            plane.started_in().as_secs_f64(),
            plane.log_dir().display()
        );
        let client = plane.client().await?;
        let config = controllers.beside_real_control_plane();
        cinder_sim::controllers::install_fixture_set(client.clone(), config.fixtures)
            .await
            .context("installing the fixture CRDs on the real control plane")?;
        cinder_sim::controllers::register_nodes(&client, &config)
            .await
            .map_err(|e| anyhow::anyhow!("registering the simulated nodes: {e}"))?;
        let controllers = cinder_sim::controllers::spawn(client.clone(), config);
        Ok(RealCluster {
            plane,
            client,
            controllers: Some(controllers),
        })
    }

    /// The control plane (its kubeconfig, logs, pid).
    pub fn plane(&self) -> &RealControlPlane {
        &self.plane
    }

    /// Stops the controllers, then the control plane (every process it started).
    pub async fn shutdown(mut self) {
        if let Some(controllers) = self.controllers.take() {
            controllers.shutdown().await;
        }
        let plane = self.plane;
        // Dropping it waits for its processes to stop: off the async workers.
        let _ = tokio::task::spawn_blocking(move || drop(plane)).await;
    }
}

/// The cluster under a scenario.
pub enum TestCluster {
    Embedded(Box<EmbeddedCluster>),
    Real(Box<RealCluster>),
}

impl TestCluster {
    /// Starts the cluster [`CLUSTER_ENV`] chooses with `config` (on a real control plane only
    /// `config.controllers` applies: the API server is the real one).
    pub async fn start(config: ClusterConfig) -> anyhow::Result<TestCluster> {
        match Backend::from_env()? {
            Backend::Embedded => {
                let cluster = EmbeddedCluster::start(config).await?;
                Ok(TestCluster::Embedded(Box::new(cluster)))
            }
            Backend::Real => {
                let cluster = RealCluster::start(config.controllers).await?;
                Ok(TestCluster::Real(Box::new(cluster)))
            }
        }
    }

    /// Which kind of cluster this is.
    pub fn backend(&self) -> Backend {
        match self {
            TestCluster::Embedded(_) => Backend::Embedded,
            TestCluster::Real(_) => Backend::Real,
        }
    }

    /// An administrator's client.
    pub async fn client(&self) -> Client {
        match self {
            TestCluster::Embedded(c) => c.client().await,
            TestCluster::Real(r) => r.client.clone(),
        }
    }

    /// The administrator's kubeconfig file.
    pub fn kubeconfig_path(&self) -> PathBuf {
        match self {
            TestCluster::Embedded(c) => c.kubeconfig_path().to_path_buf(),
            TestCluster::Real(r) => r.plane.kubeconfig_path().to_path_buf(),
        }
    }

    /// The simulated controllers (Job rules, the Job run record, CronJob triggers).
    pub fn controllers(&self) -> Option<&ControllersHandle> {
        match self {
            TestCluster::Embedded(c) => c.controllers(),
            TestCluster::Real(r) => r.controllers.as_ref(),
        }
    }

    /// The embedded cluster, when that is what this is.
    pub fn embedded(&self) -> Option<&EmbeddedCluster> {
        match self {
            TestCluster::Embedded(c) => Some(c),
            TestCluster::Real(_) => None,
        }
    }

    /// The embedded cluster, or a panic naming `feature`: a scenario that uses it does not
    /// run on a real control plane (docs/embedded-cluster.md lists them).
    fn embedded_for(&self, feature: &str) -> &EmbeddedCluster {
        match self {
            TestCluster::Embedded(c) => c,
            TestCluster::Real(_) => panic!(
                "{feature} exists only on the embedded cluster: this scenario does not run with {CLUSTER_ENV}=real"
            ),
        }
    }

    /// Fault injection (embedded cluster only).
    pub fn faults(&self) -> FaultHandle {
        self.embedded_for("fault injection").faults()
    }

    /// The request record (embedded cluster only).
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.embedded_for("the request record").requests()
    }

    /// The write record (embedded cluster only).
    pub fn writes(&self) -> Vec<WriteRecord> {
        self.embedded_for("the write record").writes()
    }

    /// The administrator's kubeconfig.
    pub fn kubeconfig_yaml(&self) -> String {
        match self {
            TestCluster::Embedded(c) => c.kubeconfig_yaml(),
            TestCluster::Real(r) => {
                std::fs::read_to_string(r.plane.kubeconfig_path()).unwrap_or_default()
            }
        }
    }

    /// A kubeconfig naming this cluster with `token` as the user (None: the administrator).
    pub fn kubeconfig_yaml_with(&self, token: Option<&str>) -> anyhow::Result<String> {
        match (self, token) {
            (TestCluster::Embedded(c), None) => Ok(c.kubeconfig_yaml()),
            (TestCluster::Embedded(c), Some(token)) => {
                Ok(cinder_sim::kubeconfig::kubeconfig_yaml(&c.url(), token))
            }
            (TestCluster::Real(r), None) => Ok(std::fs::read_to_string(r.plane.kubeconfig_path())?),
            (TestCluster::Real(r), Some(token)) => {
                token_kubeconfig(r.plane.kubeconfig_path(), token)
            }
        }
    }

    /// Stops the cluster and everything started for it.
    pub async fn shutdown(self) {
        match self {
            TestCluster::Embedded(c) => c.shutdown().await,
            TestCluster::Real(r) => r.shutdown().await,
        }
    }
}

/// The admin kubeconfig at `path` with its user replaced by a bearer `token` (same server and CA).
fn token_kubeconfig(path: &Path, token: &str) -> anyhow::Result<String> {
    let mut kubeconfig = kube::config::Kubeconfig::read_from(path)?;
    for user in &mut kubeconfig.auth_infos {
        user.auth_info = Some(kube::config::AuthInfo {
            token: Some(token.to_string().into()),
            ..Default::default()
        });
    }
    Ok(serde_norway::to_string(&kubeconfig)?)
}

/// A cluster whose simulated controllers a helper reaches (Job rules, the Job run record,
/// CronJob triggers): a [`TestCluster`], or an [`EmbeddedCluster`] a test started itself.
pub trait HasControllers {
    /// The simulated controllers, if they run.
    fn controllers(&self) -> Option<&ControllersHandle>;

    /// On a real control plane, an admin client of it (its kube-controller-manager runs the
    /// CronJobs: a helper fires one as `kubectl create job --from=cronjob/...` does).
    fn real_client(&self) -> Option<Client> {
        None
    }
}

impl HasControllers for TestCluster {
    fn controllers(&self) -> Option<&ControllersHandle> {
        TestCluster::controllers(self)
    }

    fn real_client(&self) -> Option<Client> {
        match self {
            TestCluster::Embedded(_) => None,
            TestCluster::Real(r) => Some(r.client.clone()),
        }
    }
}

impl HasControllers for EmbeddedCluster {
    fn controllers(&self) -> Option<&ControllersHandle> {
        EmbeddedCluster::controllers(self)
    }
}
