//! The Database step (condition DatabaseReady): the MariaDB gate and Database/User/Grant in
//! managed mode ([`provisioning`]), the config wait (WaitingForConfig), the image-tag vs
//! release check (ImageReleaseMismatch), then either the steady-state `{name}-db-sync` Job or
//! the release upgrade's expand → migrate → rolling update → contract walk through the pure
//! phase machine of [`crate::planning::upgrade`]. It promotes `status.installedRelease` (after a
//! db-sync, or after the contract phase) and keeps `status.targetRelease` / `upgradePhase`.
//!
//! Every database Job is created or deleted under the database's device lock ([`jobs`]); the
//! db_sync metrics pair is fed once per terminal Job UID; the upgrade check's real exit code
//! becomes an event ([`upgrade_flow`]). The RollingUpdate → Contracting flip is the Deployment
//! step's: this step only reports UpgradeRollingUpdate and lets the workload steps run.
//!
//! Requeues: 30 s RequeueDatabaseWait for the MariaDB gate, the config wait and db-sync; 30 s
//! RequeueUpgradeWait while a phase Job runs; 1 s RequeueNextPass after a state change the next
//! pass acts on (a phase entered, objects just created, a Job being replaced, a stale snapshot);
//! a DeviceBusy answer requeues after its retry_after.

pub mod jobs;
pub mod provisioning;
pub mod services;
pub mod upgrade_flow;

use crate::children::list_children;
use crate::conditions::{Cond, kind, reason};
use crate::context::OperatorContext;
use crate::crd::{Cinder, UpgradePhase};
use crate::metrics::JobResult;
use crate::names::{self, Component};
use crate::pipeline::{Clusters, Doing, Outcome, StepContext, StepError, StepResult};
use crate::planning::connection_cap::{connection_cap, volume_deployments};
use crate::planning::image_release::check_image_release;
use crate::planning::job::JobState;
use crate::planning::upgrade::{ReleaseDecision, db_sync_step, decide, phase_step};
use crate::requeue::{
    REQUEUE_DATABASE_WAIT, REQUEUE_DEPLOYMENT_POLLING, REQUEUE_NEXT_PASS, REQUEUE_UPGRADE_WAIT,
};
use crate::workloads::job_marker::CountedJob;
use jobs::{Act, JobWrite, SchemaJob};
use k8s_openapi::api::apps::v1::Deployment;
use provisioning::Provisioned;
use services::DatabaseServices;
use std::sync::Arc;
use std::time::Duration;

fn db_cond(status: bool, reason: &'static str, message: impl Into<String>) -> Cond {
    if status {
        Cond::true_(kind::DATABASE_READY, reason, message)
    } else {
        Cond::false_(kind::DATABASE_READY, reason, message)
    }
}

/// What driving one Job came to this pass.
enum Driven {
    /// The Job exists with the wanted spec, in this state (uid of the Job).
    State(JobState, String),
    /// Not acting this pass: requeue after the delay; the note says why.
    Wait(Duration, String),
}

/// The state of the existing Job `job_name` (`o` as read; a failure carries its pod's exit code),
/// feeding the db_sync pair and the JobFinished event once per terminal Job UID.
async fn existing_state(
    clusters: &Clusters,
    services: &DatabaseServices,
    cinder: &Cinder,
    which: SchemaJob,
    job_name: &str,
    o: &jobs::ObservedJob,
) -> JobState {
    let ns = cinder.metadata.namespace.as_deref().unwrap_or_default();
    let name = cinder.metadata.name.as_deref().unwrap_or_default();
    let mut state = o.state;
    if let JobState::Failed { .. } = state {
        state = JobState::Failed {
            exit_code: jobs::failed_exit_code(&clusters.children, ns, &o.uid).await,
        };
    }
    if state.is_terminal() {
        let result = if state == JobState::Succeeded {
            JobResult::Succeeded
        } else {
            JobResult::Failed
        };
        let duration = o.duration.unwrap_or_default();
        let counted = CountedJob {
            client: &clusters.children,
            name: job_name,
            uid: &o.uid,
        };
        if services
            .observe_job_once(&counted, ns, name, result, duration)
            .await
        {
            crate::events::job_finished(
                services.recorder(),
                cinder,
                job_name,
                &format!("db-{}", which.label()),
                result,
                duration,
            )
            .await;
        }
    }
    state
}

