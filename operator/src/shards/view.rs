//! `ShardView`: what the controllers ask before they touch a Cinder or a satellite: does this
//! replica hold the shard of `namespace/name` now. Cheap to clone and to ask (a watch channel's
//! current value and the held Lease's lost flag, so a Lease declared lost stops counting at once,
//! before the holder task publishes its next set); [`ShardView::all`] is the unsharded view
//! (every object is this replica's).

use super::hash::shard_of;
use cinder_lease::LostSignal;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::watch;

/// The shards this replica holds, each with its Lease's lost flag.
pub type HeldShards = Arc<BTreeMap<u32, LostSignal>>;

/// This replica's view of the shards it holds.
#[derive(Clone, Debug)]
pub struct ShardView {
    /// The shard count; 0 when the operator runs unsharded.
    count: u32,
    held: watch::Receiver<HeldShards>,
}

impl ShardView {
    /// Unsharded: every object belongs to this replica.
    pub fn all() -> Self {
        let (_tx, held) = watch::channel(HeldShards::default());
        ShardView { count: 0, held }
    }

    /// A view of `count` shards whose held set `held` publishes.
    pub fn new(count: u32, held: watch::Receiver<HeldShards>) -> Self {
        ShardView { count, held }
    }

    /// Whether the operator runs sharded.
    pub(crate) fn is_sharded(&self) -> bool {
        self.count > 0
    }

    /// The shard count (0: unsharded).
    pub(crate) fn count(&self) -> u32 {
        self.count
    }

    /// The shard of `namespace/name` (0 when unsharded).
    pub fn shard_of(&self, namespace: &str, name: &str) -> u32 {
        shard_of(namespace, name, self.count)
    }

    /// Whether this replica holds the shard of the Cinder `namespace/name` now.
    pub(crate) fn owns(&self, namespace: &str, name: &str) -> bool {
        !self.is_sharded() || self.holds(self.shard_of(namespace, name))
    }

    /// Whether this replica holds `shard` now (always, unsharded).
    pub(crate) fn holds(&self, shard: u32) -> bool {
        !self.is_sharded()
            || self
                .held
                .borrow()
                .get(&shard)
                .is_some_and(|lost| !lost.is_lost())
    }

    /// The shards held now, ascending.
    pub(crate) fn held(&self) -> Vec<u32> {
        self.held
            .borrow()
            .iter()
            .filter(|(_, lost)| !lost.is_lost())
            .map(|(i, _)| *i)
            .collect()
    }

    /// A receiver of the held set's changes.
    pub(crate) fn changes(&self) -> watch::Receiver<HeldShards> {
        self.held.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsharded_owns_everything() {
        let v = ShardView::all();
        assert!(!v.is_sharded());
        assert!(v.owns("any", "thing"));
    }

    #[test]
    fn sharded_owns_what_is_held() {
        let (tx, rx) = watch::channel(HeldShards::default());
        let v = ShardView::new(4, rx);
        let shard = v.shard_of("ns", "c");
        assert!(!v.owns("ns", "c"));
        tx.send_replace(Arc::new([(shard, LostSignal::never())].into()));
        assert!(v.owns("ns", "c"));
        tx.send_replace(HeldShards::default());
        assert!(!v.owns("ns", "c"));
    }
}
