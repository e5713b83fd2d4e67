//! `DeviceLocks`: the device-lock service the operator uses. A lock is first the in-process lock
//! (an `UpsertDevice(id)` lock of the cinder-actors coordinator at the waiter's priority: waiters
//! queue in the coordinator's device resource actor, no polling, no API calls while waiting), then
//! the device's Lease, which the device's tenure actor (see `device_actor.rs`) takes or hands over.
//! A Lease held by another replica gives back the in-process lock and answers
//! `DeviceBusy { retry_after: jitter(short_delay) }`; the in-process requests granted within half
//! of `short_delay` after that share the refusal without asking the API again.
//!
//! Hand-over: when a guard is released while other in-process requests for the same device are
//! pending, the Lease stays held (and renewed) and passes to the next in-process holder without any
//! API call, at most `max_handovers` times in a row; so many in-process waiters cost the API no
//! more than one (acquire + release + renewals per tenure).

use crate::device_actor::{
    Abandon, AllDevices, Device, DeviceActor, DeviceDirectory, EndHold, Pending, SlotView, Take,
    ViewSlot, Withdrawn,
};
use crate::error::{DeviceLockError, LeaseError};
use crate::held_lease::{HeldLease, LostSignal};
use crate::holder_identity::HolderIdentity;
use crate::jitter::jitter;
use crate::lease_lock::{Acquired, LeaseLock, LeaseSettings};
use crate::metrics::{DeviceLockMetrics, PriorityLabel};
use actix::{Actor, Addr};
use cinder_actors::query::{query, upsert_device};
use cinder_actors::{CoordinatorHandle, Locked, Priority, Query, QueryResult};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
/// Default delay before a `DeviceBusy` waiter retries (jittered).
pub const DEFAULT_SHORT_DELAY: Duration = Duration::from_secs(1);

/// Default maximum of consecutive in-process hand-overs of one Lease tenure.
pub const DEFAULT_MAX_HANDOVERS: u32 = 64;

/// Default idle grace of a device actor: as long as the longest wait between two passes over a
/// database Job (the database and upgrade waits), so a device locked once per pass keeps its
/// actor and its last-written Lease, and its acquisitions skip the GET.
pub const DEFAULT_IDLE_GRACE: Duration = Duration::from_secs(30);

/// The settings of a [`DeviceLocks`] service.
#[derive(Clone, Debug)]
pub struct DeviceLocksConfig {
    /// Namespace of the device Leases (the operator's namespace).
    pub namespace: String,
    /// The holder identity of this process (default: [`HolderIdentity::process`]).
    pub identity: HolderIdentity,
    /// Lease duration and renew period.
    pub lease: LeaseSettings,
    /// `DeviceBusy` answers `retry_after = jitter(short_delay)`, a refusal answers the in-process
    /// requests granted within `short_delay / 2` after it (no API call), and a Lease write refused
    /// with a 409 is decided again from a fresh read after `jitter(short_delay)`. Default 1 s.
    pub short_delay: Duration,
    /// How many in-process holders in a row may inherit a held Lease before it is released (and
    /// other replicas get a chance). Default 64.
    pub max_handovers: u32,
    /// How long a device nobody holds or waits for keeps its actor (and the Lease as last
    /// written) before it is forgotten. Default 30 s.
    pub idle_grace: Duration,
}

impl DeviceLocksConfig {
    /// Defaults for `namespace`.
    pub fn new(namespace: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            identity: HolderIdentity::process(),
            lease: LeaseSettings::default(),
            short_delay: DEFAULT_SHORT_DELAY,
            max_handovers: DEFAULT_MAX_HANDOVERS,
            idle_grace: DEFAULT_IDLE_GRACE,
        }
    }
}

/// The priority metric label of a coordinator priority.
pub fn priority_label(priority: Priority) -> PriorityLabel {
    match priority {
        Priority::High => PriorityLabel::High,
        Priority::Default => PriorityLabel::Default,
        Priority::Baseline => PriorityLabel::Baseline,
    }
}

