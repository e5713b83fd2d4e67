//! The database Jobs (db-sync, expand, migrate, contract): their manifests, what the step reads
//! back from them (state, spec hash, run time), and how they are launched and replaced.
//!
//! A Job is created or deleted only under the database's device lock, after checking that the
//! Cinder snapshot the pass works from is still current and that no other Job of that database
//! (db-sync, expand, migrate, contract, service-remove) is active. The lock is held around that
//! check-and-act only, never while the Job runs: the "active" check is what excludes overlap.
//! A purge Job (spawned by the `{name}-db-purge` CronJob) counts as active too, and before the
//! check the CronJob is suspended ([`fence_purge`]; the DBPurge step lifts it once no database
//! Job is active), so a purge never overlaps another database Job: the connection cap's
//! headroom holds one Job. A pod of a database Job that has not ended counts as well, whether
//! or not its Job is still there: a Job deleted with background propagation (by a replace, or by
//! `kubectl delete job`) leaves its pod running until the garbage collector and the pod's grace
//! period stopped it, and two `cinder-manage db sync` beside each other leave a half-created
//! schema.
//! A schema Job re-runs only when what the migration depends on changes: the image (the
//! `cinder-manage` it runs), the release and the database it migrates ([`run_hash`]). An edit that
//! only renders a new config ConfigMap (`extraConfig`, the gateway, uWSGI) leaves the finished Job
//! in place, so DatabaseReady stays True; the next Job that runs mounts the ConfigMap of its day.
//! Jobs are immutable: a Job that must run again is deleted (background
//! propagation, on the precondition that its UID is the one the pass read, so a Job another
//! replica put in its place is never deleted) and created again under one hold of the lock, so a
//! replacement costs the database's Lease one lock cycle; when the deleted Job is still going
//! away, a later pass creates the new one.

use super::services::DatabaseServices;
use crate::children::child_meta;
use crate::crd::Cinder;
use crate::crd::cinder::DatabaseSpec;
use crate::kube_ext::ApiErrorExt;
use crate::kube_ext::create_if_absent;
use crate::kube_ext::reader::ClusterStores;
use crate::names::{self, Component};
use crate::pipeline::Clusters;
use crate::planning::config::ENV_DB_CONNECTION;
use crate::planning::digest::sha256_hex;
use crate::planning::job::{JobState, error_line};
use crate::workloads::{config_mount, env_from_secret};
use cinder_lease::DeviceLockError;
use cinder_lease::devices::{self, DatabaseJob};
use k8s_openapi::api::batch::v1::{CronJob, Job, JobSpec};
use k8s_openapi::api::core::v1::{Container, ContainerStateTerminated, Pod};
use kube::api::{DeleteParams, ListParams, PostParams, Preconditions, PropagationPolicy};
use kube::{Api, Client};
use std::time::Duration;

/// Annotation of a database Job: [`run_hash`] (a different desired hash means run it again).
pub(crate) const SPEC_HASH_ANNOTATION: &str = "cinder.openstack.c5c3.io/job-spec-hash";
/// Annotation of a schema Job: [`schema_target`], the schema its success leaves the database
/// at (whichever phase ran it).
pub(crate) const SCHEMA_TARGET_ANNOTATION: &str = "cinder.openstack.c5c3.io/schema-target";
/// Label of a database Job: which one it is (`sync`, `expand`, `migrate`, `contract`).
pub(crate) const DB_JOB_LABEL: &str = "cinder.openstack.c5c3.io/db-job";
/// Where the migrate Job writes the real upgrade-check exit code.
pub const TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";
/// The backoff limit of the phase Jobs.
pub(crate) const PHASE_BACKOFF_LIMIT: i32 = 4;
/// The Job label kube puts on a Job's pods: the Job's UID.
pub(crate) const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";

/// The wrapper of `cinder-status upgrade check`: exit 0, 1 and 2 become 0, the real code goes to
/// the termination message; anything else fails the pod.
pub const UPGRADE_CHECK_SCRIPT: &str = "cinder-status upgrade check; rc=$?; echo \"$rc\" > /dev/termination-log; if [ \"$rc\" -le 2 ]; then exit 0; fi; exit \"$rc\"";

/// One of the four schema Jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SchemaJob {
    DbSync,
    Expand,
    Migrate,
    Contract,
}

