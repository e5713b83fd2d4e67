//! The watches of one target cluster: one [`SharedWatch`] per kind of child the steps create
//! there, selecting the children by the ownership label [`OWNER_LABEL`]. Their stores answer
//! the steps' reads of the children on that target ([`ClusterStores`]); every object they touch
//! wakes the Cinder its label names.

use super::abort_on_drop::AbortOnDrop;
use crate::children::kinds::with_child_kinds;
use crate::crd::Cinder;
use crate::kube_ext::ownership::{OWNER_LABEL, owner_of};
use crate::kube_ext::reader::ClusterStores;
use crate::kube_ext::shared_watch::SharedWatch;
use futures::channel::mpsc::UnboundedSender;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use kube::core::NamespaceResourceScope;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use std::sync::Arc;

/// The watches of one target: their stores, and the task running them (dropping it stops them).
pub(crate) struct TargetWatches {
    pub stores: ClusterStores,
    pub _task: AbortOnDrop,
}

type Run = futures::future::BoxFuture<'static, ()>;

/// The watch of kind `K` on `client` (scoped to `namespace` when set), its store added to
/// `stores`; returns the watch to run and the owners it wakes.
fn watch_kind<K>(
    client: &Client,
    namespace: Option<&str>,
    stores: &ClusterStores,
) -> (Run, BoxStream<'static, ObjectRef<Cinder>>)
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let api = crate::kube_ext::scoped::<K>(client, namespace);
    let mut watch = SharedWatch::new(api, watcher::Config::default().labels(OWNER_LABEL));
    stores.add(&mut watch);
    let owners = watch
        .subscribe()
        .filter_map(|o: Arc<K>| async move { owner_of(o.labels().get(OWNER_LABEL)?) })
        .boxed();
    (watch.run().boxed(), owners)
}

/// Starts the watches of the target behind `client`; every object they touch sends its owning
/// Cinder to `wake`.
pub(crate) fn start(
    client: &Client,
    namespace: Option<&str>,
    wake: UnboundedSender<ObjectRef<Cinder>>,
) -> TargetWatches {
    let stores = ClusterStores::default();
    macro_rules! watch_each {
        ($($(#[$doc:meta])* $field:ident: $kind:ty,)*) => {
            [$(watch_kind::<$kind>(client, namespace, &stores),)*]
        };
    }
    let kinds = with_child_kinds!(watch_each);
    let (runs, owners): (Vec<Run>, Vec<_>) = kinds.into_iter().unzip();
    let mut owners = futures::stream::select_all(owners);
    let task = tokio::spawn(async move {
        let watching = futures::future::join_all(runs);
        let waking = async move {
            while let Some(owner) = owners.next().await {
                if wake.unbounded_send(owner).is_err() {
                    return;
                }
            }
        };
        // The watches run until the task is aborted; a closed wake channel ends it too.
        futures::future::select(watching.boxed(), waking.boxed()).await;
    });
    TargetWatches {
        stores,
        _task: AbortOnDrop(task),
    }
}
