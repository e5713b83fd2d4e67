//! `DeviceLocks`: the device-lock service the operator uses. A lock is first the in-process lock
//! (an `UpsertDevice(id)` lock of the cinder-actors coordinator at the waiter's priority: waiters
//! queue in the device actor, no polling, no API calls while waiting), then the device's Lease
//! (one `LeaseLock` per device per process). A Lease held by another replica gives back the
//! in-process lock and answers `DeviceBusy { retry_after: jitter(short_delay) }`.
//!
//! Hand-over: when a guard is released while other in-process requests for the same device are
//! pending, the Lease stays held (and renewed) and passes to the next in-process holder without any
//! API call, at most `max_handovers` times in a row; so many in-process waiters cost the API no
//! more than one (acquire + release + renewals per tenure).

use crate::error::{DeviceLockError, LeaseError};
use crate::held_lease::{HeldLease, LostSignal};
use crate::holder_identity::HolderIdentity;
use crate::jitter::jitter;
use crate::lease_lock::{Acquired, LeaseLock, LeaseSettings};
use crate::metrics::{DeviceLockMetrics, PriorityLabel, PriorityLabels};
use cinder_actors::query::{query, upsert_device};
use cinder_actors::{CoordinatorHandle, Locked, Priority, Query, QueryResult};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Default delay before a `DeviceBusy` waiter retries (jittered).
pub const DEFAULT_SHORT_DELAY: Duration = Duration::from_secs(1);

/// Default maximum of consecutive in-process hand-overs of one Lease tenure.
pub const DEFAULT_MAX_HANDOVERS: u32 = 64;

