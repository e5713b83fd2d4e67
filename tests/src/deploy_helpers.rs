//! Helpers of the deploy/ and Prometheus tests: reading deploy/ the way `kubectl apply -k` does
//! (kustomizations listing files and folders), the RBAC rules bound to the operator's
//! ServiceAccount and whether they allow a recorded API request, the operator running
//! in-process with its own user agent and its HTTP endpoints, a plain HTTP/1.0 GET, and
//! Debian's `prometheus` package (installed when missing) with a Prometheus process that is
//! killed when dropped.

pub use crate::clients::{client_with_token, client_with_user_agent};
use crate::fixtures::{create_namespace, install_crds};
use crate::harness::HarnessConfig;
use crate::test_cluster::TestCluster;
use crate::test_env::{EVENTUALLY, NS};
use crate::waiting::eventually;
use anyhow::Context as _;
use cinder_lease::DeviceLockMetrics;
use cinder_operator::context::{OperatorContext, OperatorOptions};
use cinder_operator::controller::run_operator;
use cinder_operator::embedded::{Manifest, parse_stream};
use cinder_operator::http::access::AccessReviewer;
use cinder_operator::http::tls::ServingCert;
use cinder_operator::http::{Binds, Endpoints, MetricsEndpoint, Security};
use cinder_operator::metrics::Metrics;
use cinder_sim::requests::RequestRecord;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use kube::Client;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// The user agent of the operator's own client in [`DeployedOperator`] (the test's client and
/// the simulated controllers send none), so its requests can be told apart.
pub const OPERATOR_USER_AGENT: &str = "cinder-operator-under-test/0";

// ---------------------------------------------------------------------------------------------
// deploy/

/// The repository's root folder.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

/// The `deploy/` folder.
pub fn deploy_dir() -> PathBuf {
    repo_root().join("deploy")
}

/// Every manifest a kustomization folder lists, in order: a listed file is read as a YAML
/// stream, a listed folder through its own `kustomization.yaml`. Only `resources` is supported
/// (and apiVersion / kind); any other key fails, so what the test reads is what kustomize would
/// render.
pub fn kustomize(dir: &Path) -> anyhow::Result<Vec<Manifest>> {
    let path = dir.join("kustomization.yaml");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let doc: serde_norway::Mapping =
        serde_norway::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let mut out = Vec::new();
    for (key, value) in &doc {
        let key = key.as_str().unwrap_or_default();
        match key {
            "apiVersion" | "kind" => {}
            "resources" => {
                let entries = value
                    .as_sequence()
                    .with_context(|| format!("{}: resources is not a list", path.display()))?;
                for entry in entries {
                    let entry = entry.as_str().with_context(|| {
                        format!("{}: a resource entry is not a string", path.display())
                    })?;
                    let target = dir.join(entry);
                    if target.is_dir() {
                        out.extend(kustomize(&target)?);
                    } else {
                        let text = std::fs::read_to_string(&target)
                            .with_context(|| format!("reading {}", target.display()))?;
                        out.extend(parse_stream(&target, &text)?);
                    }
                }
            }
            other => anyhow::bail!(
                "{}: key {other:?} is not supported by the test's reader",
                path.display()
            ),
        }
    }
    Ok(out)
}

/// The manifests of `kubectl apply -k deploy/`.
pub fn deploy_manifests() -> anyhow::Result<Vec<Manifest>> {
    kustomize(&deploy_dir())
}

/// The manifests of kind `kind` (any group).
pub fn of_kind<'a>(manifests: &'a [Manifest], kind: &str) -> Vec<&'a Manifest> {
    manifests.iter().filter(|m| m.gvk.kind == kind).collect()
}

/// A manifest's object as the typed `K`.
pub fn typed<K: serde::de::DeserializeOwned>(m: &Manifest) -> anyhow::Result<K> {
    let value = serde_json::to_value(&m.object)?;
    serde_json::from_value(value).with_context(|| format!("reading {}", m.describe()))
}

