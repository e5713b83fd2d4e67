//! Errors of the Lease lock and of the device-lock service.

use std::time::Duration;

/// Errors of [`crate::LeaseLock`].
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Another holder has the Lease and it has not expired (or it won a concurrent update).
    #[error("lease {lease} is held by {holder}")]
    Held {
        /// Lease name.
        lease: String,
        /// The other holder's identity (as far as it could be read).
        holder: String,
    },
    /// Renewal asked by a process that is not the holder.
    #[error("lease {lease} is not held by this process (holder: {holder:?})")]
    NotHolder {
        /// Lease name.
        lease: String,
        /// The actual holder, if any.
        holder: Option<String>,
    },
    /// Renewal of a Lease that does not exist.
    #[error("lease {lease} does not exist")]
    Missing {
        /// Lease name.
        lease: String,
    },
    /// Settings rejected at construction.
    #[error("invalid lease settings: {0}")]
    InvalidSettings(String),
    /// Any other API failure (network, 5xx, 429, ...): nothing is known about the holder.
    #[error("lease {lease}: Kubernetes API error: {source}")]
    Api {
        /// Lease name.
        lease: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

/// Errors of [`crate::DeviceLocks`].
#[derive(Debug, thiserror::Error)]
pub enum DeviceLockError {
    /// Another replica holds the device's Lease: requeue after `retry_after` at the same priority.
    #[error("device {device} is busy: held by {holder}; retry after {retry_after:?}")]
    DeviceBusy {
        /// Device id.
        device: String,
        /// The other replica's holder identity.
        holder: String,
        /// `jitter(short_delay)`.
        retry_after: Duration,
    },
    /// The in-process lock coordinator refused or failed the lock.
    #[error("in-process lock of device {device} failed: {source}")]
    Coordinator {
        /// Device id.
        device: String,
        /// The coordinator's error.
        #[source]
        source: cinder_actors::LockError,
    },
    /// The Lease step's task ended abnormally (runtime shutting down); nothing is held.
    #[error("locking device {device} was interrupted")]
    Interrupted {
        /// Device id.
        device: String,
    },
    /// The Lease could not be read or written (API failure); the in-process lock was released.
    #[error(transparent)]
    Lease(#[from] LeaseError),
}
