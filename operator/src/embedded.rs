//! The `run --embedded` bootstrap: installs the operator's three CRDs (the objects `crdgen`
//! prints) and waits until they are served, reads the sample manifests (YAML streams, one or
//! more documents per file), applies them by server-side apply through discovery (namespaces
//! first), and follows the samples' conditions to print one progress line per change, a line
//! when every sample is Ready, or a message saying where it is stuck.

use crate::crd::{Cinder, CinderBackend, CinderBackupBackend};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::discovery::Scope;
use kube::{Client, CustomResourceExt, Resource};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The field manager of everything the bootstrap applies.
pub(crate) const FIELD_MANAGER: &str = "cinder-operator-embedded";

/// How long the bootstrap waits for the CRDs to be served.
const CRD_WAIT: Duration = Duration::from_secs(60);

/// A sample manifest that cannot be read or applied.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error("cannot read the samples folder {path}: {source}")]
    ReadDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read {path}: {source}")]
    ReadFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}, document {index}: {message}")]
    Document {
        path: PathBuf,
        index: usize,
        message: String,
    },
    #[error("cannot install the CRD {name}: {source}")]
    Crd {
        name: String,
        source: Box<kube::Error>,
    },
    #[error("the CRD {name} is not served after {secs} s")]
    CrdNotServed { name: String, secs: u64 },
    #[error("cannot apply {what}: {source}")]
    Apply {
        what: String,
        source: Box<kube::Error>,
    },
    #[error("cannot get a token for the ServiceAccount {namespace}/{name}: {message}")]
    Token {
        namespace: String,
        name: String,
        message: String,
    },
    #[error("cannot apply {what}: the cluster does not serve {api_version} {kind} ({source})")]
    Discovery {
        what: String,
        api_version: String,
        kind: String,
        source: Box<kube::Error>,
    },
}

/// One manifest document of the samples.
#[derive(Clone, Debug)]
pub struct Manifest {
    /// The file it came from.
    pub path: PathBuf,
    /// Its index in the file (0-based, empty documents counted).
    pub index: usize,
    /// The object.
    pub object: DynamicObject,
    /// `apiVersion` and `kind`.
    pub gvk: GroupVersionKind,
}

impl Manifest {
    /// `Kind namespace/name` (or `Kind name`).
    pub fn describe(&self) -> String {
        let name = self.object.metadata.name.as_deref().unwrap_or("");
        match &self.object.metadata.namespace {
            Some(ns) => format!("{} {ns}/{name}", self.gvk.kind),
            None => format!("{} {name}", self.gvk.kind),
        }
    }

    /// Whether this is a Namespace (applied before the objects in it).
    pub(crate) fn is_namespace(&self) -> bool {
        self.gvk.group.is_empty() && self.gvk.kind == "Namespace"
    }
}

