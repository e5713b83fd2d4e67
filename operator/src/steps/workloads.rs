//! Shared Deployment building for the workload steps (Scheduler, VolumeServices, BackupService,
//! Deployment): the pod template with the rotation annotations (`cinder.c5c3.io/authtoken-hash`
//! on the API only; `db-connection-hash` and `transport-url-hash` on every workload;
//! `installed-release` on scheduler, volume and backup), the config ConfigMap as the config
//! directory, the environment from the derived Secrets, the spec-hash comparison that decides a
//! replace, the rollout-convergence test, and deletion. A changed digest therefore rolls exactly
//! the workloads that carry it.

use super::children::child_meta;
use crate::conditions::{Cond, kind, reason};
use crate::crd::{Cinder, CinderBackend, NfsSpec};
use crate::kube_ext::reader;
use crate::kube_ext::{create_if_absent, delete_if_present, replace_unless_changed};
use crate::names::{self, Component};
use crate::pipeline::{Artefacts, Doing, StepContext, StepResult};
use crate::planning::config::{
    CONFIG_DIR, ENV_AUTHTOKEN_PASSWORD, ENV_DB_CONNECTION, ENV_TRANSPORT_URL, ROOTWRAP_FILTERS_DIR,
    ROOTWRAP_FILTERS_KEY,
};
use crate::planning::connection_urls::{DB_CONNECTION_KEY, TRANSPORT_URL_KEY};
use crate::planning::containers;
use crate::planning::digest::sha256_hex;
use crate::requeue::REQUEUE_DEPLOYMENT_POLLING;
use crate::steps::secrets::SERVICE_USER_PASSWORD_KEY;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, Container, EnvVar, EnvVarSource, NFSVolumeSource, PodSpec,
    PodTemplateSpec, ProjectedVolumeSource, SecretKeySelector, SecretProjection, Volume,
    VolumeMount, VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{DeleteParams, PropagationPolicy};
use kube::{Api, Client, ResourceExt};
use std::collections::BTreeMap;

/// Annotation on a workload object: sha256 of its desired spec (a different hash means replace).
pub const SPEC_HASH_ANNOTATION: &str = "cinder.openstack.c5c3.io/spec-hash";
/// Annotation on a volume Deployment: the storage device (lock id) its backend lives on, so a
/// Deployment whose CinderBackend is already gone is still deleted under the right lock.
pub const DEVICE_ANNOTATION: &str = "cinder.openstack.c5c3.io/device";
/// Annotation on a volume Deployment: the service host `<cinder>@<backend>`.
pub const HOST_ANNOTATION: &str = "cinder.openstack.c5c3.io/volume-host";
/// The oslo.config environment variable carrying `[DEFAULT] host`.
pub const ENV_HOST: &str = "OS_DEFAULT__HOST";
/// Where a workload's NFS exports are mounted: `/var/lib/cinder/mnt/{backend}`.
pub fn nfs_mount_dir(backend: &str) -> String {
    format!("/var/lib/cinder/mnt/{backend}")
}

/// The rotation annotations a workload carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Carries {
    pub authtoken: bool,
    pub installed_release: bool,
}

impl Carries {
    /// What `component` carries: the API authenticates tokens (authtoken) and rolls during the
    /// upgrade by image; the RPC services carry the installed release (their RPC version pin).
    pub fn of(component: Component) -> Carries {
        match component {
            Component::Api => Carries {
                authtoken: true,
                installed_release: false,
            },
            _ => Carries {
                authtoken: false,
                installed_release: true,
            },
        }
    }
}

/// The pod-template annotations of `component` from the pass's artefacts.
pub fn pod_annotations(
    component: Component,
    artefacts: &Artefacts,
    installed_release: Option<&str>,
) -> BTreeMap<String, String> {
    let carries = Carries::of(component);
    let mut out = BTreeMap::new();
    let mut put = |k: &str, v: Option<&str>| {
        if let Some(v) = v {
            out.insert(k.to_string(), v.to_string());
        }
    };
    if carries.authtoken {
        put(
            names::AUTHTOKEN_HASH_ANNOTATION,
            artefacts.authtoken_hash.as_deref(),
        );
    }
    put(
        names::DB_CONNECTION_HASH_ANNOTATION,
        artefacts.db_connection_hash.as_deref(),
    );
    put(
        names::TRANSPORT_URL_HASH_ANNOTATION,
        artefacts.transport_url_hash.as_deref(),
    );
    if carries.installed_release {
        put(names::INSTALLED_RELEASE_ANNOTATION, installed_release);
    }
    out
}

