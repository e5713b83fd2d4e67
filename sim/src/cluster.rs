//! `EmbeddedCluster`: starts the HTTP server on 127.0.0.1 (and an HTTPS one when RBAC is enforced), the garbage collector, writes a
//! kubeconfig, installs the third-party CRD fixtures, spawns the simulated controllers and, when
//! asked, the service proxy (with RBAC enforced too, the `kubernetes` Service pods reach the API
//! by: [`in_cluster`]); offers
//! a client, in-process reads of the store, the request record and fault injection at runtime;
//! shuts everything down in order.

use crate::api::{self, AppState};
use crate::auth::{Auth, AuthorizationMode};
use crate::controllers::{self, ControllersConfig, ControllersHandle};
use crate::error::SimError;
use crate::faults::{FaultConfig, FaultHandle};
use crate::gc;
use crate::in_cluster;
use crate::kubeconfig::kubeconfig_yaml_with_ca;
use crate::netproxy::{HostInterface, ServiceProxy};
use crate::objects::Engine;
use crate::objects::service_ips::{DEFAULT_SERVICE_CIDR, ServiceCidr};
use crate::registry::Registry;
use crate::requests::{RequestLog, RequestRecord};
use crate::store::Store;
use crate::writes::{WriteLog, WriteRecord};
use actix_web::{App, HttpServer, web};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How to start an embedded cluster.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// Port on 127.0.0.1; 0 chooses a free one.
    pub port: u16,
    /// Where to write the kubeconfig; None writes it in a temporary directory.
    pub kubeconfig_path: Option<PathBuf>,
    pub controllers: ControllersConfig,
    pub faults: FaultConfig,
    /// Watch events kept for resuming watches (older versions answer 410 Gone).
    pub history_window: usize,
    /// Requests kept in the request record (and writes in the write record).
    pub request_log_capacity: usize,
    /// Record only the requests whose user agent starts with this (None: every request).
    pub request_log_user_agent: Option<String>,
    /// Keep the write record: every mutating request with the Leases read just before and just
    /// after it was served (`EmbeddedCluster::writes`). Off by default.
    pub record_writes: bool,
    /// HTTP worker threads.
    pub workers: usize,
    /// How requests are authorized (every request is authenticated either way).
    pub authorization: AuthorizationMode,
    /// Run a userspace service proxy ([`crate::netproxy`]): every Service ClusterIP is held on
    /// a host interface of this cluster's own and forwards to the Service's ready endpoints.
    /// Needs root and iproute2; for clusters whose pods have real addresses (process nodes).
    /// Off by default.
    pub service_proxy: bool,
    /// The range of Service ClusterIPs. None: `10.96.0.0/16`, or with `service_proxy` the
    /// block the proxy's interface claims (a /20 no other running cluster uses).
    pub service_cidr: Option<ServiceCidr>,
    /// The runtime of the process nodes (`controllers.nodes.process` of them): the image map
    /// and back-off (see docs/embedded-cluster.md).
    pub process_runtime: crate::agent::RuntimeConfig,
}

/// How long a client may take to send a request's head before the server answers 408: the
/// Kubernetes API server's request timeout (60 s), not the web framework's 5 s, so a loaded
/// machine slows requests down instead of failing them.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// How long an idle keep-alive connection stays open: the Kubernetes API server's idle timeout
/// (90 s, the keep-alive of Go's and hyper's client pools), not the web framework's 5 s, so a
/// client reusing a pooled connection does not race the server closing it.
pub const KEEP_ALIVE: Duration = Duration::from_secs(90);

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            port: 0,
            kubeconfig_path: None,
            controllers: ControllersConfig::default(),
            faults: FaultConfig::default(),
            history_window: 50_000,
            request_log_capacity: 200_000,
            request_log_user_agent: None,
            record_writes: false,
            workers: 2,
            authorization: AuthorizationMode::default(),
            service_proxy: false,
            service_cidr: None,
            process_runtime: crate::agent::RuntimeConfig::default(),
        }
    }
}