// ---------------------------------------------------------------------------------------------
// RBAC

/// The rules bound to one ServiceAccount: ClusterRoles bound by ClusterRoleBindings (every
/// namespace) and Roles bound by RoleBindings (their namespace only).
#[derive(Clone, Debug, Default)]
pub struct RbacRules {
    pub cluster: Vec<PolicyRule>,
    /// (namespace, rules)
    pub namespaced: Vec<(String, Vec<PolicyRule>)>,
}

fn binds_subject(subjects: Option<&serde_json::Value>, sa: &str, sa_ns: &str) -> bool {
    subjects.and_then(|s| s.as_array()).is_some_and(|subjects| {
        subjects
            .iter()
            .any(|s| s["kind"] == "ServiceAccount" && s["name"] == sa && s["namespace"] == sa_ns)
    })
}

impl RbacRules {
    /// The rules `manifests` bind to ServiceAccount `sa` in `sa_ns`.
    pub fn for_service_account(
        manifests: &[Manifest],
        sa: &str,
        sa_ns: &str,
    ) -> anyhow::Result<RbacRules> {
        let mut rules = RbacRules::default();
        let cluster_role = |name: &str| -> anyhow::Result<Vec<PolicyRule>> {
            let m = of_kind(manifests, "ClusterRole")
                .into_iter()
                .find(|m| m.object.metadata.name.as_deref() == Some(name))
                .with_context(|| format!("ClusterRole {name} is bound but not in deploy/"))?;
            Ok(typed::<ClusterRole>(m)?.rules.unwrap_or_default())
        };
        for m in of_kind(manifests, "ClusterRoleBinding") {
            if !binds_subject(m.object.data.get("subjects"), sa, sa_ns) {
                continue;
            }
            let role = &m.object.data["roleRef"];
            anyhow::ensure!(
                role["kind"] == "ClusterRole",
                "{}: a ClusterRoleBinding refers to a ClusterRole",
                m.describe()
            );
            rules
                .cluster
                .extend(cluster_role(role["name"].as_str().unwrap_or_default())?);
        }
        for m in of_kind(manifests, "RoleBinding") {
            if !binds_subject(m.object.data.get("subjects"), sa, sa_ns) {
                continue;
            }
            let ns = m.object.metadata.namespace.clone().unwrap_or_default();
            let role = &m.object.data["roleRef"];
            let name = role["name"].as_str().unwrap_or_default();
            let bound = if role["kind"] == "ClusterRole" {
                cluster_role(name)?
            } else {
                let m = of_kind(manifests, "Role")
                    .into_iter()
                    .find(|r| {
                        r.object.metadata.name.as_deref() == Some(name)
                            && r.object.metadata.namespace.as_deref() == Some(ns.as_str())
                    })
                    .with_context(|| format!("Role {ns}/{name} is bound but not in deploy/"))?;
                typed::<Role>(m)?.rules.unwrap_or_default()
            };
            rules.namespaced.push((ns, bound));
        }
        Ok(rules)
    }

    /// The same rules with the Roles of namespace `from` moved to `to` (the test's operator
    /// keeps its Leases in the test namespace instead of the Deployment's).
    pub fn relocated(mut self, from: &str, to: &str) -> RbacRules {
        for (ns, _) in &mut self.namespaced {
            if ns == from {
                *ns = to.to_string();
            }
        }
        self
    }

