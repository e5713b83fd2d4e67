//! A chain of grants asked for and not yet answered: the coordinator starts a phase's first chain
//! with its answer to `Begin`, the acquisition (`acquire.rs`) the others (after a key check, or
//! to go on past an actor that stopped).

use crate::lock_queue::Priority;
use crate::plan::LockMode;
use crate::resource_actor::{Chain, ChainEnd, ResourceRef};
use std::sync::Arc;
use tokio::sync::oneshot;

/// The actors of a phase with the mode of each lock, in acquisition order.
pub(crate) type Links = Arc<[(ResourceRef, LockMode)]>;

/// A chain over `links[start..end]` asked for and not yet answered. Dropped before its answer was
/// taken (the caller was cancelled), it closes the channel, so no actor grants the chain any
/// further, and releases what the chain may hold: each actor of the chain gets a release for the
/// transaction (a no-op where it holds nothing; it also drops the chain if it is queued there).
/// An actor that the chain reaches after the close does not grant it.
pub(crate) struct PendingChain {
    rx: Option<oneshot::Receiver<ChainEnd>>,
    links: Links,
    start: usize,
    end: usize,
    txn: u64,
}

impl PendingChain {
    /// Sends a chain over `links[start..end]` on behalf of `txn` to the actor of `start`.
    pub(crate) fn start(
        links: &Links,
        txn: u64,
        priority: Priority,
        start: usize,
        end: usize,
    ) -> Self {
        let (reply, rx) = oneshot::channel();
        Chain::new(txn, priority, links.clone(), start, end, reply).send();
        PendingChain {
            rx: Some(rx),
            links: links.clone(),
            start,
            end,
            txn,
        }
    }

    /// How the chain ended, or `None` when its answer was lost (the actors stopped).
    pub(super) async fn wait(&mut self) -> Option<ChainEnd> {
        let rx = self.rx.as_mut()?;
        let end = rx.await.ok();
        self.rx = None;
        end
    }
}

impl Drop for PendingChain {
    fn drop(&mut self) {
        let Some(mut rx) = self.rx.take() else {
            return;
        };
        rx.close();
        // The steps the chain holds: all of them once granted, those before the break when
        // broken, and when no answer came, possibly any of them.
        let held_to = match rx.try_recv() {
            Ok(ChainEnd::Broken { at, .. }) => at,
            Ok(ChainEnd::Granted(_)) | Err(_) => self.end,
        };
        let to = held_to.min(self.links.len());
        for (r, _) in self.links.get(self.start..to).unwrap_or(&[]) {
            r.release(self.txn);
        }
    }
}