pub(crate) struct Inner {
    pub(crate) coordinator: CoordinatorHandle,
    pub(crate) config: DeviceLocksConfig,
    pub(crate) metrics: DeviceLockMetrics,
    directory: Addr<DeviceDirectory>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceLocks")
            .field("identity", &self.config.identity)
            .field("namespace", &self.config.namespace)
            .finish_non_exhaustive()
    }
}

/// The device-lock service. Cheap to clone.
#[derive(Clone, Debug)]
pub struct DeviceLocks {
    pub(crate) inner: Arc<Inner>,
}

impl DeviceLocks {
    /// A service locking devices through `coordinator` and Leases through `client`; its device
    /// actors run on the coordinator's arbiter. Rejects invalid Lease settings.
    pub fn new(
        coordinator: CoordinatorHandle,
        client: kube::Client,
        config: DeviceLocksConfig,
        metrics: DeviceLockMetrics,
    ) -> Result<Self, LeaseError> {
        let lease_settings = config.lease.validate()?;
        let (namespace, identity) = (config.namespace.clone(), config.identity.clone());
        let lease_metrics = metrics.clone();
        let short_delay = config.short_delay;
        let new_lease = Box::new(move |device_id: &str| {
            LeaseLock::with_validated(
                client.clone(),
                &namespace,
                device_id,
                identity.clone(),
                lease_settings,
            )
            .with_metrics(lease_metrics.clone())
            .with_conflict_backoff(short_delay)
        });
        let (max_handovers, idle_grace) = (config.max_handovers, config.idle_grace);
        let directory = DeviceDirectory::start_in_arbiter(coordinator.arbiter(), move |_| {
            DeviceDirectory::new(new_lease, max_handovers, idle_grace, short_delay / 2)
        });
        Ok(Self {
            inner: Arc::new(Inner {
                coordinator,
                config,
                metrics,
                directory,
            }),
        })
    }

    /// This process's holder identity.
    pub fn identity(&self) -> &HolderIdentity {
        &self.inner.config.identity
    }

    /// The metrics this service counts into.
    pub fn metrics(&self) -> &DeviceLockMetrics {
        &self.inner.metrics
    }

    /// The coordinator this service locks through.
    pub fn coordinator(&self) -> &CoordinatorHandle {
        &self.inner.coordinator
    }

