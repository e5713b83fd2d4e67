//! The detach sequence of the VolumeServices step: observes the first deleted CinderBackend (name order) that still holds
//! `cinder.openstack.c5c3.io/service-remove`, plans the pass with
//! [`crate::planning::detach::plan_detach`] and applies it as ONE transaction of the lock
//! coordinator — the backend's device lock (High priority, a backend change) together with the
//! backend's volume-service entry (`UpsertBackend` of `<ns>/<cinder>@<backend>`), observed again
//! under it; a pass whose plan
//! writes nothing takes no lock. 1. delete the volume Deployment and return;
//! 2. once it is gone, launch `{name}-{backend}-service-remove` under the database's device lock
//! (Default priority, High on the retry after a DeviceBusy; taken with the backend's in one
//! deadlock-free acquisition: the device that sorts first by a Lock, the other by a NestedLock
//! after it) after checking no database Job of
//! the Cinder is active; 3. sweep the
//! backend's projection Secrets; 4. release the finalizer, emit ServiceRemoved on the Cinder and
//! feed the service_remove metrics once per (backend, Job UID).

use super::super::database::jobs::{
    active_database_jobs, database_device, failed_exit_code, fence_purge, observe,
    unended_database_pod,
};
use crate::children::projection::{PROJECTION_LABEL, PROJECTION_VOLUME};
use crate::children::{child_meta, selector};
use crate::conditions::event_reason;
use crate::context::OperatorContext;
use crate::crd::{Cinder, CinderBackend};
use crate::kube_ext::finalizer;
use crate::kube_ext::reader::ClusterStores;
use crate::kube_ext::{create_if_absent, delete_if_present};
use crate::metrics::JobResult;
use crate::names::{self, Component, SERVICE_REMOVE_FINALIZER};
use crate::pipeline::Clusters;
use crate::planning::detach::{DetachAction, DetachPlan, DetachingBackend, plan_detach};
use crate::planning::job::JobState;
use crate::workloads::config_mount;
use crate::workloads::job_marker::CountedJob;
use crate::workloads::{ENV_HOST, JobReporting, workload_env};
use cinder_actors::query::{query, upsert_backend};
use cinder_lease::devices::{BACKEND_CHANGE_PRIORITY, DatabaseJob};
use cinder_lease::{DeviceGuard, DeviceLockError, DeviceLocks, Priority};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{Container, EnvVar, Pod, Secret};
use kube::api::{DeleteParams, ListParams, PropagationPolicy};
use kube::runtime::events::{Event, EventType};
use kube::{Api, Client, Resource, ResourceExt};
use std::time::Duration;

/// `cinder-manage service remove cinder-volume {host}`, run as it is: its exit code is the Job's
/// (0 removed or no such service, 1 a database error, 2 no readable configuration; see
/// [`crate::planning::detach`]).
pub fn service_remove_command(host: &str) -> Vec<String> {
    ["cinder-manage", "service", "remove", "cinder-volume", host]
        .map(str::to_string)
        .to_vec()
}

/// The annotation of a service-remove Job naming the UID of the CinderBackend it detaches.
pub(crate) const BACKEND_UID_ANNOTATION: &str = "cinder.c5c3.io/backend-uid";

