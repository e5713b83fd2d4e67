//! The `cinder-operator` binary: parses the command line and dispatches to a subcommand.

use cinder_operator::cli::{Cli, Command};
use cinder_operator::{cmd_crdgen, cmd_lock_plan, cmd_run, cmd_sim};
use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Command::Run(_) => cmd_run::run(&cli),
        Command::Crdgen(_) => cmd_crdgen::run(&cli),
        Command::LockPlan { .. } => cmd_lock_plan::run(&cli),
        Command::Sim(_) => cmd_sim::run(&cli),
    }
}
