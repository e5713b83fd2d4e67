//! The set-up every end-to-end test on real Cinder shares ([`RealCinderCluster`]): a real
//! MariaDB server and a real RabbitMQ broker on loopback, a real single-node Ceph on the host's
//! primary address, an embedded cluster whose only node is a process node with the Cinder images
//! mapped to the real Cinder roots (tests/real-cinder/setup.sh), the mariadb-operator fixture
//! reconciled against that server, the broker reachable as the sample's `rabbitmq` Service, the
//! operator in-process, and the samples of `run --embedded --real-cinder`
//! (tests/real-cinder/samples) applied at one release, their RBD backends pointed at the Ceph's
//! monitor and the store's `ceph/client.cinder` key replaced by the Ceph's key. Beside
//! it, what the tests read from the real parts: `cinder-manage` as the Cinder user, the
//! services table, the schema version, the Cinder user's connections on the server (in all, and
//! by pod), the connections the server refused, a timeline of what the samples' objects went
//! through, and [`real_cinder_roots`], the one skip rule of these tests.

use crate::deploy_helpers::repo_root;
use crate::real_cinder::{Root, prepared_roots, roots_dir};
use crate::{Harness, HarnessConfig};
use anyhow::{Context as _, bail};
use cinder_operator::crd::Cinder;
use cinder_operator::embedded::Manifest;
use cinder_operator::planning::config::ENV_DB_CONNECTION;
use cinder_sim::agent::ImageMap;
use cinder_sim::controllers::Switch;
use cinder_sim::real_servers::{CephServer, KeystoneServer, MariaDbServer, RabbitMqServer, expose};
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, ListParams};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::real_cinder::SAMPLES_NS;
/// The sample Cinder's name.
pub const CINDER: &str = "cinder";
/// The sample store's values (sim/fixtures/run-embedded/10-secret-store.yaml).
pub const DB_USER: &str = "cinder";
pub const DB_PASSWORD: &str = "sample-db-password-0c1d";
pub const RABBIT_USER: &str = "cinder";
pub const RABBIT_PASSWORD: &str = "sample-rabbit-password-93b4";
pub const RABBIT_VHOST: &str = "cinder";
/// The sample store's entry holding the cephx key of the RBD backends' users.
pub const CEPH_KEY_ENTRY: &str = "ceph/client.cinder";
/// The Cinder user's connections on the server.
const USER_CONNECTIONS: &str =
    "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'cinder'";

/// The prepared roots of every release when the real-Cinder tests can run here (root, the roots
/// with Debian's rados and rbd modules linked in, the Debian servers and Ceph). Otherwise `None` after a line saying why `test` is skipped, or a panic
/// when `CI` is set (the roots) or `CI=true` (the rest).
pub fn real_cinder_roots(test: &str) -> Option<Vec<Root>> {
    let roots = prepared_roots(test)?;
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let why = if !root {
        Some("process nodes and the service proxy need root")
    } else if !MariaDbServer::available() || !RabbitMqServer::available() {
        Some("mariadb-server or rabbitmq-server is missing: run tests/real-cinder/setup.sh")
    } else if !CephServer::available() {
        Some("the Ceph packages are missing: run tests/real-cinder/setup.sh")
    } else if !roots.iter().all(sees_ceph_bindings) {
        Some("a root does not see Debian's rados and rbd: run tests/real-cinder/setup.sh")
    } else {
        None
    };
    match why {
        None => Some(roots),
        Some(why) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("{test}: {why} (CI=true: not skipped)")
        }
        Some(why) => {
            eprintln!("skipping {test}: {why}");
            None
        }
    }
}

