//! `fleetbench`: one embedded management cluster and T embedded target clusters in this
//! process, N Cinders (each with its credentials and B NFS backends) spread over the targets,
//! R operator replicas as child processes of this binary (`fleetbench operator run ...`, the
//! operator's own `run` subcommand), and the figures of a fleet's first convergence and of a
//! steady window after it, as a table or one JSON object (`--json`).

mod args;
mod fleet;
mod measure;
mod report;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    if let Some(status) = cinder_e2e::operator_replica::run_if_replica("fleetbench") {
        // A replica: the operator binary's command line after `operator`.
        return status;
    }
    let args = args::Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fleetbench: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(fleet::run(&args)) {
        Ok(report) => {
            if args.json {
                println!("{}", report.json());
            } else {
                print!("{}", report.table());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("fleetbench: {e:#}");
            ExitCode::from(1)
        }
    }
}
