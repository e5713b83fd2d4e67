//! Simulated cluster controllers and third-party CRD fixtures.
//!
//! The controllers are ordinary API clients of the embedded cluster (kube-rs over HTTP), like
//! the real controllers they stand in for: nodes register and keep a heartbeat, a scheduler
//! binds pods to nodes and a kubelet starts them once what they need exists, Deployments roll
//! out through ReplicaSets, ReplicaSets, ReplicationControllers, DaemonSets and StatefulSets keep their pods,
//! Jobs run pods that exit with a chosen code, CronJobs spawn Jobs, mariadb-operator / external-secrets / Gateway API objects
//! become Ready, autoscalers report status, Services get EndpointSlices and Endpoints from the pods
//! they select. Each can be switched off or slowed through
//! [`ControllersConfig`], at start or at runtime through [`ControllersHandle`].

pub mod autoscalers;
pub mod config;
pub mod cronjobs;
pub mod daemonsets;
pub mod deployments;
mod dynamic;
pub mod endpointslices;
mod events;
mod external_secrets;
pub mod fixtures;
pub mod gateways;
pub mod informers;
pub mod job_runs;
pub mod jobs;
pub mod kinds;
pub mod mariadb;
pub mod mariadb_real;
pub mod nodes;
mod owner_index;
pub mod pod_template;
pub mod pods;
pub mod replicasets;
pub mod rollout;
mod runtime;
pub mod secret_stores;
pub mod statefulsets;
pub mod status;

use std::sync::{Arc, RwLock};

use tokio::task::JoinSet;

pub use config::{
    ControllersConfig, CronJobsConfig, DeploymentsConfig, FixtureSet, GatewaysConfig, JobRule,
    JobsConfig, MariaDbConfig, NameSet, NodesConfig, PodOutcome, SecretStoresConfig, Switch,
};
pub use cronjobs::{Firing, FiringOutcome};
pub use job_runs::{JobResult, JobRun, PodAttempt, overlapping_pairs};

use cronjobs::CronJobTriggers;
use job_runs::JobRuns;
use runtime::Shared;

/// Running controllers; dropping the handle stops them.
#[derive(Debug)]
pub struct ControllersHandle {
    shared: Arc<Shared>,
    runs: JobRuns,
    cron: CronJobTriggers,
    tasks: JoinSet<()>,
}

impl ControllersHandle {
    /// The live config. Edits made through it are picked up within `resync`; prefer
    /// [`ControllersHandle::update_config`], which wakes every controller at once.
    pub fn config(&self) -> Arc<RwLock<ControllersConfig>> {
        Arc::clone(&self.shared.config)
    }

    /// A copy of the current config.
    pub fn config_snapshot(&self) -> ControllersConfig {
        self.shared.read(Clone::clone)
    }

    /// Changes the config and makes every controller re-examine its objects right away.
    pub fn update_config(&self, f: impl FnOnce(&mut ControllersConfig)) {
        self.shared.update(f);
    }

    /// How many reconcile passes the controller `name` has finished (a pass that changes
    /// nothing counts too). Names: nodes (heartbeat rounds), pods, replicaset-controller,
    /// replication-controller, daemonsets, statefulsets, deployments, jobs, cronjobs, mariadb, mariadb-databases,
    /// mariadb-users, mariadb-grants, secret-stores, cluster-secret-stores, gateways,
    /// httproutes, hpa, vpa, endpointslice-controller.
    pub fn reconcile_passes(&self, name: &str) -> u64 {
        self.shared.passes(name)
    }

    /// Every Job run the Job controller saw, in start order.
    pub fn job_runs(&self) -> Vec<JobRun> {
        self.runs.snapshot()
    }