/// What writing Job `job_name` came to; `wait` is how long another Job of the same database is
/// waited for.
fn after_act(act: Act, job_name: &str, wait: Duration) -> Driven {
    match act {
        Act::Done => Driven::State(JobState::Running, String::new()),
        Act::Deleted => Driven::Wait(
            REQUEUE_NEXT_PASS,
            format!("Job {job_name} is being replaced (its image, release or database changed)"),
        ),
        Act::DeviceBusy(after) => Driven::Wait(
            after,
            format!("Job {job_name} waits for the database lock another replica holds"),
        ),
        Act::OtherActive(other) => Driven::Wait(
            wait,
            format!("Job {job_name} waits for Job {other} of the same database to finish"),
        ),
        // A pod ends within its grace period (30 s by default): looked at again sooner.
        Act::PodRunning(pod) => Driven::Wait(
            wait.min(REQUEUE_DEPLOYMENT_POLLING),
            format!("Job {job_name} waits for pod {pod} of a database Job to end"),
        ),
        Act::JobChanged => Driven::Wait(
            REQUEUE_NEXT_PASS,
            format!("Job {job_name} changed since this pass read it; comparing on the next one"),
        ),
        Act::StaleSnapshot => Driven::Wait(
            REQUEUE_NEXT_PASS,
            "the Cinder changed during this pass; acting on the next one".to_string(),
        ),
    }
}

/// Ensures the Job `which` exists with its wanted spec (creating or replacing it under the
/// device lock) and reports its state; feeds the db_sync pair once per terminal Job UID.
async fn drive_job(
    clusters: &Clusters,
    services: &DatabaseServices,
    cinder: &Cinder,
    (which, wait): (SchemaJob, Duration),
    config_map: &str,
) -> Result<Driven, StepError> {
    let driven: Result<Driven, String> = async {
        let ns = cinder.metadata.namespace.as_deref().unwrap_or_default();
        let name = cinder.metadata.name.as_deref().unwrap_or_default();
        let desired = jobs::desired_job(cinder, which, config_map);
        let job_name = which.job_name(name);
        let observed = jobs::read_job(&clusters.children, &clusters.children_reads, ns, &job_name)
            .await
            .map_err(|e| format!("reading Job {job_name}: {e}"))?;
        let act = match &observed {
            None => jobs::write_under_lock(
                clusters,
                services,
                cinder,
                which,
                JobWrite::Create(&desired),
            )
            .await
            .map_err(|e| format!("launching Job {job_name}: {e}"))?,
            // The replaced Job is still going away: its removal (a watch event) brings the pass
            // that creates the new one; taking the lock meanwhile would only repeat the delete.
            Some(o) if o.deleting && o.spec_hash.as_deref() != jobs::spec_hash(&desired) => {
                Act::Deleted
            }
            Some(o) if o.spec_hash.as_deref() != jobs::spec_hash(&desired) => {
                jobs::write_under_lock(
                    clusters,
                    services,
                    cinder,
                    which,
                    JobWrite::Replace {
                        job: &desired,
                        uid: &o.uid,
                    },
                )
                .await
                .map_err(|e| format!("replacing Job {job_name}: {e}"))?
            }
            Some(o) => {
                let state = existing_state(clusters, services, cinder, which, &job_name, o).await;
                return Ok(Driven::State(state, o.uid.clone()));
            }
        };
        if act == Act::Done {
            crate::events::job_started(
                services.recorder(),
                cinder,
                &job_name,
                &format!("db-{}", which.label()),
            )
            .await;
        }
        Ok(after_act(act, &job_name, wait))
    }
    .await;
    driven.doing("running the database Job")
}

/// Adds to `condition` what the newest failed pod of a running or failed schema Job (UID
/// `uid`) ended with ([`jobs::last_failure`]: the real error, e.g. "Can't connect to MySQL
/// server"), so a database that cannot be reached, or a migration that fails, says why while the
/// Job retries and once it gave up.
async fn with_last_failure(
    clusters: &Clusters,
    cinder: &Cinder,
    state: JobState,
    uid: &str,
    condition: &mut Cond,
) {
    if uid.is_empty() || !matches!(state, JobState::Running | JobState::Failed { .. }) {
        return;
    }
    let ns = cinder.metadata.namespace.as_deref().unwrap_or_default();
    if let Some(error) = jobs::last_failure(&clusters.children, ns, uid).await {
        condition.message = format!("{}; last failed attempt: {error}", condition.message);
    }
}