/// The service-remove Job of `backend`, with the volume service's environment and config,
/// annotated with the backend's UID.
pub(crate) fn service_remove_job(
    cinder: &Cinder,
    backend: &CinderBackend,
    config_map: &str,
) -> Job {
    let name = cinder.metadata.name.clone().unwrap_or_default();
    let uid = backend.uid().unwrap_or_default();
    let backend = backend.name_any();
    let backend = backend.as_str();
    let host = names::volume_service_host(&name, backend);
    let mut env = workload_env(cinder, Component::Volume);
    env.push(EnvVar {
        name: ENV_HOST.to_string(),
        value: Some(name.clone()),
        ..Default::default()
    });
    let mut labels = names::component_labels(&name, Component::ServiceRemove);
    let mut metadata = child_meta(
        cinder,
        &names::service_remove_job(&name, backend),
        &[
            (names::LABEL_COMPONENT, Component::ServiceRemove.as_str()),
            (names::LABEL_BACKEND, backend),
        ],
    );
    metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(BACKEND_UID_ANNOTATION.to_string(), uid);
    labels.insert(names::LABEL_BACKEND.to_string(), backend.to_string());
    let container = Container {
        name: "service-remove".to_string(),
        image: Some(cinder.spec.image.reference()),
        command: Some(service_remove_command(&host)),
        env: Some(env),
        volume_mounts: Some(vec![config_mount()]),
        ..Default::default()
    };
    Job {
        metadata,
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            template: crate::workloads::config_job_pod(labels, container, config_map),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The storage device (lock id) of a backend.
pub(crate) fn backend_device(b: &CinderBackend) -> String {
    if let Some(rbd) = &b.spec.satellite.rbd {
        return cinder_lease::devices::rbd_cluster(&rbd.monitors);
    }
    if let Some(nfs) = &b.spec.satellite.nfs {
        return cinder_lease::devices::nfs_server(&nfs.server);
    }
    format!("backend:{}", b.name_any())
}

/// The coordinator id of the volume service of `backend` (`<ns>/<cinder>@<backend>`).
pub(crate) fn service_id(namespace: &str, cinder: &str, backend: &str) -> String {
    format!(
        "{namespace}/{}",
        names::volume_service_host(cinder, backend)
    )
}

/// What taking a backend's lock came to.
pub(crate) enum Locked {
    Guard(Box<cinder_lease::DeviceGuard<'static>>),
    /// Another replica holds the device: retry after this.
    Busy(Duration),
}

/// Takes `device` together with the volume service `service` (one coordinator transaction).
pub(crate) async fn lock_backend(
    locks: &DeviceLocks,
    device: &str,
    service: &str,
    priority: Priority,
) -> Result<Locked, String> {
    match locks
        .lock_with_queries(
            device,
            priority,
            vec![query([upsert_backend(service, "", "")])],
        )
        .await
    {
        Ok(g) => Ok(Locked::Guard(Box::new(g))),
        Err(DeviceLockError::DeviceBusy { retry_after, .. }) => Ok(Locked::Busy(retry_after)),
        Err(e) => Err(e.to_string()),
    }
}

/// Runs `work` holding the backend's device and volume-service entry together with the
/// database's device, each device with its Lease, deadlock-free: the device that sorts first
/// (devices sort by id) is taken by a Lock, the other with the backend's entry by a NestedLock
/// after it (which borrows the first, so it is released first). A Lock of the database while the
/// backend is held could wait for a device that sorts before one it holds. `work` gets the
/// database's guard; the answer is its outcome, or the retry delay of a busy device.
pub(crate) async fn with_backend_and_database<T>(
    locks: &DeviceLocks,
    device: &str,
    service: &str,
    priority: Priority,
    database: &str,
    database_priority: Priority,
    work: impl AsyncFnOnce(&DeviceGuard<'_>) -> T,
) -> Result<Result<T, Duration>, String> {
    let (first, first_priority, second, second_priority) = if database < device {
        (database, database_priority, device, priority)
    } else {
        (device, priority, database, database_priority)
    };
    let outer = match locks.lock(first, first_priority).await {
        Ok(g) => g,
        Err(DeviceLockError::DeviceBusy { retry_after, .. }) => return Ok(Err(retry_after)),
        Err(e) => return Err(e.to_string()),
    };
    let refused = match locks
        .nested_lock_with_queries(
            &outer,
            second,
            second_priority,
            vec![query([upsert_backend(service, "", "")])],
        )
        .await
    {
        Ok(nested) => {
            let held = if nested.device() == database {
                &nested
            } else {
                &outer
            };
            let outcome = work(held).await;
            nested.release().await;
            Ok(Ok(outcome))
        }
        Err(DeviceLockError::DeviceBusy { retry_after, .. }) => Ok(Err(retry_after)),
        Err(e) => Err(e.to_string()),
    };
    outer.release().await;
    refused
}

/// What one detach pass came to.
pub(crate) enum DetachOutcome {
    /// No deleted backend holds the finalizer.
    Idle,
    /// A pass ran: report `condition` (when stuck) and requeue after `requeue`.
    Worked { plan: DetachPlan },
    /// A lock was busy: retry after this.
    Busy { backend: String, after: Duration },
}

/// Why a detach pass failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DetachError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("device lock: {0}")]
    Lock(String),
}

async fn backend_secrets(
    client: &Client,
    ns: &str,
    cinder: &str,
    backend: &str,
) -> Result<Vec<String>, kube::Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let sel = selector(
        cinder,
        &[
            (names::LABEL_BACKEND, backend),
            (PROJECTION_LABEL, PROJECTION_VOLUME),
        ],
    );
    Ok(api
        .list_metadata(&ListParams::default().labels(&sel))
        .await?
        .items
        .into_iter()
        .filter(|s| s.metadata.deletion_timestamp.is_none())
        .filter_map(|s| s.metadata.name)
        .collect())
}

/// Whether service-remove Job `job` detached another CinderBackend than `backend` (one of the
/// same name deleted earlier): its backend-UID annotation differs, or, without one, it was
/// created before the backend.
fn job_of_earlier_backend(job: &Job, backend: &CinderBackend) -> bool {
    let annotated = job
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(BACKEND_UID_ANNOTATION));
    match (annotated, backend.uid()) {
        (Some(job_uid), Some(uid)) => *job_uid != uid,
        _ => match (
            &job.metadata.creation_timestamp,
            &backend.metadata.creation_timestamp,
        ) {
            (Some(job), Some(backend)) => job.0 < backend.0,
            _ => false,
        },
    }
}

/// Whether a pod of backend `backend`'s volume Deployment still exists (running, or terminating
/// after the Deployment's deletion). Pods are not watched: one list by the Deployment's pod
/// labels, through the API reader, only while a detach waits to start its Job.
async fn volume_pods_exist(
    client: &Client,
    ns: &str,
    cinder: &str,
    backend: &str,
) -> Result<bool, kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let labels = selector(
        cinder,
        &[
            (names::LABEL_COMPONENT, Component::Volume.as_str()),
            (names::LABEL_BACKEND, backend),
        ],
    );
    let listed = pods
        .list_metadata(&ListParams::default().labels(&labels).limit(1))
        .await?;
    Ok(!listed.items.is_empty())
}

