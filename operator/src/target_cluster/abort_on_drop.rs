//! A spawned task that lives as long as its handle: the watches of a registered target cluster
//! stop when the registry drops them.

/// Aborts a spawned task when dropped.
pub(crate) struct AbortOnDrop(pub tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