/// Reports `condition`, then continues or requeues after `requeue`.
fn settle(ctx: &mut StepContext, condition: Cond, requeue: Option<Duration>) -> StepResult {
    ctx.set(condition);
    Ok(requeue.map_or(Outcome::Continue, Outcome::RequeueAfter))
}

async fn steady(
    clusters: &Clusters,
    services: &DatabaseServices,
    ctx: &mut StepContext,
    config_map: &str,
) -> StepResult {
    let cinder = ctx.cinder.clone();
    let release = cinder.spec.open_stack_release.clone();
    ctx.status.target_release = None;
    ctx.status.upgrade_phase = None;
    if let Some(contract) = upgrade_reached_target(clusters, &cinder, config_map).await? {
        let mut step = db_sync_step(ctx.name(), &release, JobState::Succeeded);
        step.condition.message = format!(
            "schema at {release}: the upgrade's Job {contract} completed it with this image"
        );
        return settle(ctx, step.condition, step.requeue);
    }
    let job = (SchemaJob::DbSync, REQUEUE_DATABASE_WAIT);
    let driven = drive_job(clusters, services, &cinder, job, config_map).await?;
    match driven {
        Driven::Wait(after, note) => {
            ctx.requeue(db_cond(false, reason::DB_SYNC_IN_PROGRESS, note), after)
        }
        Driven::State(state, uid) => {
            let mut step = db_sync_step(ctx.name(), &release, state);
            if step.promote {
                ctx.status.installed_release = Some(release);
            }
            with_last_failure(clusters, &cinder, state, &uid, &mut step.condition).await;
            settle(ctx, step.condition, step.requeue)
        }
    }
}

/// The upgrade's contract Job, when the db-sync Job would have to run (absent, or its image,
/// release or database changed) but a completed upgrade already brought the database to the
/// schema it would (the expand ran the same `db sync` with this image, release and database,
/// and the contract after it succeeded): running it again would only repeat a no-op migration.
async fn upgrade_reached_target(
    clusters: &Clusters,
    cinder: &Cinder,
    config_map: &str,
) -> Result<Option<String>, StepError> {
    let ns = cinder.metadata.namespace.as_deref().unwrap_or_default();
    let name = cinder.metadata.name.as_deref().unwrap_or_default();
    let read = |job: String| async move {
        jobs::read_job(&clusters.children, &clusters.children_reads, ns, &job)
            .await
            .map_err(|e| format!("reading Job {job}: {e}"))
    };
    let desired = jobs::desired_job(cinder, SchemaJob::DbSync, config_map);
    let db_sync = read(SchemaJob::DbSync.job_name(name))
        .await
        .doing("reading the db-sync Job")?;
    if db_sync.is_some_and(|o| o.spec_hash.as_deref() == jobs::spec_hash(&desired)) {
        return Ok(None);
    }
    let contract = read(SchemaJob::Contract.job_name(name))
        .await
        .doing("reading the contract Job")?;
    Ok(contract
        .filter(|c| contract_reached(c, &jobs::schema_target(cinder)))
        .map(|c| c.name))
}

/// Whether the contract Job `c` completed an upgrade to `target` (a [`jobs::schema_target`]).
fn contract_reached(c: &jobs::ObservedJob, target: &str) -> bool {
    !c.deleting && c.state == JobState::Succeeded && c.schema_target.as_deref() == Some(target)
}

fn phase_job(phase: UpgradePhase) -> Option<SchemaJob> {
    match phase {
        UpgradePhase::Expanding => Some(SchemaJob::Expand),
        UpgradePhase::Migrating => Some(SchemaJob::Migrate),
        UpgradePhase::RollingUpdate => None,
        UpgradePhase::Contracting => Some(SchemaJob::Contract),
    }
}

fn in_progress_reason(phase: UpgradePhase) -> &'static str {
    match phase {
        UpgradePhase::Expanding => reason::EXPAND_IN_PROGRESS,
        UpgradePhase::Migrating => reason::MIGRATE_IN_PROGRESS,
        UpgradePhase::RollingUpdate => reason::UPGRADE_ROLLING_UPDATE,
        UpgradePhase::Contracting => reason::CONTRACT_IN_PROGRESS,
    }
}

