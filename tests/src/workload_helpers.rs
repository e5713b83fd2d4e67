//! Helpers of the workload, detach and purge scenarios: the Deployments, Services, PDBs and
//! CronJobs the workload steps create, Job outcome rules for the purge runs, the service-remove
//! finalizer of a backend, and the pod-template annotations that roll a workload.

use crate::database_helpers::*;
use crate::fixtures::{Credentials, create_cinder, create_nfs_backend, put_secret};
use crate::test_cluster::HasControllers;
use crate::test_env::NS;
use crate::waiting::{eventually, wait_cinder_condition};
use cinder_operator::crd::CinderBackend;
use cinder_sim::controllers::FiringOutcome;
use cinder_sim::controllers::config::{JobRule, PodOutcome};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::ListParams;
use kube::{Api, Client};
use std::collections::BTreeMap;

/// The service-remove finalizer of CinderBackends.
pub const SERVICE_REMOVE_FINALIZER: &str = "cinder.openstack.c5c3.io/service-remove";

/// A ready environment (store, credentials, MariaDB) and Cinder `name` with one NFS backend
/// `backend`; waits until DatabaseReady is True.
pub async fn cinder_with_nfs(
    client: &Client,
    name: &str,
    backend: &str,
    extra: serde_json::Value,
) -> anyhow::Result<Credentials> {
    let creds = database_environment(client, name).await?;
    create_cinder(client, name, extra).await?;
    create_nfs_backend(client, backend, name).await?;
    wait_cinder_condition(client, name, "DatabaseReady", "True", "DatabaseSynced").await?;
    Ok(creds)
}

/// Deployment `name` in [`NS`], if present.
pub async fn deployment(client: &Client, name: &str) -> Option<Deployment> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), NS);
    api.get_opt(name).await.ok().flatten()
}

/// The names of the Deployments in [`NS`], sorted.
pub async fn deployment_names(client: &Client) -> Vec<String> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let mut names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|d| d.metadata.name)
        .collect();
    names.sort();
    names
}

/// The pod-template annotations of Deployment `name`.
pub async fn template_annotations(client: &Client, name: &str) -> BTreeMap<String, String> {
    deployment(client, name)
        .await
        .and_then(|d| d.spec.template.metadata)
        .and_then(|m| m.annotations)
        .unwrap_or_default()
}

/// Puts a Job rule first: purge Jobs (`<cinder>-db-purge-<n>`) end with `outcome`.
pub fn purge_rule(cluster: &impl HasControllers, outcome: PodOutcome) -> anyhow::Result<()> {
    let pattern = regex::Regex::new(r"-db-purge-[0-9]+$")?;
    let controllers = cluster
        .controllers()
        .ok_or_else(|| anyhow::anyhow!("the simulated controllers are off"))?;
    controllers.update_config(|c| c.jobs.rules.insert(0, JobRule::new(pattern, outcome)));
    Ok(())
}

/// Whether CinderBackend `name` still exists and carries the service-remove finalizer.
pub async fn backend_finalized(client: &Client, name: &str) -> Option<bool> {
    let api: Api<CinderBackend> = Api::namespaced(client.clone(), NS);
    let b = api.get_opt(name).await.ok().flatten()?;
    Some(
        b.metadata
            .finalizers
            .unwrap_or_default()
            .iter()
            .any(|f| f == SERVICE_REMOVE_FINALIZER),
    )
}

/// Rotates the service-user password of the fixture Secret `cinder-keystone`.
pub async fn rotate_service_user_password(client: &Client, password: &str) -> anyhow::Result<()> {
    put_secret(client, "cinder-keystone", &[("password", password)]).await
}

/// Puts a Job rule first: the service-remove Jobs end with `outcome` after `delay`.
pub fn service_remove_rule(
    cluster: &impl HasControllers,
    outcome: PodOutcome,
    delay: std::time::Duration,
) -> anyhow::Result<()> {
    job_rule(cluster, "-service-remove", outcome, delay)
}