/// Whether `root`'s site-packages (`lib/python3.X/site-packages`) holds the `.pth` file setup.sh
/// writes for Debian's rados and rbd.
fn sees_ceph_bindings(root: &Root) -> bool {
    std::fs::read_dir(root.dir.join("lib"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|python| {
            python
                .path()
                .join("site-packages/debian-ceph.pth")
                .is_file()
        })
}

/// Points the RBD backends of `m` at `ceph` (`spec.rbd.monitors` its monitor, `spec.rbd.networks`
/// its address when the backend names networks) and puts its key in the secret store's
/// [`CEPH_KEY_ENTRY`].
pub fn use_ceph(m: &mut Manifest, ceph: &CephServer) {
    let kind = m.gvk.kind.as_str();
    if matches!(kind, "CinderBackend" | "CinderBackupBackend")
        && let Some(rbd) = m.object.data["spec"]
            .get_mut("rbd")
            .and_then(serde_json::Value::as_object_mut)
    {
        rbd.insert("monitors".into(), serde_json::json!([ceph.monitor()]));
        if rbd.contains_key("networks") {
            rbd.insert(
                "networks".into(),
                serde_json::json!([format!("{}/32", ceph.address())]),
            );
        }
    }
    if kind == "ClusterSecretStore"
        && let Some(entries) = m
            .object
            .data
            .pointer_mut("/spec/provider/fake/data")
            .and_then(serde_json::Value::as_array_mut)
    {
        for entry in entries {
            if entry["key"] == CEPH_KEY_ENTRY {
                entry["value"] = serde_json::json!({ "key": ceph.key() }).to_string().into();
            }
        }
    }
}

/// A change to a manifest before it is applied (each manifest in turn).
pub type ManifestEdit = Box<dyn Fn(&mut Manifest) + Send + Sync>;

/// Options of [`RealCinderCluster::start`].
pub struct RealCinderOptions {
    /// The samples applied (`run --embedded`'s fixtures come first, as there).
    pub samples: PathBuf,
    /// The MAX_USER_CONNECTIONS the server gives the Cinder user in place of the operator's cap
    /// (None: the operator's).
    pub user_cap: Option<i64>,
    /// The server's `max_connections` (all users).
    pub max_connections: u32,
    /// Applied to every manifest after the release is set in the Cinder.
    pub edit: Option<ManifestEdit>,
    /// A real Keystone behind the sample Cinder's `keystoneEndpoint` ([`crate::real_keystone`]).
    pub keystone: bool,
}

impl Default for RealCinderOptions {
    fn default() -> Self {
        RealCinderOptions {
            samples: repo_root().join("tests/real-cinder/samples"),
            user_cap: None,
            max_connections: 500,
            edit: None,
            keystone: false,
        }
    }
}

/// The real servers, the embedded cluster with the operator, and the samples applied.
pub struct RealCinderCluster {
    /// The release the samples were applied at.
    pub root: Root,
    pub harness: Harness,
    pub client: kube::Client,
    pub db: Arc<MariaDbServer>,
    broker: Option<RabbitMqServer>,
    ceph: Option<CephServer>,
    /// When the samples were applied.
    pub applied: Instant,
    /// A home directory for the commands run on the host.
    pub home: tempfile::TempDir,
    /// The real Keystone (`RealCinderOptions::keystone`).
    pub keystone: Option<Arc<KeystoneServer>>,
    /// The Cinder API's URL in Keystone's catalog (with the real Keystone).
    pub api_url: Option<String>,
}

/// One row of `cinder-manage service list`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceRow {
    pub binary: String,
    pub host: String,
    pub zone: String,
    pub status: String,
    /// `:-)` or `XXX`.
    pub state: String,
    pub updated: String,
    /// The RPC and object versions, as listed.
    pub rpc_version: String,
    pub object_version: String,
}