async fn upgrade_phase(
    clusters: &Clusters,
    services: &DatabaseServices,
    ctx: &mut StepContext,
    config_map: &str,
    target: String,
    phase: UpgradePhase,
) -> StepResult {
    let cinder = ctx.cinder.clone();
    let Some(which) = phase_job(phase) else {
        let step = phase_step(ctx.name(), &target, phase, JobState::Absent);
        return settle(ctx, step.condition, step.requeue);
    };
    let job = (which, REQUEUE_UPGRADE_WAIT);
    let driven = drive_job(clusters, services, &cinder, job, config_map).await?;
    match driven {
        Driven::Wait(after, note) => {
            ctx.requeue(db_cond(false, in_progress_reason(phase), note), after)
        }
        Driven::State(state, uid) => {
            if phase == UpgradePhase::Migrating && state == JobState::Succeeded {
                upgrade_flow::report_upgrade_check(&clusters.children, services, &cinder, &uid)
                    .await;
            }
            let mut step = phase_step(ctx.name(), &target, phase, state);
            with_last_failure(clusters, &cinder, state, &uid, &mut step.condition).await;
            ctx.status.upgrade_phase = step.phase;
            ctx.status.target_release = Some(target.clone());
            if step.promote {
                ctx.status.installed_release = Some(target);
                ctx.status.target_release = None;
                ctx.status.upgrade_phase = None;
            }
            settle(ctx, step.condition, step.requeue)
        }
    }
}

/// What deleting the phase Jobs of the upgrade to `target` came to: the condition, the requeue
/// delay and whether the upgrade is over (its status fields are cleared).
fn aborted(act: Act, target: &str) -> (Cond, Duration, bool) {
    match act {
        Act::Done => (
            db_cond(
                false,
                reason::DB_SYNC_IN_PROGRESS,
                format!(
                    "upgrade to {target} aborted: spec.openStackRelease is back at the installed release; phase Jobs deleted"
                ),
            ),
            REQUEUE_NEXT_PASS,
            true,
        ),
        Act::DeviceBusy(after) => (
            db_cond(
                false,
                reason::DB_SYNC_IN_PROGRESS,
                format!("aborting the upgrade to {target}: waiting for the database lock"),
            ),
            after,
            false,
        ),
        _ => (
            db_cond(
                false,
                reason::DB_SYNC_IN_PROGRESS,
                format!("aborting the upgrade to {target} on the next pass"),
            ),
            REQUEUE_NEXT_PASS,
            false,
        ),
    }
}

async fn abort(
    clusters: &Clusters,
    services: &DatabaseServices,
    ctx: &mut StepContext,
) -> StepResult {
    let cinder = ctx.cinder.clone();
    let target = ctx.status.target_release.clone().unwrap_or_default();
    let names: Vec<String> = SchemaJob::PHASES
        .iter()
        .map(|j| j.job_name(ctx.name()))
        .collect();
    let act = jobs::write_under_lock(
        clusters,
        services,
        &cinder,
        SchemaJob::Expand,
        JobWrite::Delete(&names),
    )
    .await
    .map_err(|e| e.to_string())
    .doing("aborting the upgrade")?;
    let (c, after, over) = aborted(act, &target);
    if over {
        ctx.status.target_release = None;
        ctx.status.upgrade_phase = None;
    }
    ctx.requeue(c, after)
}

/// The requeue delay while provisioning waits: the next pass right after objects were created
/// (their readiness is the next thing to read), else the database wait.
fn provisioning_wait(created: bool) -> Duration {
    if created {
        REQUEUE_NEXT_PASS
    } else {
        REQUEUE_DATABASE_WAIT
    }
}

/// DatabaseReady=False / WaitingForConfig while no config ConfigMap is rendered.
fn waiting_for_config() -> Cond {
    db_cond(
        false,
        reason::WAITING_FOR_CONFIG,
        "waiting for the Config step to render the config ConfigMap the database Jobs mount",
    )
}

