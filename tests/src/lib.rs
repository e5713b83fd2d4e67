//! cinder-e2e: end-to-end tests across the crates, run against the embedded cluster.
//! The tests live in a few binaries, `tests/tests/e2e/` (operator scenarios),
//! `tests/tests/deploy/` (the deployment artefacts), `tests/tests/observability/` and
//! `tests/tests/reliability/` (crashes, fault storms, steady state), a module per scenario; this library holds
//! their shared helpers: start an embedded cluster with the CRDs and the operator running
//! in-process ([`Harness`]), the usual fixtures (store, credential Secrets, a Cinder,
//! satellites), polling waits with generous timeouts, and a capture of every tracing line the
//! process emits (to prove no secret value is logged).

pub mod bench_cluster;
pub mod database_helpers;
pub mod deploy_helpers;
pub mod group_helpers;
pub mod observability_helpers;
pub mod operator_process;
pub mod operator_replica;
pub mod request_checks;
pub mod target_helpers;
pub mod workload_helpers;
pub mod write_checks;

use anyhow::Context as _;
use cinder_operator::context::{OperatorContext, OperatorOptions};
use cinder_operator::controller::run_operator;
use cinder_operator::crd::{Cinder, CinderBackend, CinderBackupBackend};
use cinder_operator::metrics::Metrics;
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use kube::api::{DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The namespace every test works in.
pub const NS: &str = "cinder-e2e";
/// How long an "eventually" condition may take on a loaded 2-core machine.
pub const EVENTUALLY: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------------
// Log capture

/// Every line the process's tracing output produced (one global subscriber per test binary).
#[derive(Clone, Default)]
pub struct LogCapture(Arc<Mutex<Vec<u8>>>);

impl LogCapture {
    /// The captured text so far.
    pub fn text(&self) -> String {
        let buf = self.0.lock().unwrap_or_else(|p| p.into_inner());
        String::from_utf8_lossy(&buf).into_owned()
    }
}

impl std::io::Write for LogCapture {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogCapture {
    type Writer = LogCapture;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Installs (once) a global subscriber writing every event at TRACE for the operator and DEBUG
/// for everything else into the capture, and returns the capture.
pub fn capture_logs() -> LogCapture {
    static CAPTURE: OnceLock<LogCapture> = OnceLock::new();
    CAPTURE
        .get_or_init(|| {
            let capture = LogCapture::default();
            let filter = tracing_subscriber::EnvFilter::new(
                "debug,cinder_operator=trace,hyper=info,h2=info,tower=info",
            );
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(capture.clone())
                .with_ansi(false)
                .try_init();
            capture
        })
        .clone()
}

// ---------------------------------------------------------------------------------------------
// Harness

/// An embedded cluster with the CRDs installed and the operator running in-process.
pub struct Harness {
    pub cluster: EmbeddedCluster,
    pub client: Client,
    pub ctx: Arc<OperatorContext>,
    pub logs: LogCapture,
    shutdown: tokio::sync::watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

/// Options of [`Harness::start_with`].
pub struct HarnessConfig {
    pub cluster: ClusterConfig,
    pub options: OperatorOptions,
    /// Give the operator its own client sending this user agent (None: the operator shares the
    /// test's client, which sends none, like the simulated controllers).
    pub operator_user_agent: Option<String>,
}

impl Default for HarnessConfig {
    fn default() -> Self {
        let mut cluster = ClusterConfig::default();
        // Fast simulated controllers: stores validate quickly.
        cluster.controllers.secret_stores.switch =
            cinder_sim::controllers::config::Switch::on(Duration::from_millis(50));
        HarnessConfig {
            cluster,
            options: OperatorOptions {
                lease_namespace: NS.to_string(),
                ..Default::default()
            },
            operator_user_agent: None,
        }
    }
}

impl Harness {
    /// Default cluster and options.
    pub async fn start() -> anyhow::Result<Harness> {
        Harness::start_with(HarnessConfig::default()).await
    }

    /// Starts the cluster, installs the CRDs and the namespace, starts the operator and waits
    /// until it reports ready.
    pub async fn start_with(config: HarnessConfig) -> anyhow::Result<Harness> {
        let logs = capture_logs();
        let cluster = EmbeddedCluster::start(config.cluster).await?;
        let client = cluster.client().await;
        install_crds(&client).await?;
        create_namespace(&client, NS).await?;
        let operator_client = match &config.operator_user_agent {
            Some(agent) => deploy_helpers::client_with_user_agent(&cluster, agent).await?,
            None => client.clone(),
        };
        let (_registry, metrics) = Metrics::new_registry();
        let ctx = OperatorContext::new(operator_client, config.options, Arc::new(metrics)).await?;
        let (shutdown, rx) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(run_operator(ctx.clone(), rx));
        let harness = Harness {
            cluster,
            client,
            ctx,
            logs,
            shutdown,
            task: Some(task),
        };
        let ctx = harness.ctx.clone();
        let ready = eventually("the operator is ready", || {
            let ctx = ctx.clone();
            async move { ctx.is_ready().then_some(()) }
        })
        .await;
        if let Err(e) = ready {
            let text = harness.logs.text();
            let tail: Vec<&str> = text.lines().rev().take(60).collect();
            anyhow::bail!("{e}; last log lines (newest first):\n{}", tail.join("\n"));
        }
        Ok(harness)
    }

    /// An API over `K` in [`NS`].
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), NS)
    }

    /// Stops the operator (draining in-flight passes); the cluster keeps running.
    pub async fn stop_operator(&mut self) -> anyhow::Result<()> {
        let _ = self.shutdown.send(true);
        if let Some(task) = self.task.take() {
            tokio::time::timeout(EVENTUALLY, task)
                .await
                .context("run_operator did not return after shutdown")???;
        }
        Ok(())
    }

    /// Stops the operator (draining in-flight passes) and the cluster.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.stop_operator().await?;
        self.cluster.shutdown().await;
        Ok(())
    }
}

