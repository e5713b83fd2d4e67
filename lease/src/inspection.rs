//! Inspection of device locks for the admin endpoint (`/devices`): per device the in-process
//! holder, the Lease as last seen (name, holder, renew time), and the waiters by priority (from
//! the coordinator's device actor). Building it makes no Lease API call.

use crate::device_locks::DeviceLocks;
use crate::lease_lock::ObservedLease;
use cinder_actors::Priority;
use cinder_actors::inspect::ResourceSnapshot;
use serde::Serialize;
use std::time::Instant;

/// The device kind in the coordinator's standard schema.
pub const DEVICE_KIND: &str = "device";

/// Everything `/devices` shows.
#[derive(Clone, Debug, Serialize)]
pub struct DevicesSnapshot {
    /// This process's Lease holder identity.
    pub identity: String,
    /// Namespace of the device Leases.
    pub namespace: String,
    /// Devices this process has locked or is waiting for, sorted by id.
    pub devices: Vec<DeviceSnapshot>,
}

/// One device.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceSnapshot {
    /// Device id.
    pub device: String,
    /// The in-process holder, if any.
    pub holder: Option<HolderSnapshot>,
    /// The Lease as last seen by this process (`name` is always the device's Lease name).
    pub lease_name: String,
    /// Last observation of the Lease (none before the first call or when missing).
    pub lease: Option<ObservedLease>,
    /// Whether the Lease is held by this process right now (by a holder or parked for hand-over).
    pub lease_held_here: bool,
    /// In-process hand-overs in the current Lease tenure.
    pub handovers: u32,
    /// Requests waiting for the in-process lock.
    pub pending: usize,
    /// Waiters queued in the device actor, by priority, oldest first.
    pub waiters: WaitersByPriority,
}

/// The in-process holder.
#[derive(Clone, Debug, Serialize)]
pub struct HolderSnapshot {
    /// Its priority.
    pub priority: Priority,
    /// How long it has held the device, in milliseconds.
    pub held_ms: u64,
    /// Whether its Lease was lost.
    pub lost: bool,
}

/// One queued waiter.
#[derive(Clone, Debug, Serialize)]
pub struct WaiterSnapshot {
    /// The coordinator transaction.
    pub txn: u64,
    /// How long it has waited, in milliseconds.
    pub waited_ms: u64,
}

/// Waiters grouped by base priority.
#[derive(Clone, Debug, Default, Serialize)]
pub struct WaitersByPriority {
    /// High (backends, schema migrations).
    pub high: Vec<WaiterSnapshot>,
    /// Default.
    pub default: Vec<WaiterSnapshot>,
    /// Baseline (periodic requeues).
    pub baseline: Vec<WaiterSnapshot>,
}

impl WaitersByPriority {
    fn from_resource(resource: &ResourceSnapshot) -> Self {
        let mut out = Self::default();
        for w in &resource.waiters {
            let entry = WaiterSnapshot {
                txn: w.txn,
                waited_ms: w.waited_ms,
            };
            match w.priority {
                Priority::High => out.high.push(entry),
                Priority::Default => out.default.push(entry),
                Priority::Baseline => out.baseline.push(entry),
            }
        }
        out
    }

    /// Number of waiters of all priorities.
    pub fn len(&self) -> usize {
        self.high.len() + self.default.len() + self.baseline.len()
    }

    /// Whether nobody waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl DeviceLocks {
    /// The `/devices` snapshot. Waiters come from the coordinator; when it cannot answer (shutting
    /// down) they are shown empty.
    pub async fn inspect(&self) -> DevicesSnapshot {
        let resources = self
            .inner
            .coordinator
            .inspect()
            .await
            .map(|s| s.resources)
            .unwrap_or_default();
        let now = Instant::now();
        let mut devices: Vec<DeviceSnapshot> = self
            .inner
            .slot_views()
            .await
            .into_iter()
            .map(|slot| {
                let waiters = resources
                    .iter()
                    .find(|r| r.kind == DEVICE_KIND && r.id == slot.device)
                    .map(WaitersByPriority::from_resource)
                    .unwrap_or_default();
                let holder = slot.holder.as_ref().map(|h| HolderSnapshot {
                    priority: h.priority,
                    held_ms: u64::try_from(now.saturating_duration_since(h.since).as_millis())
                        .unwrap_or(u64::MAX),
                    lost: h.lost.is_lost(),
                });
                let lease_held_here = slot.parked
                    || (holder.as_ref().is_some_and(|h| !h.lost)
                        && slot
                            .lease
                            .observed()
                            .and_then(|o| o.holder)
                            .is_some_and(|h| h == self.identity().as_str()));
                DeviceSnapshot {
                    lease_name: slot.lease.name().to_owned(),
                    lease: slot.lease.observed(),
                    device: slot.device,
                    holder,
                    lease_held_here,
                    handovers: slot.handovers,
                    pending: slot.pending,
                    waiters,
                }
            })
            .collect();
        devices.sort_by(|a, b| a.device.cmp(&b.device));
        DevicesSnapshot {
            identity: self.identity().to_string(),
            namespace: self.inner.config.namespace.clone(),
            devices,
        }
    }
}