/// Makes CronJob `name` fire once.
pub fn trigger(cluster: &impl HasControllers, name: &str) -> anyhow::Result<()> {
    cluster
        .controllers()
        .ok_or_else(|| anyhow::anyhow!("the simulated controllers are off"))?
        .trigger_cronjob(NS, name);
    Ok(())
}

/// Fires CronJob `name` now and waits until the firing spawned a Job, firing again while the
/// CronJob controller still counts its previous Job as active (concurrencyPolicy Forbid: the
/// controller decides from its watch cache, which can be a moment behind the Job's end).
/// Returns the spawned Job's name.
pub async fn run_cronjob_now(cluster: &impl HasControllers, name: &str) -> anyhow::Result<String> {
    if let Some(client) = cluster.real_client() {
        return job_from_cronjob(&client, name).await;
    }
    let controllers = cluster
        .controllers()
        .ok_or_else(|| anyhow::anyhow!("the simulated controllers are off"))?;
    let firings_of = || {
        controllers
            .cronjob_firings()
            .into_iter()
            .filter(|f| f.namespace == NS && f.name == name)
            .collect::<Vec<_>>()
    };
    for _ in 0..60 {
        let before = firings_of().len();
        trigger(cluster, name)?;
        let outcome = eventually(&format!("CronJob {name} to fire"), || async {
            firings_of().get(before).map(|f| f.outcome.clone())
        })
        .await?;
        if let FiringOutcome::Spawned(job) = outcome {
            return Ok(job);
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    anyhow::bail!("CronJob {name} skipped every firing for 60 tries")
}

/// On a real control plane: a Job from CronJob `name`'s template as `kubectl create job
/// --from=cronjob/NAME` makes it (the template's labels and annotations,
/// `cronjob.kubernetes.io/instantiate: manual`, the CronJob as its controller), named
/// `NAME-<milliseconds>`, once the CronJob exists; returns its name.
async fn job_from_cronjob(client: &Client, name: &str) -> anyhow::Result<String> {
    use k8s_openapi::api::batch::v1::{CronJob, Job};
    let cronjobs = Api::<CronJob>::namespaced(client.clone(), NS);
    let cronjob = eventually(&format!("CronJob {name}"), || {
        let cronjobs = cronjobs.clone();
        async move { cronjobs.get_opt(name).await.ok().flatten() }
    })
    .await?;
    let template = cronjob.spec.job_template.clone();
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis();
    let job_name = format!("{name}-{millis}");
    let meta = template.metadata.unwrap_or_default();
    let mut annotations = meta.annotations.unwrap_or_default();
    annotations.insert(
        "cronjob.kubernetes.io/instantiate".to_string(),
        "manual".to_string(),
    );
    let job = Job {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(job_name.clone()),
            namespace: Some(NS.to_string()),
            labels: meta.labels,
            annotations: Some(annotations),
            owner_references: Some(vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                    api_version: "batch/v1".to_string(),
                    kind: "CronJob".to_string(),
                    name: name.to_string(),
                    uid: cronjob.metadata.uid.clone().unwrap_or_default(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                },
            ]),
            ..Default::default()
        },
        spec: template.spec,
        ..Default::default()
    };
    Api::<Job>::namespaced(client.clone(), NS)
        .create(&Default::default(), &job)
        .await?;
    Ok(job_name)
}

/// Deletes CinderBackend `name`.
pub async fn delete_backend(client: &Client, name: &str) -> anyhow::Result<()> {
    let api: Api<CinderBackend> = Api::namespaced(client.clone(), NS);
    api.delete(name, &Default::default()).await?;
    Ok(())
}

/// Waits until CinderBackend `name` is gone.
pub async fn wait_backend_gone(client: &Client, name: &str) -> anyhow::Result<()> {
    eventually(&format!("CinderBackend {name} gone"), || async {
        backend_finalized(client, name)
            .await
            .is_none()
            .then_some(())
    })
    .await
}
