//! cinder-operator: the Cinder operator.
//!
//! This crate owns the CRD types (`crd`), the product vocabulary (`conditions`, `names`,
//! `requeue`), the pure planning logic (`planning`), the pipeline engine (`pipeline`), the
//! Prometheus metrics (`metrics`), the Kubernetes Events (`events`), logs and traces
//! (`telemetry`), the HTTP endpoints and admin UI (`http`) and the `cinder-operator` binary's
//! subcommands (one module per subcommand).

/// mimalloc rather than glibc malloc, for every binary that links the operator (the operator
/// itself, and the benchmarks and test processes that run it): allocation was a sixth of the
/// operator's CPU and a third of the embedded API server's at a thousand Cinders
/// (docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod children;
pub mod cli;
pub mod cmd_crdgen;
pub mod cmd_lock_plan;
pub mod cmd_run;
#[cfg(feature = "embedded")]
pub mod cmd_sim;
pub mod conditions;
pub mod context;
pub mod controller;
pub mod crd;
pub mod credentials;
pub mod device_retry;
pub mod embedded;
#[cfg(feature = "embedded")]
pub(crate) mod embedded_keystone;
#[cfg(feature = "embedded")]
pub(crate) mod embedded_real;
pub mod entry;
pub mod events;
pub mod http;
pub mod kube_client;
pub mod kube_ext;
pub mod metrics;
pub mod names;
pub mod pipeline;
pub mod planning;
pub mod preflight;
pub mod requeue;
pub mod shards;
pub mod start;
pub mod steps;
pub mod target_cluster;
pub mod telemetry;
#[cfg(test)]
mod test_fixtures;
pub mod workloads;