/// Installs (server-side apply) the operator's CRDs and waits until each is Established and
/// its resources answer a list.
pub async fn install_crds(client: &Client) -> Result<(), BootstrapError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    for crd in crate::crd::crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &params, &Patch::Apply(&crd))
            .await
            .map_err(|source| BootstrapError::Crd {
                name: name.clone(),
                source: Box::new(source),
            })?;
    }
    let deadline = Instant::now() + CRD_WAIT;
    let probes: [(String, ApiResource); 3] = [
        (
            Cinder::crd_name().to_string(),
            ApiResource::erase::<Cinder>(&()),
        ),
        (
            CinderBackend::crd_name().to_string(),
            ApiResource::erase::<CinderBackend>(&()),
        ),
        (
            CinderBackupBackend::crd_name().to_string(),
            ApiResource::erase::<CinderBackupBackend>(&()),
        ),
    ];
    for (name, resource) in probes {
        let dynamic: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        loop {
            let established = api
                .get_opt(&name)
                .await
                .ok()
                .flatten()
                .and_then(|c| c.status)
                .and_then(|s| s.conditions)
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                });
            if established && dynamic.list(&ListParams::default().limit(1)).await.is_ok() {
                break;
            }
            if Instant::now() > deadline {
                return Err(BootstrapError::CrdNotServed {
                    name,
                    secs: CRD_WAIT.as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(())
}

/// The YAML files of `dir` (`*.yaml`, `*.yml`, except `kustomization.yaml`), sorted by name.
fn manifest_files(dir: &Path) -> Result<Vec<PathBuf>, BootstrapError> {
    let entries = std::fs::read_dir(dir).map_err(|source| BootstrapError::ReadDir {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| BootstrapError::ReadDir {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = entry.path();
        let is_yaml = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e == "yaml" || e == "yml");
        let is_kustomization = path.file_name().is_some_and(|n| n == "kustomization.yaml");
        if is_yaml && !is_kustomization && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Parses one YAML stream into manifests (empty documents skipped).
pub fn parse_stream(path: &Path, text: &str) -> Result<Vec<Manifest>, BootstrapError> {
    let mut out = Vec::new();
    for (index, document) in serde_norway::Deserializer::from_str(text).enumerate() {
        let doc_error = |message: String| BootstrapError::Document {
            path: path.to_path_buf(),
            index,
            message,
        };
        let yaml =
            serde_norway::Value::deserialize(document).map_err(|e| doc_error(e.to_string()))?;
        if yaml.is_null() {
            continue;
        }
        let json: Value = serde_json::to_value(&yaml).map_err(|e| doc_error(e.to_string()))?;
        let api_version = json
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let kind = json
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if api_version.is_empty() || kind.is_empty() {
            return Err(doc_error("apiVersion and kind are required".to_string()));
        }
        let object: DynamicObject =
            serde_json::from_value(json).map_err(|e| doc_error(e.to_string()))?;
        if object
            .metadata
            .name
            .as_deref()
            .unwrap_or_default()
            .is_empty()
        {
            return Err(doc_error("metadata.name is required".to_string()));
        }
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), api_version.clone()),
        };
        out.push(Manifest {
            path: path.to_path_buf(),
            index,
            object,
            gvk: GroupVersionKind::gvk(&group, &version, &kind),
        });
    }
    Ok(out)
}

/// Every manifest of the YAML files in `dir`, namespaces first, otherwise in file order.
pub fn read_samples(dir: &Path) -> Result<Vec<Manifest>, BootstrapError> {
    let mut manifests = Vec::new();
    for path in manifest_files(dir)? {
        let text = std::fs::read_to_string(&path).map_err(|source| BootstrapError::ReadFile {
            path: path.clone(),
            source,
        })?;
        manifests.extend(parse_stream(&path, &text)?);
    }
    manifests.sort_by_key(|m| !m.is_namespace());
    Ok(manifests)
}

/// The embedded cluster's stand-ins for what the samples name and a real cluster's owner
/// provides (`cinder_sim::controllers::fixtures::RUN_EMBEDDED`: the ClusterSecretStore with
/// sample values, the MariaDB).
#[cfg(feature = "embedded")]
pub(crate) fn fixtures() -> Result<Vec<Manifest>, BootstrapError> {
    let mut out = Vec::new();
    for (path, text) in cinder_sim::controllers::fixtures::RUN_EMBEDDED {
        out.extend(parse_stream(Path::new(path), text)?);
    }
    Ok(out)
}

/// Without the embedded cluster there is nothing to stand in for (`--embedded` is refused).
#[cfg(not(feature = "embedded"))]
pub(crate) fn fixtures() -> Result<Vec<Manifest>, BootstrapError> {
    Ok(Vec::new())
}

/// What `run --embedded` applies: the [`fixtures`] and the samples of `dir`, namespaces first.
pub fn read_bootstrap(dir: &Path) -> Result<Vec<Manifest>, BootstrapError> {
    let mut manifests = fixtures()?;
    manifests.extend(read_samples(dir)?);
    manifests.sort_by_key(|m| !m.is_namespace());
    Ok(manifests)
}

/// Applies `manifests` in order (server-side apply, forced, through discovery).
pub async fn apply(client: &Client, manifests: &[Manifest]) -> Result<(), BootstrapError> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    for m in manifests {
        let what = format!(
            "{} ({} document {})",
            m.describe(),
            m.path.display(),
            m.index
        );
        let (resource, caps) =
            kube::discovery::pinned_kind(client, &m.gvk)
                .await
                .map_err(|source| BootstrapError::Discovery {
                    what: what.clone(),
                    api_version: m.gvk.api_version(),
                    kind: m.gvk.kind.clone(),
                    source: Box::new(source),
                })?;
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => {
                let ns = m.object.metadata.namespace.as_deref().unwrap_or("default");
                Api::namespaced_with(client.clone(), ns, &resource)
            }
            Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        let name = m.object.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &params, &Patch::Apply(&m.object))
            .await
            .map_err(|source| BootstrapError::Apply {
                what,
                source: Box::new(source),
            })?;
    }
    Ok(())
}

/// The ClusterRole (and its binding) [`grant_health_check_proxy`] applies.
pub(crate) const HEALTH_CHECK_PROXY_ROLE: &str = "cinder-operator-health-check-through-api-server";