/// The settings of a [`DeviceLocks`] service.
#[derive(Clone, Debug)]
pub struct DeviceLocksConfig {
    /// Namespace of the device Leases (the operator's namespace).
    pub namespace: String,
    /// The holder identity of this process (default: [`HolderIdentity::process`]).
    pub identity: HolderIdentity,
    /// Lease duration and renew period.
    pub lease: LeaseSettings,
    /// `DeviceBusy` answers `retry_after = jitter(short_delay)`. Default 1 s.
    pub short_delay: Duration,
    /// How many in-process holders in a row may inherit a held Lease before it is released (and
    /// other replicas get a chance). Default 64.
    pub max_handovers: u32,
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

/// Per-device state of this process.
#[derive(Debug)]
struct DeviceSlot {
    /// The one Lease client of this device in this process.
    lease: Arc<LeaseLock>,
    /// The Lease while it is held between two in-process holders (hand-over).
    parked: Option<HeldLease>,
    /// In-process holders served by the current Lease tenure after the first one.
    handovers: u32,
    /// Requests waiting for the in-process lock.
    pending: usize,
    /// The current in-process holder.
    holder: Option<InProcessHolder>,
    /// Serializes a new acquisition with the release of an orphaned parked Lease (the one Lease
    /// write that happens without the in-process lock), so the release never clears a Lease the
    /// next holder has just re-acquired.
    gate: Arc<tokio::sync::Mutex<()>>,
}

/// Who holds a device in this process.
#[derive(Clone, Debug)]
pub(crate) struct InProcessHolder {
    pub(crate) priority: Priority,
    pub(crate) since: Instant,
    pub(crate) lost: LostSignal,
}

pub(crate) struct Inner {
    pub(crate) coordinator: CoordinatorHandle,
    client: kube::Client,
    pub(crate) config: DeviceLocksConfig,
    pub(crate) metrics: DeviceLockMetrics,
    /// `(leaseDurationSeconds, renew period)`, validated at construction.
    lease_settings: (i32, Duration),
    devices: Mutex<HashMap<String, DeviceSlot>>,
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
    /// A service locking devices through `coordinator` and Leases through `client`. Rejects
    /// invalid Lease settings.
    pub fn new(
        coordinator: CoordinatorHandle,
        client: kube::Client,
        config: DeviceLocksConfig,
        metrics: DeviceLockMetrics,
    ) -> Result<Self, LeaseError> {
        let lease_settings = config.lease.validate()?;
        Ok(Self {
            inner: Arc::new(Inner {
                coordinator,
                client,
                config,
                metrics,
                lease_settings,
                devices: Mutex::new(HashMap::new()),
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

    /// Locks `device_id` at `priority`: the in-process lock (queued in the device actor), then the
    /// Lease. `Err(DeviceBusy)` when another replica holds the Lease (the in-process lock is
    /// released; requeue after `retry_after` at the same priority).
    pub async fn lock(
        &self,
        device_id: &str,
        priority: Priority,
    ) -> Result<DeviceGuard, DeviceLockError> {
        self.lock_with_queries(device_id, priority, Vec::new())
            .await
    }

    /// Locks `device_id` together with other queries of the coordinator in ONE Lock call (the
    /// device query is first, `queries` follow: the guard's `results()[0]` is the device's, then
    /// one per query), then takes the Lease. The coordinator acquires everything in its plan
    /// order, and the Lease step never waits, so mixing device and resource locks cannot deadlock.
    #[tracing::instrument(name = "wait", level = "info", skip_all,
        fields(kind = "device", id = %device_id, priority = ?priority, otel.name = %format!("wait device {device_id}")))]
    pub async fn lock_with_queries(
        &self,
        device_id: &str,
        priority: Priority,
        queries: Vec<Query>,
    ) -> Result<DeviceGuard, DeviceLockError> {
        let requested = Instant::now();
        let mut all = Vec::with_capacity(queries.len() + 1);
        all.push(query([upsert_device(device_id)]));
        all.extend(queries);

        let pending = PendingRequest::new(self.inner.clone(), device_id);
        let locked = self
            .inner
            .coordinator
            .lock_with(all, priority)
            .await
            .map_err(|source| DeviceLockError::Coordinator {
                device: device_id.to_owned(),
                source,
            })?;
        // Granted in process: no longer pending; take the parked Lease, if any.
        let (lease, parked, gate) = pending.granted(priority);
        // The Lease step runs in its own task so that a caller cancelled from here on cannot
        // leave a half-acquired Lease or a stale holder behind: the task always ends with a
        // guard (dropped, hence released in order, if nobody awaits it) or a released lock.
        let finish = tokio::spawn(finish_lock(
            self.inner.clone(),
            device_id.to_owned(),
            priority,
            requested,
            locked,
            Grant {
                lease,
                parked,
                gate,
            },
        ));
        match finish.await {
            Ok(result) => result,
            Err(_) => Err(DeviceLockError::Interrupted {
                device: device_id.to_owned(),
            }),
        }
    }
}

/// What the in-process grant hands to the Lease step.
struct Grant {
    lease: Arc<LeaseLock>,
    parked: Option<HeldLease>,
    gate: Arc<tokio::sync::Mutex<()>>,
}

/// The Lease step after the in-process grant: reuse the parked Lease or acquire it; on refusal give
/// back the in-process lock and answer `DeviceBusy`.
async fn finish_lock(
    inner: Arc<Inner>,
    device: String,
    priority: Priority,
    requested: Instant,
    locked: Locked,
    grant: Grant,
) -> Result<DeviceGuard, DeviceLockError> {
    let fresh = grant.parked.is_none();
    let held = match grant.parked {
        Some(held) => held,
        None => match acquire_through_gate(grant.lease, grant.gate).await {
            Ok(held) => held,
            Err(e) => {
                inner.clear_holder(&device);
                locked.unlock().await;
                return Err(match e {
                    LeaseError::Held { holder, .. } => DeviceLockError::DeviceBusy {
                        device,
                        holder,
                        retry_after: jitter(inner.config.short_delay),
                    },
                    other => DeviceLockError::Lease(other),
                });
            }
        },
    };
    let lost = held.lost_signal();
    inner.set_holder_lost_signal(&device, lost.clone());
    inner
        .metrics
        .wait_seconds
        .get_or_create(&PriorityLabels {
            priority: priority_label(priority),
        })
        .observe(requested.elapsed().as_secs_f64());
    inner.metrics.holds.inc();
    let taken_over_from = match held.acquired() {
        Acquired::TakenOver { previous_holder } if fresh => Some(previous_holder.clone()),
        _ => None,
    };
    Ok(DeviceGuard {
        inner,
        device,
        locked: Some(locked),
        held: Some(held),
        lost,
        taken_over_from,
    })
}

impl Inner {
    fn slots(&self) -> MutexGuard<'_, HashMap<String, DeviceSlot>> {
        self.devices.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The device's slot, created with its one `LeaseLock` on first use.
    fn with_slot<R>(&self, device_id: &str, f: impl FnOnce(&mut DeviceSlot) -> R) -> R {
        let mut slots = self.slots();
        let slot = slots
            .entry(device_id.to_owned())
            .or_insert_with(|| DeviceSlot {
                lease: Arc::new(self.new_lease_lock(device_id)),
                parked: None,
                handovers: 0,
                pending: 0,
                holder: None,
                gate: Arc::new(tokio::sync::Mutex::new(())),
            });
        f(slot)
    }

    fn new_lease_lock(&self, device_id: &str) -> LeaseLock {
        LeaseLock::with_validated(
            self.client.clone(),
            &self.config.namespace,
            device_id,
            self.config.identity.clone(),
            self.lease_settings,
        )
        .with_metrics(self.metrics.clone())
    }

    fn clear_holder(&self, device_id: &str) {
        self.with_slot(device_id, |slot| slot.holder = None);
    }

    fn set_holder_lost_signal(&self, device_id: &str, lost: LostSignal) {
        self.with_slot(device_id, |slot| {
            if let Some(h) = slot.holder.as_mut() {
                h.lost = lost;
            }
        });
    }

    /// Called when a guard ends: decides whether the Lease is handed over (parked for the next
    /// in-process holder) or must be released; returns it when it must be released.
    fn end_hold(&self, device_id: &str, held: HeldLease) -> Option<HeldLease> {
        let max = self.config.max_handovers;
        self.with_slot(device_id, |slot| {
            slot.holder = None;
            if slot.pending > 0 && slot.handovers < max && !held.is_lost() {
                slot.handovers += 1;
                slot.parked = Some(held);
                None
            } else {
                slot.handovers = 0;
                Some(held)
            }
        })
    }

    /// Takes a parked Lease that nobody is going to inherit (no pending request, no holder),
    /// with the gate closed until it is released.
    fn take_orphaned_parked(
        &self,
        device_id: &str,
    ) -> Option<(HeldLease, Option<tokio::sync::OwnedMutexGuard<()>>)> {
        self.with_slot(device_id, |slot| {
            if slot.pending == 0 && slot.holder.is_none() {
                slot.handovers = 0;
                let held = slot.parked.take()?;
                Some((held, slot.gate.clone().try_lock_owned().ok()))
            } else {
                None
            }
        })
    }

    pub(crate) fn slot_views(&self) -> Vec<SlotView> {
        self.slots()
            .iter()
            .map(|(device, slot)| SlotView {
                device: device.clone(),
                lease: slot.lease.clone(),
                pending: slot.pending,
                holder: slot.holder.clone(),
                parked: slot.parked.is_some(),
                handovers: slot.handovers,
            })
            .collect()
    }
}

/// A copy of one slot for inspection.
pub(crate) struct SlotView {
    pub(crate) device: String,
    pub(crate) lease: Arc<LeaseLock>,
    pub(crate) pending: usize,
    pub(crate) holder: Option<InProcessHolder>,
    pub(crate) parked: bool,
    pub(crate) handovers: u32,
}

/// Counts a request as pending for the in-process lock until it is granted or dropped; a dropped
/// (cancelled) request that leaves a parked Lease orphaned releases it.
struct PendingRequest {
    inner: Arc<Inner>,
    device: String,
    done: bool,
}

impl PendingRequest {
    fn new(inner: Arc<Inner>, device: &str) -> Self {
        inner.with_slot(device, |slot| slot.pending += 1);
        Self {
            inner,
            device: device.to_owned(),
            done: false,
        }
    }

    /// Granted: records the holder; returns the Lease client, the parked Lease (if it is not
    /// lost) and the slot's gate.
    fn granted(
        mut self,
        priority: Priority,
    ) -> (
        Arc<LeaseLock>,
        Option<HeldLease>,
        Arc<tokio::sync::Mutex<()>>,
    ) {
        self.done = true;
        let (lease, parked, gate) = self.inner.with_slot(&self.device, |slot| {
            slot.pending = slot.pending.saturating_sub(1);
            let parked = slot.parked.take();
            slot.holder = Some(InProcessHolder {
                priority,
                since: Instant::now(),
                lost: parked
                    .as_ref()
                    .map(HeldLease::lost_signal)
                    .unwrap_or_else(LostSignal::never),
            });
            (slot.lease.clone(), parked, slot.gate.clone())
        });
        match parked {
            Some(held) if held.is_lost() => {
                // A lost Lease is not handed over; acquire afresh.
                drop(held);
                (lease, None, gate)
            }
            other => (lease, other, gate),
        }
    }
}

impl Drop for PendingRequest {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.inner.with_slot(&self.device, |slot| {
            slot.pending = slot.pending.saturating_sub(1)
        });
        if let Some((held, gate)) = self.inner.take_orphaned_parked(&self.device) {
            match tokio::runtime::Handle::try_current() {
                Ok(handle) => {
                    handle.spawn(async move {
                        release_in_order(Some(held), None).await;
                        drop(gate);
                    });
                }
                Err(_) => drop((held, gate)),
            }
        }
    }
}

/// Acquires the Lease once no orphaned parked Lease is being released (the gate is almost always
/// open: it closes only for that one release).
async fn acquire_through_gate(
    lease: Arc<LeaseLock>,
    gate: Arc<tokio::sync::Mutex<()>>,
) -> Result<HeldLease, LeaseError> {
    let _open = gate.lock().await;
    HeldLease::acquire(lease).await
}

/// Releases the Lease first, then the in-process lock (so the next in-process holder never races
/// our Lease release).
async fn release_in_order(held: Option<HeldLease>, locked: Option<Locked>) {
    if let Some(held) = held {
        let name = held.lock().name().to_owned();
        if let Err(e) = held.release().await {
            tracing::warn!(lease = %name, error = %e, "releasing a device lease failed; it will expire");
        }
    }
    if let Some(locked) = locked {
        locked.unlock().await;
    }
}

fn spawn_release(held: HeldLease, locked: Option<Locked>) {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            handle.spawn(release_in_order(Some(held), locked));
        }
        // No runtime: dropping releases the in-process lock; the Lease expires.
        Err(_) => drop((held, locked)),
    }
}

/// A held device: the in-process lock (and any other locks taken with it) plus the Lease.
/// Release with [`DeviceGuard::release`]; dropping it releases too (in a spawned task).
#[derive(Debug)]
pub struct DeviceGuard {
    inner: Arc<Inner>,
    device: String,
    locked: Option<Locked>,
    held: Option<HeldLease>,
    lost: LostSignal,
    taken_over_from: Option<String>,
}

impl DeviceGuard {
    /// The holder whose expired Lease this lock took over, when it did (a Lease handed over in
    /// process, or free, or created, took nothing over).
    pub fn taken_over_from(&self) -> Option<&str> {
        self.taken_over_from.as_deref()
    }

