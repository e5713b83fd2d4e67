//! `HeldLease`: a Lease this process holds, renewed in a background task every renew period. A
//! holder whose renewal keeps failing for a whole Lease duration (or that finds another holder)
//! stops acting as holder: `is_lost()` turns true, `lost()` resolves, a warning is logged and the
//! lost metric counts it. Release stops the renewal first, then clears the Lease.

use crate::error::LeaseError;
use crate::lease_lock::{Acquired, LeaseLock, Released};
use std::sync::Arc;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until, timeout_at};

/// A cloneable view of whether a held Lease was lost.
#[derive(Clone, Debug)]
pub struct LostSignal(watch::Receiver<bool>);

impl LostSignal {
    /// A signal that is never lost (nothing to lose yet).
    pub fn never() -> Self {
        let (_tx, rx) = watch::channel(false);
        Self(rx)
    }

    /// Whether the holder stopped being holder.
    pub fn is_lost(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once the Lease is lost; never resolves while it is held and renewing. After a
    /// release (renewal stopped, not lost) it stays pending.
    pub async fn lost(&self) {
        let mut rx = self.0.clone();
        if rx.wait_for(|lost| *lost).await.is_err() {
            // The renewal task ended without losing the Lease (released): never lost.
            std::future::pending::<()>().await;
        }
    }
}

/// A Lease held by this process, with its renewal task.
#[derive(Debug)]
pub struct HeldLease {
    lock: Arc<LeaseLock>,
    acquired: Acquired,
    lost: LostSignal,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    released: bool,
}

impl HeldLease {
    /// Acquires the Lease (see [`LeaseLock::acquire`]) and starts renewing it.
    pub async fn acquire(lock: Arc<LeaseLock>) -> Result<Self, LeaseError> {
        let sent = Instant::now();
        let acquired = lock.acquire().await?;
        let (lost_tx, lost_rx) = watch::channel(false);
        let (stop_tx, stop_rx) = oneshot::channel();
        let task = tokio::spawn(renew_loop(lock.clone(), lost_tx, stop_rx, sent));
        Ok(Self {
            lock,
            acquired,
            lost: LostSignal(lost_rx),
            stop: Some(stop_tx),
            task: Some(task),
            released: false,
        })
    }

    /// How the Lease was acquired.
    pub fn acquired(&self) -> &Acquired {
        &self.acquired
    }

    /// The Lease goes to the next in-process holder without an API call: for that holder it was
    /// already this process's ([`Acquired::Reacquired`]), nothing was taken over.
    pub(crate) fn handed_over(mut self) -> Self {
        self.acquired = Acquired::Reacquired;
        self
    }

    /// The underlying lock.
    pub fn lock(&self) -> &Arc<LeaseLock> {
        &self.lock
    }

    /// Whether the Lease was lost (renewal failing for a whole duration, or another holder).
    pub fn is_lost(&self) -> bool {
        self.lost.is_lost()
    }

    /// Resolves once the Lease is lost.
    pub async fn lost(&self) {
        self.lost.lost().await
    }

    /// A cloneable lost signal.
    pub fn lost_signal(&self) -> LostSignal {
        self.lost.clone()
    }

    /// Stops renewing and waits until the renewal task has ended (no renewal after this returns).
    async fn stop_renewal(&mut self) {
        self.stop.take();
        if let Some(task) = self.task.take() {
            // The task ends promptly once the stop sender is dropped; a join error means it
            // panicked or was aborted, and either way it no longer renews.
            let _ = task.await;
        }
    }

    /// Stops renewal, then releases the Lease (unless it was lost: then nothing is written).
    pub async fn release(mut self) -> Result<Released, LeaseError> {
        self.stop_renewal().await;
        self.released = true;
        if self.lost.is_lost() {
            return Ok(Released::NotHolder { holder: None });
        }
        self.lock.release().await
    }

    /// Simulates a crash: stops renewing and forgets the Lease without releasing it, so other
    /// replicas can take it over only once it expires.
    pub async fn abandon(mut self) {
        self.stop_renewal().await;
        self.released = true;
    }
}

impl Drop for HeldLease {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(task) = self.task.take() {
            task.abort();
        }
        if !self.released
            && !self.lost.is_lost()
            && let Ok(handle) = tokio::runtime::Handle::try_current()
        {
            let lock = self.lock.clone();
            handle.spawn(async move {
                if let Err(e) = lock.release().await {
                    tracing::warn!(lease = lock.name(), error = %e, "releasing a dropped device lease failed; it will expire");
                }
            });
        }
    }
}

/// Renews every renew period; declares the Lease lost when no renewal succeeded for a whole
/// duration since the last successful one was sent, or when the Lease has another holder.
async fn renew_loop(
    lock: Arc<LeaseLock>,
    lost: watch::Sender<bool>,
    mut stop: oneshot::Receiver<()>,
    acquired_at: Instant,
) {
    let mut valid_until = acquired_at + lock.duration();
    loop {
        let next = (Instant::now() + lock.renew_period()).min(valid_until);
        tokio::select! {
            _ = &mut stop => return,
            _ = sleep_until(next) => {}
        }
        if Instant::now() >= valid_until {
            return declare_lost(
                &lock,
                &lost,
                "renewal kept failing for a whole lease duration",
            );
        }
        let sent = Instant::now();
        let result = tokio::select! {
            _ = &mut stop => return,
            r = timeout_at(valid_until, lock.renew()) => r,
        };
        match result {
            Ok(Ok(())) => valid_until = sent + lock.duration(),
            Ok(Err(
                e @ (LeaseError::NotHolder { .. }
                | LeaseError::Missing { .. }
                | LeaseError::Held { .. }),
            )) => {
                return declare_lost(&lock, &lost, &e.to_string());
            }
            Ok(Err(e)) => {
                tracing::warn!(lease = lock.name(), error = %e, "device lease renewal failed; retrying");
            }
            Err(_elapsed) => {
                return declare_lost(
                    &lock,
                    &lost,
                    "renewal did not finish within the lease duration",
                );
            }
        }
    }
}

fn declare_lost(lock: &LeaseLock, lost: &watch::Sender<bool>, why: &str) {
    tracing::warn!(
        lease = lock.name(),
        reason = why,
        "lease lost: this process stops acting as holder"
    );
    if let Some(m) = lock.metrics() {
        m.lost.inc();
    }
    lost.send_replace(true);
}