    /// Whether a resource request is allowed. A non-resource request (discovery: `/api`,
    /// `/apis`, `/version`, `/openapi/...`) is allowed to every authenticated user by the
    /// built-in `system:discovery` role; any other non-resource path is not.
    pub fn allows(&self, r: &RequestRecord) -> bool {
        if r.resource.is_empty() {
            let path = r.path.split('?').next().unwrap_or_default();
            return ["/api", "/apis", "/version", "/openapi"]
                .iter()
                .any(|p| path == *p || path.starts_with(&format!("{p}/")));
        }
        let resource = if r.subresource.is_empty() {
            r.resource.clone()
        } else {
            format!("{}/{}", r.resource, r.subresource)
        };
        let matches = |rule: &PolicyRule| {
            let has = |list: &Option<Vec<String>>, v: &str| {
                list.as_ref()
                    .is_some_and(|l| l.iter().any(|x| x == "*" || x == v))
            };
            let names_ok = rule
                .resource_names
                .as_ref()
                .is_none_or(|n| n.is_empty() || n.iter().any(|x| x == &r.name));
            has(&rule.api_groups, &r.group)
                && has(&rule.resources, &resource)
                && rule.verbs.iter().any(|v| v == "*" || v == &r.verb)
                && names_ok
        };
        if self.cluster.iter().any(matches) {
            return true;
        }
        !r.namespace.is_empty()
            && self
                .namespaced
                .iter()
                .any(|(ns, rules)| ns == &r.namespace && rules.iter().any(matches))
    }

    /// Every verb the cluster-wide rules grant on `group`/`resource`, sorted.
    pub fn cluster_verbs(&self, group: &str, resource: &str) -> Vec<String> {
        let mut verbs: Vec<String> = self
            .cluster
            .iter()
            .filter(|r| {
                r.api_groups
                    .as_ref()
                    .is_some_and(|g| g.iter().any(|x| x == group || x == "*"))
                    && r.resources
                        .as_ref()
                        .is_some_and(|x| x.iter().any(|x| x == resource || x == "*"))
            })
            .flat_map(|r| r.verbs.clone())
            .collect();
        verbs.sort();
        verbs.dedup();
        verbs
    }
}

/// One line naming a request (for failure messages).
pub fn describe_request(r: &RequestRecord) -> String {
    let resource = if r.subresource.is_empty() {
        r.resource.clone()
    } else {
        format!("{}/{}", r.resource, r.subresource)
    };
    let group = if r.group.is_empty() { "core" } else { &r.group };
    format!(
        "{} {group}/{} {resource} namespace={:?} name={:?} ({} {}) -> {}",
        r.verb, r.version, r.namespace, r.name, r.method, r.path, r.status
    )
}

// ---------------------------------------------------------------------------------------------
// The operator in-process, with its own client and endpoints

/// The namespace and ServiceAccount deploy/ runs the operator as.
pub const DEPLOY_NAMESPACE: &str = "cinder-system";
pub const DEPLOY_ACCOUNT: &str = "cinder-operator";

/// The kinds of deploy/ that grant the operator its permissions.
pub const RBAC_KINDS: &[&str] = &[
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
];

/// A change to the RBAC manifests before they are applied.
pub type RbacEdit = Box<dyn Fn(&mut Vec<Manifest>) + Send + Sync>;

/// How [`DeployedOperator::start_with`] runs the operator.
#[derive(Default)]
pub struct DeploySetup {
    /// Enforce RBAC on the cluster, apply the RBAC of deploy/ and run the operator with a token
    /// of deploy/'s ServiceAccount (its Leases in deploy/'s namespace).
    pub under_rbac: bool,
    /// Changes the RBAC manifests before they are applied (e.g. removes a rule).
    pub edit_rbac: Option<RbacEdit>,
    /// Serve `/metrics` over HTTPS to callers the reviews admit (a generated certificate).
    pub metrics_secure: bool,
}

/// Applies `manifests` (server-side, as the administrator) and answers a token of the
/// ServiceAccount `namespace/name` from the TokenRequest API.
pub async fn apply_service_account(
    admin: &Client,
    manifests: &[Manifest],
    namespace: &str,
    name: &str,
) -> anyhow::Result<String> {
    let mut ordered = manifests.to_vec();
    ordered.sort_by_key(|m| m.gvk.kind != "Namespace");
    cinder_operator::embedded::apply(admin, &ordered).await?;
    let accounts: kube::Api<k8s_openapi::api::core::v1::ServiceAccount> =
        kube::Api::namespaced(admin.clone(), namespace);
    if accounts.get_opt(name).await?.is_none() {
        let sa = serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))?;
        accounts.create(&Default::default(), &sa).await?;
    }
    let answer = accounts
        .create_token_request(name, &Default::default(), &Default::default())
        .await?;
    answer
        .status
        .and_then(|s| s.token)
        .context("the TokenRequest answer holds no token")
}

