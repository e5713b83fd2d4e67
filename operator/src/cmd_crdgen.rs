//! The `cinder-operator crdgen` subcommand.

use std::process::ExitCode;

pub fn run(_args: &crate::cli::Cli) -> ExitCode {
    crate::not_built("crdgen")
}