/// Grants ServiceAccount `namespace/name` `get` on `services/proxy` (the ClusterRole and
/// ClusterRoleBinding [`HEALTH_CHECK_PROXY_ROLE`]): what an operator outside the cluster
/// needs to probe the API Services through the API server
/// (`--health-check-through-api-server`, implied by `--embedded`), and what `deploy/rbac`
/// does not grant, since the in-cluster operator probes them itself.
pub async fn grant_health_check_proxy(
    admin: &Client,
    namespace: &str,
    name: &str,
) -> Result<(), kube::Error> {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let role: ClusterRole = serde_json::from_value(serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": HEALTH_CHECK_PROXY_ROLE},
        "rules": [{"apiGroups": [""], "resources": ["services/proxy"], "verbs": ["get"]}]
    }))
    .map_err(kube::Error::SerdeError)?;
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": HEALTH_CHECK_PROXY_ROLE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
            "name": HEALTH_CHECK_PROXY_ROLE},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    }))
    .map_err(kube::Error::SerdeError)?;
    let params = PatchParams::apply(FIELD_MANAGER).force();
    Api::<ClusterRole>::all(admin.clone())
        .patch(HEALTH_CHECK_PROXY_ROLE, &params, &Patch::Apply(&role))
        .await?;
    Api::<ClusterRoleBinding>::all(admin.clone())
        .patch(HEALTH_CHECK_PROXY_ROLE, &params, &Patch::Apply(&binding))
        .await?;
    Ok(())
}

/// With `--as-service-account`: applies the RBAC manifests of `rbac_dir` (creating the
/// ServiceAccount's namespace first) and the health check's grant ([`grant_health_check_proxy`]:
/// `--embedded` probes through the API server), asks the TokenRequest API for a token of `namespace/name`
/// and answers a client of `url` that authenticates with it.
pub(crate) async fn service_account_client(
    admin: &Client,
    url: &str,
    rbac_dir: &Path,
    namespace: &str,
    name: &str,
) -> Result<Client, BootstrapError> {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
    let token_error = |message: String| BootstrapError::Token {
        namespace: namespace.to_string(),
        name: name.to_string(),
        message,
    };
    let ns: Namespace = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}
    }))
    .map_err(|e| token_error(e.to_string()))?;
    Api::<Namespace>::all(admin.clone())
        .patch(
            namespace,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&ns),
        )
        .await
        .map_err(|source| BootstrapError::Apply {
            what: format!("Namespace {namespace}"),
            source: Box::new(source),
        })?;
    apply(admin, &read_samples(rbac_dir)?).await?;
    grant_health_check_proxy(admin, namespace, name)
        .await
        .map_err(|source| BootstrapError::Apply {
            what: format!("ClusterRole {HEALTH_CHECK_PROXY_ROLE}"),
            source: Box::new(source),
        })?;
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    let answer = accounts
        .create_token_request(name, &Default::default(), &TokenRequest::default())
        .await
        .map_err(|e| token_error(e.to_string()))?;
    let token = answer
        .status
        .and_then(|s| s.token)
        .ok_or_else(|| token_error("the answer holds no token".to_string()))?;
    let mut config = kube::Config::new(url.parse().map_err(|e| token_error(format!("{e}")))?);
    config.auth_info.token = Some(token.into());
    Client::try_from(config).map_err(|e| token_error(e.to_string()))
}

/// One condition as the progress shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConditionState {
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
}

/// One tracked sample (a Cinder or a satellite) and its conditions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SampleState {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// Whether the object exists.
    pub exists: bool,
    pub conditions: Vec<ConditionState>,
}

impl SampleState {
    fn key(&self) -> String {
        format!("{} {}/{}", self.kind, self.namespace, self.name)
    }

    fn is_ready(&self) -> bool {
        self.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    }

    /// `Kind ns/name  Type=Status(Reason) …`.
    pub(crate) fn line(&self) -> String {
        if !self.exists {
            return format!("{}  (missing)", self.key());
        }
        if self.conditions.is_empty() {
            return format!("{}  (no conditions yet)", self.key());
        }
        let conditions: Vec<String> = self
            .conditions
            .iter()
            .map(|c| format!("{}={}({})", c.type_, c.status, c.reason))
            .collect();
        format!("{}  {}", self.key(), conditions.join(" "))
    }

    /// The condition that holds it back: the first non-True condition other than Ready (in
    /// status order), else Ready itself.
    fn blocking(&self) -> Option<&ConditionState> {
        self.conditions
            .iter()
            .find(|c| c.type_ != "Ready" && c.status != "True")
            .or_else(|| self.conditions.iter().find(|c| c.type_ == "Ready"))
    }
}