fn secret_env(name: &str, secret: String, key: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret,
                key: key.to_string(),
                optional: Some(false),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The environment of `component`: the DSN and transport URL from the derived Secrets, and for
/// the API the service-user password from its derived Secret (all three beside the pods).
pub fn workload_env(cinder: &Cinder, component: Component) -> Vec<EnvVar> {
    let name = cinder.metadata.name.clone().unwrap_or_default();
    let mut env = vec![
        secret_env(
            ENV_DB_CONNECTION,
            names::db_connection_secret(&name),
            DB_CONNECTION_KEY,
        ),
        secret_env(
            ENV_TRANSPORT_URL,
            names::transport_url_secret(&name),
            TRANSPORT_URL_KEY,
        ),
    ];
    if Carries::of(component).authtoken {
        env.push(secret_env(
            ENV_AUTHTOKEN_PASSWORD,
            names::service_user_secret(&name),
            SERVICE_USER_PASSWORD_KEY,
        ));
    }
    env
}

/// One extra volume of a workload and where it is mounted.
#[derive(Clone, Debug, PartialEq)]
pub struct ExtraVolume {
    pub volume: Volume,
    pub mount_path: String,
}

impl ExtraVolume {
    /// A projection Secret mounted read-only at `mount_path`.
    pub fn secret(volume_name: &str, secret: &str, mount_path: String) -> ExtraVolume {
        ExtraVolume {
            volume: Volume {
                name: volume_name.to_string(),
                projected: Some(ProjectedVolumeSource {
                    sources: Some(vec![VolumeProjection {
                        secret: Some(SecretProjection {
                            name: secret.to_string(),
                            optional: Some(false),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
                ..Default::default()
            },
            mount_path,
        }
    }

    /// An NFS export mounted at [`nfs_mount_dir`] of `backend`.
    pub fn nfs(volume_name: &str, backend: &str, nfs: &NfsSpec) -> ExtraVolume {
        ExtraVolume {
            volume: Volume {
                name: volume_name.to_string(),
                nfs: Some(NFSVolumeSource {
                    server: nfs.server.clone(),
                    path: nfs.path.clone(),
                    read_only: Some(false),
                }),
                ..Default::default()
            },
            mount_path: nfs_mount_dir(backend),
        }
    }
}

/// What differs between the workloads.
#[derive(Clone, Debug)]
pub struct WorkloadSpec {
    pub component: Component,
    pub name: String,
    pub replicas: i32,
    /// `Recreate` (single-writer volume services) instead of the default rolling update.
    pub recreate: bool,
    pub command: Vec<String>,
    pub extra_env: Vec<EnvVar>,
    pub extra_volumes: Vec<ExtraVolume>,
    /// Extra labels on the Deployment and its pods (the backend of a volume service).
    pub extra_labels: Vec<(String, String)>,
    /// Extra annotations on the Deployment object (not the pods).
    pub object_annotations: BTreeMap<String, String>,
    pub pod_annotations: BTreeMap<String, String>,
    pub config_map: String,
    pub container_port: Option<i32>,
    /// An HPA owns the replica count: the Deployment is written without `spec.replicas`, and a
    /// replacement keeps the live count.
    pub hpa_owns_replicas: bool,
}

impl WorkloadSpec {
    /// A workload of `component` named `name` running `command` with the config ConfigMap
    /// `config_map`: rolling updates, the pod annotations of `artefacts` (and of `release` for
    /// the components that carry it), no extras.
    pub fn new(
        component: Component,
        name: &str,
        replicas: i32,
        command: &[&str],
        config_map: String,
        artefacts: &Artefacts,
        release: Option<&str>,
    ) -> Self {
        WorkloadSpec {
            component,
            name: name.to_string(),
            replicas,
            recreate: false,
            command: command.iter().map(|c| c.to_string()).collect(),
            extra_env: Vec::new(),
            extra_volumes: Vec::new(),
            extra_labels: Vec::new(),
            object_annotations: BTreeMap::new(),
            pod_annotations: pod_annotations(component, artefacts, release),
            config_map,
            container_port: None,
            hpa_owns_replicas: false,
        }
    }
}

/// The desired Deployment of `spec` owned by `cinder`, with its spec-hash annotation.
pub fn desired_deployment(cinder: &Cinder, spec: &WorkloadSpec) -> Deployment {
    let cinder_name = cinder.metadata.name.clone().unwrap_or_default();
    let mut labels = names::component_labels(&cinder_name, spec.component);
    for (k, v) in &spec.extra_labels {
        labels.insert(k.clone(), v.clone());
    }
    let mut volumes = vec![Volume {
        name: "config".to_string(),
        config_map: Some(ConfigMapVolumeSource {
            name: spec.config_map.clone(),
            ..Default::default()
        }),
        ..Default::default()
    }];
    let mut mounts = vec![config_mount()];
    if matches!(spec.component, Component::Volume | Component::Backup) {
        let (volume, mount) = rootwrap_filters_volume(&spec.config_map);
        volumes.push(volume);
        mounts.push(mount);
    }
    for extra in &spec.extra_volumes {
        volumes.push(extra.volume.clone());
        mounts.push(VolumeMount {
            name: extra.volume.name.clone(),
            mount_path: extra.mount_path.clone(),
            read_only: Some(extra.volume.nfs.is_none()),
            ..Default::default()
        });
    }
    let mut env = workload_env(cinder, spec.component);
    env.extend(spec.extra_env.iter().cloned());
    let (startup_probe, readiness_probe, liveness_probe) = containers::probes(spec.component);
    let container = Container {
        resources: containers::resources(&cinder.spec, spec.component),
        startup_probe,
        readiness_probe,
        liveness_probe,
        name: spec.component.as_str().to_string(),
        image: Some(cinder.spec.image.reference()),
        command: Some(spec.command.clone()),
        env: Some(env),
        volume_mounts: Some(mounts),
        ports: spec.container_port.map(|p| {
            vec![k8s_openapi::api::core::v1::ContainerPort {
                container_port: p,
                name: Some("api".to_string()),
                ..Default::default()
            }]
        }),
        ..Default::default()
    };
    let deployment_spec = DeploymentSpec {
        // An HPA owns the count: the field is left out, so no write of the operator's sets it.
        replicas: (!spec.hpa_owns_replicas).then_some(spec.replicas),
        selector: LabelSelector {
            match_labels: Some(labels.clone()),
            ..Default::default()
        },
        strategy: spec.recreate.then(|| DeploymentStrategy {
            type_: Some("Recreate".to_string()),
            ..Default::default()
        }),
        template: PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(labels),
                annotations: Some(spec.pod_annotations.clone()),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![container],
                volumes: Some(volumes),
                ..Default::default()
            }),
        },
        ..Default::default()
    };
    let extra: Vec<(&str, &str)> =
        std::iter::once((names::LABEL_COMPONENT, spec.component.as_str()))
            .chain(
                spec.extra_labels
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str())),
            )
            .collect();
    let mut metadata = child_meta(cinder, &spec.name, &extra);
    let mut annotations = spec.object_annotations.clone();
    annotations.insert(SPEC_HASH_ANNOTATION.to_string(), hash_of(&deployment_spec));
    metadata.annotations = Some(annotations);
    Deployment {
        metadata,
        spec: deployment_spec,
        ..Default::default()
    }
}

/// sha256 of the JSON form of `value` (empty when it cannot be serialised).
pub fn hash_of<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value)
        .map(|s| sha256_hex(s.as_bytes()))
        .unwrap_or_default()
}

/// The spec hash an object carries.
pub fn spec_hash(meta: &ObjectMeta) -> Option<&str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(SPEC_HASH_ANNOTATION))
        .map(String::as_str)
}

