//! The product step table: each of the seventeen steps declared in [`StepName`] (its label,
//! condition and place follow from the declaration) and the function of its file that runs it.

use super::database::services::DatabaseServices;
use super::{
    backends, backup_backend, backup_service, config, database, db_connection_secret, db_purge,
    deployment, health_check, hpa, http_route, network_policy, scheduler, secrets,
    transport_url_secret, volume_services, vpa,
};
use crate::metrics::JobKind;
use crate::pipeline::StepEnv;
use crate::pipeline::{
    GROUP, LANE, PipelineTable, Step, StepBody, StepFn, StepMemory, StepName, TableError,
};
use crate::workloads::JobReporting;
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

/// The product steps, each in its own file, in the order of [`LANE`] and [`GROUP`]: the match
/// gives every declared step its function (a step declared without one does not compile).
pub fn steps(env: StepEnv) -> Vec<Arc<dyn Step>> {
    let step_of = |name: StepName| match name {
        StepName::Secrets => step(name, &env, secrets::run),
        StepName::DBConnectionSecret => step(name, &env, db_connection_secret::run),
        StepName::TransportURLSecret => step(name, &env, transport_url_secret::run),
        StepName::Backends => step(name, &env, backends::run),
        StepName::BackupBackend => step(name, &env, backup_backend::run),
        StepName::Config => step(name, &env, config::run),
        StepName::Database => {
            let services =
                DatabaseServices::new(env.client.clone(), env.device_locks.clone(), &env.metrics);
            step_with(name, &env, services, database::run)
        }
        StepName::Scheduler => step(name, &env, scheduler::run),
        StepName::VolumeServices => {
            let detach = JobReporting::new(&env, JobKind::ServiceRemove);
            step_with(name, &env, detach, volume_services::run)
        }
        StepName::BackupService => step(name, &env, backup_service::run),
        StepName::Deployment => step(name, &env, deployment::run),
        StepName::DBPurge => {
            let purge = JobReporting::new(&env, JobKind::DbPurge);
            step_with(name, &env, purge, db_purge::run)
        }
        StepName::HTTPRoute => step(name, &env, http_route::run),
        StepName::HealthCheck => step(name, &env, health_check::run),
        StepName::HPA => step_with(name, &env, hpa::HpaEvents::new(&env), hpa::run),
        StepName::VPA => step(name, &env, vpa::run),
        StepName::NetworkPolicy => step(name, &env, network_policy::run),
    };
    LANE.iter()
        .chain(GROUP.iter())
        .map(|&n| step_of(n))
        .collect()
}

/// The product step table (starts the step actors: call it on the actor thread).
pub fn table(env: StepEnv) -> Result<PipelineTable, TableError> {
    PipelineTable::product(steps(env))
}
