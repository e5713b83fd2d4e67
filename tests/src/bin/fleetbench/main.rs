//! `fleetbench`: one embedded management cluster and T embedded target clusters in this
//! process, N Cinders (each with its credentials and B NFS backends) spread over the targets,
//! R operator replicas as child processes of this binary (`fleetbench operator run ...`, the
//! operator's own `run` subcommand), and the figures of a fleet's first convergence and of a
//! steady window after it, as a table or one JSON object (`--json`).

mod args;
mod fleet;
mod measure;
mod replica;
mod report;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("operator") {
        // A replica: the operator binary's command line after `operator`.
        let cli = match cinder_operator::cli::Cli::try_parse_from(
            std::iter::once("cinder-operator".to_string()).chain(argv[2..].iter().cloned()),
        ) {
            Ok(cli) => cli,
            Err(e) => {
                eprintln!(
                    "fleetbench operator: {}",
                    cinder_operator::cli::one_line_error(&e)
                );
                return ExitCode::from(2);
            }
        };
        return match cli.command {
            cinder_operator::cli::Command::Run(run) => cinder_operator::cmd_run::run(&run),
            _ => {
                eprintln!("fleetbench operator: only the run subcommand starts a replica");
                ExitCode::from(2)
            }
        };
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
