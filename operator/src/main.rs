//! The `cinder-operator` binary: parses the command line and dispatches to a subcommand.

use cinder_operator::cli::{Cli, Command};
use cinder_operator::{cmd_crdgen, cmd_lock_plan, cmd_run, cmd_sim};
use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Command::Run(args) => cmd_run::run(args),
        Command::Crdgen(args) => cmd_crdgen::run(args),
        Command::LockPlan { file } => cmd_lock_plan::run(file),
        Command::Sim(args) => cmd_sim::run(args),
    }
}