async fn observe_backend(
    client: &Client,
    reads: &ClusterStores,
    ns: &str,
    cinder: &str,
    spec: &CinderBackend,
) -> Result<(DetachingBackend, Option<Duration>), kube::Error> {
    let backend = spec.name_any();
    let backend = backend.as_str();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let deployment_exists = reads
        .get_opt(&deployments, &names::volume_deployment(cinder, backend))
        .await?
        .is_some();
    let pods_exist = !deployment_exists && volume_pods_exist(client, ns, cinder, backend).await?;
    let job_name = names::service_remove_job(cinder, backend);
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    let live = reads
        .get_opt(&jobs, &job_name)
        .await?
        .filter(|j| j.metadata.deletion_timestamp.is_none());
    let job_of_earlier_backend = live
        .as_ref()
        .is_some_and(|j| job_of_earlier_backend(j, spec));
    let (job, job_uid, duration) = match live.as_ref().map(observe) {
        None => (JobState::Absent, None, None),
        Some(o) => {
            let state = match o.state {
                JobState::Failed { .. } => JobState::Failed {
                    exit_code: failed_exit_code(client, ns, &o.uid).await,
                },
                s => s,
            };
            (state, Some(o.uid), o.duration)
        }
    };
    let secrets = backend_secrets(client, ns, cinder, backend).await?;
    Ok((
        DetachingBackend {
            name: backend.to_string(),
            has_finalizer: true,
            deployment_exists,
            pods_exist,
            job,
            job_uid,
            job_of_earlier_backend,
            secrets,
        },
        duration,
    ))
}

