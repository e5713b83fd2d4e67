//! Sharding over replicas (`run --shards S`): Cinders are split over S shards by a stable hash
//! of `namespace/name` ([`hash`]); each shard is a Kubernetes Lease `cinder-operator-shard-<i>`
//! in the operator's namespace, with the renew period, duration and jitter of every other Lease
//! of the operator ([`cinder_lease::HeldLease`]). Each replica also holds a membership Lease
//! ([`membership`]) so every replica knows how many are live, and holds at most
//! `ceil(S / live replicas)` shards ([`plan`]); the [`holder`] task takes free and expired shards,
//! gives back the ones over its quota and, on SIGTERM, all of them. The controllers reconcile
//! only the Cinders (and satellites, by their Cinder) of the shards in the [`ShardView`]; a pass
//! whose shard is lost stops before its next step and writes no status.
//!
//! Leader election is not needed with shards: no work of the operator is a cluster-wide
//! singleton (every reconcile belongs to one Cinder, and shared devices are protected by their
//! own device Leases across shards), so `--shards` and `--leader-elect` exclude each other.

pub mod hash;
pub mod holder;
pub mod membership;
pub mod metrics;
pub mod plan;
pub mod view;
pub mod wake;

pub use hash::shard_of;
pub use holder::ShardHolderConfig;
pub use holder::ShardHolderHandle;
pub use metrics::ShardMetrics;
pub use view::ShardView;
