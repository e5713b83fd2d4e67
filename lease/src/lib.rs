//! cinder-lease: per-device locks (the device-locking decision, design section 4).
//!
//! This crate owns the device locks of the operator: the in-process lock (through the cinder-actors
//! lock coordinator's device resource actor, waiters queued by priority with ageing), each device's
//! tenure actor (the held or parked Lease, hand-overs, the holder), the Kubernetes Lease
//! that excludes other operator replicas, their metrics and inspection, and `jitter`, the one
//! function every periodic requeue of the project goes through.

mod device_actor;
pub mod device_locks;
pub mod devices;
pub mod error;
pub mod held_lease;
pub mod holder_identity;
pub mod inspection;
pub mod jitter;
pub mod leader;
pub mod lease_lock;
pub mod lease_name;
pub mod metrics;

pub use cinder_actors::Priority;
pub use device_locks::{DeviceGuard, DeviceLocks, DeviceLocksConfig};
pub use error::{DeviceLockError, LeaseError};
pub use held_lease::{HeldLease, LostSignal};
pub use holder_identity::HolderIdentity;
pub use inspection::DevicesSnapshot;
pub use jitter::jitter;
pub use leader::{LEADER_LEASE_NAME, LeaderElector, LeaderHandle};
pub use lease_lock::{Acquired, LeaseLock, LeaseSettings, ObservedLease, Released};
pub use lease_name::lease_name;
pub use metrics::DeviceLockMetrics;
