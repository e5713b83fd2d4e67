//! The controllers: the shared watches (one per kind, [`watches`]), the index they feed, the
//! kube-runtime Controller over Cinder (owned children and the watches that enqueue a Cinder;
//! each reconcile goes to the context's pipelines registry), the two satellite controllers,
//! readiness, and the drain on shutdown.
//!
//! Triggers of the Cinder controller:
//! - owned (controller ownerReference): Deployment, Service, ConfigMap, Secret,
//!   PodDisruptionBudget, HorizontalPodAutoscaler, NetworkPolicy, Job, CronJob, and the
//!   HTTPRoute when the Gateway API CRD is served at start-up (a CRD installed later is watched
//!   from the next start; until then the HTTPRoute step's passes notice changes);
//! - Secrets through the `spec.secretRefs.name` legs of the index (one request per Cinder);
//! - SecretStores, and ClusterSecretStores unless `--namespace` is set;
//! - MariaDB clusters named by `spec.database.clusterRef`;
//! - the Cinder's mariadb-operator Database, User and Grant (by name, which is the Cinder's);
//! - CinderBackend and CinderBackupBackend through `spec.cinderRef.name` (no generation predicate);
//! - the same owned kinds on every resolved target cluster, by the ownership label
//!   ([`crate::target_cluster::TargetClusters`]);
//! - with `--shards`, the shards this replica gains ([`crate::shards::wake`]): their Cinders and
//!   satellites are reconciled at once. Objects of shards it does not hold are skipped;
//! - the Cinders the pipelines registry grants a reconcile slot to
//!   ([`crate::pipeline::admission`]).

pub mod cinder;
pub mod deletion;
pub mod index;
pub mod satellites;
pub mod status;
pub mod watches;

use crate::context::OperatorContext;
use crate::crd::{Cinder, CinderBackend, CinderBackupBackend, Satellite, SecretStoreKind};
use crate::kube_ext::capability::{HTTP_ROUTE, is_served};
use crate::pipeline::{CinderKey, WakeOnGrant};
use crate::shards::wake::{WakeTarget, Wakeable};
use futures::StreamExt;
use futures::channel::mpsc::UnboundedSender;
use index::IndexHandle;
use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{ObjectRef, Store};
use std::sync::Arc;
use watches::Watches;

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

/// Adds the kinds the index maps to Cinders to the Cinder controller: the credential Secrets,
/// the (Cluster)SecretStores and the MariaDB clusters a Cinder names.
fn watch_indexed(
    mut cinders: Controller<Cinder>,
    index: &IndexHandle,
    w: &mut Watches,
) -> Controller<Cinder> {
    {
        let ix = index.clone();
        cinders = cinders.watches_shared_stream(w.secret_triggers(), move |s| {
            ix.read()
                .cinders_for_secret(&s.namespace().unwrap_or_default(), &s.name_any())
        });
    }
    {
        let ix = index.clone();
        cinders = cinders.watches_shared_stream_with(
            w.secret_stores.subscribe(),
            move |s| {
                ix.read().cinders_for_store(
                    SecretStoreKind::SecretStore,
                    s.namespace().as_deref(),
                    &s.name_any(),
                )
            },
            crate::kube_ext::resources::secret_store_resource(),
        );
    }
    if let Some(stores) = w.cluster_secret_stores.as_mut() {
        let ix = index.clone();
        cinders = cinders.watches_shared_stream_with(
            stores.subscribe(),
            move |s| {
                ix.read().cinders_for_store(
                    SecretStoreKind::ClusterSecretStore,
                    None,
                    &s.name_any(),
                )
            },
            crate::kube_ext::resources::cluster_secret_store_resource(),
        );
    }
    {
        let ix = index.clone();
        cinders = cinders.watches_shared_stream_with(
            w.mariadbs.subscribe(),
            move |m| {
                ix.read()
                    .cinders_for_mariadb(&m.namespace().unwrap_or_default(), &m.name_any())
            },
            crate::kube_ext::resources::mariadb_resource(),
        );
    }
    cinders
}

