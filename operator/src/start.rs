//! Starting the operator's one context ([`OperatorContext`]): the actor thread, the lock
//! coordinator and the device locks on it, the pipelines registry with the product step table
//! ([`crate::steps::table`]), the target-cluster registry, the satellites' back-off and the event
//! recorder. It sits above the steps (it names their table) and the context (the type the steps
//! run with), so neither depends on the other's construction.

use crate::context::{ActorThread, OperatorContext, OperatorOptions};
use crate::metrics::Metrics;
use crate::pipeline::Pipelines;
use cinder_actors::{CoordinatorConfig, CoordinatorHandle, Schema};
use cinder_lease::{DeviceLocks, DeviceLocksConfig, HolderIdentity, LeaseSettings};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

impl OperatorContext {
    /// Starts the actor thread, the lock coordinator on it and the device-lock service.
    pub async fn new(
        client: kube::Client,
        options: OperatorOptions,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Arc<Self>> {
        let actors = ActorThread::start()?;
        let config = CoordinatorConfig {
            arbiters: usize::from(options.lock_arbiters),
            ..CoordinatorConfig::default()
        };
        let coordinator = actors
            .run(move || CoordinatorHandle::start(Schema::standard(), config))
            .await?;
        let identity = if options.identity == HolderIdentity::process().as_str() {
            HolderIdentity::process()
        } else {
            HolderIdentity::for_pod(&options.identity)
        };
        let mut config = DeviceLocksConfig::new(options.lease_namespace.clone());
        config.identity = identity;
        config.lease = LeaseSettings::with_duration(options.lease_duration);
        let device_locks = DeviceLocks::new(
            coordinator.clone(),
            client.clone(),
            config,
            options.device_lock_metrics.clone(),
        )?;
        let engine_metrics = (*metrics).clone();
        let shards = options.shards.clone();
        let concurrency = usize::from(options.concurrency);
        let pipelines = actors
            .run(
                move || -> anyhow::Result<actix::Addr<Pipelines<OperatorContext>>> {
                    use actix::Actor;
                    let table = crate::steps::table()?;
                    Ok(Pipelines::new(table, engine_metrics)
                        .with_shards(shards)
                        .with_concurrency(concurrency)
                        .start())
                },
            )
            .await??;
        let target_registry = actors
            .run(|| {
                use actix::Actor;
                crate::target_cluster::TargetRegistry::default().start()
            })
            .await?;
        let satellite_backoffs = actors.start_actor(|_| Default::default());
        let reads = crate::kube_ext::reader::ClusterStores::default();
        let targets = crate::target_cluster::TargetClusters::new(
            client.clone(),
            reads.clone(),
            &options.lease_namespace,
            options.namespace.as_deref(),
            options.target_client_limits,
            target_registry,
        );
        let recorder = crate::events::recorder(client.clone(), Some(options.identity.clone()));
        Ok(Arc::new(OperatorContext {
            targets,
            reads,
            client,
            namespace: options.namespace,
            identity: options.identity,
            lease_namespace: options.lease_namespace,
            shards: options.shards,
            health_check: options.health_check,
            watch_selection: options.watch_selection,
            coordinator,
            device_locks,
            metrics,
            recorder,
            pipelines,
            satellite_backoffs,
            actors,
            ready: AtomicBool::new(false),
        }))
    }
}