/// A second operator process (its own context, identity and actor thread, in this process)
/// running against the same cluster, without leader election.
pub struct SecondOperator {
    pub ctx: Arc<OperatorContext>,
    shutdown: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl SecondOperator {
    /// Starts the controllers through `client` with the identity `identity` (device Leases in [`NS`]).
    pub async fn start(client: Client, identity: &str) -> anyhow::Result<SecondOperator> {
        let (_registry, metrics) = Metrics::new_registry();
        let ctx = OperatorContext::new(
            client,
            OperatorOptions {
                identity: identity.to_string(),
                lease_namespace: NS.to_string(),
                ..Default::default()
            },
            Arc::new(metrics),
        )
        .await?;
        let (shutdown, rx) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(run_operator(ctx.clone(), rx));
        Ok(SecondOperator {
            ctx,
            shutdown,
            task,
        })
    }

    /// Stops it and waits until its controllers returned.
    pub async fn stop(self) -> anyhow::Result<()> {
        let _ = self.shutdown.send(true);
        tokio::time::timeout(EVENTUALLY, self.task)
            .await
            .context("the second operator did not return after shutdown")???;
        Ok(())
    }
}

/// Creates the namespace `name` (an existing one is fine).
pub async fn create_namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        ..Default::default()
    };
    match namespaces.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Installs the three CRDs and waits until the API serves them.