/// The Cinder controller: the Cinder and its owned children, the kinds the index maps to Cinders
/// (credential Secrets, stores, MariaDB clusters, satellites), and the wake-ups of the target
/// cluster watchers (`woken`); it drains on `stop`. Every trigger comes from the shared `watches`.
fn cinder_controller(
    index: &IndexHandle,
    w: &mut Watches,
    woken: futures::channel::mpsc::UnboundedReceiver<ObjectRef<Cinder>>,
    gained: futures::channel::mpsc::UnboundedReceiver<ObjectRef<Cinder>>,
    admitted: futures::channel::mpsc::UnboundedReceiver<CinderKey>,
    stop: satellites::StopSignal,
) -> Controller<Cinder> {
    let cinders = Controller::for_shared_stream(w.cinders.subscribe(), w.cinders.store());
    let mut cinders = w
        .owned
        .owned_by(cinders)
        .reconcile_on(woken)
        .reconcile_on(gained)
        .reconcile_on(admitted.map(|k| ObjectRef::new(&k.name).within(&k.namespace)));
    if let Some(routes) = w.http_routes.as_mut() {
        // Owned: an HTTPRoute wakes the Cinder that controls it.
        cinders = cinders.watches_shared_stream_with(
            routes.subscribe(),
            |r: Arc<DynamicObject>| {
                let ns = r.namespace();
                r.owner_references()
                    .iter()
                    .find(|o| o.controller == Some(true) && o.kind == "Cinder")
                    .and_then(|o| parent_ref(ns, &o.name))
            },
            HTTP_ROUTE.api_resource(),
        );
    }
    cinders = watch_indexed(cinders, index, w);
    for (ar, sql) in w.sql_objects.iter_mut() {
        // The Database, User and Grant carry their Cinder's name (`sql_object_name`).
        cinders = cinders.watches_shared_stream_with(
            sql.subscribe(),
            |o: Arc<DynamicObject>| parent_ref(o.namespace(), &o.name_any()),
            ar.clone(),
        );
    }
    cinders
        .watches_shared_stream(w.backends.subscribe(), |b: Arc<CinderBackend>| {
            parent_ref(b.namespace(), &b.spec.satellite.cinder_ref.name)
        })
        .watches_shared_stream(
            w.backup_backends.subscribe(),
            |b: Arc<CinderBackupBackend>| {
                parent_ref(b.namespace(), &b.spec.satellite.cinder_ref.name)
            },
        )
        // No limit here: the pipelines registry admits at most `--max-concurrent-reconciles`
        // reconciles, oldest Cinder first, and the others return at once
        // (`crate::pipeline::admission`).
        .with_config(kube::runtime::controller::Config::default().concurrency(0))
        .graceful_shutdown_on(stop)
}

/// What the wake-up of gained shards reads: each kind's store with the sender that reconciles
/// its objects at once (a satellite follows its parent Cinder's shard).
fn wake_targets(
    cinders: (&Store<Cinder>, UnboundedSender<ObjectRef<Cinder>>),
    backends: (
        &Store<CinderBackend>,
        UnboundedSender<ObjectRef<CinderBackend>>,
    ),
    backups: (
        &Store<CinderBackupBackend>,
        UnboundedSender<ObjectRef<CinderBackupBackend>>,
    ),
) -> Vec<Box<dyn Wakeable>> {
    vec![
        Box::new(WakeTarget {
            store: cinders.0.clone(),
            wake: cinders.1,
            cinder_of: |c: &Cinder| c.name_any(),
        }),
        Box::new(WakeTarget {
            store: backends.0.clone(),
            wake: backends.1,
            cinder_of: |b: &CinderBackend| b.satellite().cinder_ref.name.clone(),
        }),
        Box::new(WakeTarget {
            store: backups.0.clone(),
            wake: backups.1,
            cinder_of: |b: &CinderBackupBackend| b.satellite().cinder_ref.name.clone(),
        }),
    ]
}

