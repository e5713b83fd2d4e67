//! cinder-operator: the Cinder operator.
//!
//! This crate owns the CRD types (`crd`), the seed-001 vocabulary (`conditions`, `names`,
//! `requeue`), the pure planning logic (`planning`), the pipeline engine (`pipeline`), the
//! Prometheus metrics (`metrics`), the Kubernetes Events (`events`), logs and traces
//! (`telemetry`), the HTTP endpoints and admin UI (`http`) and the `cinder-operator` binary's
//! subcommands (one module per subcommand).

pub mod cli;
pub mod cmd_crdgen;
pub mod cmd_lock_plan;
pub mod cmd_run;
pub mod cmd_sim;
pub mod conditions;
pub mod context;
pub mod controller;
pub mod crd;
pub mod embedded;
pub mod events;
pub mod http;
pub mod metrics;
pub mod names;
pub mod pipeline;
pub mod planning;
pub mod requeue;
pub mod satellites;
pub mod steps;
pub mod telemetry;

use std::process::ExitCode;

/// The exit of a subcommand that a later issue builds: status 2 and one line on stderr.
pub fn not_built(what: &str) -> ExitCode {
    eprintln!("cinder-operator: `{what}` is not built yet");
    ExitCode::from(2)
}