impl SchemaJob {
    pub(crate) const ALL: [SchemaJob; 4] = [
        SchemaJob::DbSync,
        SchemaJob::Expand,
        SchemaJob::Migrate,
        SchemaJob::Contract,
    ];
    /// The phase Jobs (deleted on abort).
    pub const PHASES: [SchemaJob; 3] = [SchemaJob::Expand, SchemaJob::Migrate, SchemaJob::Contract];

    /// The Job name for Cinder `cinder`.
    pub fn job_name(self, cinder: &str) -> String {
        match self {
            SchemaJob::DbSync => names::db_sync_job(cinder),
            SchemaJob::Expand => names::db_expand_job(cinder),
            SchemaJob::Migrate => names::db_migrate_job(cinder),
            SchemaJob::Contract => names::db_contract_job(cinder),
        }
    }

    /// The value of [`DB_JOB_LABEL`].
    pub(crate) fn label(self) -> &'static str {
        match self {
            SchemaJob::DbSync => "sync",
            SchemaJob::Expand => "expand",
            SchemaJob::Migrate => "migrate",
            SchemaJob::Contract => "contract",
        }
    }

    /// The device-lock kind (priority) of this Job.
    pub(crate) fn device_job(self) -> DatabaseJob {
        match self {
            SchemaJob::DbSync => DatabaseJob::DbSync,
            SchemaJob::Expand => DatabaseJob::Expand,
            SchemaJob::Migrate => DatabaseJob::Migrate,
            SchemaJob::Contract => DatabaseJob::Contract,
        }
    }

    /// The container command.
    pub fn command(self) -> Vec<String> {
        let words: &[&str] = match self {
            // Cinder has no separate expand verb: the sync is the idempotent upgrade-to-head.
            SchemaJob::DbSync | SchemaJob::Expand => &["cinder-manage", "db", "sync"],
            SchemaJob::Migrate => &["/bin/sh", "-c", UPGRADE_CHECK_SCRIPT],
            SchemaJob::Contract => &["cinder-manage", "db", "online_data_migrations"],
        };
        words.iter().map(|w| (*w).to_string()).collect()
    }

    fn backoff_limit(self) -> Option<i32> {
        match self {
            SchemaJob::DbSync => None,
            _ => Some(PHASE_BACKOFF_LIMIT),
        }
    }
}

/// The database device id of `cinder` (`db:<namespace>/<database>`).
pub(crate) fn database_device(cinder: &Cinder) -> String {
    let ns = cinder.metadata.namespace.as_deref().unwrap_or_default();
    devices::database(ns, &cinder.spec.database.database)
}

/// What a schema Job's run depends on, as the sha256 its spec-hash annotation carries: the Job
/// spec with the config volume's ConfigMap name left out (the ConfigMap is content-addressed, so
/// its name changes with every config edit, none of which changes what the migration does),
/// `release`, and the database the migration runs against (`spec.database` without its
/// credentials: a rotated password reaches the same schema and is no reason to migrate again).
pub(crate) fn run_hash(spec: &JobSpec, release: &str, database: &DatabaseSpec) -> String {
    let mut spec = spec.clone();
    if let Some(volumes) = spec.template.spec.as_mut().and_then(|p| p.volumes.as_mut()) {
        for cm in volumes.iter_mut().filter_map(|v| v.config_map.as_mut()) {
            cm.name = String::new();
        }
    }
    let target = database_target(database);
    let spec = serde_json::to_string(&spec).unwrap_or_default();
    let input = format!("{spec}\nrelease={release}\ndatabase={target}");
    sha256_hex(input.as_bytes())
}

/// The database a migration runs against, without its credentials.
fn database_target(database: &DatabaseSpec) -> serde_json::Value {
    serde_json::json!({
        "clusterRef": database.cluster_ref,
        "host": database.host,
        "port": database.port,
        "database": database.database,
    })
}

/// The schema a successful `db sync` of `cinder` leaves its database at: the image (whose
/// `cinder-manage` knows the head revision), the release and the database, as a sha256. The
/// steady state's db-sync and an upgrade's expand (the same `db sync`) share it, so a contract
/// that completed for it has left nothing for the db-sync to do.
pub(crate) fn schema_target(cinder: &Cinder) -> String {
    let input = format!(
        "image={}\nrelease={}\ndatabase={}",
        cinder.spec.image.reference(),
        cinder.spec.open_stack_release,
        database_target(&cinder.spec.database)
    );
    sha256_hex(input.as_bytes())
}