    /// Pairs of runs, among the Jobs in `namespace` whose name `selects`, that ran at the same
    /// time (e.g. two migration Jobs of one database).
    pub fn overlapping_job_runs(
        &self,
        namespace: &str,
        selects: impl Fn(&str) -> bool,
    ) -> Vec<(JobRun, JobRun)> {
        let runs: Vec<JobRun> = self
            .runs
            .snapshot()
            .into_iter()
            .filter(|run| run.namespace == namespace && selects(&run.name))
            .collect();
        overlapping_pairs(&runs)
    }

    /// Makes the CronJob `namespace/name` fire once, as if its schedule came due.
    pub fn trigger_cronjob(&self, namespace: &str, name: &str) {
        self.cron.trigger(namespace, name);
    }

    /// Every CronJob firing so far (spawned or skipped), oldest first.
    pub fn cronjob_firings(&self) -> Vec<Firing> {
        self.cron.firings()
    }

    /// Stops every controller and waits until they have stopped.
    pub async fn shutdown(mut self) {
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
    }
}

/// Installs every third-party CRD fixture (external-secrets, mariadb-operator, Gateway API,
/// VPA); CRDs that already exist are left as they are.
pub async fn install_fixtures(client: kube::Client) -> Result<(), kube::Error> {
    fixtures::install(client, FixtureSet::ALL).await
}

/// Installs the fixtures `set` selects (see [`ControllersConfig::fixtures`]).
pub async fn install_fixture_set(client: kube::Client, set: FixtureSet) -> Result<(), kube::Error> {
    fixtures::install(client, set).await
}

/// Deletes the fixture CRDs `set` selects, so a test can see "CRD absent" behaviour.
pub async fn uninstall_fixture_set(
    client: kube::Client,
    set: FixtureSet,
) -> Result<(), kube::Error> {
    fixtures::uninstall(client, set).await
}

/// Registers the simulated nodes `config` asks for, each with its first heartbeat.
pub async fn register_nodes(
    client: &kube::Client,
    config: &ControllersConfig,
) -> Result<(), String> {
    nodes::register(client, config.nodes.count)
        .await
        .map_err(|error| error.to_string())
}

/// Starts the simulated controllers against the cluster `client` talks to. Must be called
/// inside a Tokio runtime. Controllers of third-party kinds wait until their CRD exists.
pub fn spawn(client: kube::Client, config: ControllersConfig) -> ControllersHandle {
    let (changes, _) = tokio::sync::watch::channel(0);
    let informers = informers::Informers::new(&client);
    let shared = Arc::new(Shared {
        client,
        config: Arc::new(RwLock::new(config)),
        changes,
        passes: Default::default(),
        informers,
    });
    let runs = JobRuns::default();
    let (cron, woken) = CronJobTriggers::new();
    let mut tasks = JoinSet::new();
    tasks.spawn(nodes::run(Arc::clone(&shared)));
    tasks.spawn(pods::run(Arc::clone(&shared)));
    tasks.spawn(replicasets::run(
        Arc::clone(&shared),
        replicasets::REPLICA_SET,
    ));
    tasks.spawn(replicasets::run(
        Arc::clone(&shared),
        replicasets::REPLICATION_CONTROLLER,
    ));
    tasks.spawn(daemonsets::run(Arc::clone(&shared)));
    tasks.spawn(statefulsets::run(Arc::clone(&shared)));
    tasks.spawn(deployments::run(Arc::clone(&shared)));
    tasks.spawn(jobs::run(Arc::clone(&shared), runs.clone()));
    tasks.spawn(cronjobs::run(Arc::clone(&shared), cron.clone(), woken));
    tasks.spawn(mariadb::run(Arc::clone(&shared)));
    tasks.spawn(secret_stores::run(Arc::clone(&shared)));
    tasks.spawn(external_secrets::run(Arc::clone(&shared)));
    tasks.spawn(gateways::run(Arc::clone(&shared)));
    tasks.spawn(autoscalers::run(Arc::clone(&shared)));
    tasks.spawn(endpointslices::run(Arc::clone(&shared)));
    ControllersHandle {
        shared,
        runs,
        cron,
        tasks,
    }
}