/// A running embedded cluster.
pub struct EmbeddedCluster {
    url: String,
    kubeconfig_path: PathBuf,
    kubeconfig: String,
    _tempdir: Option<tempfile::TempDir>,
    engine: Engine,
    faults: FaultHandle,
    log: RequestLog,
    writes: WriteLog,
    auth: Auth,
    client: kube::Client,
    controllers: Option<ControllersHandle>,
    proxy: Option<ServiceProxy>,
    agent: Option<crate::agent::Agent>,
    server: actix_web::dev::ServerHandle,
    stop: tokio::sync::watch::Sender<bool>,
    gc_task: Option<tokio::task::JoinHandle<()>>,
    /// Keeps `kube-root-ca.crt` and the `default` ServiceAccount in every namespace.
    namespace_defaults_task: Option<tokio::task::JoinHandle<()>>,
    server_task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl std::fmt::Debug for EmbeddedCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedCluster")
            .field("url", &self.url)
            .field("kubeconfig", &self.kubeconfig_path)
            .finish()
    }
}

/// In-process read access to the cluster's objects (JSON as stored).
#[derive(Clone, Debug)]
pub struct StoreView {
    store: Store,
    registry: Registry,
}

impl StoreView {
    /// One object by group ("" for core), plural resource, namespace ("" if cluster-scoped), name.
    pub fn get(
        &self,
        group: &str,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Option<serde_json::Value> {
        self.store.get(group, resource, namespace, name)
    }

    /// Objects of a resource in one namespace or all.
    pub fn list(
        &self,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
    ) -> Vec<serde_json::Value> {
        self.store.list(group, resource, namespace)
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.store.resource_version()
    }

    /// Whether `group/resource` is currently served (e.g. after a CRD was registered).
    pub fn serves(&self, group: &str, resource: &str) -> bool {
        self.registry.find_resource(group, resource).is_some()
    }
}

impl EmbeddedCluster {
    /// Starts the server, registers the built-in kinds, installs the fixtures and spawns the
    /// simulated controllers.
    pub async fn start(config: ClusterConfig) -> Result<EmbeddedCluster, SimError> {
        let listener =
            std::net::TcpListener::bind(("127.0.0.1", config.port)).map_err(|source| {
                SimError::Bind {
                    port: config.port,
                    source,
                }
            })?;
        let port = listener
            .local_addr()
            .map_err(|source| SimError::Bind {
                port: config.port,
                source,
            })?
            .port();
        let url = format!("http://127.0.0.1:{port}");
        // The proxy's interface is claimed first: its block is the ClusterIP range.
        let interface = if config.service_proxy {
            Some(HostInterface::claim().map_err(|e| SimError::ServiceProxy(e.to_string()))?)
        } else {
            None
        };
        let service_cidr = config
            .service_cidr
            .or_else(|| interface.as_ref().and_then(HostInterface::range))
            .unwrap_or(DEFAULT_SERVICE_CIDR);
        let engine = Engine::with_service_cidr(config.history_window, service_cidr);
        let faults = FaultHandle::new(config.faults.clone());
        let log = RequestLog::new(
            config.request_log_capacity,
            config.request_log_user_agent.as_deref(),
        );
        let writes = WriteLog::new(config.record_writes, config.request_log_capacity);
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let auth = Auth::new(config.authorization);
        let state = AppState {
            auth: auth.clone(),
            engine: engine.clone(),
            faults: faults.clone(),
            log: log.clone(),
            writes: writes.clone(),
            stop: stop_rx.clone(),
            address: format!("127.0.0.1:{port}"),
        };
        // With RBAC enforced the API is also served over HTTPS (the kubeconfig points there):
        // kubectl sends its token only over TLS.
        // With the service proxy too, pods reach that listener through the `kubernetes`
        // Service, whose ClusterIP the certificate names.
        let in_cluster_ip = (config.service_proxy
            && config.authorization == AuthorizationMode::Rbac)
            .then(|| in_cluster::service_ip(service_cidr));
        let secure = match config.authorization {
            AuthorizationMode::Rbac => {
                let names = in_cluster_ip
                    .map(in_cluster::certificate_names)
                    .unwrap_or_default();
                let cert = crate::auth::tls::self_signed(&names).map_err(SimError::Client)?;
                let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
                    .map_err(|source| SimError::Bind { port: 0, source })?;
                Some((cert, listener))
            }
            AuthorizationMode::AlwaysAllow => None,
        };
        let mut server = HttpServer::new(move || {
            App::new()
                .app_data(web::Data::new(state.clone()))
                .default_service(web::to(api::dispatch))
        })
        .workers(config.workers.max(1))
        .client_request_timeout(REQUEST_TIMEOUT)
        .keep_alive(KEEP_ALIVE)
        .disable_signals()
        .shutdown_timeout(2)
        .listen(listener)
        .map_err(|source| SimError::Bind { port, source })?;
        let mut kubeconfig_target = (url.clone(), None);
        let mut https_port = None;
        if let Some((cert, listener)) = secure {
            let secure_port = listener
                .local_addr()
                .map_err(|source| SimError::Bind { port: 0, source })?
                .port();
            server = server
                .listen_rustls_0_23(listener, cert.config)
                .map_err(|source| SimError::Bind {
                    port: secure_port,
                    source,
                })?;
            kubeconfig_target = (format!("https://127.0.0.1:{secure_port}"), Some(cert.pem));
            https_port = Some(secure_port);
        }
        let server = server.run();
        let handle = server.handle();
        let server_task = tokio::spawn(server);
        let gc_task = tokio::spawn(gc::run(engine.clone(), stop_rx));

        let kubeconfig = kubeconfig_yaml_with_ca(
            &kubeconfig_target.0,
            auth.tokens.admin_token(),
            kubeconfig_target.1.as_deref(),
        );
        let (kubeconfig_path, tempdir) = match &config.kubeconfig_path {
            Some(p) => (p.clone(), None),
            None => {
                let dir = tempfile::tempdir().map_err(|source| SimError::Kubeconfig {
                    path: std::env::temp_dir(),
                    source,
                })?;
                (dir.path().join("kubeconfig"), Some(dir))
            }
        };
        if let Some(parent) = kubeconfig_path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
        {
            std::fs::create_dir_all(parent).map_err(|source| SimError::Kubeconfig {
                path: kubeconfig_path.clone(),
                source,
            })?;
        }
        std::fs::write(&kubeconfig_path, &kubeconfig).map_err(|source| SimError::Kubeconfig {
            path: kubeconfig_path.clone(),
            source,
        })?;
        let client = client_for(&kubeconfig, None).await?;
        let controllers_client = client_for(&kubeconfig, Some(CONTROLLER_MANAGER_AGENT)).await?;
        let mut cluster = EmbeddedCluster {
            url,
            kubeconfig_path,
            kubeconfig,
            _tempdir: tempdir,
            engine,
            faults,
            log,
            writes,
            auth,
            client: client.clone(),
            controllers: None,
            proxy: None,
            agent: None,
            server: handle,
            stop,
            gc_task: Some(gc_task),
            namespace_defaults_task: None,
            server_task: Some(server_task),
        };
        // Before any other Service, so the range's first address is free.
        if let (Some(ip), Some(port)) = (in_cluster_ip, https_port) {
            in_cluster::create_service(&client, ip, port)
                .await
                .map_err(|e| SimError::Client(format!("the kubernetes Service: {e}")))?;
        }
        // Every namespace of a real cluster has kube-root-ca.crt and the default
        // ServiceAccount. Served over HTTPS the ConfigMap holds
        // the serving certificate; over plain HTTP a certificate of its own that no listener
        // presents (nothing verifies against it there).
        if config.controllers.namespace_defaults.enabled {
            let root_ca = match kubeconfig_target.1.clone() {
                Some(pem) => pem,
                None => {
                    crate::auth::tls::self_signed(&[])
                        .map_err(SimError::Client)?
                        .pem
                }
            };
            cluster.namespace_defaults_task =
                Some(tokio::spawn(in_cluster::keep_namespace_defaults(
                    client.clone(),
                    root_ca,
                    cluster.stop.subscribe(),
                )));
        }
        controllers::install_fixture_set(client.clone(), config.controllers.fixtures)
            .await
            .map_err(SimError::Fixtures)?;
        controllers::register_nodes(&client, &config.controllers)
            .await
            .map_err(SimError::Nodes)?;
        if let Some(interface) = interface {
            cluster.proxy = Some(ServiceProxy::spawn(client.clone(), interface));
        }
        if config.controllers.nodes.process > 0 {
            let agent = crate::agent::Agent::start(
                client.clone(),
                config.controllers.nodes.process,
                config.process_runtime.clone(),
            )
            .await
            .map_err(SimError::Agent)?;
            cluster.agent = Some(agent);
        }
        cluster.controllers = Some(controllers::spawn(
            controllers_client,
            config.controllers.clone(),
        ));
        Ok(cluster)
    }

