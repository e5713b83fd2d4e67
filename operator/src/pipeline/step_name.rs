//! The seventeen named steps of the pipeline: the twelve-step lane and the five-member parallel
//! group, in order, each with the condition it reports through.

/// The seventeen steps of the pipeline, by their `sub_reconciler` label.
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

    /// The condition the step reports through.
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
