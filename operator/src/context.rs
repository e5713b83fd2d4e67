//! The operator's one context, [`OperatorContext`]: the Kubernetes client, what the run options
//! leave for the reconciles (the watched namespace, the identity, the shards), the lock
//! coordinator and the device locks (on their own actix system thread), the metrics, the event
//! recorder, the pipelines registry with the product step table (on the same thread; the admin
//! `/pipelines` view asks it), the satellites' back-off, the resolved target clusters, the
//! management cluster's watch stores and the readiness flag `/readyz` reads.
//!
//! `run` builds it from [`OperatorOptions`] with `OperatorContext::new` (in `crate::start`,
//! which knows the product step table) and hands it to
//! [`crate::controller::run_operator`]; every reconcile gets it from kube-runtime, and each pass
//! hands it to the steps with the pass ([`crate::pipeline::Reconcile`]).

use crate::kube_ext::reader::ClusterStores;
use crate::metrics::Metrics;
use crate::pipeline::{EngineContext, Pipelines};
use cinder_actors::CoordinatorHandle;
use cinder_lease::{DeviceLockMetrics, DeviceLocks, HolderIdentity};
use kube::runtime::events::Recorder;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// How the operator runs.
#[derive(Clone, Debug)]
pub struct OperatorOptions {
    /// Watch only this namespace (`--namespace`); `None` watches all. With a namespace the
    /// ClusterSecretStore leg is not registered and a Cinder selecting a ClusterSecretStore gets
    /// SecretsReady=False/ClusterSecretStoreUnsupported.
    pub namespace: Option<String>,
    /// This process's identity (pod name + uuid), written into device Leases.
    pub identity: String,
    /// Namespace of the device Leases (and of target-cluster registration Secrets).
    pub lease_namespace: String,
    /// The device-lock metric families (register them in the metrics registry before `new`).
    pub device_lock_metrics: DeviceLockMetrics,
    /// How many Cinder passes may run at once (different Cinders; one Cinder is always serial).
    pub concurrency: u16,
    /// `leaseDurationSeconds` of the device Leases (`--lease-duration`; whole seconds, >= 1; the
    /// renew period is a third of it).
    pub lease_duration: std::time::Duration,
    /// How many arbiters the lock coordinator spreads its resource actors over
    /// (`--lock-arbiters`; 1: the coordinator's own thread).
    pub lock_arbiters: u16,
    /// The client-side limits of the clients built for target clusters (`--kube-qps`,
    /// `--kube-burst`); `None` leaves them unthrottled.
    pub target_client_limits: Option<crate::kube_client::ClientLimits>,
    /// The shards this replica holds (`--shards`); [`ShardView::all`] when unsharded.
    pub shards: crate::shards::ShardView,
    /// How the HealthCheck step reaches a Cinder's API Service.
    pub health_check: HealthCheckRoute,
    /// Which objects the watches of the owned kinds cache.
    pub watch_selection: WatchSelection,
}

/// How the HealthCheck step reaches the API Service of a Cinder whose children live on the
/// operator's own cluster (a target cluster's is always reached through its API server).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HealthCheckRoute {
    /// `GET http://{name}-api.{namespace}.svc:8776/healthcheck` from the operator's own pod:
    /// cluster DNS and the pod network, as the specification asks (in a cluster).
    #[default]
    ClusterLocal,
    /// Through the API server's Service proxy (`services/proxy` get), for an operator running
    /// outside the cluster, where Service names do not resolve
    /// (`--health-check-through-api-server`; `run --embedded` always).
    ApiServerProxy,
}

/// Which objects of the kinds the operator creates its watches select, and so cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WatchSelection {
    /// The children by the managed-by label, the credential Secrets by the credential label.
    #[default]
    Labelled,
    /// Every object of each kind (`--unselected-watches`, the memory benchmark's baseline).
    Everything,
}

/// The default of `--lock-arbiters`: 1, the whole lock core on the coordinator's thread. It measured
/// best on the 2-core machines the docs size the operator for (docs/performance.md, "The
/// operator's `--lock-arbiters`"): with 2 or 4 arbiters every grant, commit and reply crosses
/// threads, and the lock core's throughput and latency were lower than on one thread.
pub(crate) fn default_lock_arbiters() -> u16 {
    1
}

impl Default for OperatorOptions {
    fn default() -> Self {
        OperatorOptions {
            namespace: None,
            identity: HolderIdentity::process().as_str().to_string(),
            lease_namespace: "default".to_string(),
            device_lock_metrics: DeviceLockMetrics::default(),
            concurrency: 8,
            lease_duration: cinder_lease::lease_lock::DEFAULT_LEASE_DURATION,
            lock_arbiters: default_lock_arbiters(),
            target_client_limits: None,
            shards: crate::shards::ShardView::all(),
            health_check: HealthCheckRoute::default(),
            watch_selection: WatchSelection::default(),
        }
    }
}

