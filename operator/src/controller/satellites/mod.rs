//! The two satellite controllers (CinderBackend, CinderBackupBackend). Each is the single
//! writer of its own CR's status and creates nothing. Each watches its parent Cinder with no
//! generation predicate (through the index's `spec.cinderRef.name` leg), the RBD key Secrets
//! (through the index's `spec.secretRefs.name` leg) and the parent's projection Secrets (by
//! their backend label).

pub mod backend;
pub mod backup_backend;
pub mod kind;
pub mod reconcile;
pub mod status;

use crate::context::OperatorContext;
use crate::controller::index::{IndexHandle, IndexSnapshot};
use crate::crd::{Cinder, CinderBackend, CinderBackupBackend};
use crate::kube_ext::scoped;
use crate::names;
use crate::steps::projection::PROJECTION_LABEL;
use futures::future::{BoxFuture, Shared};
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Secret;
use kind::SatelliteKind;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use reconcile::SatelliteContext;
use std::sync::Arc;

/// The shutdown signal the controllers drain on.
pub type StopSignal = Shared<BoxFuture<'static, ()>>;

fn controller_for<S: SatelliteKind>(
    client: &Client,
    namespace: Option<&str>,
    index: IndexHandle,
    of_parent: fn(&IndexSnapshot, &str, &str) -> Vec<ObjectRef<S>>,
    for_key: fn(&IndexSnapshot, &str, &str) -> Vec<String>,
) -> Controller<S> {
    let wc = watcher::Config::default();
    let ix = index.clone();
    let ix2 = index;
    Controller::new(scoped::<S>(client, namespace), wc.clone())
        .watches(
            scoped::<Cinder>(client, namespace),
            wc.clone(),
            move |c: Cinder| {
                of_parent(
                    &ix.snapshot(),
                    &c.namespace().unwrap_or_default(),
                    &c.name_any(),
                )
            },
        )
        .watches(scoped::<Secret>(client, namespace), wc, move |s: Secret| {
            let ns = s.namespace().unwrap_or_default();
            let mut names = for_key(&ix2.snapshot(), &ns, &s.name_any());
            let labels = s.labels();
            if labels.get(PROJECTION_LABEL).map(String::as_str) == Some(S::PROJECTION)
                && let Some(b) = labels.get(names::LABEL_BACKEND)
            {
                names.push(b.clone());
            }
            names.sort();
            names.dedup();
            names
                .into_iter()
                .map(|n| ObjectRef::new(&n).within(&ns))
                .collect::<Vec<_>>()
        })
}

/// The two satellite controllers, built and ready to run.
pub struct SatelliteControllers {
    backends: Controller<CinderBackend>,
    backup_backends: Controller<CinderBackupBackend>,
    ctx: Arc<SatelliteContext>,
}

impl SatelliteControllers {
    /// Builds both controllers (the Cinder controller, which owns the index, is set up first).
    pub fn build(op: Arc<OperatorContext>, index: IndexHandle, stop: StopSignal) -> Self {
        let client = op.client.clone();
        let ns = op.options.namespace.clone();
        let ns = ns.as_deref();
        let backends = controller_for::<CinderBackend>(
            &client,
            ns,
            index.clone(),
            |s, ns, c| s.backends_of(ns, c),
            |s, ns, secret| s.satellites_for_secret(ns, secret).0,
        )
        .graceful_shutdown_on(stop.clone());
        let backup_backends = controller_for::<CinderBackupBackend>(
            &client,
            ns,
            index,
            |s, ns, c| s.backup_backends_of(ns, c),
            |s, ns, secret| s.satellites_for_secret(ns, secret).1,
        )
        .graceful_shutdown_on(stop);
        let recorder = crate::events::recorder(client, Some(op.options.identity.clone()));
        SatelliteControllers {
            backends,
            backup_backends,
            ctx: Arc::new(SatelliteContext { op, recorder }),
        }
    }

    /// The CinderBackend reflector store (readiness).
    pub fn backend_store(&self) -> Store<CinderBackend> {
        self.backends.store()
    }

    /// The CinderBackupBackend reflector store (readiness).
    pub fn backup_backend_store(&self) -> Store<CinderBackupBackend> {
        self.backup_backends.store()
    }

    /// Runs both until the stop signal, draining in-flight reconciles.
    pub async fn run(self) {
        let backends = self
            .backends
            .run(
                reconcile::reconcile,
                reconcile::error_policy,
                self.ctx.clone(),
            )
            .for_each(|r| {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "satellite controller");
                }
                futures::future::ready(())
            });
        let backup_backends = self
            .backup_backends
            .run(reconcile::reconcile, reconcile::error_policy, self.ctx)
            .for_each(|r| {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "satellite controller");
                }
                futures::future::ready(())
            });
        futures::join!(backends, backup_backends);
    }
}

/// Boxes a shutdown future into the shared signal the controllers take.
pub fn stop_signal(f: impl std::future::Future<Output = ()> + Send + 'static) -> StopSignal {
    f.boxed().shared()
}

/// The backend-actor ids of every satellite in `snapshot`.
fn satellite_actor_ids(snapshot: &IndexSnapshot) -> std::collections::BTreeSet<String> {
    let backends = snapshot
        .backends
        .keys()
        .map(|(ns, n)| status::actor_id(<CinderBackend as SatelliteKind>::KIND, ns, n));
    let backups = snapshot
        .backup_backends
        .keys()
        .map(|(ns, n)| status::actor_id(<CinderBackupBackend as SatelliteKind>::KIND, ns, n));
    backends.chain(backups).collect()
}

/// Follows the index and deletes the backend actor of every satellite that left the cluster
/// (a CinderBackupBackend has no finalizer, so its reconcile never sees its own deletion).
/// Returns when `shutdown` turns true.
pub async fn forget_departed(
    index: IndexHandle,
    coordinator: cinder_actors::CoordinatorHandle,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut rx = index.subscribe();
    let mut known = satellite_actor_ids(&rx.borrow_and_update());
    loop {
        tokio::select! {
            _ = shutdown.wait_for(|s| *s) => return,
            changed = rx.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
        let now = satellite_actor_ids(&rx.borrow_and_update());
        for gone in known.difference(&now) {
            if let Err(e) = status::forget_actor(&coordinator, gone).await {
                tracing::warn!(actor = %gone, error = %e, "forgetting a departed satellite's actor failed");
            }
        }
        known = now;
    }
}