impl ServiceRow {
    /// The rows of `cinder-manage service list`'s output.
    pub fn parse(text: &str) -> Vec<ServiceRow> {
        text.lines()
            .skip_while(|l| !l.starts_with("Binary"))
            .skip(1)
            .filter_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                // Binary Host Zone Status State Updated-At (date time) RPC Object Cluster
                if w.len() < 6 {
                    return None;
                }
                let rest = &w[5..];
                let (updated, versions) = match rest.first() {
                    Some(&"None") => ("None".to_string(), &rest[1..]),
                    _ if rest.len() >= 2 => (format!("{} {}", rest[0], rest[1]), &rest[2..]),
                    _ => (rest.join(" "), &rest[rest.len()..]),
                };
                Some(ServiceRow {
                    binary: w[0].into(),
                    host: w[1].into(),
                    zone: w[2].into(),
                    status: w[3].into(),
                    state: w[4].into(),
                    updated,
                    rpc_version: versions.first().copied().unwrap_or_default().into(),
                    object_version: versions.get(1).copied().unwrap_or_default().into(),
                })
            })
            .collect()
    }
}

impl RealCinderCluster {
    /// Starts the servers and the cluster and applies the samples at `root`'s release (the RBD
    /// backends pointed at the real Ceph, whichever samples and edit `opts` has).
    pub async fn start(root: &Root, opts: RealCinderOptions) -> anyhow::Result<Self> {
        let started = Instant::now();
        let max_connections = opts.max_connections;
        let (db, broker, ceph) = tokio::join!(
            tokio::task::spawn_blocking(move || MariaDbServer::start(max_connections)),
            tokio::task::spawn_blocking(RabbitMqServer::start),
            tokio::task::spawn_blocking(CephServer::start),
        );
        let db = Arc::new(db?.map_err(anyhow::Error::msg)?);
        let keystone = opts
            .keystone
            .then(|| tokio::spawn(crate::real_keystone::start_keystone(Arc::clone(&db))));
        let broker = broker?.map_err(anyhow::Error::msg)?;
        let ceph = ceph?.map_err(|e| anyhow::anyhow!("starting Ceph: {e}"))?;
        let broker = tokio::task::spawn_blocking(move || {
            broker
                .add_user(RABBIT_USER, RABBIT_PASSWORD, RABBIT_VHOST)
                .map(|()| broker)
        })
        .await?
        .map_err(anyhow::Error::msg)?;
        eprintln!(
            "real servers up after {:.1} s",
            started.elapsed().as_secs_f64()
        );

        let mut config = HarnessConfig::default();
        config.cluster.service_proxy = true;
        config.cluster.controllers.nodes.count = 0;
        config.cluster.controllers.nodes.process = 1;
        config.cluster.controllers.mariadb.switch = Switch::on(Duration::from_millis(10));
        config.cluster.controllers.mariadb.real = Some(Arc::clone(&db));
        config.cluster.controllers.mariadb.user_cap = opts.user_cap;
        config.cluster.process_runtime.images = ImageMap::with_real_cinder(&roots_dir());
        let harness = Harness::start_with(config).await?;
        let client = harness.client.clone();

        // The broker's Service first: a pod's /etc/hosts names the Services there when it starts.
        crate::fixtures::create_namespace(&client, SAMPLES_NS).await?;
        expose(&client, SAMPLES_NS, "rabbitmq", 5672, broker.port()).await?;
        let keystone = match keystone {
            Some(started) => {
                let keystone = Arc::new(started.await??);
                crate::real_keystone::serve_keystone(&client, &keystone).await?;
                Some(keystone)
            }
            None => None,
        };
        let mut manifests = cinder_operator::embedded::read_bootstrap(&opts.samples)?;
        for m in &mut manifests {
            use_ceph(m, &ceph);
            if m.gvk.kind == "Cinder" {
                m.object.data["spec"]["openStackRelease"] = root.release.into();
                m.object.data["spec"]["image"]["tag"] = root.release.into();
                if keystone.is_some() {
                    m.object.data["spec"]["keystoneEndpoint"] =
                        crate::real_keystone::pod_url().into();
                }
            }
            if let Some(edit) = &opts.edit {
                edit(m);
            }
        }
        let applied = Instant::now();
        cinder_operator::embedded::apply(&client, &manifests).await?;
        let api_url = match &keystone {
            Some(k) => Some(crate::real_keystone::register_cinder(&client, k).await?),
            None => None,
        };
        Ok(RealCinderCluster {
            root: root.clone(),
            harness,
            client,
            db,
            broker: Some(broker),
            ceph: Some(ceph),
            applied,
            home: tempfile::tempdir()?,
            keystone,
            api_url,
        })
    }

