//! Creating and sweeping the Cinder's children: every child carries the common labels and a
//! controller ownerReference to its Cinder, or, when the Cinder projects onto a target cluster
//! (where an ownerReference cannot point), the ownership label
//! `cinder.openstack.c5c3.io/owner=<namespace>.<name>`; derived Secrets are created or replaced
//! when their data changed; content-addressed children are immutable and only created or deleted.

use crate::conditions::not_required;
use crate::crd::Cinder;
use crate::kube_ext::ApiErrorExt;
use crate::kube_ext::delete_if_present;
use crate::kube_ext::reader;
use crate::kube_ext::{create_if_absent, replace_unless_changed};
use crate::names;
use crate::pipeline::{Doing, StepContext, StepResult};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client, Resource};
use std::collections::BTreeMap;

/// Metadata of a child `name` of `cinder` with the common labels plus `extra_labels`, owned as
/// the cluster it lives on allows: by ownerReference on the management cluster, by the
/// ownership label on the Cinder's target cluster.
pub fn child_meta(cinder: &Cinder, name: &str, extra_labels: &[(&str, &str)]) -> ObjectMeta {
    if cinder.spec.target_cluster_ref.is_none() {
        return management_child_meta(cinder, name, extra_labels);
    }
    let mut meta = management_child_meta(cinder, name, extra_labels);
    meta.owner_references = None;
    let owner = crate::kube_ext::ownership::owner_value(
        cinder.metadata.namespace.as_deref().unwrap_or_default(),
        cinder.metadata.name.as_deref().unwrap_or_default(),
    );
    meta.labels
        .get_or_insert_with(Default::default)
        .insert(crate::kube_ext::ownership::OWNER_LABEL.to_string(), owner);
    meta
}

/// Metadata of a child that always lives on the management cluster beside its Cinder (the
/// MariaDB Database, User and Grant): the common labels plus `extra_labels` and a controller
/// ownerReference.
pub fn management_child_meta(
    cinder: &Cinder,
    name: &str,
    extra_labels: &[(&str, &str)],
) -> ObjectMeta {
    let cinder_name = cinder.metadata.name.clone().unwrap_or_default();
    let mut labels = names::common_labels(&cinder_name);
    for (k, v) in extra_labels {
        labels.insert((*k).to_string(), (*v).to_string());
    }
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: cinder.metadata.namespace.clone(),
        labels: Some(labels),
        owner_references: cinder.controller_owner_ref(&()).map(|o| vec![o]),
        ..Default::default()
    }
}

/// A Secret `name` owned by `cinder` holding `data`.
pub fn secret(
    cinder: &Cinder,
    name: &str,
    extra_labels: &[(&str, &str)],
    data: BTreeMap<String, Vec<u8>>,
    immutable: bool,
) -> Secret {
    Secret {
        metadata: child_meta(cinder, name, extra_labels),
        data: Some(data.into_iter().map(|(k, v)| (k, ByteString(v))).collect()),
        immutable: immutable.then_some(true),
        type_: Some("Opaque".to_string()),
        ..Default::default()
    }
}

/// Ensures the Cinder's derived Secret `name` holding `value` under `key` (one value the
/// workloads mount, such as the database connection or the transport URL).
pub async fn ensure_derived_secret(
    client: &Client,
    cinder: &Cinder,
    name: &str,
    key: &str,
    value: &str,
) -> Result<bool, kube::Error> {
    let data = [(key.to_string(), value.as_bytes().to_vec())].into();
    ensure_secret(client, secret(cinder, name, &[], data, false)).await
}

/// Creates `desired`, or replaces the existing Secret when its data or labels differ.
/// Returns whether anything was written.
pub async fn ensure_secret(client: &Client, desired: Secret) -> Result<bool, kube::Error> {
    let ns = desired.metadata.namespace.clone().unwrap_or_default();
    let name = desired.metadata.name.clone().unwrap_or_default();
    let api: Api<Secret> = Api::namespaced(client.clone(), &ns);
    match reader::children().get_opt(&api, &name).await? {
        None => create_if_absent(&api, &desired).await,
        Some(existing) => {
            if existing.data == desired.data
                && existing.metadata.labels == desired.metadata.labels
                && existing.metadata.owner_references == desired.metadata.owner_references
            {
                return Ok(false);
            }
            if existing.immutable == Some(true) {
                api.delete(&name, &DeleteParams::default()).await?;
                api.create(&PostParams::default(), &desired).await?;
                return Ok(true);
            }
            let mut replacement = desired;
            replacement.metadata.resource_version = existing.metadata.resource_version;
            replace_unless_changed(&api, &name, &replacement).await
        }
    }
}

