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
    cinder_e2e::operator_replica::bench_main("fleetbench", || async {
        let args = args::Args::parse();
        let report = fleet::run(&args).await?;
        Ok(if args.json {
            format!("{}\n", report.json())
        } else {
            report.table()
        })
    })
}
