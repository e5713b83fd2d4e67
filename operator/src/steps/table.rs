//! The product step table: each of the seventeen steps declared in [`StepName`] (its label,
//! condition and place follow from the declaration) and the function of its file that runs it.

use super::{
    backends, backup_backend, backup_service, config, database, db_connection_secret, db_purge,
    deployment, health_check, hpa, http_route, network_policy, scheduler, secrets,
    transport_url_secret, volume_services, vpa,
};
use crate::context::OperatorContext;
use crate::pipeline::{GROUP, LANE, PipelineTable, Step, StepBody, StepFn, StepName, TableError};
use std::sync::Arc;

/// The step `name` running `body`.
fn step<B>(name: StepName, body: B) -> Arc<dyn Step<OperatorContext>>
where
    B: for<'a> StepBody<'a, OperatorContext> + Clone + Send + Sync + 'static,
{
    Arc::new(StepFn { name, body })
}

/// The product steps, each in its own file, in the order of [`LANE`] and [`GROUP`]: the match
/// gives every declared step its function (a step declared without one does not compile).
pub(crate) fn steps() -> Vec<Arc<dyn Step<OperatorContext>>> {
    let step_of = |name: StepName| match name {
        StepName::Secrets => step(name, secrets::run),
        StepName::DBConnectionSecret => step(name, db_connection_secret::run),
        StepName::TransportURLSecret => step(name, transport_url_secret::run),
        StepName::Backends => step(name, backends::run),
        StepName::BackupBackend => step(name, backup_backend::run),
        StepName::Config => step(name, config::run),
        StepName::Database => step(name, database::run),
        StepName::Scheduler => step(name, scheduler::run),
        StepName::VolumeServices => step(name, volume_services::run),
        StepName::BackupService => step(name, backup_service::run),
        StepName::Deployment => step(name, deployment::run),
        StepName::DBPurge => step(name, db_purge::run),
        StepName::HTTPRoute => step(name, http_route::run),
        StepName::HealthCheck => step(name, health_check::run),
        StepName::HPA => step(name, hpa::run),
        StepName::VPA => step(name, vpa::run),
        StepName::NetworkPolicy => step(name, network_policy::run),
    };
    LANE.iter()
        .chain(GROUP.iter())
        .map(|&n| step_of(n))
        .collect()
}

/// The product step table (starts the step actors: call it on the actor thread).
pub(crate) fn table() -> Result<PipelineTable<OperatorContext>, TableError> {
    PipelineTable::product(steps())
}