/// What a client-side record says of one answer, worded as [`describe_request`] words a
/// request of the embedded cluster's record: the verb from the method, the path and the
/// `watch` query; group, version, resource (with subresource), namespace and name from the
/// path.
pub fn describe_answer(a: &crate::clients::ClientAnswer) -> String {
    let (path, query) = a.path.split_once('?').unwrap_or((&a.path, ""));
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match parts.as_slice() {
        ["api", version, rest @ ..] => ("core", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => ("", "", &parts[..0]),
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (*ns, rest),
        _ => ("", rest),
    };
    let (resource, name) = match rest {
        [resource] => (resource.to_string(), ""),
        [resource, name] => (resource.to_string(), *name),
        [resource, name, sub @ ..] => (format!("{resource}/{}", sub.join("/")), *name),
        _ => (String::new(), ""),
    };
    let watch = query
        .split('&')
        .any(|q| q == "watch=true" || q == "watch=1");
    let verb = match (a.method.as_str(), name.is_empty()) {
        ("GET", _) if watch => "watch",
        ("GET", true) => "list",
        ("GET", false) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "deletecollection",
        ("DELETE", false) => "delete",
        (other, _) => other,
    };
    format!(
        "{verb} {group}/{version} {resource} namespace={namespace:?} name={name:?} ({} {}) -> {}",
        a.method, a.path, a.status
    )
}

/// `curl -sk` of `https://addr/path` with an optional bearer token: the status and body.
pub async fn https_get(
    addr: &str,
    path: &str,
    token: Option<&str>,
) -> anyhow::Result<(u16, String)> {
    let mut cmd = tokio::process::Command::new("curl");
    cmd.args(["-sk", "--max-time", "30", "-w", "\n%{http_code}"]);
    if let Some(token) = token {
        cmd.arg("-H").arg(format!("Authorization: Bearer {token}"));
    }
    let out = cmd.arg(format!("https://{addr}{path}")).output().await?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    Ok((code.trim().parse().unwrap_or(0), body.to_string()))
}

/// A cluster (the e2e defaults; a real control plane when `CINDER_E2E_CLUSTER=real`) with the
/// CRDs and [`NS`], and the operator running in-process on its own client
/// ([`OPERATOR_USER_AGENT`]) with its metrics / probe / admin endpoints on free ports of
/// 127.0.0.1.
pub struct DeployedOperator {
    pub cluster: TestCluster,
    /// The test's client (no user agent).
    pub client: Client,
    pub ctx: Arc<OperatorContext>,
    pub endpoints: Endpoints,
    /// On a real control plane: what the operator's client got (no request record there).
    record: Option<crate::clients::ClientRecord>,
    shutdown: tokio::sync::watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

impl DeployedOperator {
    /// Starts everything (allow-all cluster, plain endpoints) and waits until the operator is
    /// ready.
    pub async fn start() -> anyhow::Result<DeployedOperator> {
        Self::start_with(DeploySetup::default()).await
    }

    /// Starts everything as `setup` asks and waits until the operator is ready.
    pub async fn start_with(setup: DeploySetup) -> anyhow::Result<DeployedOperator> {
        let mut config = HarnessConfig::default().cluster;
        if setup.under_rbac {
            config.authorization = cinder_sim::auth::AuthorizationMode::Rbac;
        }
        let cluster = TestCluster::start(config).await?;
        let client = cluster.client().await;
        install_crds(&client).await?;
        create_namespace(&client, NS).await?;

        let (token, lease_namespace) = if setup.under_rbac {
            let mut rbac: Vec<Manifest> = deploy_manifests()?
                .into_iter()
                .filter(|m| RBAC_KINDS.contains(&m.gvk.kind.as_str()))
                .collect();
            if let Some(edit) = &setup.edit_rbac {
                edit(&mut rbac);
            }
            let token =
                apply_service_account(&client, &rbac, DEPLOY_NAMESPACE, DEPLOY_ACCOUNT).await?;
            // This operator runs outside the cluster and probes through the API server: the
            // grant `run --embedded --as-service-account` adds beside deploy/rbac.
            cinder_operator::embedded::grant_health_check_proxy(
                &client,
                DEPLOY_NAMESPACE,
                DEPLOY_ACCOUNT,
            )
            .await?;
            (Some(token), DEPLOY_NAMESPACE)
        } else {
            (None, NS)
        };
        let (op_client, record) = match cluster.embedded() {
            Some(_) => (
                client_with_token(&cluster, OPERATOR_USER_AGENT, token.as_deref()).await?,
                None,
            ),
            None => {
                let (client, record) = crate::clients::recording_client(
                    &cluster,
                    OPERATOR_USER_AGENT,
                    token.as_deref(),
                )
                .await?;
                (client, Some(record))
            }
        };
        let (mut registry, metrics) = Metrics::new_registry();
        // As `cinder-operator run` wires them.
        let device_lock_metrics = cinder_operator::metrics::device_lock_metrics(&metrics);
        device_lock_metrics.register(&mut registry);
        let options = OperatorOptions {
            // The embedded cluster's Service names do not resolve on this host.
            health_check: cinder_operator::context::HealthCheckRoute::ApiServerProxy,
            lease_namespace: lease_namespace.to_string(),
            device_lock_metrics,
            ..Default::default()
        };
        let ctx = OperatorContext::new(op_client.clone(), options, Arc::new(metrics)).await?;
        let binds = Binds {
            metrics: "127.0.0.1:0".to_string(),
            probes: "127.0.0.1:0".to_string(),
            admin: "127.0.0.1:0".to_string(),
        };
        let security = Security {
            metrics: if setup.metrics_secure {
                let cert = ServingCert::load(None, &["localhost".to_string()])?;
                Some((
                    cert,
                    AccessReviewer::new(op_client.clone(), "/metrics", "get"),
                ))
            } else {
                None
            },
            admin: None,
        };
        let endpoints = Endpoints::start_secured(
            &binds,
            &security,
            MetricsEndpoint::new(registry, ctx.metrics.clone(), Some(ctx.coordinator.clone())),
            cinder_operator::cmd_run::readiness(&ctx),
            cinder_operator::cmd_run::admin_sources(&ctx),
        )?;
        let (shutdown, rx) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(run_operator(ctx.clone(), rx));
        let op = DeployedOperator {
            cluster,
            client,
            ctx,
            endpoints,
            record,
            shutdown,
            task: Some(task),
        };
        let ctx = op.ctx.clone();
        eventually("the operator is ready", || {
            let ctx = ctx.clone();
            async move { ctx.is_ready().then_some(()) }
        })
        .await?;
        Ok(op)
    }

    /// Every request the operator's own client made so far.
    pub fn operator_requests(&self) -> Vec<RequestRecord> {
        self.cluster
            .requests()
            .into_iter()
            .filter(|r| r.user_agent == OPERATOR_USER_AGENT)
            .collect()
    }

    /// The operator's requests the API server refused (401 or 403), described: from the
    /// embedded cluster's request record ([`describe_request`]), or on a real control plane
    /// from what the operator's client recorded (`METHOD path -> status`).
    pub fn operator_refusals(&self) -> Vec<String> {
        match &self.record {
            None => self
                .operator_requests()
                .iter()
                .filter(|r| r.status == 401 || r.status == 403)
                .map(describe_request)
                .collect(),
            Some(record) => record
                .answers()
                .into_iter()
                .filter(|a| a.status == 401 || a.status == 403)
                .map(|a| describe_answer(&a))
                .collect(),
        }
    }

    /// Stops the operator (draining), its endpoints and the cluster.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let _ = self.shutdown.send(true);
        if let Some(task) = self.task.take() {
            tokio::time::timeout(EVENTUALLY, task)
                .await
                .context("run_operator did not return after shutdown")???;
        }
        self.endpoints.stop().await;
        self.cluster.shutdown().await;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Metrics

/// The operator's `/metrics` text with one sample in every family (a family without series
/// shows nothing), so that every exported name appears: the operator's registry plus the
/// device-lock families, (with `--leader-elect`) the leader gauge and (with `--shards`) the
/// shard families, as `cinder-operator run` registers them.
pub fn every_metric_family_text() -> anyhow::Result<String> {
    use cinder_lease::metrics::{LeaseVerb, PriorityLabel, PriorityLabels};
    use cinder_operator::metrics::{JobKind, JobResult, KindLabels, LockLabels};
    let (mut registry, metrics) = Metrics::new_registry();
    let device = DeviceLockMetrics::default();
    device.register(&mut registry);
    metrics.observe_step("Config", Duration::from_millis(3));
    metrics.count_step_error("Config", "ConfigReady");
    metrics.observe_cinder("ns", "c", &cinder_operator::crd::CinderStatus::default());
    for kind in [JobKind::DbSync, JobKind::DbPurge, JobKind::ServiceRemove] {
        metrics
            .job(kind)
            .observe("ns", "c", JobResult::Failed, Duration::from_secs(1));
    }
    metrics
        .mailbox_depth
        .get_or_create(&KindLabels {
            kind: "backend".into(),
        })
        .set(1);
    metrics
        .lock_wait_seconds
        .get_or_create(&LockLabels {
            kind: "backend".into(),
            mode: "write".into(),
        })
        .observe(0.1);
    device
        .wait_seconds
        .get_or_create(&PriorityLabels {
            priority: PriorityLabel::High,
        })
        .observe(0.1);
    device.count_call(LeaseVerb::Get);
    device.holds.inc();
    cinder_operator::metrics::register_leader_gauge(&mut registry).set(1);
    let shards = cinder_operator::shards::ShardMetrics::default();
    shards.register(&mut registry);
    shards.held.set(2);
    shards.takeovers.inc();
    Ok(cinder_operator::metrics::encode_openmetrics(&registry)?)
}

// ---------------------------------------------------------------------------------------------
// HTTP

/// A plain HTTP/1.0 GET of `path` (with its query) on `addr`: the status code and the body.
/// Blocking; a connection, read or write that takes longer than 30 s fails.
pub fn http_get(addr: &str, path: &str) -> anyhow::Result<(u16, String)> {
    let timeout = Some(Duration::from_secs(30));
    let mut stream =
        std::net::TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
    stream.set_read_timeout(timeout)?;
    stream.set_write_timeout(timeout)?;
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .with_context(|| format!("GET {path} on {addr}: no end of headers"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("GET {path} on {addr}: no status in {head:?}"))?;
    Ok((status, body.to_string()))
}

/// [`http_get`] on a blocking thread.
pub async fn http_get_async(addr: String, path: String) -> anyhow::Result<(u16, String)> {
    tokio::task::spawn_blocking(move || http_get(&addr, &path)).await?
}

/// Percent-encodes a query parameter value.
pub fn url_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A free TCP port on 127.0.0.1, outside the ephemeral range (see the sim's `free_port`).
pub fn free_port() -> anyhow::Result<u16> {
    Ok(cinder_sim::real_servers::process::free_port()?)
}

// ---------------------------------------------------------------------------------------------
// Prometheus

fn runs(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Makes `promtool` and `prometheus` available: when either is missing and the process runs as
/// root, installs Debian's `prometheus` package with apt-get (an install failure is an error).
/// `Ok(Some(reason))` means the test should skip: not root and not installed.
pub fn ensure_prometheus() -> anyhow::Result<Option<String>> {
    if runs("promtool") && runs("prometheus") {
        return Ok(None);
    }
    if !is_root() {
        return Ok(Some(
            "promtool/prometheus are not installed and this process is not root, so Debian's \
             `prometheus` package cannot be installed (run `apt-get install prometheus` as root)"
                .to_string(),
        ));
    }
    let apt = |args: &[&str]| -> anyhow::Result<()> {
        let out = Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .context("running apt-get")?;
        anyhow::ensure!(
            out.status.success(),
            "apt-get {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    };
    apt(&["update", "-qq"])?;
    apt(&[
        "install",
        "-y",
        "-qq",
        "--no-install-recommends",
        "prometheus",
    ])?;
    anyhow::ensure!(
        runs("promtool") && runs("prometheus"),
        "the prometheus package is installed but promtool/prometheus do not run"
    );
    Ok(None)
}

/// OpenMetrics text rewritten to the Prometheus text format 0.0.4 that `promtool check metrics`
/// parses: a counter family `x` is declared as `x_total` (the name its samples carry) and the
/// `# EOF` line goes. Nothing else changes.
pub fn openmetrics_to_text_format(openmetrics: &str) -> String {
    let counters: Vec<String> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .map(str::to_string)
        .collect();
    let mut out = String::new();
    for line in openmetrics.lines() {
        if line == "# EOF" {
            continue;
        }
        let mut rewritten = line.to_string();
        for prefix in ["# HELP ", "# TYPE ", "# UNIT "] {
            if let Some(rest) = line.strip_prefix(prefix) {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                if counters.iter().any(|c| c == name) {
                    rewritten = format!("{prefix}{name}_total {tail}");
                }
            }
        }
        out.push_str(&rewritten);
        out.push('\n');
    }
    out
}

/// `promtool check metrics` on `text`: its exit status success and its combined output.
pub fn promtool_check_metrics(text: &str) -> anyhow::Result<(bool, String)> {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting promtool")?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(text.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    let mut report = String::from_utf8_lossy(&out.stdout).into_owned();
    report.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok((out.status.success(), report))
}

/// A Prometheus process on 127.0.0.1 scraping one target every second, with its config and
/// storage in a fresh temporary folder; killed (and the folder removed) when dropped.
pub struct PrometheusProcess {
    child: Child,
    dir: PathBuf,
    /// `127.0.0.1:PORT` of its HTTP API.
    pub addr: String,
}

impl PrometheusProcess {
    /// Starts Prometheus scraping `target` (`host:port`, path `/metrics`) as job `job`.
    pub fn start(target: &str, job: &str) -> anyhow::Result<PrometheusProcess> {
        let dir = std::env::temp_dir().join(format!(
            "cinder-e2e-prometheus-{}-{}",
            std::process::id(),
            free_port()?
        ));
        std::fs::create_dir_all(dir.join("data"))?;
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: {job}\n    metrics_path: /metrics\n    \
             static_configs:\n      - targets: [\"{target}\"]\n"
        );
        let config_path = dir.join("prometheus.yml");
        std::fs::write(&config_path, config)?;
        let port = free_port()?;
        let addr = format!("127.0.0.1:{port}");
        let log = std::fs::File::create(dir.join("prometheus.log"))?;
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting prometheus")?;
        Ok(PrometheusProcess { child, dir, addr })
    }

    /// Its log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// The value of the first sample of an instant query, if the query returns one.
    pub async fn query_scalar(&self, query: &str) -> anyhow::Result<Option<f64>> {
        let path = format!("/api/v1/query?query={}", url_encode(query));
        let (status, body) = http_get_async(self.addr.clone(), path).await?;
        anyhow::ensure!(status == 200, "query {query:?}: HTTP {status}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body)?;
        anyhow::ensure!(v["status"] == "success", "query {query:?}: {body}");
        Ok(v["data"]["result"]
            .as_array()
            .and_then(|r| r.first())
            .and_then(|s| s["value"][1].as_str())
            .and_then(|s| s.parse().ok()))
    }
}

impl Drop for PrometheusProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
