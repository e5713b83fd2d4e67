//! The shard holder: a task (an actor with one message, [`ShardHolderHandle::release`]) that
//! owns this replica's shard Leases and its membership Lease. Every `jitter(renew period)`, and
//! at once when a held shard is lost, it lists the operator namespace's Leases (one request),
//! plans ([`super::plan`]), gives back the shards over its quota, acquires free or expired ones
//! (each held Lease renews itself through [`HeldLease`]) and publishes the held set to the
//! [`ShardView`]. A shard whose renewal fails for a whole Lease duration leaves the view the
//! moment its Lease is declared lost. On release (SIGTERM) every shard Lease is given back
//! (holderIdentity cleared) so the other replicas take them on their next round, and the
//! membership Lease is released and deleted (it names this process only); dropping the handle is
//! a crash: the Leases expire.

use super::membership::{member_lease_name, observe, shard_lease_name};
use super::metrics::ShardMetrics;
use super::plan::plan;
use super::view::{HeldShards, ShardView};
use cinder_lease::{
    Acquired, HeldLease, HolderIdentity, LeaseError, LeaseLock, LeaseSettings, jitter,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

/// What the shard holder needs.
pub struct ShardHolderConfig {
    pub client: kube::Client,
    /// The operator's namespace (where the Leases live).
    pub namespace: String,
    /// The shard count (at least 1).
    pub count: u32,
    pub identity: HolderIdentity,
    pub settings: LeaseSettings,
    pub metrics: ShardMetrics,
}

/// The running holder. Dropping it abandons the Leases (they expire), as a crash would.
#[derive(Debug)]
pub struct ShardHolderHandle {
    view: ShardView,
    stop: Option<oneshot::Sender<oneshot::Sender<()>>>,
    task: Option<JoinHandle<()>>,
}

impl ShardHolderHandle {
    /// Checks the settings and the Lease names, then starts holding (needs a tokio runtime).
    pub fn start(config: ShardHolderConfig) -> Result<Self, LeaseError> {
        let lock = |name: &str| {
            LeaseLock::with_name(
                config.client.clone(),
                &config.namespace,
                name,
                config.identity.clone(),
                &config.settings,
            )
            .map(Arc::new)
        };
        let shards = (0..config.count.max(1))
            .map(|i| lock(&shard_lease_name(i)))
            .collect::<Result<Vec<_>, _>>()?;
        let member = lock(&member_lease_name(config.identity.as_str()))?;
        let (tx, rx) = watch::channel(HeldShards::default());
        let view = ShardView::new(config.count.max(1), rx);
        let holder = Holder {
            leases: Api::namespaced(config.client, &config.namespace),
            identity: config.identity,
            shards,
            member,
            held: BTreeMap::new(),
            membership: None,
            published: tx,
            metrics: config.metrics,
        };
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(holder.run(stopped));
        Ok(ShardHolderHandle {
            view,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The view the controllers read.
    pub(crate) fn view(&self) -> ShardView {
        self.view.clone()
    }

    /// Gives every shard Lease and the membership Lease back, then ends the holder.
    pub async fn release(mut self) {
        let (done, released) = oneshot::channel();
        if let Some(stop) = self.stop.take()
            && stop.send(done).is_ok()
        {
            let _ = released.await;
        }
        if let Some(task) = self.task.take() {
            // A join error means the task panicked or was aborted: it renews nothing any more.
            let _ = task.await;
        }
    }
}

impl Drop for ShardHolderHandle {
    fn drop(&mut self) {
        // Dropping the stop sender tells the task to abandon its Leases without releasing them.
        self.stop.take();
    }
}

struct Holder {
    leases: Api<Lease>,
    identity: HolderIdentity,
    /// Shard `i`'s lock at index `i`.
    shards: Vec<Arc<LeaseLock>>,
    member: Arc<LeaseLock>,
    held: BTreeMap<u32, HeldLease>,
    membership: Option<HeldLease>,
    published: watch::Sender<HeldShards>,
    metrics: ShardMetrics,
}

impl Holder {
    async fn run(mut self, mut stop: oneshot::Receiver<oneshot::Sender<()>>) {
        let period = self.member.renew_period();
        loop {
            self.round().await;
            let lost = self.any_lost();
            tokio::select! {
                command = &mut stop => {
                    match command {
                        Ok(done) => {
                            self.release_all().await;
                            let _ = done.send(());
                        }
                        Err(_) => self.abandon_all().await,
                    }
                    return;
                }
                _ = tokio::time::sleep(jitter(period)) => {}
                _ = lost => {}
            }
        }
    }

    /// Resolves once any held shard Lease (or the membership) is lost.
    fn any_lost(&self) -> futures::future::BoxFuture<'static, ()> {
        let signals: Vec<_> = self
            .held
            .values()
            .chain(self.membership.iter())
            .map(HeldLease::lost_signal)
            .collect();
        Box::pin(async move {
            if signals.is_empty() {
                return std::future::pending().await;
            }
            let waits = signals.iter().map(|s| Box::pin(s.lost()));
            futures::future::select_all(waits).await;
        })
    }

    /// One round: forget lost Leases, keep the membership, list, plan, give back, take, publish.
    async fn round(&mut self) {
        self.forget_lost().await;
        if self.membership.is_none() {
            match HeldLease::acquire(self.member.clone()).await {
                Ok(held) => self.membership = Some(held),
                Err(e) => {
                    tracing::warn!(lease = self.member.name(), error = %e, "cannot hold the membership Lease; retrying")
                }
            }
        }
        let listed = match self.leases.list(&ListParams::default()).await {
            Ok(list) => list.items,
            Err(e) => {
                tracing::warn!(error = %e, "listing the shard Leases failed; retrying");
                return self.publish();
            }
        };
        let count = u32::try_from(self.shards.len()).unwrap_or(u32::MAX);
        let default_secs = i32::try_from(self.member.duration().as_secs()).unwrap_or(i32::MAX);
        let observed = observe(&listed, count, Timestamp::now(), default_secs);
        let held: Vec<u32> = self.held.keys().copied().collect();
        let planned = plan(
            self.identity.as_str(),
            &observed.shards,
            &held,
            observed.live_members.max(1),
        );
        for shard in planned.give_back {
            if let Some(lease) = self.held.remove(&shard) {
                // Out of the view before the Lease is given back: no pass starts on it after.
                self.publish();
                tracing::info!(
                    shard,
                    live = observed.live_members,
                    "giving a shard back to balance the replicas"
                );
                if let Err(e) = lease.release().await {
                    tracing::warn!(shard, error = %e, "giving a shard back failed; it will expire");
                }
            }
        }
        for shard in planned.take {
            let Some(lock) = self.shards.get(shard as usize) else {
                continue;
            };
            match HeldLease::acquire(lock.clone()).await {
                Ok(lease) => {
                    if let Acquired::TakenOver { previous_holder } = lease.acquired() {
                        self.metrics.takeovers.inc();
                        tracing::info!(
                            shard,
                            previous_holder,
                            "took over a shard whose holder stopped renewing"
                        );
                    } else {
                        tracing::info!(shard, "holding a shard");
                    }
                    self.held.insert(shard, lease);
                }
                Err(LeaseError::Held { holder, .. }) => {
                    tracing::debug!(shard, holder, "the shard went to another replica first");
                }
                Err(e) => tracing::warn!(shard, error = %e, "acquiring a shard failed; retrying"),
            }
        }
        self.publish();
    }

    /// Drops the shard Leases whose renewal was lost (and the membership, taken again).
    async fn forget_lost(&mut self) {
        let lost: Vec<u32> = self
            .held
            .iter()
            .filter(|(_, l)| l.is_lost())
            .map(|(i, _)| *i)
            .collect();
        for shard in lost {
            if let Some(lease) = self.held.remove(&shard) {
                tracing::warn!(
                    shard,
                    "lost a shard Lease: its Cinders are left to the replica that takes it"
                );
                lease.abandon().await;
            }
        }
        if self.membership.as_ref().is_some_and(HeldLease::is_lost)
            && let Some(m) = self.membership.take()
        {
            m.abandon().await;
        }
        self.publish();
    }

    fn publish(&self) {
        let held: HeldShards = Arc::new(
            self.held
                .iter()
                .map(|(i, l)| (*i, l.lost_signal()))
                .collect(),
        );
        self.metrics
            .held
            .set(i64::try_from(held.len()).unwrap_or(i64::MAX));
        self.published.send_if_modified(|current| {
            let same = current.len() == held.len() && current.keys().eq(held.keys());
            *current = held;
            !same
        });
    }

    async fn release_all(&mut self) {
        let held = std::mem::take(&mut self.held);
        self.publish();
        for (shard, lease) in held {
            if let Err(e) = lease.release().await {
                tracing::warn!(shard, error = %e, "giving a shard back failed; it will expire");
            }
        }
        if let Some(m) = self.membership.take()
            && let Err(e) = m.release().await
        {
            tracing::warn!(error = %e, "giving the membership Lease back failed; it will expire");
        }
        // The membership Lease is named after this process's identity, which no later process
        // has: released, it would only pile up, one per replica that ever ran.
        let member = self.member.name().to_string();
        match self.leases.delete(&member, &Default::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => {
                tracing::warn!(lease = %member, error = %e, "deleting the membership Lease failed; it stays, released")
            }
        }
        tracing::info!("gave every shard back");
    }

    async fn abandon_all(&mut self) {
        for (_, lease) in std::mem::take(&mut self.held) {
            lease.abandon().await;
        }
        if let Some(m) = self.membership.take() {
            m.abandon().await;
        }
        self.publish();
    }
}