/// The desired Job `which` of `cinder` mounting `config_map`, with its spec hash annotation
/// ([`run_hash`] over the spec, the release and the database).
pub fn desired_job(cinder: &Cinder, which: SchemaJob, config_map: &str) -> Job {
    let cinder_name = cinder.metadata.name.clone().unwrap_or_default();
    let mut pod_labels = names::component_labels(&cinder_name, Component::DbSync);
    pod_labels.insert(DB_JOB_LABEL.to_string(), which.label().to_string());
    let container = Container {
        name: format!("db-{}", which.label()),
        image: Some(cinder.spec.image.reference()),
        command: Some(which.command()),
        env: Some(vec![env_from_secret(
            ENV_DB_CONNECTION,
            &names::db_connection_secret(&cinder_name),
            crate::planning::connection_urls::DB_CONNECTION_KEY,
        )]),
        volume_mounts: Some(vec![config_mount()]),
        termination_message_path: Some(TERMINATION_MESSAGE_PATH.to_string()),
        // A failure that writes no message (cinder-manage's traceback) leaves the tail of its
        // log there: DatabaseReady quotes its error.
        termination_message_policy: Some("FallbackToLogsOnError".to_string()),
        ..Default::default()
    };
    let spec = JobSpec {
        backoff_limit: which.backoff_limit(),
        template: crate::workloads::config_job_pod(pod_labels, container, config_map),
        ..Default::default()
    };
    let hash = run_hash(
        &spec,
        &cinder.spec.open_stack_release,
        &cinder.spec.database,
    );
    let mut metadata = child_meta(
        cinder,
        &which.job_name(&cinder_name),
        &[
            (names::LABEL_COMPONENT, Component::DbSync.as_str()),
            (DB_JOB_LABEL, which.label()),
        ],
    );
    metadata.annotations = Some(
        [
            (SPEC_HASH_ANNOTATION.to_string(), hash),
            (SCHEMA_TARGET_ANNOTATION.to_string(), schema_target(cinder)),
        ]
        .into(),
    );
    Job {
        metadata,
        spec: Some(spec),
        ..Default::default()
    }
}

/// The spec hash a Job carries (or would carry).
pub(crate) fn spec_hash(job: &Job) -> Option<&str> {
    job.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SPEC_HASH_ANNOTATION))
        .map(String::as_str)
}

fn condition_true(job: &Job, type_: &str) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

/// What the step reads from an existing Job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ObservedJob {
    pub name: String,
    pub uid: String,
    pub state: JobState,
    pub spec_hash: Option<String>,
    /// Its [`SCHEMA_TARGET_ANNOTATION`].
    pub schema_target: Option<String>,
    /// From `status.startTime` to completion (or the Failed condition), when terminal.
    pub duration: Option<Duration>,
    /// The Job has a deletionTimestamp: it is going away.
    pub deleting: bool,
}

/// The state of `job` (a failed Job's exit code is filled in by [`failed_exit_code`]).
pub(crate) fn observe(job: &Job) -> ObservedJob {
    let complete = condition_true(job, "Complete");
    let failed = condition_true(job, "Failed");
    let state = JobState::from_status(complete, failed, None);
    let status = job.status.as_ref();
    let start = status.and_then(|s| s.start_time.as_ref()).map(|t| t.0);
    let end = if complete {
        status.and_then(|s| s.completion_time.as_ref()).map(|t| t.0)
    } else {
        None
    }
    .or_else(|| {
        status.and_then(|s| s.conditions.as_ref()).and_then(|cs| {
            cs.iter()
                .filter(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
                .filter_map(|c| c.last_transition_time.as_ref().map(|t| t.0))
                .max()
        })
    });
    let duration = match (state.is_terminal(), start, end) {
        (true, Some(s), Some(e)) => {
            let ms = e.as_millisecond().saturating_sub(s.as_millisecond()).max(0);
            Some(Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
        }
        (true, _, _) => Some(Duration::ZERO),
        _ => None,
    };
    ObservedJob {
        name: job.metadata.name.clone().unwrap_or_default(),
        uid: job.metadata.uid.clone().unwrap_or_default(),
        state,
        spec_hash: spec_hash(job).map(str::to_string),
        schema_target: job
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SCHEMA_TARGET_ANNOTATION))
            .cloned(),
        duration,
        deleting: job.metadata.deletion_timestamp.is_some(),
    }
}

