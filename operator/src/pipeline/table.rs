//! The table of named steps: the seed's twelve-step lane and five-member parallel group, the
//! actor that runs one step kind ([`StepActor`], message [`RunStep`]), and [`PipelineTable`],
//! which holds the step actors a pipeline uses.

use super::step::{Step, StepContext, StepReport};
use actix::prelude::*;
use std::sync::Arc;

/// The seventeen steps of seed 001, by their `sub_reconciler` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StepName {
    Secrets,
    DBConnectionSecret,
    TransportURLSecret,
    Backends,
    BackupBackend,
    Config,
    Database,
    Scheduler,
    VolumeServices,
    BackupService,
    Deployment,
    DBPurge,
    HTTPRoute,
    HealthCheck,
    HPA,
    VPA,
    NetworkPolicy,
}

/// The sequential lane, in order.
pub const LANE: [StepName; 12] = [
    StepName::Secrets,
    StepName::DBConnectionSecret,
    StepName::TransportURLSecret,
    StepName::Backends,
    StepName::BackupBackend,
    StepName::Config,
    StepName::Database,
    StepName::Scheduler,
    StepName::VolumeServices,
    StepName::BackupService,
    StepName::Deployment,
    StepName::DBPurge,
];

/// The parallel group.
pub const GROUP: [StepName; 5] = [
    StepName::HTTPRoute,
    StepName::HealthCheck,
    StepName::HPA,
    StepName::VPA,
    StepName::NetworkPolicy,
];

impl StepName {
    pub fn as_str(self) -> &'static str {
        match self {
            StepName::Secrets => "Secrets",
            StepName::DBConnectionSecret => "DBConnectionSecret",
            StepName::TransportURLSecret => "TransportURLSecret",
            StepName::Backends => "Backends",
            StepName::BackupBackend => "BackupBackend",
            StepName::Config => "Config",
            StepName::Database => "Database",
            StepName::Scheduler => "Scheduler",
            StepName::VolumeServices => "VolumeServices",
            StepName::BackupService => "BackupService",
            StepName::Deployment => "Deployment",
            StepName::DBPurge => "DBPurge",
            StepName::HTTPRoute => "HTTPRoute",
            StepName::HealthCheck => "HealthCheck",
            StepName::HPA => "HPA",
            StepName::VPA => "VPA",
            StepName::NetworkPolicy => "NetworkPolicy",
        }
    }

    /// The step of that label.
    pub fn parse(s: &str) -> Option<StepName> {
        LANE.iter()
            .chain(GROUP.iter())
            .copied()
            .find(|n| n.as_str() == s)
    }

    /// The condition the step reports through (seed 001, "Pipeline" table).
    pub fn condition_type(self) -> &'static str {
        use crate::conditions::kind;
        match self {
            StepName::Secrets
            | StepName::DBConnectionSecret
            | StepName::TransportURLSecret
            | StepName::Config => kind::SECRETS_READY,
            StepName::Backends => kind::BACKENDS_READY,
            StepName::BackupBackend => kind::BACKUP_BACKEND_READY,
            StepName::Database => kind::DATABASE_READY,
            StepName::Scheduler => kind::SCHEDULER_READY,
            StepName::VolumeServices => kind::VOLUME_SERVICES_READY,
            StepName::BackupService => kind::BACKUP_SERVICE_READY,
            StepName::Deployment => kind::DEPLOYMENT_READY,
            StepName::DBPurge => kind::DB_PURGE_READY,
            StepName::HTTPRoute => kind::HTTP_ROUTE_READY,
            StepName::HealthCheck => kind::CINDER_API_READY,
            StepName::HPA => kind::HPA_READY,
            StepName::VPA => kind::VPA_READY,
            StepName::NetworkPolicy => kind::NETWORK_POLICY_READY,
        }
    }

    /// True for the members of the parallel group.
    pub fn in_group(self) -> bool {
        GROUP.contains(&self)
    }
}

