//! What the Cinder's live workloads mount ([`Mounts`]: its Deployments, its CronJobs and its
//! Jobs still running, [`job_running`]): the ConfigMaps and Secrets a sweep of superseded
//! children must keep.

use super::list::list_children;
use crate::kube_ext::reader::ClusterStores;
use crate::names;
use kube::Client;

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
    pub(crate) fn add_pod(
        &mut self,
        pod: Option<&k8s_openapi::api::core::v1::PodSpec>,
    ) -> Vec<String> {
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
pub async fn mounts(
    client: &Client,
    reads: &ClusterStores,
    namespace: &str,
    cinder: &str,
) -> Result<Mounts, kube::Error> {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::batch::v1::{CronJob, Job};
    let deployments: Vec<Deployment> =
        list_children(client, reads, namespace, cinder, None).await?;
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
    let cron_jobs: Vec<CronJob> = list_children(client, reads, namespace, cinder, None).await?;
    for c in &cron_jobs {
        let template = c.spec.job_template.spec.as_ref();
        out.add_pod(template.and_then(|j| j.template.spec.as_ref()));
    }
    let jobs: Vec<Job> = list_children(client, reads, namespace, cinder, None).await?;
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
