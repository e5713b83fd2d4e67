//! Integration tests of the device locks, the Lease lock and leader election against the embedded
//! cluster: one module per area, `common` for the shared helpers.

mod common;
mod device_locks;
mod leader_election;
mod lease_lock;