    /// The sample Cinder.
    pub async fn cinder(&self) -> anyhow::Result<Cinder> {
        let api: Api<Cinder> = Api::namespaced(self.client.clone(), SAMPLES_NS);
        Ok(api.get(CINDER).await?)
    }

    /// Waits until `done` holds of the Cinder, a progress line every 20 s; `Err` after
    /// `timeout`, with the conditions and pods. Returns the time waited.
    pub async fn wait_cinder(
        &self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&Cinder) -> bool,
    ) -> anyhow::Result<Duration> {
        let api: Api<Cinder> = Api::namespaced(self.client.clone(), SAMPLES_NS);
        let since = Instant::now();
        let mut last = Instant::now();
        loop {
            if let Ok(Some(c)) = api.get_opt(CINDER).await
                && done(&c)
            {
                return Ok(since.elapsed());
            }
            if since.elapsed() > timeout {
                bail!(
                    "{what}: not within {} s\n  {}\n  pods: {}",
                    timeout.as_secs(),
                    self.conditions_line().await,
                    self.pods_line().await
                );
            }
            if last.elapsed() > Duration::from_secs(20) {
                eprintln!(
                    "[{:>4} s] {what}: {}\n         pods: {}",
                    since.elapsed().as_secs(),
                    self.conditions_line().await,
                    self.pods_line().await
                );
                last = Instant::now();
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// Waits until the Cinder is Ready (its observed generation current).
    pub async fn wait_ready(&self, timeout: Duration) -> anyhow::Result<Duration> {
        self.wait_cinder("Ready", timeout, |c| {
            let status = c.status.as_ref();
            let current = status.and_then(|s| s.observed_generation) == c.metadata.generation;
            current
                && status.is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True")
                })
        })
        .await
    }

    /// The Cinder's conditions, one line.
    pub async fn conditions_line(&self) -> String {
        crate::waiting::cinder_conditions_in(&self.client, SAMPLES_NS, CINDER)
            .await
            .iter()
            .map(|c| format!("{}={}/{}", c.type_, c.status, c.reason))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The samples' pods with their phase and waiting reasons, one line.
    pub async fn pods_line(&self) -> String {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), SAMPLES_NS);
        let list = pods
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        list.iter()
            .map(|p| {
                let name = p.metadata.name.clone().unwrap_or_default();
                let status = p.status.as_ref();
                let phase = status.and_then(|s| s.phase.clone()).unwrap_or_default();
                let waiting: Vec<String> = status
                    .and_then(|s| s.container_statuses.clone())
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|c| {
                        let w = c.state.as_ref()?.waiting.as_ref()?;
                        Some(format!(
                            "{}:{}",
                            c.name,
                            w.reason.clone().unwrap_or_default()
                        ))
                    })
                    .collect();
                if waiting.is_empty() {
                    format!("{name}={phase}")
                } else {
                    format!("{name}={phase}({})", waiting.join(","))
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// `cinder-manage ARGS` of `root` against the server as the Cinder user: its stdout, or
    /// `Err` with its stderr.
    pub async fn cinder_manage_of(&self, root: &Root, args: &[&str]) -> anyhow::Result<String> {
        self.cinder_manage_as(root, DB_PASSWORD, args).await
    }

    /// `cinder-manage ARGS` of `root` as the Cinder user with `password`.
    pub async fn cinder_manage_as(
        &self,
        root: &Root,
        password: &str,
        args: &[&str],
    ) -> anyhow::Result<String> {
        let dsn = format!(
            "mysql+pymysql://{DB_USER}:{password}@127.0.0.1:{}/cinder?charset=utf8",
            self.db.port()
        );
        let mut c = root.command("cinder-manage", self.home.path());
        c.args(args).env(ENV_DB_CONNECTION, dsn);
        let what = format!("cinder-manage {args:?} of {}", root.release);
        let out = tokio::task::spawn_blocking(move || c.output())
            .await?
            .with_context(|| format!("running {what}"))?;
        if !out.status.success() {
            bail!(
                "{what}: {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `cinder-manage ARGS` of the release the samples were applied at.
    pub async fn cinder_manage(&self, args: &[&str]) -> anyhow::Result<String> {
        self.cinder_manage_of(&self.root, args).await
    }

    /// The services table as `cinder-manage service list` of `root` shows it.
    pub async fn service_list_of(&self, root: &Root) -> anyhow::Result<Vec<ServiceRow>> {
        Ok(ServiceRow::parse(
            &self.cinder_manage_of(root, &["service", "list"]).await?,
        ))
    }

    /// The services table, by the applied release's `cinder-manage`.
    pub async fn service_list(&self) -> anyhow::Result<Vec<ServiceRow>> {
        self.service_list_of(&self.root).await
    }

    /// `cinder-manage db version` (its last line) of `root`.
    pub async fn db_version_of(&self, root: &Root) -> anyhow::Result<String> {
        let out = self.cinder_manage_of(root, &["db", "version"]).await?;
        Ok(out.lines().last().unwrap_or_default().trim().to_owned())
    }

    /// `cinder-manage db version` of the applied release.
    pub async fn db_version(&self) -> anyhow::Result<String> {
        self.db_version_of(&self.root).await
    }

    /// `root`'s alembic head (`probe.py alembic-head`).
    pub fn alembic_head(&self, root: &Root) -> anyhow::Result<String> {
        let head = root.probe(self.home.path(), &["alembic-head"], &[])?;
        head[0]
            .as_str()
            .map(str::to_owned)
            .context("probe.py alembic-head answered no revision")
    }

    /// The Cinder user's connections on the server now.
    pub async fn user_connections(&self) -> anyhow::Result<usize> {
        let n = self
            .db
            .sql(USER_CONNECTIONS)
            .await
            .map_err(anyhow::Error::msg)?;
        n.trim()
            .parse()
            .with_context(|| format!("the connection count {n:?}"))
    }

    /// The Cinder user's MAX_USER_CONNECTIONS on the server.
    pub async fn user_cap(&self) -> anyhow::Result<usize> {
        let n = self
            .db
            .sql("SELECT max_user_connections FROM mysql.user WHERE User = 'cinder'")
            .await
            .map_err(anyhow::Error::msg)?;
        n.trim()
            .parse()
            .with_context(|| format!("the user's cap {n:?}"))
    }

    /// How many connection attempts the server refused since it started (its
    /// `Aborted_connects`: a login over a user's cap, MySQL error 1226, is one, as are a
    /// wrong password and a client gone before its handshake). MariaDB keeps no per-user count
    /// of 1226 (USER_STATISTICS' DENIED_CONNECTIONS stays 0 for it).
    pub async fn refused_connections(&self) -> anyhow::Result<usize> {
        let n = self
            .db
            .sql("SHOW GLOBAL STATUS LIKE 'Aborted_connects'")
            .await
            .map_err(anyhow::Error::msg)?;
        let value = n.split_whitespace().nth(1).unwrap_or_default();
        value
            .parse()
            .with_context(|| format!("Aborted_connects {n:?}"))
    }

    /// The Cinder user's connections sampled every `every` until the returned sampler is
    /// stopped.
    pub fn sample_connections(&self, every: Duration) -> ConnectionSampler {
        let db = Arc::clone(&self.db);
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            let mut samples = Vec::new();
            let since = Instant::now();
            loop {
                if let Ok(n) = db.sql(USER_CONNECTIONS).await
                    && let Ok(n) = n.trim().parse::<usize>()
                {
                    samples.push((since.elapsed(), n));
                }
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = stopped.changed() => break,
                }
            }
            samples
        });
        ConnectionSampler { stop, task }
    }

    /// Records what the samples' objects go through, every `every`, until stopped.
    pub fn record_timeline(&self, every: Duration) -> TimelineRecorder {
        let client = self.client.clone();
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            let since = Instant::now();
            let mut seen: BTreeMap<String, String> = BTreeMap::new();
            let mut timeline = Timeline::default();
            loop {
                let now = snapshot(&client).await;
                let t = since.elapsed();
                for (k, v) in &now {
                    if seen.get(k) != Some(v) {
                        timeline.changes.push((t, k.clone(), v.clone()));
                    }
                }
                for k in seen.keys() {
                    if k.starts_with("pod/") && !now.contains_key(k) {
                        timeline.changes.push((t, k.clone(), "gone".into()));
                    }
                }
                seen = now;
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = stopped.changed() => break,
                }
            }
            timeline
        });
        TimelineRecorder { stop, task }
    }

    /// The open connections to the MariaDB Service, by the pod (or host address) they come
    /// from: the service proxy's accepted connections on the Service's ClusterIP (the server
    /// sees the proxy, the proxy sees the pod).
    pub async fn database_connections_by_pod(&self) -> anyhow::Result<BTreeMap<String, usize>> {
        let services: Api<Service> = Api::namespaced(self.client.clone(), SAMPLES_NS);
        let ip = services
            .get("mariadb")
            .await?
            .spec
            .and_then(|s| s.cluster_ip)
            .context("the mariadb Service has no ClusterIP")?;
        let out = tokio::process::Command::new("ss")
            .args(["-Htn", "state", "established", "src"])
            .arg(format!("{ip}:3306"))
            .output()
            .await
            .context("running ss")?;
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), SAMPLES_NS);
        let by_ip: BTreeMap<String, String> = pods
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter_map(|p| Some((p.status.as_ref()?.pod_ip.clone()?, p.metadata.name.clone()?)))
            .collect();
        let mut counts = BTreeMap::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            // Recv-Q Send-Q Local Peer
            let Some(peer) = line.split_whitespace().nth(3) else {
                continue;
            };
            let peer_ip = peer.rsplit_once(':').map_or(peer, |(ip, _)| ip);
            let who = by_ip
                .get(peer_ip)
                .cloned()
                .unwrap_or_else(|| peer_ip.to_owned());
            *counts.entry(who).or_insert(0) += 1;
        }
        Ok(counts)
    }

    /// Each sample pod's log.
    pub async fn pod_logs(&self) -> anyhow::Result<Vec<(String, String)>> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), SAMPLES_NS);
        let mut out = Vec::new();
        for pod in pods.list(&ListParams::default()).await?.items {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let text = pods
                .logs(&name, &Default::default())
                .await
                .unwrap_or_default();
            out.push((name, text));
        }
        Ok(out)
    }

    /// The API's `/healthcheck` status through its Service's ClusterIP.
    pub async fn api_health(&self) -> anyhow::Result<String> {
        let services: Api<Service> = Api::namespaced(self.client.clone(), SAMPLES_NS);
        let ip = services
            .get("cinder-api")
            .await?
            .spec
            .and_then(|s| s.cluster_ip)
            .context("the cinder-api Service has no ClusterIP")?;
        http_status(
            &format!("http://{ip}:8776/healthcheck"),
            &[],
            Duration::from_secs(10),
        )
        .await
    }

    /// The broker.
    pub fn broker(&self) -> Option<&RabbitMqServer> {
        self.broker.as_ref()
    }

    /// The Ceph cluster.
    pub fn ceph(&self) -> Option<&CephServer> {
        self.ceph.as_ref()
    }

    /// Stops the operator, the cluster (its pods and proxy) and the servers, each by its pid.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let stopped = self.harness.stop().await;
        let broker = self.broker.take();
        let keystone = self.keystone.take();
        tokio::task::spawn_blocking(move || drop(keystone)).await?;
        let ceph = self.ceph.take();
        drop(self.db);
        tokio::task::spawn_blocking(move || {
            drop(broker);
            drop(ceph);
        })
        .await?;
        stopped
    }
}

