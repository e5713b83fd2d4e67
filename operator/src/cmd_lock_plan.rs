//! The `cinder-operator lock-plan` subcommand.

use std::process::ExitCode;

pub fn run(_args: &crate::cli::Cli) -> ExitCode {
    crate::not_built("lock-plan")
}