/// Reads Job `name` (None: absent).
pub(crate) async fn read_job(
    client: &Client,
    reads: &ClusterStores,
    namespace: &str,
    name: &str,
) -> Result<Option<ObservedJob>, kube::Error> {
    let api: Api<Job> = Api::namespaced(client.clone(), namespace);
    Ok(reads
        .get_opt(&api, name)
        .await?
        .filter(|j| j.metadata.deletion_timestamp.is_none())
        .map(|j| observe(&j)))
}

/// The pods of the Job with UID `uid` (an uncached list, by the controller-uid label, then
/// filtered on that label again so a pod of an earlier Job of the same name never counts).
pub(crate) async fn job_pods(
    client: &Client,
    namespace: &str,
    uid: &str,
) -> Result<Vec<Pod>, kube::Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let list = api
        .list(&ListParams::default().labels(&format!("{CONTROLLER_UID_LABEL}={uid}")))
        .await?;
    Ok(list
        .items
        .into_iter()
        .filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(CONTROLLER_UID_LABEL))
                .is_some_and(|v| v == uid)
        })
        .collect())
}

/// How the first container of the newest failed pod of the Job with UID `uid` terminated, when
/// it can be read.
async fn newest_failed_termination(
    client: &Client,
    namespace: &str,
    uid: &str,
) -> Option<ContainerStateTerminated> {
    let pods = job_pods(client, namespace, uid).await.ok()?;
    let newest = pods
        .into_iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed"))
        .max_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0))?;
    newest
        .status?
        .container_statuses?
        .into_iter()
        .next()?
        .state?
        .terminated
}

/// The exit code of the newest failed pod of a failed Job, when it can be read.
pub(crate) async fn failed_exit_code(client: &Client, namespace: &str, uid: &str) -> Option<i32> {
    newest_failed_termination(client, namespace, uid)
        .await
        .map(|t| t.exit_code)
}

/// What the newest failed pod of the Job with UID `uid` ended with: the error line of its
/// container's termination message ([`error_line`]; the tail of its log, under
/// `FallbackToLogsOnError`), when there is one and it can be read.
pub(crate) async fn last_failure(client: &Client, namespace: &str, uid: &str) -> Option<String> {
    newest_failed_termination(client, namespace, uid)
        .await?
        .message
        .as_deref()
        .and_then(error_line)
}

/// Whether `job` is one of the Jobs that change the database of Cinder `cinder`.
fn is_database_job(job: &Job, cinder: &str) -> bool {
    let name = job.metadata.name.as_deref().unwrap_or_default();
    let component = job
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(names::LABEL_COMPONENT))
        .map(String::as_str);
    SchemaJob::ALL.iter().any(|j| j.job_name(cinder) == name)
        || component == Some(Component::ServiceRemove.as_str())
        || is_purge_job(job)
}

/// Whether `job` is a purge Job (the db-purge component, spawned by the CronJob).
pub(crate) fn is_purge_job(job: &Job) -> bool {
    job.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(names::LABEL_COMPONENT))
        .map(String::as_str)
        == Some(Component::DbPurge.as_str())
}

/// Suspends the purge CronJob of Cinder `cinder`, read live, unless it is absent or suspended
/// already: called before a database Job starts, so that the CronJob starts no purge beside
/// it. The DBPurge step writes the CronJob's own `suspend` back once no database Job is active.
/// A replace that loses to a concurrent write (the CronJob controller's status) reads again, a
/// few times, before the error is the caller's.
pub(crate) async fn fence_purge(
    client: &Client,
    ns: &str,
    cinder: &str,
) -> Result<(), kube::Error> {
    let api: Api<CronJob> = Api::namespaced(client.clone(), ns);
    let name = names::db_purge_cronjob(cinder);
    let mut attempts = 0;
    loop {
        let Some(mut cj) = api.get_opt(&name).await? else {
            return Ok(());
        };
        if cj.spec.suspend == Some(true) {
            return Ok(());
        }
        cj.spec.suspend = Some(true);
        match api.replace(&name, &PostParams::default(), &cj).await {
            Ok(_) => return Ok(()),
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) if e.is_conflict() && attempts < 3 => attempts += 1,
            Err(e) => return Err(e),
        }
    }
}

/// The database Jobs of `cinder` that are active (exist and are not terminal), by name.
pub(crate) async fn active_database_jobs(
    client: &Client,
    reads: &ClusterStores,
    namespace: &str,
    cinder: &str,
) -> Result<Vec<String>, kube::Error> {
    let jobs: Vec<Job> =
        crate::children::list_children(client, reads, namespace, cinder, None).await?;
    Ok(jobs
        .iter()
        .filter(|j| is_database_job(j, cinder))
        .filter(|j| !observe(j).state.is_terminal())
        .filter_map(|j| j.metadata.name.clone())
        .collect())
}

