//! The `cinder-operator` command: parses the command line and dispatches to a subcommand. The
//! binary's `main` is this function, and so is the tests' `operator-under-test` binary, which
//! is the same program built with the tests' features.

use crate::cli::{Cli, Command};
#[cfg(feature = "embedded")]
use crate::cmd_sim;
use crate::{cmd_crdgen, cmd_lock_plan, cmd_run};
use clap::Parser;
use std::process::ExitCode;

/// Runs the command this process was started with.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Command::Run(args) => cmd_run::run(args),
        Command::Crdgen(args) => cmd_crdgen::run(args),
        Command::LockPlan { file } => cmd_lock_plan::run(file),
        #[cfg(feature = "embedded")]
        Command::Sim(args) => cmd_sim::run(args),
    }
}