/// Marks the operator ready once the stores of the three kinds and the index have their first
/// complete list.
async fn become_ready(
    ctx: Arc<OperatorContext>,
    index: IndexHandle,
    cinders: Store<Cinder>,
    backends: Store<CinderBackend>,
    backups: Store<CinderBackupBackend>,
) {
    let synced = store_ready(&cinders).await
        && store_ready(&backends).await
        && store_ready(&backups).await
        && index.wait_synced().await;
    if synced {
        ctx.set_ready(true);
        tracing::info!("controllers synced; ready");
    }
}

/// Runs the Cinder controller and the two satellite controllers until `shutdown` turns true,
/// then lets in-flight passes finish and returns.
pub async fn run_operator(
    ctx: Arc<OperatorContext>,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let client = ctx.client.clone();
    let (index, departures) = IndexHandle::new();
    let gateway_api = match is_served(&client, HTTP_ROUTE).await {
        Ok(served) => served,
        Err(e) => {
            tracing::warn!(error = %e, "probing the Gateway API failed; HTTPRoutes are not watched");
            false
        }
    };
    let mut w = Watches::new(
        &client,
        ctx.namespace.as_deref(),
        ctx.watch_selection,
        &index,
        gateway_api,
    );
    w.serve_reads(&ctx.reads);

    let stop = {
        let mut rx = shutdown.clone();
        satellites::stop_signal(async move {
            let _ = rx.wait_for(|s| *s).await;
        })
    };
    // Children on target clusters wake their Cinder through the target watchers.
    let (wake, woken) = futures::channel::mpsc::unbounded();
    ctx.targets.watch_into(wake);
    // The Cinders and satellites of shards this replica gains are reconciled at once.
    let (wake_cinder, gained_cinders) = futures::channel::mpsc::unbounded();
    let (wake_backend, gained_backends) = futures::channel::mpsc::unbounded();
    let (wake_backup, gained_backups) = futures::channel::mpsc::unbounded();
    // The Cinder controller is set up first: it owns the indexes the satellites rely on.
    // The Cinders granted a reconcile slot are reconciled at once.
    let (wake_admitted, admitted) = futures::channel::mpsc::unbounded();
    ctx.pipelines.do_send(WakeOnGrant(wake_admitted));
    let cinders = cinder_controller(
        &index,
        &mut w,
        woken,
        gained_cinders,
        admitted,
        stop.clone(),
    );
    let cinder_store = w.cinders.store();
    let departed_cinders = tokio::spawn(cinder::forget_departed(
        departures.cinders,
        ctx.clone(),
        shutdown.clone(),
    ));
    let cinder_run = cinders
        .run(cinder::reconcile, cinder::error_policy, ctx.clone())
        .for_each(|r| {
            if let Err(e) = r {
                tracing::debug!(error = %e, "cinder controller");
            }
            futures::future::ready(())
        });

    let satellites =
        satellites::SatelliteControllers::build(ctx.clone(), &index, &mut w, stop.clone())
            .reconcile_on(gained_backends, gained_backups);
    let backend_store = w.backends.store();
    let backup_store = w.backup_backends.store();
    let waking = tokio::spawn(crate::shards::wake::wake_gained(
        ctx.shards.clone(),
        wake_targets(
            (&cinder_store, wake_cinder),
            (&backend_store, wake_backend),
            (&backup_store, wake_backup),
        ),
        shutdown.clone(),
    ));
    let watching = tokio::spawn(w.run());

    let readiness = tokio::spawn(become_ready(
        ctx.clone(),
        index.clone(),
        cinder_store,
        backend_store,
        backup_store,
    ));
    let departed = tokio::spawn(satellites::forget_departed(
        departures.satellites,
        ctx.clone(),
        shutdown.clone(),
    ));

    futures::join!(cinder_run, satellites.run());
    ctx.targets.stop_watches();
    ctx.set_ready(false);
    readiness.abort();
    watching.abort();
    waking.abort();
    ctx.reads.clear();
    let _ = departed.await;
    let _ = departed_cinders.await;
    Ok(())
}
