//! `LeaderElector`: leader election among operator replicas on one Lease (by default
//! `cinder-operator-leader` in the operator's namespace). A candidate tries to acquire the Lease
//! every `jitter(renew period)`; the leader renews it (through [`HeldLease`]), and leadership is
//! reported through a tokio watch channel. When renewal is lost the elector steps down (a warn
//! log says so) and campaigns again; callers that must not continue after a loss (the operator
//! exits) watch for the `true -> false` change. [`LeaderHandle::release`] gives the Lease up at
//! once for a successor; dropping the handle is a crash: the Lease is left to expire.

use crate::error::LeaseError;
use crate::held_lease::HeldLease;
use crate::holder_identity::HolderIdentity;
use crate::jitter::jitter;
use crate::lease_lock::{Acquired, LeaseLock, LeaseSettings, Released};
use std::sync::Arc;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

/// The name of the operator's leader-election Lease.
pub const LEADER_LEASE_NAME: &str = "cinder-operator-leader";

/// How the elector task is told to stop.
#[derive(Debug)]
enum Stop {
    /// Release the Lease if held, then end (graceful shutdown).
    Release(oneshot::Sender<Result<Released, LeaseError>>),
}

/// A candidate for leadership on one Lease; [`LeaderElector::start`] begins campaigning.
#[derive(Debug)]
pub struct LeaderElector {
    lock: Arc<LeaseLock>,
}

impl LeaderElector {
    /// An elector on the Lease [`LEADER_LEASE_NAME`] in `namespace`. Rejects invalid settings.
    pub fn new(
        client: kube::Client,
        namespace: &str,
        identity: HolderIdentity,
        settings: &LeaseSettings,
    ) -> Result<Self, LeaseError> {
        Self::with_lease_name(client, namespace, LEADER_LEASE_NAME, identity, settings)
    }

    /// An elector on the Lease `name` in `namespace`.
    pub fn with_lease_name(
        client: kube::Client,
        namespace: &str,
        name: &str,
        identity: HolderIdentity,
        settings: &LeaseSettings,
    ) -> Result<Self, LeaseError> {
        let lock = LeaseLock::with_name(client, namespace, name, identity, settings)?;
        Ok(Self {
            lock: Arc::new(lock),
        })
    }

    /// The Lease lock (name, identity, duration, renew period, last observed Lease).
    pub fn lock(&self) -> &Arc<LeaseLock> {
        &self.lock
    }

    /// Starts campaigning in a background task (needs a tokio runtime).
    pub fn start(self) -> LeaderHandle {
        let (leading_tx, leading_rx) = watch::channel(false);
        let (stop_tx, stop_rx) = oneshot::channel();
        let task = tokio::spawn(campaign(self.lock.clone(), leading_tx, stop_rx));
        LeaderHandle {
            lock: self.lock,
            leading: leading_rx,
            stop: Some(stop_tx),
            task: Some(task),
        }
    }
}

/// A running elector. Dropping it stops the elector without releasing the Lease (as a crash
/// would): other candidates take over once the Lease expires.
#[derive(Debug)]
pub struct LeaderHandle {
    lock: Arc<LeaseLock>,
    leading: watch::Receiver<bool>,
    stop: Option<oneshot::Sender<Stop>>,
    task: Option<JoinHandle<()>>,
}

impl LeaderHandle {
    /// Whether this process is the leader now.
    pub fn is_leader(&self) -> bool {
        *self.leading.borrow()
    }

    /// A receiver of leadership changes (`true` while leading).
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.leading.clone()
    }

    /// The Lease lock (name, identity, last observed Lease).
    pub fn lock(&self) -> &Arc<LeaseLock> {
        &self.lock
    }

    /// Resolves once this process leads (at once if it already does).
    pub async fn wait_for_leadership(&self) {
        let mut rx = self.leading.clone();
        if rx.wait_for(|leading| *leading).await.is_err() {
            // The elector ended: leadership never comes.
            std::future::pending::<()>().await;
        }
    }

    /// Stops campaigning and, if leading, releases the Lease so a successor takes over at once.
    pub async fn release(mut self) -> Result<Released, LeaseError> {
        let (done_tx, done_rx) = oneshot::channel();
        let sent = self
            .stop
            .take()
            .is_some_and(|stop| stop.send(Stop::Release(done_tx)).is_ok());
        let outcome = if sent { done_rx.await.ok() } else { None };
        if let Some(task) = self.task.take() {
            // A join error means the task panicked or was aborted: it no longer renews.
            let _ = task.await;
        }
        outcome.unwrap_or(Ok(Released::NotHolder { holder: None }))
    }
}

impl Drop for LeaderHandle {
    fn drop(&mut self) {
        // Dropping the stop sender tells the task to abandon the Lease without releasing it.
        self.stop.take();
    }
}

/// Campaigns until stopped: acquire, lead while renewal holds, step down when it is lost.
async fn campaign(
    lock: Arc<LeaseLock>,
    leading: watch::Sender<bool>,
    mut stop: oneshot::Receiver<Stop>,
) {
    loop {
        let attempt = tokio::select! {
            command = &mut stop => return finish(None, command.ok(), &leading).await,
            attempt = HeldLease::acquire(lock.clone()) => attempt,
        };
        match attempt {
            Ok(held) => {
                log_acquired(&lock, held.acquired());
                leading.send_replace(true);
                tokio::select! {
                    command = &mut stop => return finish(Some(held), command.ok(), &leading).await,
                    _ = held.lost() => {
                        leading.send_replace(false);
                        tracing::warn!(
                            lease = lock.name(),
                            identity = %lock.identity(),
                            "lost the leader lease: stepping down (no longer the leader)"
                        );
                        held.abandon().await;
                    }
                }
            }
            Err(LeaseError::Held { holder, .. }) => {
                tracing::debug!(lease = lock.name(), holder, "another replica leads");
            }
            Err(e) => {
                tracing::warn!(lease = lock.name(), error = %e, "leader election attempt failed; retrying");
            }
        }
        tokio::select! {
            command = &mut stop => return finish(None, command.ok(), &leading).await,
            _ = tokio::time::sleep(jitter(lock.renew_period())) => {}
        }
    }
}

/// Ends the campaign: releases the held Lease on a release command, abandons it (crash) when the
/// handle was dropped.
async fn finish(held: Option<HeldLease>, command: Option<Stop>, leading: &watch::Sender<bool>) {
    leading.send_replace(false);
    match (held, command) {
        (Some(held), Some(Stop::Release(done))) => {
            let released = held.release().await;
            let _ = done.send(released);
        }
        (None, Some(Stop::Release(done))) => {
            let _ = done.send(Ok(Released::NotHolder { holder: None }));
        }
        (Some(held), None) => held.abandon().await,
        (None, None) => {}
    }
}

fn log_acquired(lock: &LeaseLock, acquired: &Acquired) {
    match acquired {
        Acquired::TakenOver { previous_holder } => tracing::info!(
            lease = lock.name(),
            identity = %lock.identity(),
            previous_holder,
            "became the leader (the previous leader's lease expired)"
        ),
        _ => tracing::info!(lease = lock.name(), identity = %lock.identity(), "became the leader"),
    }
}