/// Runs one detach pass for the first (name order) deleted backend of `cinder` still holding
/// the finalizer. `clusters.children` is the cluster holding the Cinder's children (its
/// Deployments, Jobs and projection Secrets); `config_map` is the config the service-remove Job
/// mounts.
pub(crate) async fn detach_pass(
    op: &OperatorContext,
    clusters: &Clusters,
    reporting: &JobReporting,
    cinder: &Cinder,
    backends: &[CinderBackend],
    config_map: Option<&str>,
) -> Result<DetachOutcome, DetachError> {
    let ns = cinder.metadata.namespace.clone().unwrap_or_default();
    let name = cinder.metadata.name.clone().unwrap_or_default();
    let Some(backend) = backends
        .iter()
        .filter(|b| {
            b.metadata.deletion_timestamp.is_some() && finalizer::has(*b, SERVICE_REMOVE_FINALIZER)
        })
        .min_by_key(|b| b.name_any())
    else {
        return Ok(DetachOutcome::Idle);
    };
    let bname = backend.name_any();
    // A pass with nothing to write (the service-remove Job is running) takes no lock: the detach
    // is woken by every change of its Job and Deployment, and a lock per wake-up would cost the
    // device's Lease two writes each time.
    let (observed, _) = observe_backend(
        &clusters.children,
        &clusters.children_reads,
        &ns,
        &name,
        backend,
    )
    .await?;
    let Some(plan) = plan_detach(&name, std::slice::from_ref(&observed)) else {
        return Ok(DetachOutcome::Idle);
    };
    if plan.actions.is_empty() {
        return Ok(DetachOutcome::Worked { plan });
    }
    // A pass that launches the service-remove Job takes the database's device in the same
    // deadlock-free acquisition as the backend's, not in a second Lock while holding the backend.
    let launches = plan
        .actions
        .iter()
        .any(|a| matches!(a, DetachAction::CreateServiceRemoveJob { .. }));
    let device = backend_device(backend);
    let service = service_id(&ns, &name, &bname);
    if launches {
        let database = database_device(cinder);
        let memory = reporting.memory();
        let database_priority =
            crate::device_retry::priority(memory, &database, DatabaseJob::ServiceRemove.priority())
                .await;
        let applied = with_backend_and_database(
            &op.device_locks,
            &device,
            &service,
            BACKEND_CHANGE_PRIORITY,
            &database,
            database_priority,
            async |held| apply(clusters, reporting, Some(held), cinder, backend, config_map).await,
        )
        .await
        .map_err(DetachError::Lock)?;
        return match applied {
            Ok(result) => result,
            Err(after) => {
                // The next pass asks for the database one level higher.
                crate::device_retry::refused(memory, &database);
                Ok(DetachOutcome::Busy {
                    backend: bname,
                    after,
                })
            }
        };
    }
    let guard = match lock_backend(&op.device_locks, &device, &service, BACKEND_CHANGE_PRIORITY)
        .await
        .map_err(DetachError::Lock)?
    {
        Locked::Guard(g) => *g,
        Locked::Busy(after) => {
            return Ok(DetachOutcome::Busy {
                backend: bname,
                after,
            });
        }
    };
    let result = apply(clusters, reporting, None, cinder, backend, config_map).await;
    guard.release().await;
    result
}

/// Publishes the ServiceRemoved event of backend `b` (a failure is logged: the detach goes on).
async fn service_removed(reporting: &JobReporting, cinder: &Cinder, b: &str) {
    let name = cinder.metadata.name.as_deref().unwrap_or_default();
    let event = Event {
        type_: EventType::Normal,
        reason: event_reason::SERVICE_REMOVED.to_string(),
        note: Some(format!(
            "volume service {} removed from the service registry; backend {b} detached",
            names::volume_service_host(name, b)
        )),
        action: "Detach".to_string(),
        secondary: None,
    };
    if let Err(e) = reporting
        .recorder
        .publish(&event, &cinder.object_ref(&()))
        .await
    {
        tracing::warn!(cinder = %name, backend = %b, error = %e, "publishing ServiceRemoved failed");
    }
}