/// Whether `existing` must be replaced by `desired` (absent, or another spec hash).
pub fn needs_write(existing: Option<&Deployment>, desired: &Deployment) -> bool {
    existing.is_none_or(|e| spec_hash(&e.metadata) != spec_hash(&desired.metadata))
}

/// Creates `desired`, or replaces the existing Deployment when its spec hash differs. Returns
/// whether anything was written.
pub async fn ensure_deployment(client: &Client, desired: &Deployment) -> Result<bool, kube::Error> {
    let ns = desired.metadata.namespace.clone().unwrap_or_default();
    let name = desired.metadata.name.clone().unwrap_or_default();
    let api: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let existing = reader::children().get_opt(&api, &name).await?;
    if !needs_write(existing.as_ref(), desired) {
        return Ok(false);
    }
    match existing {
        None => create_if_absent(&api, desired).await,
        Some(e) => {
            let mut replacement = desired.clone();
            replacement.metadata.resource_version = e.metadata.resource_version;
            if replacement.spec.replicas.is_none() {
                // The count belongs to an HPA: keep what it set (a conflict with its write
                // retries on the next pass).
                replacement.spec.replicas = e.spec.replicas;
            }
            replace_unless_changed(&api, &name, &replacement).await
        }
    }
}

/// Deletes Deployment `name` (foreground is not needed: its pods follow); returns whether it
/// existed. It reads before it deletes, so that passes that find it absent write nothing.
pub async fn delete_deployment(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<bool, kube::Error> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    if reader::children().get_opt(&api, name).await?.is_none() {
        return Ok(false);
    }
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..Default::default()
    };
    delete_if_present(&api, name, &params).await
}