/// The name of the thread every actor of the operator runs on (what `top -H` and
/// `/proc/<pid>/task/*/comm` show).
pub const ACTOR_THREAD_NAME: &str = "cinder-actors";

/// The actix system thread the actors (coordinator, pipelines, step actors) run on.
pub struct ActorThread {
    system: actix::System,
    arbiter: actix::ArbiterHandle,
}

impl ActorThread {
    /// Starts a thread running an actix system; returns once it is up.
    pub(crate) fn start() -> anyhow::Result<Self> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name(ACTOR_THREAD_NAME.to_string())
            .spawn(move || {
                let system = actix::System::new();
                system.block_on(async move {
                    let _ = tx.send((actix::System::current(), actix::Arbiter::current()));
                });
                let _ = system.run();
            })?;
        let (system, arbiter) = rx
            .recv()
            .map_err(|_| anyhow::anyhow!("the actor system thread did not start"))?;
        Ok(ActorThread { system, arbiter })
    }

    /// Runs `f` on the actor thread (where actors can be started) and returns its result.
    pub(crate) async fn run<T, F>(&self, f: F) -> anyhow::Result<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let spawned = self.arbiter.spawn_fn(move || {
            let _ = tx.send(f());
        });
        if !spawned {
            anyhow::bail!("the actor system has stopped");
        }
        rx.await
            .map_err(|_| anyhow::anyhow!("the actor system dropped a task"))
    }
}

impl ActorThread {
    /// Starts the actor `make` builds on the actor thread and returns its address at once.
    pub(crate) fn start_actor<A, F>(&self, make: F) -> actix::Addr<A>
    where
        A: actix::Actor<Context = actix::Context<A>>,
        F: FnOnce(&mut actix::Context<A>) -> A + Send + 'static,
    {
        A::start_in_arbiter(&self.arbiter, make)
    }
}

impl Drop for ActorThread {
    fn drop(&mut self) {
        self.system.stop();
    }
}

/// Everything the reconciles and the steps share: one value, built once by `OperatorContext::new`
/// and handed to every reconcile (the Cinder's and the satellites') and, with each pass, to every
/// step.
pub struct OperatorContext {
    pub client: kube::Client,
    /// Watch only this namespace (`--namespace`); `None` watches all.
    pub namespace: Option<String>,
    /// This process's identity (pod name + uuid), written into device Leases and reported as
    /// the events' reporting instance.
    pub identity: String,
    /// Namespace of the device Leases (and of target-cluster registration Secrets).
    pub lease_namespace: String,
    /// The shards this replica holds (`--shards`).
    pub shards: crate::shards::ShardView,
    /// How the HealthCheck step reaches the API Services.
    pub health_check: HealthCheckRoute,
    /// Which objects the watches of the owned kinds cache.
    pub watch_selection: WatchSelection,
    pub coordinator: CoordinatorHandle,
    pub device_locks: DeviceLocks,
    pub metrics: Arc<Metrics>,
    /// Publishes the events of the Cinders, their satellites and their Jobs (reporting as
    /// `cinder-operator`, instance [`OperatorContext::identity`]).
    pub recorder: Recorder,
    /// The pipelines registry: every Cinder's pass goes through it to the Cinder's pipeline
    /// actor, which keeps what the admin `/pipelines` view shows (no secret values).
    pub pipelines: actix::Addr<Pipelines<OperatorContext>>,
    /// The failure counts of the satellites' reconciles (their retry back-off).
    pub satellite_backoffs: actix::Addr<crate::pipeline::backoff_actor::BackoffActor>,
    /// The actix system the actors run on.
    pub actors: ActorThread,
    /// The resolved target clusters (one client and one watcher per registered kubeconfig).
    pub targets: crate::target_cluster::TargetClusters,
    /// The management cluster's reflector stores the cached reads answer from (filled when the
    /// controllers start their watches, emptied when they stop).
    pub reads: crate::kube_ext::reader::ClusterStores,
    pub(crate) ready: AtomicBool,
}

impl OperatorContext {
    /// True once every reflector and controller has synced its first list.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Marks the context ready (or not): the controllers call it once their stores synced.
    pub(crate) fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// The admin `/pipelines` view: see [`crate::pipeline::snapshot`].
    pub async fn pipelines_snapshot(&self) -> serde_json::Value {
        crate::pipeline::snapshot(&self.pipelines).await
    }
}

impl EngineContext for OperatorContext {
    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn reads(&self) -> &ClusterStores {
        &self.reads
    }
}