/// Creates the immutable ConfigMap `desired` unless it exists (content-addressed: same name,
/// same content). Returns whether it created it.
pub async fn ensure_config_map(client: &Client, desired: ConfigMap) -> Result<bool, kube::Error> {
    let ns = desired.metadata.namespace.clone().unwrap_or_default();
    let name = desired.metadata.name.clone().unwrap_or_default();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    if reader::children().get_opt(&api, &name).await?.is_some() {
        return Ok(false);
    }
    create_if_absent(&api, &desired).await
}

/// The label selector of `cinder`'s children carrying `extra` too.
pub fn selector(cinder_name: &str, extra: &[(&str, &str)]) -> String {
    let mut parts = vec![format!("{}={cinder_name}", names::LABEL_INSTANCE)];
    parts.push(format!("{}={}", names::LABEL_MANAGED_BY, names::MANAGED_BY));
    for (k, v) in extra {
        parts.push(format!("{k}={v}"));
    }
    parts.join(",")
}

/// The children of kind `K` of Cinder `cinder` in `namespace`, of `component` when given.
pub async fn list_children<K>(
    client: &Client,
    namespace: &str,
    cinder: &str,
    component: Option<names::Component>,
) -> Result<Vec<K>, kube::Error>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let extra: Vec<_> = component
        .map(|c| (names::LABEL_COMPONENT, c.as_str()))
        .into_iter()
        .collect();
    reader::children()
        .list(
            &api,
            &ListParams::default().labels(&selector(cinder, &extra)),
        )
        .await
}

/// An optional child the spec does not ask for: what it is ("HPA"), its condition and reason
/// when absent, and the spec field that is unset.
pub struct NotRequired {
    pub what: &'static str,
    pub condition_type: &'static str,
    pub reason: &'static str,
    pub field: &'static str,
}

impl NotRequired {
    pub const fn new(
        what: &'static str,
        condition_type: &'static str,
        reason: &'static str,
        field: &'static str,
    ) -> Self {
        NotRequired {
            what,
            condition_type,
            reason,
            field,
        }
    }
}

/// Whether the Cinder's status already holds the True `condition_type` with `reason`: the
/// optional child it stands for was found absent or deleted by the pass that set it, so a
/// pass while the spec still does not ask for it need not read (a kind the stores do not hold
/// would cost a GET answered 404 on every pass).
pub fn already_not_required(cinder: &Cinder, condition_type: &str, reason: &str) -> bool {
    cinder.status.as_ref().is_some_and(|s| {
        crate::conditions::find(&s.conditions, condition_type)
            .is_some_and(|c| c.status == "True" && c.reason == reason)
    })
}

/// Ends the step of an optional child the spec does not ask for: when the status already says
/// so ([`already_not_required`]) it proceeds at once; otherwise deletes `what` `name` if it
/// exists (a 404, also of its kind, is the goal state) and proceeds with the True condition of
/// `unwanted`. It reads before it deletes, so that a settled Cinder's periodic passes write
/// nothing.
pub async fn remove_unwanted<K>(
    ctx: &mut StepContext,
    api: &Api<K>,
    name: &str,
    unwanted: NotRequired,
) -> StepResult
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    let what = unwanted.what;
    if already_not_required(&ctx.cinder, unwanted.condition_type, unwanted.reason) {
        // The pass that set the condition found `name` absent or deleted it.
        return ctx.proceed(not_required(
            unwanted.condition_type,
            unwanted.reason,
            unwanted.field,
            &format!("{what} {name}"),
            false,
        ));
    }
    let present = match reader::children().get_opt(api, name).await {
        Ok(found) => found.is_some(),
        Err(e) if e.is_not_found() => false,
        Err(e) => return Err(e).doing(format_args!("reading {what} {name}")),
    };
    let deleted = present
        && delete_if_present(api, name, &DeleteParams::default())
            .await
            .doing(format_args!("deleting {what} {name}"))?;
    ctx.proceed(not_required(
        unwanted.condition_type,
        unwanted.reason,
        unwanted.field,
        &format!("{what} {name}"),
        deleted,
    ))
}

