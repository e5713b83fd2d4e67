//! The product step table: each of the seventeen steps by its [`StepName`] (its condition
//! follows from the name) and the function of its file that runs it.

use super::database::services::DatabaseServices;
use super::env::StepEnv;
use super::workloads::JobReporting;
use super::{
    backends, backup_backend, backup_service, config, database, db_connection_secret, db_purge,
    deployment, health_check, hpa, http_route, network_policy, scheduler, secrets,
    transport_url_secret, volume_services, vpa,
};
use crate::metrics::JobKind;
use crate::pipeline::{PipelineTable, Step, StepBody, StepFn, StepMemory, StepName, TableError};
use std::sync::Arc;

/// The step `name` running `body` with a copy of `env`, its reads served from `env`'s stores.
fn step<B>(name: StepName, env: &StepEnv, body: B) -> Arc<dyn Step>
where
    B: for<'a> StepBody<'a, StepEnv> + Clone + Send + Sync + 'static,
{
    Arc::new(StepFn::new(name, env.reads.clone(), env.clone(), body))
}

/// What a Job-running step keeps beyond the environment; each run gets a copy that remembers
/// through that run's step memory.
pub trait PerRun: Clone + Send + Sync + 'static {
    fn for_run(&self, memory: &StepMemory) -> Self;
}

impl PerRun for DatabaseServices {
    fn for_run(&self, memory: &StepMemory) -> Self {
        DatabaseServices::for_run(self, memory)
    }
}

impl PerRun for hpa::HpaEvents {
    fn for_run(&self, memory: &StepMemory) -> Self {
        hpa::HpaEvents::for_run(self, memory)
    }
}

impl PerRun for JobReporting {
    fn for_run(&self, memory: &StepMemory) -> Self {
        JobReporting::for_run(self, memory)
    }
}

/// The step `name` running `body` with a copy of `env` and `state` made for the run, its reads
/// served from `env`'s stores.
fn step_with<S, B>(name: StepName, env: &StepEnv, state: S, body: B) -> Arc<dyn Step>
where
    S: PerRun,
    B: for<'a> StepBody<'a, (StepEnv, S)> + Clone + Send + Sync + 'static,
{
    Arc::new(StepFn {
        name,
        reads: env.reads.clone(),
        with: (env.clone(), state),
        per_run: |(env, state), memory| (env.clone(), state.for_run(memory)),
        body,
    })
}

/// The product steps, each in its own file.
pub fn steps(env: StepEnv) -> Vec<Arc<dyn Step>> {
    let database =
        DatabaseServices::new(env.client.clone(), env.device_locks.clone(), &env.metrics);
    let purge = JobReporting::new(&env, JobKind::DbPurge);
    let detach = JobReporting::new(&env, JobKind::ServiceRemove);
    vec![
        step(StepName::Secrets, &env, secrets::run),
        step(
            StepName::DBConnectionSecret,
            &env,
            db_connection_secret::run,
        ),
        step(
            StepName::TransportURLSecret,
            &env,
            transport_url_secret::run,
        ),
        step(StepName::Backends, &env, backends::run),
        step(StepName::BackupBackend, &env, backup_backend::run),
        step(StepName::Config, &env, config::run),
        step_with(StepName::Database, &env, database, database::run),
        step(StepName::Scheduler, &env, scheduler::run),
        step_with(StepName::VolumeServices, &env, detach, volume_services::run),
        step(StepName::BackupService, &env, backup_service::run),
        step(StepName::Deployment, &env, deployment::run),
        step_with(StepName::DBPurge, &env, purge, db_purge::run),
        step(StepName::HTTPRoute, &env, http_route::run),
        step(StepName::HealthCheck, &env, health_check::run),
        step_with(StepName::HPA, &env, hpa::HpaEvents::new(&env), hpa::run),
        step(StepName::VPA, &env, vpa::run),
        step(StepName::NetworkPolicy, &env, network_policy::run),
    ]
}

/// The product step table (starts the step actors: call it on the actor thread).
pub fn table(env: StepEnv) -> Result<PipelineTable, TableError> {
    PipelineTable::product(steps(env))
}