pub async fn install_crds(client: &Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in cinder_operator::crd::crds() {
        match crds.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    let cinders: Api<Cinder> = Api::all(client.clone());
    let backends: Api<CinderBackend> = Api::all(client.clone());
    let backups: Api<CinderBackupBackend> = Api::all(client.clone());
    eventually("the CRDs are served", || {
        let (c, b, bb) = (cinders.clone(), backends.clone(), backups.clone());
        async move {
            let ok = c.list(&ListParams::default()).await.is_ok()
                && b.list(&ListParams::default()).await.is_ok()
                && bb.list(&ListParams::default()).await.is_ok();
            ok.then_some(())
        }
    })
    .await
}

// ---------------------------------------------------------------------------------------------
// Waiting

/// Polls `probe` every 100 ms until it yields `Some`, for up to [`EVENTUALLY`].
pub async fn eventually<T, F, Fut>(what: &str, mut probe: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + EVENTUALLY;
    loop {
        if let Some(v) = probe().await {
            return Ok(v);
        }
        if Instant::now() > deadline {
            anyhow::bail!("timed out after {EVENTUALLY:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The condition `type_` of a condition list.
pub fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Checks the aggregate: Ready is True exactly when all fourteen sub-conditions are True
/// (whichever steps exist yet), and ExtraConfigHealthy never decides it. Returns Ready.
pub fn assert_ready_consistent(conditions: &[Condition]) -> Condition {
    let ready = condition(conditions, "Ready")
        .cloned()
        .expect("a Ready condition");
    let all_true = cinder_operator::conditions::SUB_CONDITIONS
        .iter()
        .all(|t| condition(conditions, t).is_some_and(|c| c.status == "True"));
    assert_eq!(ready.status == "True", all_true, "{ready:?}");
    if all_true {
        assert_eq!(ready.reason, "AllReady");
    } else {
        assert_eq!(ready.reason, "NotAllReady");
        assert!(
            !ready.message.contains("ExtraConfigHealthy"),
            "{}",
            ready.message
        );
    }
    ready
}

/// The current conditions of Cinder `name`.
pub async fn cinder_conditions(client: &Client, name: &str) -> Vec<Condition> {
    let api: Api<Cinder> = Api::namespaced(client.clone(), NS);
    api.get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|c| c.status)
        .map(|s| s.conditions)
        .unwrap_or_default()
}

/// Waits until Cinder `name` has condition `type_` with `status` and `reason`; returns it.
pub async fn wait_cinder_condition(
    client: &Client,
    name: &str,
    type_: &str,
    status: &str,
    reason: &str,
) -> anyhow::Result<Condition> {
    let what = format!("Cinder {name} {type_}={status}/{reason}");
    let result = eventually(&what, || async {
        let cs = cinder_conditions(client, name).await;
        condition(&cs, type_)
            .filter(|c| c.status == status && c.reason == reason)
            .cloned()
    })
    .await;
    if result.is_err() {
        let cs = cinder_conditions(client, name).await;
        let seen: Vec<String> = cs
            .iter()
            .map(|c| format!("{}={}/{}: {}", c.type_, c.status, c.reason, c.message))
            .collect();
        anyhow::bail!("timed out waiting for {what}; conditions: {seen:#?}");
    }
    result
}

/// Waits until satellite `K` `name` has condition `type_` with `status` and `reason`.
pub async fn wait_satellite_condition<K>(
    client: &Client,
    name: &str,
    type_: &str,
    status: &str,
    reason: &str,
) -> anyhow::Result<Condition>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + serde::Serialize,
{
    let api: Api<K> = Api::namespaced(client.clone(), NS);
    let what = format!("{name} {type_}={status}/{reason}");
    eventually(&what, || {
        let api = api.clone();
        async move {
            let obj = api.get_opt(name).await.ok().flatten()?;
            let v = serde_json::to_value(&obj).ok()?;
            let cs: Vec<Condition> =
                serde_json::from_value(v.pointer("/status/conditions")?.clone()).ok()?;
            condition(&cs, type_)
                .filter(|c| c.status == status && c.reason == reason)
                .cloned()
        }
    })
    .await
}

// ---------------------------------------------------------------------------------------------
// Fixtures

/// Values of the credential Secrets a fixture Cinder uses (unique per call, so a test can
/// grep for them).
#[derive(Clone, Debug)]
pub struct Credentials {
    pub db_password: String,
    pub service_password: String,
    pub rabbit_password: String,
}

impl Credentials {
    pub fn fresh(tag: &str) -> Self {
        let id = format!("{tag}{}", std::process::id());
        Credentials {
            db_password: format!("dbpw-{id}-Zq8xW"),
            service_password: format!("svcpw-{id}-Kp3vR"),
            rabbit_password: format!("mqpw-{id}-Tj5nY"),
        }
    }
    /// Every value a test must never see outside a Secret.
    pub fn values(&self) -> Vec<String> {
        vec![
            self.db_password.clone(),
            self.service_password.clone(),
            self.rabbit_password.clone(),
        ]
    }
}

/// Creates or replaces Secret `name` in [`NS`] with string `data`.
pub async fn put_secret(client: &Client, name: &str, data: &[(&str, &str)]) -> anyhow::Result<()> {
    let api: Api<Secret> = Api::namespaced(client.clone(), NS);
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(NS.to_string()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Default::default()
    };
    let patch = serde_json::json!({ "data": secret.data });
    match api.get_opt(name).await? {
        None => {
            api.create(&PostParams::default(), &secret).await?;
        }
        Some(_) => {
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
    }
    Ok(())
}

/// The ClusterSecretStore `openbao-cluster-store` (the simulated external-secrets validates it).
pub async fn create_cluster_store(client: &Client) -> anyhow::Result<()> {
    create_store(client, "ClusterSecretStore", None, "openbao-cluster-store").await
}

/// A SecretStore / ClusterSecretStore named `name`.
pub async fn create_store(
    client: &Client,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> anyhow::Result<()> {
    let (plural, ar_kind) = match kind {
        "ClusterSecretStore" => ("clustersecretstores", "ClusterSecretStore"),
        _ => ("secretstores", "SecretStore"),
    };
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("external-secrets.io", "v1", ar_kind),
        plural,
    );
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    let mut obj = DynamicObject::new(name, &ar).data(serde_json::json!({
        "spec": {"provider": {"vault": {"server": "http://openbao:8200", "path": "secret", "auth": {}}}}
    }));
    obj.metadata.namespace = namespace.map(str::to_string);
    api.create(&PostParams::default(), &obj).await?;
    Ok(())
}

/// The credential Secrets `cinder-db`, `cinder-keystone`, `cinder-rabbit` with `creds`.
pub async fn create_credentials(client: &Client, creds: &Credentials) -> anyhow::Result<()> {
    put_secret(
        client,
        "cinder-db",
        &[("username", "cinder"), ("password", &creds.db_password)],
    )
    .await?;
    put_secret(
        client,
        "cinder-keystone",
        &[("password", &creds.service_password)],
    )
    .await?;
    put_secret(
        client,
        "cinder-rabbit",
        &[
            ("username", "cinder"),
            ("password", &creds.rabbit_password),
            ("host", "rabbitmq.cinder-e2e.svc"),
        ],
    )
    .await
}

/// A Cinder spec (JSON) using the fixture Secrets; `extra` is merged into `spec`.
pub fn cinder_json(name: &str, extra: serde_json::Value) -> serde_json::Value {
    let mut spec = serde_json::json!({
        "openStackRelease": "2026.1",
        "image": {"repository": "registry.example/cinder", "tag": "2026.1"},
        "database": {"clusterRef": {"name": "mariadb"}, "secretRef": {"name": "cinder-db"}},
        "messaging": {"secretRef": {"name": "cinder-rabbit"}},
        "serviceUser": {"secretRef": {"name": "cinder-keystone"}},
        "keystoneEndpoint": "http://keystone.cinder-e2e.svc:5000"
    });
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            s.insert(k.clone(), v.clone());
        }
    }
    serde_json::json!({
        "apiVersion": "cinder.openstack.c5c3.io/v1alpha1",
        "kind": "Cinder",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec
    })
}

/// Creates a Cinder from [`cinder_json`].
pub async fn create_cinder(
    client: &Client,
    name: &str,
    extra: serde_json::Value,
) -> Result<Cinder, kube::Error> {
    let api: Api<Cinder> = Api::namespaced(client.clone(), NS);
    let cinder: Cinder =
        serde_json::from_value(cinder_json(name, extra)).map_err(kube::Error::SerdeError)?;
    api.create(&PostParams::default(), &cinder).await
}

/// Creates an object of kind `K` from raw JSON (so invalid specs reach the API server).
pub async fn create_raw<K>(client: &Client, body: serde_json::Value) -> Result<K, kube::Error>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + serde::Serialize,
{
    let ar = kube::api::ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &ar);
    let obj: DynamicObject = serde_json::from_value(body).map_err(kube::Error::SerdeError)?;
    let created = api.create(&PostParams::default(), &obj).await?;
    let v = serde_json::to_value(created).map_err(kube::Error::SerdeError)?;
    serde_json::from_value(v).map_err(kube::Error::SerdeError)
}

/// An RBD CinderBackend `name` of Cinder `parent` whose key is in Secret `key_secret`.
pub async fn create_rbd_backend(
    client: &Client,
    name: &str,
    parent: &str,
    key_secret: &str,
) -> Result<CinderBackend, kube::Error> {
    create_raw(
        client,
        serde_json::json!({
            "apiVersion": "cinder.openstack.c5c3.io/v1alpha1",
            "kind": "CinderBackend",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "cinderRef": {"name": parent},
                "type": "RBD",
                "rbd": {"pool": "volumes", "user": "cinder", "monitors": ["10.0.0.1:6789"], "keySecretRef": {"name": key_secret}}
            }
        }),
    )
    .await
}

/// An NFS CinderBackend `name` of Cinder `parent`.
pub async fn create_nfs_backend(
    client: &Client,
    name: &str,
    parent: &str,
) -> Result<CinderBackend, kube::Error> {
    create_raw(
        client,
        serde_json::json!({
            "apiVersion": "cinder.openstack.c5c3.io/v1alpha1",
            "kind": "CinderBackend",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"cinderRef": {"name": parent}, "type": "NFS", "nfs": {"server": "nfs.example", "path": "/exports/cinder"}}
        }),
    )
    .await
}

/// The names of Secrets in [`NS`] matching `selector`, sorted.
pub async fn secret_names(client: &Client, selector: &str) -> Vec<String> {
    let api: Api<Secret> = Api::namespaced(client.clone(), NS);
    let mut names: Vec<String> = api
        .list(&ListParams::default().labels(selector))
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter_map(|s| s.metadata.name)
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The value of `key` in Secret `name`, if present.
pub async fn secret_value(client: &Client, name: &str, key: &str) -> Option<String> {
    let api: Api<Secret> = Api::namespaced(client.clone(), NS);
    let s = api.get_opt(name).await.ok().flatten()?;
    let v = s.data?.get(key)?.0.clone();
    String::from_utf8(v).ok()
}

/// sha256 hex of `value`.
pub fn sha256_hex(value: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(value.as_bytes()))
}
