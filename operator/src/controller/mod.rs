//! The Cinder controller wiring: the index actor, the pipeline engine with the product step
//! table, the kube-runtime Controller over Cinder (owned children and the watches of seed 001,
//! "Watches and indexes"), the two satellite controllers, readiness, and the drain on shutdown.
//!
//! Watches of the Cinder controller:
//! - owned (controller ownerReference): Deployment, Service, ConfigMap, Secret,
//!   PodDisruptionBudget, HorizontalPodAutoscaler, NetworkPolicy, Job, CronJob;
//! - Secrets through the `spec.secretRefs.name` legs of the index (one request per Cinder);
//! - SecretStores, and ClusterSecretStores unless `--namespace` is set;
//! - MariaDB clusters named by `spec.database.clusterRef`;
//! - CinderBackend and CinderBackupBackend through `spec.cinderRef.name` (no generation predicate);
//! - the same owned kinds on every resolved target cluster, by the ownership label
//!   ([`target_cluster::TargetClusters`]).

pub mod cinder;
pub mod deletion;
pub mod directory;
pub mod finalizer;
pub mod index;
pub mod status;
pub mod target_cluster;

use crate::context::OperatorContext;
use crate::crd::{Cinder, CinderBackend, CinderBackupBackend, SecretStoreKind};
use crate::pipeline::Pipelines;
use futures::StreamExt;
use index::IndexHandle;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{ApiResource, DynamicObject};
use kube::core::{GroupVersionKind, NamespaceResourceScope};
use kube::runtime::controller::Controller;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use std::sync::Arc;

/// The external-secrets SecretStore.
pub fn secret_store_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("external-secrets.io", "v1", "SecretStore"),
        "secretstores",
    )
}

/// The external-secrets ClusterSecretStore.
pub fn cluster_secret_store_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("external-secrets.io", "v1", "ClusterSecretStore"),
        "clustersecretstores",
    )
}

/// The mariadb-operator MariaDB.
pub fn mariadb_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("k8s.mariadb.com", "v1alpha1", "MariaDB"),
        "mariadbs",
    )
}

/// An API over namespaced `K`: the watched namespace, or all of them.
pub fn scoped<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

fn scoped_dynamic(
    client: &Client,
    namespace: Option<&str>,
    ar: &ApiResource,
) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    }
}

fn parent_ref(namespace: Option<String>, parent: &str) -> Option<ObjectRef<Cinder>> {
    let ns = namespace?;
    Some(ObjectRef::new(parent).within(&ns))
}

/// Waits until a reflector store has its first list. kube-runtime's readiness signal wakes only
/// the last task that polled it (the controller's own runner also waits on it), so this re-polls
/// on a short tick instead of relying on the wake-up.
async fn store_ready<K>(store: &kube::runtime::reflector::Store<K>) -> bool
where
    K: kube::runtime::reflector::Lookup + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    loop {
        match tokio::time::timeout(
            std::time::Duration::from_millis(100),
            store.wait_until_ready(),
        )
        .await
        {
            Ok(r) => return r.is_ok(),
            Err(_elapsed) => continue,
        }
    }
}

/// Starts the pipeline engine (registry actor with the product table) on the actor thread;
/// the HealthCheck member shares `probe_cache`.
pub async fn start_engine(
    ctx: &Arc<OperatorContext>,
    probe_cache: crate::steps::probe_cache::ProbeCache,
) -> anyhow::Result<actix::Addr<Pipelines>> {
    let env = crate::steps::StepEnv {
        client: ctx.client.clone(),
        watch_namespace: ctx.options.namespace.clone(),
        probe_cache,
        services: Some(crate::steps::StepServices {
            device_locks: ctx.device_locks.clone(),
            metrics: Arc::clone(&ctx.metrics),
        }),
    };
    let metrics = (*ctx.metrics).clone();
    let addr = ctx
        .actors
        .run(move || -> anyhow::Result<actix::Addr<Pipelines>> {
            use actix::Actor;
            let table = crate::steps::table(env)?;
            Ok(Pipelines::new(table, metrics).start())
        })
        .await??;
    Ok(addr)
}