/// What an attempt to act on a database Job came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Act {
    /// Done (created, already there, or deleted).
    Done,
    /// The Job being replaced was deleted and is still going away: create on a later pass.
    Deleted,
    /// Another replica holds the database's Lease: try again after this.
    DeviceBusy(Duration),
    /// Another Job of the database is active: wait for it.
    OtherActive(String),
    /// A pod of a database Job (one deleted among them) has not ended: wait for it.
    PodRunning(String),
    /// The Cinder changed since this pass's snapshot: act on a fresh one.
    StaleSnapshot,
    /// The Job to replace is not the one this pass read (another replica replaced it): compare
    /// again on the next pass.
    JobChanged,
}

/// Why acting failed.
#[derive(Debug, thiserror::Error)]
pub enum ActError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("device lock: {0}")]
    Lock(String),
}

/// Whether the live Cinder still is the snapshot's generation and release state.
async fn snapshot_is_current(client: &Client, snapshot: &Cinder) -> Result<bool, kube::Error> {
    let ns = snapshot.metadata.namespace.as_deref().unwrap_or_default();
    let name = snapshot.metadata.name.as_deref().unwrap_or_default();
    let api: Api<Cinder> = Api::namespaced(client.clone(), ns);
    let Some(live) = api.get_opt(name).await? else {
        return Ok(false);
    };
    let key = |c: &Cinder| {
        let s = c.status.clone().unwrap_or_default();
        (
            c.metadata.generation,
            s.installed_release,
            s.target_release,
            s.upgrade_phase,
        )
    };
    Ok(key(&live) == key(snapshot))
}

/// A write of the database Jobs, made under the database's device lock.
pub enum JobWrite<'a> {
    /// Create the Job unless it exists or another database Job is active.
    Create(&'a Job),
    /// Delete the live Job of the same name if it still is the one this pass read (`uid`; another
    /// spec; background propagation), then create `job` unless another database Job is active:
    /// one hold for both. `Deleted` when the old Job is still going away (the next pass creates the
    /// new one); `JobChanged` when the live Job is another one (a replica replaced it since).
    Replace { job: &'a Job, uid: &'a str },
    /// Delete these Jobs (background propagation).
    Delete(&'a [String]),
}

/// Makes `action` under the database's device lock, at the priority of `which` (raised on the
/// retry after a DeviceBusy, [`crate::device_retry`]), when the snapshot is still current.
pub async fn write_under_lock(
    clusters: &Clusters,
    services: &DatabaseServices,
    snapshot: &Cinder,
    which: SchemaJob,
    action: JobWrite<'_>,
) -> Result<Act, ActError> {
    let job = which.device_job();
    let ns = snapshot.metadata.namespace.as_deref().unwrap_or_default();
    let cinder = snapshot.metadata.name.as_deref().unwrap_or_default();
    let locks = services.device_locks();
    let device = database_device(snapshot);
    let priority = crate::device_retry::priority(services.memory(), &device, job.priority()).await;
    let guard = match locks.lock(&device, priority).await {
        Ok(g) => g,
        Err(DeviceLockError::DeviceBusy { retry_after, .. }) => {
            crate::device_retry::refused(services.memory(), &device);
            return Ok(Act::DeviceBusy(retry_after));
        }
        Err(e) => return Err(ActError::Lock(e.to_string())),
    };
    crate::events::device_taken_over(services.recorder(), snapshot, &guard).await;
    let result = act_locked(clusters, snapshot, ns, cinder, action).await;
    guard.release().await;
    result
}

async fn act_locked(
    clusters: &Clusters,
    snapshot: &Cinder,
    ns: &str,
    cinder: &str,
    action: JobWrite<'_>,
) -> Result<Act, ActError> {
    if !snapshot_is_current(&clusters.management, snapshot).await? {
        return Ok(Act::StaleSnapshot);
    }
    let client = &clusters.children;
    let api: Api<Job> = Api::namespaced(client.clone(), ns);
    match action {
        JobWrite::Create(job) => {
            let name = job.metadata.name.clone().unwrap_or_default();
            if api.get_opt(&name).await?.is_some() {
                return Ok(Act::Done);
            }
            fence_purge(client, ns, cinder).await?;
            if let Some(other) =
                other_active(client, &clusters.children_reads, ns, cinder, &name).await?
            {
                return Ok(Act::OtherActive(other));
            }
            if let Some(pod) = unended_database_pod(client, ns, cinder).await? {
                return Ok(Act::PodRunning(pod));
            }
            create_if_absent(&api, job).await?;
            Ok(Act::Done)
        }
        JobWrite::Replace { job, uid } => {
            let name = job.metadata.name.clone().unwrap_or_default();
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: Some(uid.to_string()),
                    resource_version: None,
                }),
                ..background()
            };
            match api.delete(&name, &params).await {
                Ok(_) => {}
                Err(e) if e.is_not_found() => {}
                // The UID precondition failed: the live Job is not the one read.
                Err(e) if e.is_conflict() => return Ok(Act::JobChanged),
                Err(e) => return Err(e.into()),
            }
            fence_purge(client, ns, cinder).await?;
            if let Some(other) =
                other_active(client, &clusters.children_reads, ns, cinder, &name).await?
            {
                return Ok(Act::OtherActive(other));
            }
            if let Some(pod) = unended_database_pod(client, ns, cinder).await? {
                return Ok(Act::PodRunning(pod));
            }
            // A 409 on create: the deleted Job is still going away.
            Ok(if create_if_absent(&api, job).await? {
                Act::Done
            } else {
                Act::Deleted
            })
        }
        JobWrite::Delete(names) => {
            delete_background(&api, names).await?;
            Ok(Act::Done)
        }
    }
}