/// Runs one step for one Cinder, inside the given span (the step's span under its pass: the
/// step's future runs on the actor, outside the caller's task).
#[derive(Message)]
#[rtype(result = "StepReport")]
pub struct RunStep(pub StepContext, pub tracing::Span);

/// The actor of one step kind, shared by every Cinder. Runs are not serialized here (the
/// per-Cinder pipeline actor does that); each run is its own future.
pub struct StepActor {
    step: Arc<dyn Step>,
}

impl StepActor {
    pub fn new(step: Arc<dyn Step>) -> Self {
        StepActor { step }
    }
}

impl Actor for StepActor {
    type Context = Context<Self>;
}

impl Handler<RunStep> for StepActor {
    type Result = ResponseFuture<StepReport>;

    fn handle(&mut self, msg: RunStep, _ctx: &mut Self::Context) -> Self::Result {
        Box::pin(tracing::Instrument::instrument(self.step.run(msg.0), msg.1))
    }
}

/// One entry of the table: a step's names and the address of its actor.
#[derive(Clone)]
pub struct StepHandle {
    pub name: &'static str,
    pub condition_type: &'static str,
    pub addr: Addr<StepActor>,
}

impl StepHandle {
    /// Starts the actor of `step` (inside a running actix system).
    pub fn start(step: Arc<dyn Step>) -> Self {
        StepHandle {
            name: step.name(),
            condition_type: step.condition_type(),
            addr: StepActor::new(step).start(),
        }
    }
}

/// A step the product table cannot hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    #[error("{0:?} is not a step of the Cinder pipeline")]
    UnknownStep(String),
    #[error("step {0} was given twice")]
    Duplicate(&'static str),
    #[error("step {name} must report through {expected}, not {actual}")]
    WrongCondition {
        name: &'static str,
        expected: &'static str,
        actual: &'static str,
    },
}

/// The lane and the group a pipeline runs.
#[derive(Clone, Default)]
pub struct PipelineTable {
    pub lane: Vec<StepHandle>,
    pub group: Vec<StepHandle>,
}

impl PipelineTable {
    /// Any lane and group, in the given order (tests and experiments).
    pub fn custom(lane: Vec<Arc<dyn Step>>, group: Vec<Arc<dyn Step>>) -> Self {
        PipelineTable {
            lane: lane.into_iter().map(StepHandle::start).collect(),
            group: group.into_iter().map(StepHandle::start).collect(),
        }
    }

    /// The product table from the real steps that exist: each must carry a seed step name and
    /// its seed condition; lane steps are ordered as [`LANE`], group members as [`GROUP`].
    pub fn product(steps: Vec<Arc<dyn Step>>) -> Result<Self, TableError> {
        let mut named: Vec<(StepName, Arc<dyn Step>)> = Vec::new();
        for step in steps {
            let name = StepName::parse(step.name())
                .ok_or_else(|| TableError::UnknownStep(step.name().to_string()))?;
            if named.iter().any(|(n, _)| *n == name) {
                return Err(TableError::Duplicate(name.as_str()));
            }
            if step.condition_type() != name.condition_type() {
                return Err(TableError::WrongCondition {
                    name: name.as_str(),
                    expected: name.condition_type(),
                    actual: step.condition_type(),
                });
            }
            named.push((name, step));
        }
        named.sort_by_key(|(n, _)| *n);
        let (group, lane): (Vec<_>, Vec<_>) = named.into_iter().partition(|(n, _)| n.in_group());
        Ok(PipelineTable::custom(
            lane.into_iter().map(|(_, s)| s).collect(),
            group.into_iter().map(|(_, s)| s).collect(),
        ))
    }

    /// The step names, lane first.
    pub fn names(&self) -> Vec<&'static str> {
        self.lane
            .iter()
            .chain(self.group.iter())
            .map(|h| h.name)
            .collect()
    }
}
