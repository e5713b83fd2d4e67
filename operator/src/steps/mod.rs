//! The product pipeline steps (seed 001, "Pipeline"), one file per step, and [`table`], the
//! product step table the engine runs. This issue builds the first six lane steps (Secrets,
//! DBConnectionSecret, TransportURLSecret, Backends, BackupBackend, Config); Database and the
//! rest are a later issue, so the aggregate Ready stays False (NotAllReady).
//!
//! Secret values are read here and written into derived Secrets; they never reach a log line,
//! an event, a condition message, an error message or an artefact (only their digests do).

pub mod backends;
pub mod backup_backend;
pub mod backup_service;
pub mod capability;
pub mod children;
pub mod config;
pub mod credentials;
pub mod database;
pub mod db_connection_secret;
pub mod db_purge;
pub mod deployment;
pub mod digest;
pub mod health_check;
pub mod hpa;
pub mod http_route;
pub mod network_policy;
pub mod probe_cache;
pub mod projection;
pub mod scheduler;
pub mod secrets;
pub mod transport_url_secret;
pub mod volume_services;
pub mod vpa;
pub mod workloads;

use crate::pipeline::{PipelineTable, Step, TableError};
use std::sync::Arc;

/// What the steps need from the outside.
#[derive(Clone)]
pub struct StepEnv {
    pub client: kube::Client,
    /// `--namespace`, when the operator watches one namespace only.
    pub watch_namespace: Option<String>,
    /// The /healthcheck probe cache shared by every Cinder (evict a deleted Cinder's entries).
    pub probe_cache: probe_cache::ProbeCache,
    /// The operator context's device locks and served metrics; `None` where steps are only
    /// constructed (never run), and then the steps fall back to per-thread services.
    pub services: Option<StepServices>,
}

/// What the steps share with the operator context: the device locks (so `/devices` shows the
/// database and backend locks) and the metrics the `/metrics` endpoint serves (the Job pairs).
#[derive(Clone)]
pub struct StepServices {
    pub device_locks: cinder_lease::DeviceLocks,
    pub metrics: Arc<crate::metrics::Metrics>,
}

/// The product steps that exist.
pub fn steps(env: StepEnv) -> Vec<Arc<dyn Step>> {
    vec![
        Arc::new(secrets::SecretsStep::new(env.clone())),
        Arc::new(db_connection_secret::DbConnectionSecretStep::new(
            env.clone(),
        )),
        Arc::new(transport_url_secret::TransportUrlSecretStep::new(
            env.clone(),
        )),
        Arc::new(backends::BackendsStep::new(env.clone())),
        Arc::new(backup_backend::BackupBackendStep::new(env.clone())),
        Arc::new(config::ConfigStep::new(env.clone())),
        Arc::new(database::DatabaseStep::new(env.clone())),
        Arc::new(scheduler::SchedulerStep::new(env.clone())),
        Arc::new(volume_services::VolumeServicesStep::new(env.clone())),
        Arc::new(backup_service::BackupServiceStep::new(env.clone())),
        Arc::new(deployment::DeploymentStep::new(env.clone())),
        Arc::new(db_purge::DbPurgeStep::new(env.clone())),
        Arc::new(http_route::HttpRouteStep::new(env.clone())),
        Arc::new(health_check::HealthCheckStep::new(
            env.clone(),
            env.probe_cache.clone(),
        )),
        Arc::new(hpa::HpaStep::new(env.clone())),
        Arc::new(vpa::VpaStep::new(env.clone())),
        Arc::new(network_policy::NetworkPolicyStep::new(env.clone())),
    ]
}

/// The product step table (starts the step actors: call it on the actor thread).
pub fn table(env: StepEnv) -> Result<PipelineTable, TableError> {
    PipelineTable::product(steps(env))
}