/// Whether the rollout of `d`'s current generation fully converged: observed, every replica
/// updated, ready and available, and nothing left over.
pub fn converged(d: &Deployment) -> bool {
    let want = d.spec.replicas.unwrap_or(1);
    let Some(status) = d.status.as_ref() else {
        return false;
    };
    let generation = d.metadata.generation.unwrap_or(0);
    status.observed_generation.unwrap_or(0) >= generation
        && status.updated_replicas.unwrap_or(0) == want
        && status.ready_replicas.unwrap_or(0) == want
        && status.available_replicas.unwrap_or(0) == want
        && status.replicas.unwrap_or(0) == want
}

/// The condition a workload step reports: its type, its reason once the rollout converged and
/// its reason while waiting (for the rendered config or the rollout).
pub struct WorkloadCondition {
    kind: &'static str,
    ready: &'static str,
    waiting: &'static str,
}

impl WorkloadCondition {
    /// SchedulerReady: SchedulerReady / WaitingForScheduler.
    pub const SCHEDULER: Self = Self::new(
        kind::SCHEDULER_READY,
        reason::SCHEDULER_READY,
        reason::WAITING_FOR_SCHEDULER,
    );

    /// BackupServiceReady: BackupServiceReady / WaitingForBackupService.
    pub const BACKUP_SERVICE: Self = Self::new(
        kind::BACKUP_SERVICE_READY,
        reason::BACKUP_SERVICE_READY,
        reason::WAITING_FOR_BACKUP_SERVICE,
    );

    /// DeploymentReady: DeploymentReady / WaitingForDeployment.
    pub const API: Self = Self::new(
        kind::DEPLOYMENT_READY,
        reason::DEPLOYMENT_READY,
        reason::WAITING_FOR_DEPLOYMENT,
    );

    /// VolumeServicesReady: AllVolumeServicesReady / WaitingForVolumeServices.
    pub const VOLUME_SERVICES: Self = Self::new(
        kind::VOLUME_SERVICES_READY,
        reason::ALL_VOLUME_SERVICES_READY,
        reason::WAITING_FOR_VOLUME_SERVICES,
    );

    pub const fn new(kind: &'static str, ready: &'static str, waiting: &'static str) -> Self {
        WorkloadCondition {
            kind,
            ready,
            waiting,
        }
    }

    /// True with the ready reason.
    pub fn ready(&self, message: impl Into<String>) -> Cond {
        Cond::true_(self.kind, self.ready, message)
    }

    /// False with the waiting reason.
    pub fn waiting(&self, message: impl Into<String>) -> Cond {
        Cond::false_(self.kind, self.waiting, message)
    }

    /// Ends the step waiting for the rendered config (polled every
    /// [`REQUEUE_DEPLOYMENT_POLLING`]).
    pub fn await_config(&self, ctx: &mut StepContext) -> StepResult {
        ctx.requeue(
            self.waiting("waiting for the rendered config"),
            REQUEUE_DEPLOYMENT_POLLING,
        )
    }
}