/// Feeds the service_remove pair and the JobFinished event once for the finished
/// service-remove Job `job_uid` of backend `b`.
async fn record_service_remove(
    reporting: &JobReporting,
    client: &Client,
    cinder: &Cinder,
    b: &str,
    job_uid: &str,
    succeeded: bool,
    duration: Duration,
) {
    let ns = cinder.metadata.namespace.clone().unwrap_or_default();
    let name = cinder.metadata.name.clone().unwrap_or_default();
    let result = if succeeded {
        JobResult::Succeeded
    } else {
        JobResult::Failed
    };
    let job = names::service_remove_job(&name, b);
    let counted = CountedJob {
        client,
        name: &job,
        uid: job_uid,
    };
    if reporting
        .observe_once(
            &counted,
            &format!("{b}/{job_uid}"),
            &ns,
            &name,
            result,
            duration,
        )
        .await
    {
        crate::events::job_finished(
            &reporting.recorder,
            cinder,
            &job,
            "service-remove",
            result,
            duration,
        )
        .await;
    }
}

async fn apply(
    clusters: &Clusters,
    reporting: &JobReporting,
    database: Option<&DeviceGuard<'_>>,
    cinder: &Cinder,
    backend: &CinderBackend,
    config_map: Option<&str>,
) -> Result<DetachOutcome, DetachError> {
    let ns = cinder.metadata.namespace.clone().unwrap_or_default();
    let name = cinder.metadata.name.clone().unwrap_or_default();
    let bname = backend.name_any();
    let client = &clusters.children;
    let (observed, duration) =
        observe_backend(client, &clusters.children_reads, &ns, &name, backend).await?;
    let Some(plan) = plan_detach(&name, std::slice::from_ref(&observed)) else {
        return Ok(DetachOutcome::Idle);
    };
    for action in &plan.actions {
        match action {
            DetachAction::DeleteDeployment { name: d } => {
                crate::workloads::delete_deployment(client, &clusters.children_reads, &ns, d)
                    .await?;
            }
            DetachAction::CreateServiceRemoveJob { .. } => {
                let Some(config_map) = config_map else {
                    continue;
                };
                let job = service_remove_job(cinder, backend, config_map);
                if let Some(after) = launch_under_database_lock(
                    clusters,
                    database,
                    &reporting.recorder,
                    cinder,
                    &job,
                )
                .await?
                {
                    return Ok(DetachOutcome::Busy {
                        backend: bname,
                        after,
                    });
                }
                let job_name = job.metadata.name.as_deref().unwrap_or_default();
                crate::events::job_started(&reporting.recorder, cinder, job_name, "service-remove")
                    .await;
            }
            DetachAction::DeleteEarlierJob { name: job } => {
                let api: Api<Job> = Api::namespaced(client.clone(), &ns);
                let params = DeleteParams {
                    propagation_policy: Some(PropagationPolicy::Background),
                    ..Default::default()
                };
                delete_if_present(&api, job, &params).await?;
            }
            DetachAction::DeleteSecrets { names: secrets } => {
                let api: Api<Secret> = Api::namespaced(client.clone(), &ns);
                for s in secrets {
                    delete_if_present(&api, s, &DeleteParams::default()).await?;
                }
            }
            DetachAction::ReleaseFinalizer { .. } => {
                let api: Api<CinderBackend> = Api::namespaced(clusters.management.clone(), &ns);
                finalizer::remove(&api, backend, SERVICE_REMOVE_FINALIZER).await?;
            }
            DetachAction::EmitServiceRemoved { backend: b } => {
                service_removed(reporting, cinder, b).await;
            }
            DetachAction::RecordServiceRemove {
                backend: b,
                job_uid,
                succeeded,
            } => {
                let duration = duration.unwrap_or_default();
                record_service_remove(reporting, client, cinder, b, job_uid, *succeeded, duration)
                    .await;
            }
        }
    }
    Ok(DetachOutcome::Worked { plan })
}