/// Runs the Cinder controller and the two satellite controllers until `shutdown` turns true,
/// then lets in-flight passes finish and returns.
pub async fn run_operator(
    ctx: Arc<OperatorContext>,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let client = ctx.client.clone();
    let ns = ctx.options.namespace.clone();
    let ns = ns.as_deref();
    let (index, index_task) = IndexHandle::spawn(client.clone(), ns, shutdown.clone());
    let probe_cache = crate::steps::probe_cache::ProbeCache::default();
    let engine = start_engine(&ctx, probe_cache.clone()).await?;
    ctx.pipelines.attach_engine(engine.clone());

    let stop = {
        let mut rx = shutdown.clone();
        crate::satellites::stop_signal(async move {
            let _ = rx.wait_for(|s| *s).await;
        })
    };
    let wc = watcher::Config::default();
    // Children on target clusters wake their Cinder through the target watchers.
    let (wake, woken) = futures::channel::mpsc::unbounded();
    ctx.targets.watch_into(wake);

    // The Cinder controller (set up first: it owns the indexes the satellites rely on).
    let mut cinders = Controller::new(scoped::<Cinder>(&client, ns), wc.clone())
        .owns(scoped::<Deployment>(&client, ns), wc.clone())
        .owns(scoped::<Service>(&client, ns), wc.clone())
        .owns(scoped::<ConfigMap>(&client, ns), wc.clone())
        .owns(scoped::<Secret>(&client, ns), wc.clone())
        .owns(scoped::<PodDisruptionBudget>(&client, ns), wc.clone())
        .owns(scoped::<HorizontalPodAutoscaler>(&client, ns), wc.clone())
        .owns(scoped::<NetworkPolicy>(&client, ns), wc.clone())
        .owns(scoped::<Job>(&client, ns), wc.clone())
        .owns(scoped::<CronJob>(&client, ns), wc.clone())
        .reconcile_on(woken);
    {
        let ix = index.clone();
        cinders = cinders.watches(
            scoped::<Secret>(&client, ns),
            wc.clone(),
            move |s: Secret| {
                ix.snapshot()
                    .cinders_for_secret(&s.namespace().unwrap_or_default(), &s.name_any())
            },
        );
    }
    {
        let ix = index.clone();
        let ar = secret_store_resource();
        cinders = cinders.watches_with(
            scoped_dynamic(&client, ns, &ar),
            ar,
            wc.clone(),
            move |s: DynamicObject| {
                ix.snapshot().cinders_for_store(
                    SecretStoreKind::SecretStore,
                    s.namespace().as_deref(),
                    &s.name_any(),
                )
            },
        );
    }
    if ns.is_none() {
        let ix = index.clone();
        let ar = cluster_secret_store_resource();
        cinders = cinders.watches_with(
            Api::all_with(client.clone(), &ar),
            ar,
            wc.clone(),
            move |s: DynamicObject| {
                ix.snapshot().cinders_for_store(
                    SecretStoreKind::ClusterSecretStore,
                    None,
                    &s.name_any(),
                )
            },
        );
    }
    {
        let ix = index.clone();
        let ar = mariadb_resource();
        cinders = cinders.watches_with(
            scoped_dynamic(&client, ns, &ar),
            ar,
            wc.clone(),
            move |m: DynamicObject| {
                ix.snapshot()
                    .cinders_for_mariadb(&m.namespace().unwrap_or_default(), &m.name_any())
            },
        );
    }
    cinders = cinders
        .watches(
            scoped::<CinderBackend>(&client, ns),
            wc.clone(),
            |b: CinderBackend| parent_ref(b.namespace(), &b.spec.cinder_ref.name),
        )
        .watches(
            scoped::<CinderBackupBackend>(&client, ns),
            wc.clone(),
            |b: CinderBackupBackend| parent_ref(b.namespace(), &b.spec.cinder_ref.name),
        )
        .with_config(
            kube::runtime::controller::Config::default().concurrency(ctx.options.concurrency),
        )
        .graceful_shutdown_on(stop.clone());
    let cinder_store = cinders.store();
    let reconciler = Arc::new(cinder::CinderReconciler {
        op: ctx.clone(),
        engine,
        recorder: crate::events::recorder(client.clone(), Some(ctx.options.identity.clone())),
        probe_cache,
    });
    let cinder_run = cinders
        .run(cinder::reconcile, cinder::error_policy, reconciler)
        .for_each(|r| {
            if let Err(e) = r {
                tracing::debug!(error = %e, "cinder controller");
            }
            futures::future::ready(())
        });

    let satellites =
        crate::satellites::SatelliteControllers::build(ctx.clone(), index.clone(), stop.clone());
    let backend_store = satellites.backend_store();
    let backup_store = satellites.backup_backend_store();

    let readiness = {
        let ctx = ctx.clone();
        let index = index.clone();
        async move {
            let synced = store_ready(&cinder_store).await
                && store_ready(&backend_store).await
                && store_ready(&backup_store).await
                && index.wait_synced().await;
            if synced {
                ctx.set_ready(true);
                tracing::info!("controllers synced; ready");
            }
        }
    };
    let readiness = tokio::spawn(readiness);
    let departed = tokio::spawn(crate::satellites::forget_departed(
        index.clone(),
        ctx.coordinator.clone(),
        shutdown.clone(),
    ));

    futures::join!(cinder_run, satellites.run());
    ctx.targets.stop_watches();
    ctx.set_ready(false);
    readiness.abort();
    let _ = departed.await;
    let _ = index_task.await;
    Ok(())
}