/// Ensures `desired` on `client` and ends the step with it: waiting while the rollout runs
/// (polled every [`REQUEUE_DEPLOYMENT_POLLING`]), ready with `ready_message` once converged; an
/// API error fails the step.
pub async fn converge(
    ctx: &mut StepContext,
    client: &Client,
    desired: &Deployment,
    condition: &WorkloadCondition,
    ready_message: String,
) -> StepResult {
    let name = desired.metadata.name.clone().unwrap_or_default();
    if ensure_converged(client, desired)
        .await
        .doing(format_args!("writing Deployment {name}"))?
    {
        ctx.proceed(condition.ready(ready_message))
    } else {
        ctx.requeue(
            condition.waiting(format!("Deployment {name} is rolling out")),
            REQUEUE_DEPLOYMENT_POLLING,
        )
    }
}

/// Ensures `desired` and reports whether it is converged (a Deployment just written is not).
pub async fn ensure_converged(client: &Client, desired: &Deployment) -> Result<bool, kube::Error> {
    if ensure_deployment(client, desired).await? {
        return Ok(false);
    }
    let ns = desired.metadata.namespace.clone().unwrap_or_default();
    let name = desired.metadata.name.clone().unwrap_or_default();
    let api: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    Ok(reader::children()
        .get_opt(&api, &name)
        .await?
        .is_some_and(|d| converged(&d)))
}

/// The CinderBackends of Cinder `cinder` in `namespace`, by name (including those being deleted).
pub async fn attached_backends(
    client: &Client,
    namespace: &str,
    cinder: &str,
) -> Result<BTreeMap<String, CinderBackend>, kube::Error> {
    Ok(
        super::projection::attached::<CinderBackend>(client, namespace, cinder)
            .await?
            .into_iter()
            .map(|b| (b.name_any(), b))
            .collect(),
    )
}

/// The volumes every volume backend contributes to a workload (its NFS export, or its RBD
/// projection Secret with the keyring), named after the backend.
pub fn backend_volumes(
    backend: &crate::pipeline::ProjectedBackend,
    spec: Option<&CinderBackend>,
) -> Vec<ExtraVolume> {
    let mut out = vec![ExtraVolume::secret(
        &format!("backend-{}", backend.name),
        &backend.secret_name,
        crate::planning::backend_projection::backend_mount_dir(&backend.name),
    )];
    if let Some(nfs) = spec.and_then(|b| b.spec.satellite.nfs.as_ref())
        && backend.backend_type == Some(crate::crd::BackendType::Nfs)
    {
        out.push(ExtraVolume::nfs(
            &format!("nfs-{}", backend.name),
            &backend.name,
            nfs,
        ));
    }
    out
}

/// What the Job-reporting workload steps (DBPurge, the detach in VolumeServices) share beyond
/// the client: an event recorder, their metrics pair and, for one run, the step actor's memory
/// of which Job UIDs were already counted (metrics and events happen once per Job UID; the
/// Job's counted marker carries that across restarts).
#[derive(Clone)]
pub struct JobReporting {
    pub recorder: kube::runtime::events::Recorder,
    pub metrics: crate::metrics::JobMetrics,
    memory: crate::pipeline::StepMemory,
}

impl JobReporting {
    /// A recorder reporting as `cinder-operator` and the served `kind` pair of `env`'s metrics.
    pub fn new(env: &super::env::StepEnv, kind: crate::metrics::JobKind) -> Self {
        JobReporting {
            recorder: crate::events::recorder(env.client.clone(), None),
            metrics: env.metrics.job(kind).clone(),
            memory: Default::default(),
        }
    }

    /// For one run: remembering through the run's step memory.
    pub fn for_run(&self, memory: &crate::pipeline::StepMemory) -> Self {
        JobReporting {
            memory: memory.clone(),
            ..self.clone()
        }
    }

    /// The run's step memory.
    pub fn memory(&self) -> &crate::pipeline::StepMemory {
        &self.memory
    }

    /// True the first time it is asked for `key` (a Job UID, or a backend/UID tuple).
    pub async fn first_time(&self, key: &str) -> bool {
        self.memory.first_time(key).await
    }

