//! cinder-operator: the Cinder operator.
//!
//! This crate owns the CRD types, the Cinder pipeline (reconcile actors and one module
//! per step), the two satellite controllers, the Prometheus metrics, the admin endpoint
//! and the `cinder-operator` binary's subcommands (one module per subcommand).

pub mod cli;
pub mod cmd_crdgen;
pub mod cmd_lock_plan;
pub mod cmd_run;
pub mod cmd_sim;

use std::process::ExitCode;

/// The exit of a subcommand that a later issue builds: status 2 and one line on stderr.
pub fn not_built(what: &str) -> ExitCode {
    eprintln!("cinder-operator: `{what}` is not built yet");
    ExitCode::from(2)
}