    /// Locks `device_id` at `priority`: the in-process lock (queued in the device's resource
    /// actor), then the Lease. `Err(DeviceBusy)` when another replica holds the Lease (the
    /// in-process lock is released; requeue after `retry_after` at the same priority).
    pub async fn lock(
        &self,
        device_id: &str,
        priority: Priority,
    ) -> Result<DeviceGuard<'static>, DeviceLockError> {
        self.lock_with_queries(device_id, priority, Vec::new())
            .await
    }

    /// Locks `device_id` together with other queries of the coordinator in ONE Lock call (the
    /// device query is first, `queries` follow: the guard's `results()[0]` is the device's, then
    /// one per query), then takes the Lease. The coordinator acquires everything in its plan
    /// order, and the Lease step never waits for another lock, so mixing device and resource locks
    /// cannot deadlock.
    pub async fn lock_with_queries(
        &self,
        device_id: &str,
        priority: Priority,
        queries: Vec<Query>,
    ) -> Result<DeviceGuard<'static>, DeviceLockError> {
        self.lock_in(None, device_id, priority, queries).await
    }

    /// Locks `device_id` (with `queries`) as a NestedLock of the transaction `outer` holds, then
    /// takes its Lease: for code that holds a device and needs another one (a second top-level
    /// Lock from it could wait for a device that sorts before the one it holds). Everything new
    /// must sort after `outer`'s last lock (devices sort by id, before backends), else the
    /// coordinator refuses it (`would_deadlock`) and nothing is taken. The nested guard borrows
    /// `outer`, so it is released first.
    pub async fn nested_lock_with_queries<'a>(
        &self,
        outer: &'a DeviceGuard<'_>,
        device_id: &str,
        priority: Priority,
        queries: Vec<Query>,
    ) -> Result<DeviceGuard<'a>, DeviceLockError> {
        let Some(parent) = outer.locked() else {
            return Err(DeviceLockError::Interrupted {
                device: device_id.to_owned(),
            });
        };
        self.lock_in(Some(parent), device_id, priority, queries)
            .await
    }

    /// A Lock (`nested_in` None) or a NestedLock of the device with `queries`, then its Lease.
    #[tracing::instrument(name = "wait", level = "info", skip_all,
        fields(kind = "device", id = %device_id, priority = ?priority, otel.name = %format!("wait device {device_id}")))]
    async fn lock_in<'a>(
        &self,
        nested_in: Option<&'a Locked<'_>>,
        device_id: &str,
        priority: Priority,
        queries: Vec<Query>,
    ) -> Result<DeviceGuard<'a>, DeviceLockError> {
        let requested = Instant::now();
        let interrupted = || DeviceLockError::Interrupted {
            device: device_id.to_owned(),
        };
        let device = self
            .inner
            .directory
            .send(Device(device_id.to_owned()))
            .await
            .map_err(|_| interrupted())?;
        let mut all = Vec::with_capacity(queries.len() + 1);
        all.push(query([upsert_device(device_id)]));
        all.extend(queries);

        let pending = PendingRequest::new(device.clone());
        let coordinator = &self.inner.coordinator;
        let locked = match nested_in {
            None => coordinator.lock_with(all, priority).await,
            Some(parent) => parent.nested_lock_with(all, priority).await,
        }
        .map_err(|source| DeviceLockError::Coordinator {
            device: device_id.to_owned(),
            source,
        })?;
        // Granted in process: the device actor hands over the parked Lease or acquires it.
        let (reply, answer) = oneshot::channel();
        pending.taken();
        device.do_send(Take { priority, reply });
        let mut answer = LeaseAnswer {
            rx: Some(answer),
            device: device.clone(),
        };
        let held = match answer.wait().await {
            Some(Ok(held)) => held,
            Some(Err(e)) => {
                locked.unlock().await;
                return Err(match e {
                    LeaseError::Held { holder, .. } => DeviceLockError::DeviceBusy {
                        device: device_id.to_owned(),
                        holder,
                        retry_after: jitter(self.inner.config.short_delay),
                    },
                    other => DeviceLockError::Lease(other),
                });
            }
            None => return Err(interrupted()),
        };
        let lost = held.lost_signal();
        self.inner
            .metrics
            .observe_wait(priority_label(priority), requested.elapsed().as_secs_f64());
        self.inner.metrics.holds.inc();
        let taken_over_from = match held.acquired() {
            Acquired::TakenOver { previous_holder } => Some(previous_holder.clone()),
            _ => None,
        };
        Ok(DeviceGuard {
            device_actor: device,
            device: device_id.to_owned(),
            locked: Some(locked),
            held: Some(held),
            lost,
            taken_over_from,
        })
    }
}

impl Inner {
    /// Every device's tenure, for inspection.
    pub(crate) async fn slot_views(&self) -> Vec<SlotView> {
        let Ok(devices) = self.directory.send(AllDevices).await else {
            return Vec::new();
        };
        futures::future::join_all(devices.iter().map(|d| d.send(ViewSlot)))
            .await
            .into_iter()
            .filter_map(Result::ok)
            .collect()
    }
}

/// Counts a request as pending at the device actor until it is granted or dropped (cancelled or
/// refused), so the device actor knows whether to park the Lease for it.
struct PendingRequest {
    device: Addr<DeviceActor>,
    done: bool,
}

impl PendingRequest {
    fn new(device: Addr<DeviceActor>) -> Self {
        device.do_send(Pending);
        Self {
            device,
            done: false,
        }
    }

    /// Granted: the `Take` that follows counts it off.
    fn taken(mut self) {
        self.done = true;
    }
}

impl Drop for PendingRequest {
    fn drop(&mut self) {
        if !self.done {
            self.device.do_send(Withdrawn);
        }
    }
}

/// The device actor's answer to `Take`, awaited by the caller. Dropped before it was read (the
/// caller was cancelled), a Lease that arrived meanwhile goes back to the device actor (released
/// or handed over there, in order); one that arrives later is kept by the actor itself.
struct LeaseAnswer {
    rx: Option<oneshot::Receiver<Result<HeldLease, LeaseError>>>,
    device: Addr<DeviceActor>,
}

