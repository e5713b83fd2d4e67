//! A grant asked for and not yet taken: the coordinator asks for a phase's first lock with its
//! answer to `Begin`, the acquisition (`acquire.rs`) for the others.

use crate::lock_queue::Priority;
use crate::plan::LockStep;
use crate::resource_actor::{Grant, ResourceRef};
use tokio::sync::oneshot;

/// A grant asked for and not yet taken. Dropped before it was taken (the caller was cancelled), it
/// closes the channel, withdraws the queued request and releases a grant that arrived meanwhile; a
/// grant sent after the close fails and the resource actor releases it itself.
pub(crate) struct PendingGrant {
    rx: Option<oneshot::Receiver<Grant>>,
    resource: ResourceRef,
    txn: u64,
}

impl PendingGrant {
    /// Asks `resource` for the lock of `step` on behalf of `txn`.
    pub(crate) fn ask(
        resource: &ResourceRef,
        txn: u64,
        step: &LockStep,
        priority: Priority,
    ) -> Self {
        PendingGrant {
            rx: Some(resource.acquire(txn, step.mode, priority)),
            resource: resource.clone(),
            txn,
        }
    }

    /// The grant, or `None` when the actor stopped before granting.
    pub(super) async fn wait(&mut self) -> Option<Grant> {
        let rx = self.rx.as_mut()?;
        let grant = rx.await.ok();
        self.rx = None;
        grant
    }
}

impl Drop for PendingGrant {
    fn drop(&mut self) {
        if let Some(mut rx) = self.rx.take() {
            rx.close();
            if rx.try_recv().is_ok() {
                self.resource.release(self.txn);
            } else {
                self.resource.withdraw(self.txn);
            }
        }
    }
}