/// The first active database Job of the Cinder other than `name`.
async fn other_active(
    client: &Client,
    reads: &ClusterStores,
    ns: &str,
    cinder: &str,
    name: &str,
) -> Result<Option<String>, kube::Error> {
    let active = active_database_jobs(client, reads, ns, cinder).await?;
    Ok(active.into_iter().find(|other| other != name))
}

/// The components whose Jobs change the database.
const DATABASE_COMPONENTS: [Component; 3] = [
    Component::DbSync,
    Component::ServiceRemove,
    Component::DbPurge,
];

/// The first pod of a database Job of Cinder `cinder` that has not ended (an uncached list by
/// the Cinder's label), by name.
pub(crate) async fn unended_database_pod(
    client: &Client,
    ns: &str,
    cinder: &str,
) -> Result<Option<String>, kube::Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pods = api
        .list(&ListParams::default().labels(&format!("{}={cinder}", names::LABEL_CINDER)))
        .await?;
    Ok(first_unended_database_pod(&pods.items))
}

/// The first of `pods` that belongs to a database Job and has not ended (its phase is neither
/// Succeeded nor Failed: Pending, Running or Unknown, deleted or not).
fn first_unended_database_pod(pods: &[Pod]) -> Option<String> {
    pods.iter()
        .filter(|p| {
            let component = p
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(names::LABEL_COMPONENT));
            DATABASE_COMPONENTS
                .iter()
                .any(|c| component.is_some_and(|v| v == c.as_str()))
        })
        .find(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded" | "Failed"))
        })
        .and_then(|p| p.metadata.name.clone())
}

/// Delete options that leave the Job's pods to the garbage collector.
fn background() -> DeleteParams {
    DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..Default::default()
    }
}