    /// Feeds the pair once for `job` (remembered under `key` in this process, and by the
    /// Job's counted marker across processes); returns whether it counted.
    pub async fn observe_once(
        &self,
        job: &super::job_marker::CountedJob<'_>,
        key: &str,
        namespace: &str,
        cinder: &str,
        result: crate::metrics::JobResult,
        duration: std::time::Duration,
    ) -> bool {
        let first = self.first_time(key).await;
        super::job_marker::count_once(
            first,
            || job.claim(namespace, result),
            || self.memory.unsee(key),
            || self.metrics.observe(namespace, cinder, result, duration),
        )
        .await
    }
}

/// The read-only mount of the `config` volume (the rendered config ConfigMap) at [`CONFIG_DIR`].
pub fn config_mount() -> VolumeMount {
    VolumeMount {
        name: "config".to_string(),
        mount_path: CONFIG_DIR.to_string(),
        read_only: Some(true),
        ..Default::default()
    }
}

/// The `rootwrap-filters` volume of cinder-volume and cinder-backup, the only processes that run
/// `cinder-rootwrap`: the config ConfigMap's filter file alone, mounted read-only at
/// [`ROOTWRAP_FILTERS_DIR`] (a directory of `rootwrap.conf`'s `filters_path`, which must hold
/// nothing but filter files).
pub fn rootwrap_filters_volume(config_map: &str) -> (Volume, VolumeMount) {
    let volume = Volume {
        name: "rootwrap-filters".to_string(),
        config_map: Some(ConfigMapVolumeSource {
            name: config_map.to_string(),
            items: Some(vec![k8s_openapi::api::core::v1::KeyToPath {
                key: ROOTWRAP_FILTERS_KEY.to_string(),
                path: ROOTWRAP_FILTERS_KEY.to_string(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mount = VolumeMount {
        name: volume.name.clone(),
        mount_path: ROOTWRAP_FILTERS_DIR.to_string(),
        read_only: Some(true),
        ..Default::default()
    };
    (volume, mount)
}

/// `name` set from `key` of the Cinder's derived Secret `secret` (which must exist).
pub fn env_from_secret(name: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value_from: Some(k8s_openapi::api::core::v1::EnvVarSource {
            secret_key_ref: Some(k8s_openapi::api::core::v1::SecretKeySelector {
                name: secret.to_string(),
                key: key.to_string(),
                optional: Some(false),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The pod template of the Cinder's one-shot Jobs (db-sync and the phase Jobs, service-remove,
/// db-purge): one container, never restarted, the rendered config ConfigMap as its `config` volume.
pub fn config_job_pod(
    labels: BTreeMap<String, String>,
    container: k8s_openapi::api::core::v1::Container,
    config_map: &str,
) -> k8s_openapi::api::core::v1::PodTemplateSpec {
    use k8s_openapi::api::core::v1::{ConfigMapVolumeSource, PodSpec, PodTemplateSpec, Volume};
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            restart_policy: Some("Never".to_string()),
            containers: vec![container],
            volumes: Some(vec![Volume {
                name: "config".to_string(),
                config_map: Some(ConfigMapVolumeSource {
                    name: config_map.to_string(),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cinder() -> Cinder {
        crate::test_fixtures::cinder()
    }

    fn artefacts() -> Artefacts {
        Artefacts {
            authtoken_hash: Some("a1".into()),
            db_connection_hash: Some("d1".into()),
            transport_url_hash: Some("t1".into()),
            ..Default::default()
        }
    }

    fn spec(component: Component, artefacts: &Artefacts) -> WorkloadSpec {
        WorkloadSpec {
            component,
            name: format!("c-{}", component.as_str()),
            replicas: 1,
            recreate: false,
            command: vec!["x".into()],
            extra_env: vec![],
            extra_volumes: vec![],
            extra_labels: vec![],
            object_annotations: BTreeMap::new(),
            pod_annotations: pod_annotations(component, artefacts, Some("2026.1")),
            config_map: "c-config-1".into(),
            container_port: None,
            hpa_owns_replicas: false,
        }
    }

    #[test]
    fn an_hpa_owned_deployment_carries_no_replica_count() {
        let a = artefacts();
        let c = crate::test_fixtures::cinder();
        let mut s = spec(Component::Api, &a);
        assert_eq!(desired_deployment(&c, &s).spec.replicas, Some(1));
        s.hpa_owns_replicas = true;
        let d = desired_deployment(&c, &s);
        assert_eq!(d.spec.replicas, None);
        assert_ne!(spec_hash(&d.metadata), None);
    }

    #[test]
    fn authtoken_only_on_the_api_installed_release_only_on_rpc_services() {
        let a = artefacts();
        let api = pod_annotations(Component::Api, &a, Some("2026.1"));
        assert_eq!(
            api.get(names::AUTHTOKEN_HASH_ANNOTATION)
                .map(String::as_str),
            Some("a1")
        );
        assert!(!api.contains_key(names::INSTALLED_RELEASE_ANNOTATION));
        for c in [Component::Scheduler, Component::Volume, Component::Backup] {
            let p = pod_annotations(c, &a, Some("2026.1"));
            assert!(!p.contains_key(names::AUTHTOKEN_HASH_ANNOTATION));
            assert_eq!(p[names::INSTALLED_RELEASE_ANNOTATION], "2026.1");
            assert_eq!(p[names::DB_CONNECTION_HASH_ANNOTATION], "d1");
            assert_eq!(p[names::TRANSPORT_URL_HASH_ANNOTATION], "t1");
        }
    }

    #[test]
    fn a_rotated_password_changes_only_the_api_spec_hash() {
        let c = cinder();
        let before = artefacts();
        let mut after = before.clone();
        after.authtoken_hash = Some("a2".into());
        for (component, changes) in [
            (Component::Api, true),
            (Component::Scheduler, false),
            (Component::Volume, false),
            (Component::Backup, false),
        ] {
            let old = desired_deployment(&c, &spec(component, &before));
            let new = desired_deployment(&c, &spec(component, &after));
            assert_eq!(needs_write(Some(&old), &new), changes, "{component:?}");
        }
    }

    #[test]
    fn the_rootwrap_filters_are_mounted_alone_where_rootwrap_looks_for_volume_and_backup() {
        let c = cinder();
        let a = artefacts();
        for (component, mounted) in [
            (Component::Api, false),
            (Component::Scheduler, false),
            (Component::Volume, true),
            (Component::Backup, true),
        ] {
            let pod = desired_deployment(&c, &spec(component, &a))
                .spec
                .template
                .spec
                .unwrap();
            let volume = pod
                .volumes
                .unwrap_or_default()
                .into_iter()
                .find(|v| v.name == "rootwrap-filters");
            let mount = pod.containers[0]
                .volume_mounts
                .clone()
                .unwrap_or_default()
                .into_iter()
                .find(|m| m.name == "rootwrap-filters");
            assert_eq!(volume.is_some(), mounted, "{component:?}");
            assert_eq!(mount.is_some(), mounted, "{component:?}");
            if let (Some(v), Some(m)) = (volume, mount) {
                let cm = v.config_map.unwrap();
                assert_eq!(cm.name, "c-config-1");
                let items = cm.items.unwrap();
                assert_eq!(
                    (items.len(), items[0].key.as_str(), items[0].path.as_str()),
                    (1, "volume.filters", "volume.filters")
                );
                assert_eq!(m.mount_path, "/usr/share/cinder/rootwrap");
                assert_eq!(m.read_only, Some(true));
            }
        }
    }

    #[test]
    fn api_env_carries_the_password_others_do_not() {
        let c = cinder();
        let names_of = |comp| {
            workload_env(&c, comp)
                .into_iter()
                .map(|e| e.name)
                .collect::<Vec<_>>()
        };
        assert!(names_of(Component::Api).contains(&ENV_AUTHTOKEN_PASSWORD.to_string()));
        assert!(!names_of(Component::Scheduler).contains(&ENV_AUTHTOKEN_PASSWORD.to_string()));
        assert!(names_of(Component::Volume).contains(&ENV_DB_CONNECTION.to_string()));
    }

    #[test]
    fn convergence_needs_every_replica_of_the_current_generation() {
        let c = cinder();
        let mut d = desired_deployment(&c, &spec(Component::Scheduler, &artefacts()));
        assert!(!converged(&d));
        d.metadata.generation = Some(2);
        d.status = Some(
            serde_json::from_value(serde_json::json!({"observedGeneration": 2, "replicas": 1,
                "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1}))
            .unwrap(),
        );
        assert!(converged(&d));
        d.metadata.generation = Some(3);
        assert!(!converged(&d));
    }
}