/// A running sample of the Cinder user's connections ([`RealCinderCluster::sample_connections`]).
pub struct ConnectionSampler {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<Vec<(Duration, usize)>>,
}

impl ConnectionSampler {
    /// Stops sampling; every (time since the start, connections) sample.
    pub async fn stop(self) -> Vec<(Duration, usize)> {
        let _ = self.stop.send(true);
        self.task.await.unwrap_or_default()
    }
}

/// What the samples' objects went through, recorded by polling
/// ([`RealCinderCluster::record_timeline`]): every change of a watched value, with the time
/// since the recording started. Keys: `cinder/phase`, `cinder/installedRelease`,
/// `cinder/<condition type>` (status/reason), `deployment/<name>/image` (the template's image
/// tag), `deployment/<name>/installed-release` (the template's annotation),
/// `deployment/<name>/rolled` (every replica updated and ready, none old), `job/<name>`
/// (created, active, succeeded or failed) and `pod/<name>` (phase, ready or not, gone).
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    pub changes: Vec<(Duration, String, String)>,
}

impl Timeline {
    /// When `key` first had `value`.
    pub fn first(&self, key: &str, value: &str) -> Option<Duration> {
        self.changes
            .iter()
            .find(|(_, k, v)| k == key && v == value)
            .map(|(t, _, _)| *t)
    }