    /// The device id.
    pub fn device(&self) -> &str {
        &self.device
    }

    /// The coordinator results: `[0]` is the device's, then one per extra query.
    pub fn results(&self) -> &[QueryResult] {
        self.locked.as_ref().map_or(&[], |l| l.results.as_slice())
    }

    /// The coordinator's outcome (context for a NestedLock, results, plan).
    pub fn locked(&self) -> Option<&Locked> {
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
            self.inner.with_slot(&self.device, |slot| {
                slot.holder = None;
                slot.handovers = 0;
            });
            held.abandon().await;
        }
        if let Some(locked) = self.locked.take() {
            locked.unlock().await;
        }
    }

    /// Releases: hands the Lease over to a pending in-process request or releases it, then
    /// releases the in-process lock.
    pub async fn release(mut self) {
        let (held, locked) = (self.held.take(), self.locked.take());
        let to_release = held.and_then(|h| self.inner.end_hold(&self.device, h));
        release_in_order(to_release, locked).await;
    }
}

impl Drop for DeviceGuard {
    fn drop(&mut self) {
        let Some(held) = self.held.take() else {
            return;
        };
        let locked = self.locked.take();
        match self.inner.end_hold(&self.device, held) {
            Some(held) => spawn_release(held, locked),
            None => drop(locked),
        }
    }
}