/// Reads the state of a sample from its object (`status.conditions`).
pub(crate) fn sample_state(
    kind: &str,
    namespace: &str,
    name: &str,
    object: Option<&Value>,
) -> SampleState {
    let conditions = object
        .and_then(|o| o.pointer("/status/conditions"))
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    let field = |k: &str| {
                        c.get(k)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string()
                    };
                    ConditionState {
                        type_: field("type"),
                        status: field("status"),
                        reason: field("reason"),
                        message: field("message"),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    SampleState {
        kind: kind.to_string(),
        namespace: namespace.to_string(),
        name: name.to_string(),
        exists: object.is_some(),
        conditions,
    }
}

/// What the progress printer remembers between two looks.
#[derive(Debug)]
pub(crate) struct Progress {
    stuck_after: Duration,
    lines: BTreeMap<String, String>,
    last_change: Instant,
    ready_reported: bool,
    stuck_reported: bool,
}

impl Progress {
    /// A printer that reports "stuck" after `stuck_after` without any change.
    pub(crate) fn new(stuck_after: Duration, now: Instant) -> Self {
        Progress {
            stuck_after,
            lines: BTreeMap::new(),
            last_change: now,
            ready_reported: false,
            stuck_reported: false,
        }
    }

    /// The lines to print for this look at the samples.
    pub(crate) fn observe(&mut self, samples: &[SampleState], now: Instant) -> Vec<String> {
        let mut out = Vec::new();
        for s in samples {
            let line = s.line();
            if self.lines.get(&s.key()) != Some(&line) {
                self.lines.insert(s.key(), line.clone());
                self.last_change = now;
                self.stuck_reported = false;
                out.push(line);
            }
        }
        let all_ready = !samples.is_empty() && samples.iter().all(SampleState::is_ready);
        if all_ready {
            if !self.ready_reported {
                self.ready_reported = true;
                out.push(format!("every sample is Ready ({} objects)", samples.len()));
            }
            return out;
        }
        self.ready_reported = false;
        if !self.stuck_reported
            && now.saturating_duration_since(self.last_change) >= self.stuck_after
        {
            self.stuck_reported = true;
            out.extend(self.stuck_message(samples));
        }
        out
    }

    fn stuck_message(&self, samples: &[SampleState]) -> Vec<String> {
        let mut out = vec![format!(
            "no progress for {} s; not Ready yet:",
            self.stuck_after.as_secs()
        )];
        for s in samples.iter().filter(|s| !s.is_ready()) {
            let detail = match s.blocking() {
                _ if !s.exists => "the object does not exist".to_string(),
                None => "no conditions yet (is the operator reconciling? see /readyz)".to_string(),
                Some(c) => format!(
                    "{}={} reason {}: {}",
                    c.type_, c.status, c.reason, c.message
                ),
            };
            out.push(format!("  {} {}/{}: {detail}", s.kind, s.namespace, s.name));
        }
        out
    }
}

/// The samples to follow: the Cinders and satellites among `manifests`.
pub fn tracked(manifests: &[Manifest]) -> Vec<(ApiResource, String, String)> {
    let group = Cinder::group(&()).to_string();
    manifests
        .iter()
        .filter(|m| m.gvk.group == group)
        .filter_map(|m| {
            let resource = match m.gvk.kind.as_str() {
                "Cinder" => ApiResource::erase::<Cinder>(&()),
                "CinderBackend" => ApiResource::erase::<CinderBackend>(&()),
                "CinderBackupBackend" => ApiResource::erase::<CinderBackupBackend>(&()),
                _ => return None,
            };
            let namespace = m
                .object
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".to_string());
            Some((
                resource,
                namespace,
                m.object.metadata.name.clone().unwrap_or_default(),
            ))
        })
        .collect()
}

/// Looks at the tracked samples once.
pub async fn look(client: &Client, tracked: &[(ApiResource, String, String)]) -> Vec<SampleState> {
    let mut states = Vec::with_capacity(tracked.len());
    for (resource, namespace, name) in tracked {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, resource);
        let object = match api.get_opt(name).await {
            Ok(found) => found.and_then(|o| serde_json::to_value(o).ok()),
            Err(_) => None,
        };
        states.push(sample_state(
            &resource.kind,
            namespace,
            name,
            object.as_ref(),
        ));
    }
    states
}