    /// "http://127.0.0.1:PORT" (with RBAC enforced, the kubeconfig names the HTTPS listener
    /// instead; both serve the same API).
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// The kubeconfig file written for this cluster.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    pub fn kubeconfig_yaml(&self) -> String {
        self.kubeconfig.clone()
    }

    /// A client for this cluster (default namespace "default").
    pub async fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// How this cluster authorizes requests.
    pub fn authorization(&self) -> AuthorizationMode {
        self.auth.mode
    }

    /// Fault injection of the running cluster.
    pub fn faults(&self) -> FaultHandle {
        self.faults.clone()
    }

    /// Every API request served so far (bounded by `request_log_capacity`; only those of
    /// `request_log_user_agent` when set).
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.log.all()
    }

    pub fn clear_requests(&self) {
        self.log.clear();
    }

    /// Every mutating request served so far with the Leases before and after it (empty unless
    /// `ClusterConfig::record_writes`; bounded by `request_log_capacity`).
    pub fn writes(&self) -> Vec<WriteRecord> {
        self.writes.all()
    }

    /// In-process reads of the stored objects.
    pub fn store(&self) -> StoreView {
        StoreView {
            store: self.engine.store.clone(),
            registry: self.engine.registry.clone(),
        }
    }

    /// The service proxy, when `ClusterConfig::service_proxy` started one.
    pub fn service_proxy(&self) -> Option<&ServiceProxy> {
        self.proxy.as_ref()
    }

    /// The range this cluster's Service ClusterIPs come from.
    pub fn service_cidr(&self) -> ServiceCidr {
        self.engine.service_cidr
    }

    /// The simulated controllers (to change their settings at runtime).
    pub fn controllers(&self) -> Option<&ControllersHandle> {
        self.controllers.as_ref()
    }

    /// The node agent of the process nodes, when `controllers.nodes.process` > 0.
    pub fn agent(&self) -> Option<&crate::agent::Agent> {
        self.agent.as_ref()
    }

    /// Stops the node agent (every pod process, sandbox and the bridge go), the service proxy
    /// (its listeners and interface go), the controllers, then the server (open watches end),
    /// then the garbage collector.
    pub async fn shutdown(mut self) {
        if let Some(agent) = self.agent.take() {
            agent.shutdown().await;
        }
        if let Some(proxy) = self.proxy.take()
            && let Err(error) = proxy.shutdown().await
        {
            tracing::warn!(%error, "the service proxy did not stop cleanly");
        }
        if let Some(c) = self.controllers.take() {
            c.shutdown().await;
        }
        if let Some(t) = self.namespace_defaults_task.take() {
            t.abort();
        }
        let _ = self.stop.send(true);
        self.server.stop(true).await;
        if let Some(t) = self.server_task.take() {
            let _ = t.await;
        }
        if let Some(t) = self.gc_task.take() {
            let _ = t.await;
        }
    }
}