/// DatabaseReady=False / ExpandInProgress as the upgrade from `installed` to `target` starts.
fn upgrade_started(installed: Option<&str>, target: &str) -> Cond {
    db_cond(
        false,
        reason::EXPAND_IN_PROGRESS,
        format!(
            "upgrade from {} to {target} started",
            installed.unwrap_or_default()
        ),
    )
}

/// The volume Deployments the connection cap counts: one per projected backend (being deleted
/// or not) and per volume Deployment that exists, once per backend.
async fn running_volume_services(
    op: &OperatorContext,
    ctx: &StepContext,
) -> Result<usize, StepError> {
    let running: Vec<Deployment> = list_children(
        &ctx.children(&op.client),
        ctx.children_reads(),
        ctx.namespace(),
        ctx.name(),
        Some(Component::Volume),
    )
    .await
    .doing("listing volume Deployments")?;
    let running = running.iter().filter_map(|d| {
        d.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(names::LABEL_BACKEND))
            .map(String::as_str)
    });
    let projected = ctx.artefacts.backends.iter().map(|b| b.name.as_str());
    Ok(volume_deployments(projected, running))
}

/// Runs the step once for one Cinder.
pub(crate) async fn run(op: Arc<OperatorContext>, ctx: &mut StepContext) -> StepResult {
    let cinder = ctx.cinder.clone();
    let clusters = ctx.clusters(&op.client);
    let services = DatabaseServices::new(&op, ctx.memory());

    let cap = connection_cap(&cinder.spec, running_volume_services(&op, ctx).await?);
    match provisioning::provision(&op.client, ctx.management_reads(), &cinder, cap)
        .await
        .doing("provisioning the database")?
    {
        Provisioned::Waiting { condition, created } => {
            return ctx.requeue(condition, provisioning_wait(created));
        }
        Provisioned::Ready => {}
    }

    let Some(config_map) = ctx.artefacts.config_map_name.clone() else {
        return ctx.requeue(waiting_for_config(), REQUEUE_DATABASE_WAIT);
    };

    if let Some(c) =
        check_image_release(&cinder.spec.image, &cinder.spec.open_stack_release).condition()
    {
        return ctx.requeue(c, REQUEUE_DATABASE_WAIT);
    }

    let decision = decide(
        &cinder.spec.open_stack_release,
        ctx.status.installed_release.as_deref(),
        ctx.status.target_release.as_deref(),
        ctx.status.upgrade_phase,
    );
    match decision {
        ReleaseDecision::Refused(c) => ctx.requeue(c, REQUEUE_DATABASE_WAIT),
        ReleaseDecision::Steady => steady(&clusters, &services, ctx, &config_map).await,
        ReleaseDecision::Abort => abort(&clusters, &services, ctx).await,
        ReleaseDecision::Start { target } => {
            // The phase is persisted first; the Expanding Job is created on the next pass.
            let c = upgrade_started(ctx.status.installed_release.as_deref(), &target);
            ctx.status.target_release = Some(target);
            ctx.status.upgrade_phase = Some(UpgradePhase::Expanding);
            ctx.requeue(c, REQUEUE_NEXT_PASS)
        }
        ReleaseDecision::Continue { target, phase } => {
            upgrade_phase(&clusters, &services, ctx, &config_map, target, phase).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_completed_contract_for_the_same_schema_target_stands_for_the_db_sync() {
        let contract = |state, target: &str, deleting| jobs::ObservedJob {
            name: "c-db-contract".into(),
            uid: "u".into(),
            state,
            spec_hash: None,
            schema_target: Some(target.into()),
            duration: None,
            deleting,
        };
        assert!(contract_reached(
            &contract(JobState::Succeeded, "t", false),
            "t"
        ));
        assert!(!contract_reached(
            &contract(JobState::Succeeded, "old", false),
            "t"
        ));
        assert!(!contract_reached(
            &contract(JobState::Running, "t", false),
            "t"
        ));
        assert!(!contract_reached(
            &contract(JobState::Succeeded, "t", true),
            "t"
        ));
    }

    #[test]
    fn every_job_write_outcome_but_done_waits_and_says_why() {
        let wait = Duration::from_secs(30);
        let Driven::State(state, uid) = after_act(Act::Done, "c-db-sync", wait) else {
            panic!("a Job written is driven on");
        };
        assert_eq!((state, uid.as_str()), (JobState::Running, ""));
        let busy = Duration::from_secs(7);
        for (act, after, note) in [
            (
                Act::Deleted,
                REQUEUE_NEXT_PASS,
                "Job c-db-sync is being replaced (its image, release or database changed)",
            ),
            (
                Act::DeviceBusy(busy),
                busy,
                "Job c-db-sync waits for the database lock another replica holds",
            ),
            (
                Act::OtherActive("c-db-expand".into()),
                wait,
                "Job c-db-sync waits for Job c-db-expand of the same database to finish",
            ),
            (
                Act::PodRunning("c-db-sync-x7k2p".into()),
                REQUEUE_DEPLOYMENT_POLLING,
                "Job c-db-sync waits for pod c-db-sync-x7k2p of a database Job to end",
            ),
            (
                Act::JobChanged,
                REQUEUE_NEXT_PASS,
                "Job c-db-sync changed since this pass read it; comparing on the next one",
            ),
            (
                Act::StaleSnapshot,
                REQUEUE_NEXT_PASS,
                "the Cinder changed during this pass; acting on the next one",
            ),
        ] {
            let Driven::Wait(d, n) = after_act(act.clone(), "c-db-sync", wait) else {
                panic!("{act:?} waits");
            };
            assert_eq!((d, n.as_str()), (after, note), "{act:?}");
        }
    }

    #[test]
    fn each_upgrade_phase_runs_its_job_under_its_reason() {
        assert_eq!(phase_job(UpgradePhase::Expanding), Some(SchemaJob::Expand));
        assert_eq!(phase_job(UpgradePhase::Migrating), Some(SchemaJob::Migrate));
        assert_eq!(
            phase_job(UpgradePhase::RollingUpdate),
            None,
            "the Deployment step rolls the workloads"
        );
        assert_eq!(
            phase_job(UpgradePhase::Contracting),
            Some(SchemaJob::Contract)
        );
        assert_eq!(
            [
                UpgradePhase::Expanding,
                UpgradePhase::Migrating,
                UpgradePhase::RollingUpdate,
                UpgradePhase::Contracting
            ]
            .map(in_progress_reason),
            [
                "ExpandInProgress",
                "MigrateInProgress",
                "UpgradeRollingUpdate",
                "ContractInProgress"
            ]
        );
    }

    #[test]
    fn an_abort_ends_the_upgrade_only_once_the_phase_jobs_are_gone() {
        let (c, after, over) = aborted(Act::Done, "2026.2");
        assert_eq!(
            (c.type_, c.status, c.reason),
            (kind::DATABASE_READY, false, reason::DB_SYNC_IN_PROGRESS)
        );
        assert_eq!(
            c.message,
            "upgrade to 2026.2 aborted: spec.openStackRelease is back at the installed release; phase Jobs deleted"
        );
        assert_eq!((after, over), (REQUEUE_NEXT_PASS, true));
        let busy = Duration::from_secs(4);
        let (c, after, over) = aborted(Act::DeviceBusy(busy), "2026.2");
        assert_eq!(
            c.message,
            "aborting the upgrade to 2026.2: waiting for the database lock"
        );
        assert_eq!((after, over), (busy, false));
        let (c, after, over) = aborted(Act::StaleSnapshot, "2026.2");
        assert_eq!(c.message, "aborting the upgrade to 2026.2 on the next pass");
        assert_eq!((after, over), (REQUEUE_NEXT_PASS, false));
    }

    #[test]
    fn the_step_waits_for_provisioning_and_the_config_and_starts_an_upgrade() {
        assert_eq!(provisioning_wait(true), REQUEUE_NEXT_PASS);
        assert_eq!(provisioning_wait(false), REQUEUE_DATABASE_WAIT);
        let c = waiting_for_config();
        assert_eq!(
            (c.type_, c.status, c.reason),
            (kind::DATABASE_READY, false, reason::WAITING_FOR_CONFIG)
        );
        let started = upgrade_started(Some("2026.1"), "2026.2");
        assert_eq!(
            (started.status, started.reason),
            (false, reason::EXPAND_IN_PROGRESS)
        );
        assert_eq!(started.message, "upgrade from 2026.1 to 2026.2 started");
        let ok = db_cond(true, reason::DATABASE_SYNCED, "m");
        assert_eq!((ok.type_, ok.status), (kind::DATABASE_READY, true));
    }
}
