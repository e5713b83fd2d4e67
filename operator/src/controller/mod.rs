//! The controllers: the index actor, the kube-runtime Controller over Cinder (owned children and
//! the watches that enqueue a Cinder; each reconcile goes to the context's pipelines registry),
//! the two satellite controllers, readiness, and the drain on shutdown.
//!
//! Watches of the Cinder controller:
//! - owned (controller ownerReference): Deployment, Service, ConfigMap, Secret,
//!   PodDisruptionBudget, HorizontalPodAutoscaler, NetworkPolicy, Job, CronJob, and the
//!   HTTPRoute when the Gateway API CRD is served at start-up (a CRD installed later is watched
//!   from the next start; until then the HTTPRoute step's passes notice changes);
//! - Secrets through the `spec.secretRefs.name` legs of the index (one request per Cinder);
//! - SecretStores, and ClusterSecretStores unless `--namespace` is set;
//! - MariaDB clusters named by `spec.database.clusterRef`;
//! - CinderBackend and CinderBackupBackend through `spec.cinderRef.name` (no generation predicate);
//! - the same owned kinds on every resolved target cluster, by the ownership label
//!   ([`crate::target_cluster::TargetClusters`]).

pub mod cinder;
pub mod deletion;
pub mod index;
pub mod satellites;
pub mod status;

use crate::context::OperatorContext;
use crate::crd::{Cinder, CinderBackend, CinderBackupBackend, SecretStoreKind};
use crate::kube_ext::resources::{
    cluster_secret_store_resource, mariadb_resource, secret_store_resource,
};
use crate::kube_ext::{scoped, scoped_dynamic};
use crate::steps::capability::{HTTP_ROUTE, is_served};
use futures::StreamExt;
use index::IndexHandle;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::DynamicObject;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use std::sync::Arc;

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

/// The Cinder controller: the Cinder and its owned children, the kinds the index maps to Cinders
/// (credential Secrets, stores, MariaDB clusters, satellites), and the wake-ups of the target
/// cluster watchers (`woken`); it drains on `stop`.
fn cinder_controller(
    ctx: &Arc<OperatorContext>,
    index: &IndexHandle,
    woken: futures::channel::mpsc::UnboundedReceiver<ObjectRef<Cinder>>,
    stop: satellites::StopSignal,
    gateway_api: bool,
) -> Controller<Cinder> {
    let client = ctx.client.clone();
    let ns = ctx.options.namespace.as_deref();
    let wc = watcher::Config::default();
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
    if gateway_api {
        let ar = HTTP_ROUTE.api_resource();
        cinders = cinders.owns_with(scoped_dynamic(&client, ns, &ar), ar, wc.clone());
    }
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
            |b: CinderBackend| parent_ref(b.namespace(), &b.spec.satellite.cinder_ref.name),
        )
        .watches(
            scoped::<CinderBackupBackend>(&client, ns),
            wc.clone(),
            |b: CinderBackupBackend| parent_ref(b.namespace(), &b.spec.satellite.cinder_ref.name),
        )
        .with_config(
            kube::runtime::controller::Config::default().concurrency(ctx.options.concurrency),
        )
        .graceful_shutdown_on(stop);
    cinders
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

    let stop = {
        let mut rx = shutdown.clone();
        satellites::stop_signal(async move {
            let _ = rx.wait_for(|s| *s).await;
        })
    };
    // Children on target clusters wake their Cinder through the target watchers.
    let (wake, woken) = futures::channel::mpsc::unbounded();
    ctx.targets.watch_into(wake);
    let gateway_api = match is_served(&client, HTTP_ROUTE).await {
        Ok(served) => served,
        Err(e) => {
            tracing::warn!(error = %e, "probing the Gateway API failed; HTTPRoutes are not watched");
            false
        }
    };
    // The Cinder controller is set up first: it owns the indexes the satellites rely on.
    let cinders = cinder_controller(&ctx, &index, woken, stop.clone(), gateway_api);
    let cinder_store = cinders.store();
    let reconciler = Arc::new(cinder::CinderReconciler {
        op: ctx.clone(),
        recorder: crate::events::recorder(client.clone(), Some(ctx.options.identity.clone())),
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
        satellites::SatelliteControllers::build(ctx.clone(), index.clone(), stop.clone());
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
    let departed = tokio::spawn(satellites::forget_departed(
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
