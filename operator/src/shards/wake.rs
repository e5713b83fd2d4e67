//! Wakes the objects of shards this replica gains: the watches do not fire when a shard Lease
//! changes hands, so when the held set grows, every Cinder of a new shard (and every satellite
//! whose Cinder is in one) is sent to its controller's trigger channel, and its pass runs at once
//! rather than at its next watch event.

use super::view::ShardView;
use futures::channel::mpsc::UnboundedSender;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use std::collections::BTreeSet;

/// A controller's store and trigger channel, with how to find an object's Cinder name.
pub(crate) struct WakeTarget<K: Resource<DynamicType = ()> + Clone + 'static> {
    pub store: Store<K>,
    pub wake: UnboundedSender<ObjectRef<K>>,
    /// The name of the Cinder whose shard the object follows (its own name for a Cinder).
    pub cinder_of: fn(&K) -> String,
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> WakeTarget<K> {
    /// Sends every stored object whose Cinder is in one of `gained`.
    fn wake(&self, view: &ShardView, gained: &BTreeSet<u32>) {
        for obj in self.store.state() {
            let ns = obj.namespace().unwrap_or_default();
            if gained.contains(&view.shard_of(&ns, &(self.cinder_of)(&obj))) {
                let _ = self.wake.unbounded_send(ObjectRef::from_obj(obj.as_ref()));
            }
        }
    }
}

/// Something [`wake_gained`] can wake (a [`WakeTarget`] of any kind).
pub(crate) trait Wakeable: Send + Sync {
    fn wake(&self, view: &ShardView, gained: &BTreeSet<u32>);
}

impl<K> Wakeable for WakeTarget<K>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    fn wake(&self, view: &ShardView, gained: &BTreeSet<u32>) {
        WakeTarget::wake(self, view, gained);
    }
}

/// Until `shutdown` or the view's end: on every change of the held set, wakes the objects of the
/// shards that joined it. Returns at once when the view is unsharded.
pub(crate) async fn wake_gained(
    view: ShardView,
    targets: Vec<Box<dyn Wakeable>>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    if !view.is_sharded() {
        return;
    }
    let mut changes = view.changes();
    let mut before: BTreeSet<u32> = BTreeSet::new();
    loop {
        let now: BTreeSet<u32> = view.held().into_iter().collect();
        let gained: BTreeSet<u32> = now.difference(&before).copied().collect();
        if !gained.is_empty() {
            for target in &targets {
                target.wake(&view, &gained);
            }
        }
        before = now;
        tokio::select! {
            _ = shutdown.wait_for(|s| *s) => return,
            changed = changes.changed() => if changed.is_err() { return },
        }
    }
}