    /// When `key` first had a value `pred` accepts.
    pub fn first_where(&self, key: &str, pred: impl Fn(&str) -> bool) -> Option<Duration> {
        self.changes
            .iter()
            .find(|(_, k, v)| k == key && pred(v))
            .map(|(t, _, _)| *t)
    }

    /// The values `key` took, in order, with their times.
    pub fn values(&self, key: &str) -> Vec<(Duration, &str)> {
        self.changes
            .iter()
            .filter(|(_, k, _)| k == key)
            .map(|(t, _, v)| (*t, v.as_str()))
            .collect()
    }

    /// Every change, one line each.
    pub fn lines(&self) -> String {
        self.changes
            .iter()
            .map(|(t, k, v)| format!("{:>7.2} s  {k} = {v}", t.as_secs_f64()))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A running recording ([`RealCinderCluster::record_timeline`]).
pub struct TimelineRecorder {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<Timeline>,
}

impl TimelineRecorder {
    /// Stops recording; what was recorded.
    pub async fn stop(self) -> Timeline {
        let _ = self.stop.send(true);
        self.task.await.unwrap_or_default()
    }
}

/// The watched values of the samples now (see [`Timeline`]).
async fn snapshot(client: &kube::Client) -> BTreeMap<String, String> {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::batch::v1::Job;
    let mut out = BTreeMap::new();
    let cinders: Api<Cinder> = Api::namespaced(client.clone(), SAMPLES_NS);
    if let Ok(Some(c)) = cinders.get_opt(CINDER).await
        && let Some(s) = c.status
    {
        out.insert(
            "cinder/phase".into(),
            s.upgrade_phase
                .map_or_else(|| "-".to_string(), |p| p.as_str().to_string()),
        );
        out.insert(
            "cinder/installedRelease".into(),
            s.installed_release.unwrap_or_else(|| "-".into()),
        );
        for c in s.conditions {
            out.insert(
                format!("cinder/{}", c.type_),
                format!("{}/{}", c.status, c.reason),
            );
        }
    }
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), SAMPLES_NS);
    for d in deployments
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        let name = d.metadata.name.clone().unwrap_or_default();
        let spec = Some(&d.spec);
        let template = spec.and_then(|s| s.template.spec.as_ref());
        let image = template
            .and_then(|t| t.containers.first())
            .and_then(|c| c.image.clone())
            .unwrap_or_default();
        let tag = image.rsplit_once(':').map_or(image.as_str(), |(_, t)| t);
        out.insert(format!("deployment/{name}/image"), tag.to_string());
        let annotation = spec
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.annotations.as_ref())
            .and_then(|a| a.get(cinder_operator::names::INSTALLED_RELEASE_ANNOTATION))
            .cloned();
        if let Some(a) = annotation {
            out.insert(format!("deployment/{name}/installed-release"), a);
        }
        let want = spec.and_then(|s| s.replicas).unwrap_or(1);
        let st = d.status.clone().unwrap_or_default();
        let rolled = st.observed_generation >= d.metadata.generation
            && st.updated_replicas.unwrap_or(0) == want
            && st.ready_replicas.unwrap_or(0) == want
            && st.replicas.unwrap_or(0) == want;
        out.insert(format!("deployment/{name}/rolled"), rolled.to_string());
    }
    let jobs: Api<Job> = Api::namespaced(client.clone(), SAMPLES_NS);
    for j in jobs
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        let name = j.metadata.name.clone().unwrap_or_default();
        let st = j.status.clone().unwrap_or_default();
        let state = if st.succeeded.unwrap_or(0) > 0 {
            "succeeded"
        } else if st.failed.unwrap_or(0) > 0 && st.active.unwrap_or(0) == 0 {
            "failed"
        } else if st.active.unwrap_or(0) > 0 {
            "active"
        } else {
            "created"
        };
        out.insert(format!("job/{name}"), state.to_string());
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), SAMPLES_NS);
    for p in pods
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        let name = p.metadata.name.clone().unwrap_or_default();
        let st = p.status.clone().unwrap_or_default();
        let ready = st
            .conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        let phase = st.phase.unwrap_or_default();
        let value = if p.metadata.deletion_timestamp.is_some() {
            format!("{phase} terminating")
        } else if ready {
            format!("{phase} ready")
        } else {
            phase
        };
        out.insert(format!("pod/{name}"), value);
    }
    out
}