/// Creates `job` under the database's device lock (`database`, taken with the backend's by the
/// pass) unless another database Job of the Cinder is active; returns a retry delay when the
/// database is busy, or when the pass did not take its lock (its plan before the locks did not
/// launch the Job: the next pass takes it).
async fn launch_under_database_lock(
    clusters: &Clusters,
    database: Option<&DeviceGuard<'_>>,
    recorder: &kube::runtime::events::Recorder,
    cinder: &Cinder,
    job: &Job,
) -> Result<Option<Duration>, DetachError> {
    let ns = cinder.metadata.namespace.clone().unwrap_or_default();
    let name = cinder.metadata.name.clone().unwrap_or_default();
    let Some(guard) = database else {
        return Ok(Some(crate::requeue::REQUEUE_DEPLOYMENT_POLLING));
    };
    crate::events::device_taken_over(recorder, cinder, guard).await;
    async {
        let client = &clusters.children;
        fence_purge(client, &ns, &name).await?;
        let active = active_database_jobs(client, &clusters.children_reads, &ns, &name).await?;
        if !active.is_empty() || unended_database_pod(client, &ns, &name).await?.is_some() {
            return Ok(Some(crate::requeue::REQUEUE_DEPLOYMENT_POLLING));
        }
        let api: Api<Job> = Api::namespaced(client.clone(), &ns);
        create_if_absent(&api, job).await?;
        Ok(None)
    }
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_exits_with_cinder_manage_s_own_code() {
        for (code, expect) in [(0, 0), (2, 2), (1, 1), (3, 3)] {
            let stub = crate::test_fixtures::StubProgram::exiting("sr", "cinder-manage", code);
            let cmd = service_remove_command("c@a");
            let status = std::process::Command::new(&cmd[0])
                .args(&cmd[1..])
                .env("PATH", stub.path())
                .status()
                .unwrap();
            assert_eq!(status.code(), Some(expect), "exit {code}");
        }
    }

    #[test]
    fn the_job_is_a_service_remove_of_the_backend_host() {
        let c = crate::test_fixtures::cinder();
        let mut b: CinderBackend = serde_json::from_value(serde_json::json!({
            "apiVersion": "cinder.openstack.c5c3.io/v1alpha1",
            "kind": "CinderBackend",
            "metadata": {"name": "a", "namespace": "ns", "uid": "uid-1"},
            "spec": {"cinderRef": {"name": "c"}, "type": "NFS",
                "nfs": {"server": "nfs.example", "path": "/export"}}
        }))
        .unwrap();
        let job = service_remove_job(&c, &b, "c-config-1");
        assert!(!job_of_earlier_backend(&job, &b));
        b.metadata.uid = Some("uid-2".into());
        assert!(job_of_earlier_backend(&job, &b));
        assert_eq!(job.metadata.name.as_deref(), Some("c-a-service-remove"));
        let labels = job.metadata.labels.clone().unwrap();
        assert_eq!(labels[names::LABEL_COMPONENT], "service-remove");
        let pod = job.spec.unwrap().template.spec.unwrap();
        let script = pod.containers[0].command.as_ref().unwrap().join(" ");
        assert_eq!(script, "cinder-manage service remove cinder-volume c@a");
        let env: Vec<_> = pod.containers[0]
            .env
            .as_ref()
            .unwrap()
            .iter()
            .map(|e| e.name.clone())
            .collect();
        assert!(env.contains(&"OS_DATABASE__CONNECTION".to_string()));
        assert!(env.contains(&ENV_HOST.to_string()));
    }
}