/// What the Cinder's live workloads mount: its Deployments, its CronJobs (the next run mounts
/// what the template names) and its Jobs still running (a running db-sync or service-remove
/// Job's pods, and their retries, mount the ConfigMap of the day the Job was created).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mounts {
    /// The config ConfigMap the API Deployment (`{name}-api`) mounts, if any.
    pub api_config_map: Option<String>,
    /// Every ConfigMap any of those workloads mounts.
    pub config_maps: Vec<String>,
    /// Every Secret any of those workloads mounts.
    pub secrets: Vec<String>,
}

impl Mounts {
    /// Adds what a pod spec's volumes mount; returns the ConfigMaps it mounts.
    pub fn add_pod(&mut self, pod: Option<&k8s_openapi::api::core::v1::PodSpec>) -> Vec<String> {
        let mut config_maps = Vec::new();
        for v in pod.and_then(|p| p.volumes.as_ref()).into_iter().flatten() {
            if let Some(c) = &v.config_map {
                config_maps.push(c.name.clone());
            }
            if let Some(name) = v.secret.as_ref().and_then(|s| s.secret_name.clone()) {
                self.secrets.push(name);
            }
            let sources = v.projected.as_ref().and_then(|p| p.sources.as_ref());
            for source in sources.into_iter().flatten() {
                if let Some(s) = &source.secret {
                    self.secrets.push(s.name.clone());
                }
                if let Some(c) = &source.config_map {
                    config_maps.push(c.name.clone());
                }
            }
        }
        self.config_maps.extend(config_maps.iter().cloned());
        config_maps
    }
}

/// Whether `job` may still start pods: neither its Complete nor its Failed condition is True.
pub fn job_running(job: &k8s_openapi::api::batch::v1::Job) -> bool {
    !job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        })
}

/// The volumes of the Deployments, CronJobs and running Jobs labelled as `cinder`'s children
/// (what a sweep must keep: pods of a rollout still in progress, the next run of a CronJob and
/// a running Job mount the previous content-addressed children).
pub async fn mounts(client: &Client, namespace: &str, cinder: &str) -> Result<Mounts, kube::Error> {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::batch::v1::{CronJob, Job};
    let deployments: Vec<Deployment> = list_children(client, namespace, cinder, None).await?;
    let api_name = names::api_deployment(cinder);
    let mut out = Mounts::default();
    for d in deployments {
        let config_maps = out.add_pod(d.spec.template.spec.as_ref());
        if d.metadata.name.as_deref() == Some(api_name.as_str()) {
            out.api_config_map = config_maps
                .iter()
                .find(|n| n.starts_with(&format!("{cinder}-config-")))
                .cloned();
        }
    }
    let cron_jobs: Vec<CronJob> = list_children(client, namespace, cinder, None).await?;
    for c in &cron_jobs {
        let template = c.spec.job_template.spec.as_ref();
        out.add_pod(template.and_then(|j| j.template.spec.as_ref()));
    }
    let jobs: Vec<Job> = list_children(client, namespace, cinder, None).await?;
    for j in jobs.iter().filter(|j| job_running(j)) {
        out.add_pod(j.spec.as_ref().and_then(|s| s.template.spec.as_ref()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
    use k8s_openapi::api::core::v1::{ConfigMapVolumeSource, PodSpec, SecretVolumeSource, Volume};

    #[test]
    fn a_job_runs_until_complete_or_failed() {
        let with = |type_: &str, status: &str| Job {
            status: Some(JobStatus {
                conditions: Some(vec![JobCondition {
                    type_: type_.into(),
                    status: status.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(job_running(&Job::default()));
        assert!(job_running(&with("Complete", "False")));
        assert!(job_running(&with("Suspended", "True")));
        assert!(!job_running(&with("Complete", "True")));
        assert!(!job_running(&with("Failed", "True")));
    }

    #[test]
    fn a_pod_spec_adds_its_config_maps_and_secrets() {
        let pod = PodSpec {
            volumes: Some(vec![
                Volume {
                    name: "config".into(),
                    config_map: Some(ConfigMapVolumeSource {
                        name: "c-config-old".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                Volume {
                    name: "key".into(),
                    secret: Some(SecretVolumeSource {
                        secret_name: Some("c-backend-1".into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        };
        let mut m = Mounts::default();
        assert_eq!(m.add_pod(Some(&pod)), vec!["c-config-old".to_string()]);
        assert_eq!(m.add_pod(None), Vec::<String>::new());
        assert_eq!(m.config_maps, vec!["c-config-old".to_string()]);
        assert_eq!(m.secrets, vec!["c-backend-1".to_string()]);
    }
}