impl LeaseAnswer {
    async fn wait(&mut self) -> Option<Result<HeldLease, LeaseError>> {
        let rx = self.rx.as_mut()?;
        let answer = rx.await.ok();
        self.rx = None;
        answer
    }
}

impl Drop for LeaseAnswer {
    fn drop(&mut self) {
        if let Some(mut rx) = self.rx.take() {
            rx.close();
            if let Ok(Ok(held)) = rx.try_recv() {
                self.device.do_send(EndHold { held, done: None });
            }
        }
    }
}

/// A held device: the in-process lock (and any other locks taken with it) plus the Lease.
/// Release with [`DeviceGuard::release`]; dropping it releases too. `'p` is the guard a nested
/// device lock extends (`'static` for a top-level one): the nested guard cannot outlive it.
pub struct DeviceGuard<'p> {
    device_actor: Addr<DeviceActor>,
    device: String,
    locked: Option<Locked<'p>>,
    held: Option<HeldLease>,
    lost: LostSignal,
    taken_over_from: Option<String>,
}

impl std::fmt::Debug for DeviceGuard<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceGuard")
            .field("device", &self.device)
            .field("locked", &self.locked)
            .field("held", &self.held)
            .finish_non_exhaustive()
    }
}

impl<'p> DeviceGuard<'p> {
    /// The holder whose expired Lease this lock took over, when it did (a Lease handed over in
    /// process, or free, or created, took nothing over).
    pub fn taken_over_from(&self) -> Option<&str> {
        self.taken_over_from.as_deref()
    }

    /// The device id.
    pub fn device(&self) -> &str {
        &self.device
    }

    /// The coordinator results: `[0]` is the device's, then one per extra query (typed:
    /// `results()[1].backend.upsert(v)`), lent out for as long as the guard lives.
    pub fn results(&self) -> &[QueryResult] {
        self.locked.as_ref().map_or(&[], |l| l.results())
    }

    /// The coordinator's outcome (context, results, plan).
    pub fn locked(&self) -> Option<&Locked<'p>> {
        self.locked.as_ref()
    }

    /// Whether this process stopped being the Lease holder (renewal failing for a whole duration,
    /// or another holder): stop acting on the device.
    pub fn is_lost(&self) -> bool {
        self.lost.is_lost()
    }

    /// Resolves when the Lease is lost (use in `select!` next to the device work).
    pub async fn lost(&self) {
        self.lost.lost().await
    }

    /// Stops renewing WITHOUT releasing the Lease (what a crash leaves behind: other replicas can
    /// take the device only once the Lease expires) and releases the in-process lock. For a process
    /// that must stop at once, and for crash tests.
    pub async fn abandon(mut self) {
        if let Some(held) = self.held.take() {
            let (done, finished) = oneshot::channel();
            self.device_actor.do_send(Abandon { held, done });
            let _ = finished.await;
        }
        if let Some(locked) = self.locked.take() {
            locked.unlock().await;
        }
    }

    /// Releases: the device actor hands the Lease over to a pending in-process request or
    /// releases it, then the in-process lock is released; returns once both are done. The Lease
    /// step is queued at the device actor before the in-process lock is released, so the next
    /// in-process holder's Lease step always comes after it.
    pub async fn release(mut self) {
        let finished = self.end_hold(true);
        if let Some(locked) = self.locked.take() {
            locked.unlock().await;
        }
        if let Some(finished) = finished {
            let _ = finished.await;
        }
    }

    /// Hands the Lease back to the device actor; with `wait`, a receiver told when it is done.
    fn end_hold(&mut self, wait: bool) -> Option<oneshot::Receiver<()>> {
        let held = self.held.take()?;
        let (done, finished) = if wait {
            let (tx, rx) = oneshot::channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        self.device_actor.do_send(EndHold { held, done });
        finished
    }
}

impl Drop for DeviceGuard<'_> {
    fn drop(&mut self) {
        // The Lease step is queued first, then the in-process lock is released (dropping `locked`).
        self.end_hold(false);
        self.locked.take();
    }
}