/// Prints progress lines (through `print`) every `interval` until the task is dropped.
pub(crate) async fn follow(
    client: Client,
    tracked: Vec<(ApiResource, String, String)>,
    interval: Duration,
    stuck_after: Duration,
    mut print: impl FnMut(&str),
) {
    let mut progress = Progress::new(stuck_after, Instant::now());
    loop {
        let states = look(&client, &tracked).await;
        for line in progress.observe(&states, Instant::now()) {
            print(&line);
        }
        tokio::time::sleep(interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cond(t: &str, s: &str, r: &str) -> Value {
        json!({"type": t, "status": s, "reason": r, "message": format!("{t} says {r}")})
    }

    #[test]
    fn streams_parse_and_namespaces_sort_first() {
        let dir = std::env::temp_dir().join(format!("cinder-embedded-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("a.yaml"),
            "---\napiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: ns}\nstringData: {a: b}\n---\n---\napiVersion: cinder.openstack.c5c3.io/v1alpha1\nkind: Cinder\nmetadata: {name: c, namespace: ns}\nspec: {}\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("b.yml"),
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\n",
        )
        .unwrap();
        std::fs::write(dir.join("notes.txt"), "not a manifest").unwrap();
        let manifests = read_samples(&dir).unwrap();
        let kinds: Vec<&str> = manifests.iter().map(|m| m.gvk.kind.as_str()).collect();
        assert_eq!(kinds, ["Namespace", "Secret", "Cinder"]);
        assert_eq!(manifests[2].gvk.group, "cinder.openstack.c5c3.io");
        assert_eq!(manifests[2].index, 2);
        assert_eq!(tracked(&manifests).len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn documents_without_kind_or_name_are_refused_with_their_place() {
        let err = parse_stream(Path::new("x.yaml"), "apiVersion: v1\nkind: Secret\nmetadata: {name: a}\n---\napiVersion: v1\nmetadata: {name: b}\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("x.yaml, document 1") && err.contains("kind"),
            "{err}"
        );
        let err = parse_stream(
            Path::new("y.yaml"),
            "apiVersion: v1\nkind: Secret\nmetadata: {}\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("metadata.name"), "{err}");
        let err = parse_stream(Path::new("z.yaml"), "a: [")
            .unwrap_err()
            .to_string();
        assert!(err.contains("z.yaml, document 0"), "{err}");
    }

    #[test]
    fn progress_prints_changes_only_then_ready_once() {
        let t0 = Instant::now();
        let mut p = Progress::new(Duration::from_secs(30), t0);
        let a = json!({"status": {"conditions": [cond("SecretsReady", "False", "SecretStoreNotReady")]}});
        let s1 = vec![sample_state("Cinder", "openstack", "cinder", Some(&a))];
        assert_eq!(
            p.observe(&s1, t0),
            ["Cinder openstack/cinder  SecretsReady=False(SecretStoreNotReady)"]
        );
        assert!(p.observe(&s1, t0 + Duration::from_secs(1)).is_empty());
        let b = json!({"status": {"conditions": [cond("Ready", "True", "AllReady")]}});
        let s2 = vec![sample_state("Cinder", "openstack", "cinder", Some(&b))];
        let lines = p.observe(&s2, t0 + Duration::from_secs(2));
        assert_eq!(lines.len(), 2);
        assert!(lines[1].starts_with("every sample is Ready"));
        assert!(p.observe(&s2, t0 + Duration::from_secs(100)).is_empty());
    }

    #[test]
    fn stuck_message_names_the_blocking_condition() {
        let t0 = Instant::now();
        let mut p = Progress::new(Duration::from_secs(30), t0);
        let a = json!({"status": {"conditions": [
            cond("Ready", "False", "NotAllReady"),
            cond("SecretsReady", "True", "SecretsAvailable"),
            cond("BackendsReady", "False", "WaitingForBackends"),
        ]}});
        let s = vec![
            sample_state("Cinder", "openstack", "cinder", Some(&a)),
            sample_state("CinderBackend", "openstack", "nfs", None),
        ];
        assert_eq!(p.observe(&s, t0).len(), 2);
        assert!(p.observe(&s, t0 + Duration::from_secs(29)).is_empty());
        let stuck = p.observe(&s, t0 + Duration::from_secs(31)).join("\n");
        assert!(
            stuck.contains("Cinder openstack/cinder: BackendsReady=False reason WaitingForBackends: BackendsReady says WaitingForBackends"),
            "{stuck}"
        );
        assert!(
            stuck.contains("CinderBackend openstack/nfs: the object does not exist"),
            "{stuck}"
        );
        assert!(
            p.observe(&s, t0 + Duration::from_secs(90)).is_empty(),
            "reported once"
        );
    }
}