impl Drop for EmbeddedCluster {
    fn drop(&mut self) {
        self.agent.take();
        self.proxy.take();
        self.controllers.take();
        if let Some(t) = self.namespace_defaults_task.take() {
            t.abort();
        }
        let _ = self.stop.send(true);
        if self.server_task.is_some() {
            let stop = self.server.stop(false);
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(stop);
            }
        }
    }
}

/// The user agent of the built-in controllers: a real server credits their writes (status
/// counts, managedFields) to the manager `kube-controller-manager` it derives from it.
const CONTROLLER_MANAGER_AGENT: &str = "kube-controller-manager/v1.37.2 (embedded)";

async fn client_for(kubeconfig: &str, user_agent: Option<&str>) -> Result<kube::Client, SimError> {
    let kc = kube::config::Kubeconfig::from_yaml(kubeconfig)
        .map_err(|e| SimError::Client(e.to_string()))?;
    let mut cfg =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| SimError::Client(e.to_string()))?;
    if let Some(agent) = user_agent {
        let value =
            http::HeaderValue::from_str(agent).map_err(|e| SimError::Client(e.to_string()))?;
        cfg.headers.push((http::header::USER_AGENT, value));
    }
    kube::Client::try_from(cfg).map_err(|e| SimError::Client(e.to_string()))
}