/// Deletes the Jobs `names` with background propagation (absent ones are fine).
async fn delete_background(api: &Api<Job>, names: &[String]) -> Result<(), kube::Error> {
    let params = background();
    for name in names {
        match api.delete(name, &params).await {
            Ok(_) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod_spec(job: &Job) -> &k8s_openapi::api::core::v1::PodSpec {
        job.spec.as_ref().unwrap().template.spec.as_ref().unwrap()
    }

    fn cinder(tag: &str) -> Cinder {
        let mut c = crate::test_fixtures::cinder();
        c.spec.image.tag = Some(tag.to_string());
        c.metadata.generation = Some(1);
        c
    }

    #[test]
    fn jobs_mount_the_config_and_take_the_connection_from_the_secret() {
        let job = desired_job(&cinder("2026.1"), SchemaJob::DbSync, "c-config-abc");
        assert_eq!(job.metadata.name.as_deref(), Some("c-db-sync"));
        let pod = pod_spec(&job);
        let c = &pod.containers[0];
        assert_eq!(c.image.as_deref(), Some("r:2026.1"));
        assert_eq!(
            c.command.as_ref().unwrap().join(" "),
            "cinder-manage db sync"
        );
        assert_eq!(
            c.volume_mounts.as_ref().unwrap()[0].mount_path,
            "/etc/cinder"
        );
        let env = &c.env.as_ref().unwrap()[0];
        let key = env
            .value_from
            .as_ref()
            .unwrap()
            .secret_key_ref
            .as_ref()
            .unwrap();
        assert_eq!(
            (key.name.as_str(), key.key.as_str()),
            ("c-db-connection", "connection")
        );
        assert_eq!(
            pod.volumes.as_ref().unwrap()[0]
                .config_map
                .as_ref()
                .unwrap()
                .name,
            "c-config-abc"
        );
        assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
    }

    #[test]
    fn phase_jobs_have_their_commands_and_backoff_limit() {
        let c = cinder("2026.1");
        let expand = desired_job(&c, SchemaJob::Expand, "cm");
        assert_eq!(expand.metadata.name.as_deref(), Some("c-db-expand"));
        assert_eq!(expand.spec.as_ref().unwrap().backoff_limit, Some(4));
        let migrate = desired_job(&c, SchemaJob::Migrate, "cm");
        let mc = &pod_spec(&migrate).containers[0];
        let script = mc.command.as_ref().unwrap().join(" ");
        assert!(script.contains("cinder-status upgrade check"));
        assert!(script.contains("/dev/termination-log"));
        assert_eq!(
            mc.termination_message_path.as_deref(),
            Some("/dev/termination-log")
        );
        let contract = desired_job(&c, SchemaJob::Contract, "cm");
        let cc = &pod_spec(&contract).containers[0];
        assert_eq!(
            cc.command.as_ref().unwrap().join(" "),
            "cinder-manage db online_data_migrations"
        );
    }

    #[test]
    fn only_the_image_release_or_database_changes_the_spec_hash() {
        let a = desired_job(&cinder("2026.1"), SchemaJob::DbSync, "cm1");
        let b = desired_job(&cinder("2026.1"), SchemaJob::DbSync, "cm1");
        assert_eq!(spec_hash(&a), spec_hash(&b));
        assert!(spec_hash(&a).is_some_and(|h| h.len() == 64));
        // A config edit renders another ConfigMap: the Job stays (it still mounts its own).
        let config = desired_job(&cinder("2026.1"), SchemaJob::DbSync, "cm2");
        assert_eq!(spec_hash(&a), spec_hash(&config));
        assert_eq!(
            pod_spec(&config).volumes.as_ref().unwrap()[0]
                .config_map
                .as_ref()
                .unwrap()
                .name,
            "cm2",
            "a new Job mounts the current ConfigMap"
        );
        // A new image, another release or another database connection runs it again.
        let image = desired_job(&cinder("2026.1-p1"), SchemaJob::DbSync, "cm1");
        assert_ne!(spec_hash(&a), spec_hash(&image));
        let mut moved = cinder("2026.1");
        moved.spec.open_stack_release = "2026.2".into();
        let release = desired_job(&moved, SchemaJob::DbSync, "cm1");
        assert_ne!(spec_hash(&a), spec_hash(&release));
        let mut elsewhere = cinder("2026.1");
        elsewhere.spec.database.database = "cinder_b".into();
        let database = desired_job(&elsewhere, SchemaJob::DbSync, "cm1");
        assert_ne!(spec_hash(&a), spec_hash(&database));
        // Rotated credentials reach the same schema: no new run.
        let mut rotated = cinder("2026.1");
        rotated.spec.database.secret_ref.name = "cinder-db-rotated".into();
        let rotated = desired_job(&rotated, SchemaJob::DbSync, "cm1");
        assert_eq!(spec_hash(&a), spec_hash(&rotated));
    }

    #[test]
    fn the_schema_target_follows_image_release_and_database_not_the_phase() {
        let a = cinder("2026.1");
        let expand = desired_job(&a, SchemaJob::Expand, "cm");
        let db_sync = desired_job(&a, SchemaJob::DbSync, "cm");
        let target = |j: &Job| {
            j.metadata
                .annotations
                .as_ref()
                .and_then(|m| m.get(SCHEMA_TARGET_ANNOTATION))
                .cloned()
        };
        assert_eq!(target(&expand), target(&db_sync));
        assert_ne!(spec_hash(&expand), spec_hash(&db_sync));
        assert_ne!(schema_target(&a), schema_target(&cinder("2026.2")));
        let mut moved = a.clone();
        moved.spec.database.database = "elsewhere".into();
        assert_ne!(schema_target(&a), schema_target(&moved));
    }

    #[test]
    fn the_upgrade_check_wrapper_normalises_0_to_2() {
        // Run the wrapper with a stand-in `cinder-status` that exits with each code.
        for (code, expect_exit) in [(0, 0), (1, 0), (2, 0), (3, 3)] {
            let stub = crate::test_fixtures::StubProgram::exiting("uc", "cinder-status", code);
            let msg = stub.dir.join("termination-log");
            let script =
                UPGRADE_CHECK_SCRIPT.replace("/dev/termination-log", msg.to_str().unwrap());
            let status = std::process::Command::new("/bin/sh")
                .arg("-c")
                .arg(&script)
                .env("PATH", stub.path())
                .status()
                .unwrap();
            assert_eq!(status.code(), Some(expect_exit), "code {code}");
            assert_eq!(
                std::fs::read_to_string(&msg).unwrap().trim(),
                code.to_string()
            );
        }
    }

    #[test]
    fn observed_state_and_duration() {
        let mut job = desired_job(&cinder("2026.1"), SchemaJob::DbSync, "cm");
        job.metadata.uid = Some("j1".into());
        assert_eq!(observe(&job).state, JobState::Running);
        job.status = Some(serde_json::from_value(serde_json::json!({
            "startTime": "2026-01-01T00:00:00Z",
            "completionTime": "2026-01-01T00:00:07Z",
            "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:00:07Z"}]
        })).unwrap());
        let o = observe(&job);
        assert_eq!(o.state, JobState::Succeeded);
        assert_eq!(o.duration, Some(Duration::from_secs(7)));
        job.status = Some(serde_json::from_value(serde_json::json!({
            "startTime": "2026-01-01T00:00:00Z",
            "conditions": [{"type": "Failed", "status": "True", "lastTransitionTime": "2026-01-01T00:00:04Z"}]
        })).unwrap());
        let o = observe(&job);
        assert_eq!(o.state, JobState::Failed { exit_code: None });
        assert_eq!(o.duration, Some(Duration::from_secs(4)));
    }

    #[test]
    fn an_unended_pod_of_a_database_job_is_found_and_an_ended_one_or_a_service_pod_is_not() {
        let pod = |name: &str, component: Component, phase: Option<&str>| Pod {
            metadata: kube::api::ObjectMeta {
                name: Some(name.to_string()),
                labels: Some(names::component_labels("c", component)),
                ..Default::default()
            },
            status: Some(k8s_openapi::api::core::v1::PodStatus {
                phase: phase.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        };
        let ended = [
            pod("c-db-sync-a", Component::DbSync, Some("Failed")),
            pod("c-db-purge-b", Component::DbPurge, Some("Succeeded")),
            pod("c-api-x", Component::Api, Some("Running")),
            pod("c-volume-y", Component::Volume, None),
        ];
        assert_eq!(first_unended_database_pod(&ended), None);
        for (name, component, phase) in [
            ("c-db-sync-b", Component::DbSync, Some("Running")),
            (
                "c-ceph-service-remove-c",
                Component::ServiceRemove,
                Some("Pending"),
            ),
            ("c-db-purge-d", Component::DbPurge, Some("Unknown")),
            ("c-db-sync-e", Component::DbSync, None),
        ] {
            let mut pods = ended.to_vec();
            pods.push(pod(name, component, phase));
            assert_eq!(
                first_unended_database_pod(&pods).as_deref(),
                Some(name),
                "{phase:?}"
            );
        }
    }

    #[test]
    fn database_jobs_are_the_schema_jobs_service_removes_and_purges() {
        let c = cinder("2026.1");
        for which in SchemaJob::ALL {
            assert!(is_database_job(&desired_job(&c, which, "cm"), "c"));
        }
        let mut other = desired_job(&c, SchemaJob::DbSync, "cm");
        other.metadata.name = Some("c-something".into());
        other.metadata.labels = Some(names::component_labels("c", Component::Api));
        assert!(!is_database_job(&other, "c"));
        other.metadata.labels = Some(names::component_labels("c", Component::ServiceRemove));
        assert!(is_database_job(&other, "c"));
        // A purge Job holds its connections like any other: it excludes the others.
        other.metadata.labels = Some(names::component_labels("c", Component::DbPurge));
        assert!(is_database_job(&other, "c") && is_purge_job(&other));
    }
}
