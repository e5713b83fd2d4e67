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

use crate::children::projection::PROJECTION_LABEL;
use crate::context::OperatorContext;
use crate::controller::index::{Departed, IndexHandle, SatelliteSide};
use crate::controller::watches::Watches;
use crate::crd::{Cinder, CinderBackend, CinderBackupBackend};
use crate::kube_ext::shared_watch::SharedWatch;
use crate::names;
use crate::pipeline::backoff_actor::Forget;
use futures::future::{BoxFuture, Shared};
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Secret;
use kind::SatelliteKind;
use kube::ResourceExt;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::ObjectRef;
use std::sync::Arc;

/// The shutdown signal the controllers drain on.
pub(crate) type StopSignal = Shared<BoxFuture<'static, ()>>;

/// The controller of satellite kind `S`: its own watch, its parent Cinder (through the index)
/// and the Secrets it reads (key Secrets through the index, projection Secrets by their
/// backend label).
fn controller_for<S: SatelliteKind>(
    own: &mut SharedWatch<S>,
    cinders: &mut SharedWatch<Cinder>,
    secrets: BoxStream<'static, Arc<Secret>>,
    index: &IndexHandle,
) -> Controller<S> {
    let ix = index.clone();
    let ix2 = index.clone();
    Controller::for_shared_stream(own.subscribe(), own.store())
        .watches_shared_stream(cinders.subscribe(), move |c: Arc<Cinder>| {
            ix.read()
                .satellites_of(S::SIDE, &c.namespace().unwrap_or_default(), &c.name_any())
        })
        .watches_shared_stream(secrets, move |s: Arc<Secret>| {
            let ns = s.namespace().unwrap_or_default();
            let mut names = ix2
                .read()
                .satellites_for_secret(S::SIDE, &ns, &s.name_any());
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
pub(crate) struct SatelliteControllers {
    backends: Controller<CinderBackend>,
    backup_backends: Controller<CinderBackupBackend>,
    ctx: Arc<OperatorContext>,
}

impl SatelliteControllers {
    /// Builds both controllers (the Cinder controller, which owns the index, is set up first).
    pub(crate) fn build(
        op: Arc<OperatorContext>,
        index: &IndexHandle,
        w: &mut Watches,
        stop: StopSignal,
    ) -> Self {
        let (backend_secrets, backup_secrets) = (w.secret_triggers(), w.secret_triggers());
        let cinders = &mut w.cinders;
        let backends = controller_for(&mut w.backends, cinders, backend_secrets, index)
            .graceful_shutdown_on(stop.clone());
        let backup_backends =
            controller_for(&mut w.backup_backends, cinders, backup_secrets, index)
                .graceful_shutdown_on(stop);
        SatelliteControllers {
            backends,
            backup_backends,
            ctx: op,
        }
    }

    /// Also reconciles the satellites these streams name (the shards this replica gains).
    pub(crate) fn reconcile_on(
        mut self,
        backends: impl futures::Stream<Item = ObjectRef<CinderBackend>> + Send + 'static,
        backup_backends: impl futures::Stream<Item = ObjectRef<CinderBackupBackend>> + Send + 'static,
    ) -> Self {
        self.backends = self.backends.reconcile_on(backends);
        self.backup_backends = self.backup_backends.reconcile_on(backup_backends);
        self
    }

    /// Runs both until the stop signal, draining in-flight reconciles.
    pub(crate) async fn run(self) {
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
pub(crate) fn stop_signal(f: impl std::future::Future<Output = ()> + Send + 'static) -> StopSignal {
    f.boxed().shared()
}

/// Deletes the backend actor and forgets the failure count of every satellite that leaves the
/// cluster, as the index reports it (a CinderBackupBackend has no finalizer, so its reconcile
/// never sees its own deletion). Returns when `shutdown` turns true.
pub(crate) async fn forget_departed(
    mut departures: futures::channel::mpsc::UnboundedReceiver<Departed>,
    ctx: Arc<OperatorContext>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        let gone = tokio::select! {
            _ = shutdown.wait_for(|s| *s) => return,
            next = departures.next() => match next {
                Some(d) => d,
                None => return,
            },
        };
        let kind = match gone.side {
            SatelliteSide::Backend => <CinderBackend as SatelliteKind>::KIND,
            SatelliteSide::BackupBackend => <CinderBackupBackend as SatelliteKind>::KIND,
        };
        let (ns, name) = (&gone.key.0, &gone.key.1);
        ctx.satellite_backoffs
            .do_send(Forget(reconcile::backoff_key(kind, ns, name)));
        let actor = status::actor_id(kind, ns, name);
        if let Err(e) = status::forget_actor(&ctx.coordinator, &actor).await {
            tracing::warn!(actor = %actor, error = %e, "forgetting a departed satellite's actor failed");
        }
    }
}