/// The highest of `samples`.
pub fn peak(samples: &[(Duration, usize)]) -> usize {
    samples.iter().map(|(_, n)| *n).max().unwrap_or(0)
}

/// The HTTP status code of a GET of `url` with `headers` (`Name: value`) from the host, by curl,
/// within `max_time` ("000" when nothing answered).
pub async fn http_status(
    url: &str,
    headers: &[String],
    max_time: Duration,
) -> anyhow::Result<String> {
    let mut curl = tokio::process::Command::new("curl");
    curl.args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time"])
        .arg(max_time.as_secs().max(1).to_string());
    for header in headers {
        curl.args(["-H", header]);
    }
    let out = curl.arg(url).output().await.context("running curl")?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_list_rows_are_read() {
        let text = "Binary           Host                                 Zone             Status     State Updated At           RPC Version  Object Version  Cluster                             \n\
cinder-scheduler cinder                               nova             enabled    :-)   2026-12-07 12:00:01  3.12         1.39                                                \n\
cinder-volume    cinder@ceph                          nova             enabled    XXX   None                 3.17         1.39                                                \n";
        let rows = ServiceRow::parse(text);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].binary, "cinder-scheduler");
        assert_eq!(rows[0].updated, "2026-12-07 12:00:01");
        assert_eq!(rows[0].rpc_version, "3.12");
        assert_eq!(rows[0].object_version, "1.39");
        assert_eq!(rows[1].host, "cinder@ceph");
        assert_eq!(rows[1].state, "XXX");
        assert_eq!(rows[1].updated, "None");
        assert_eq!(rows[1].rpc_version, "3.17");
    }
}
