//! `soakbench`: no slow leaks. One embedded cluster in this process, one operator as a child
//! process of this binary (`soakbench operator run ...`), N Cinders (each with its credential
//! Secrets and NFS backends) churned in turn (spec update, password rotation, deletion and
//! re-creation under a new name) until the operator has run the asked number of passes (its
//! `cinder_operator_reconcile_duration_seconds` counts) or the time is up; the operator's
//! resident memory is sampled every so many passes and printed as a curve with the verdict:
//! PASS when, after warm-up, it stays within 10% of its first value after warm-up, else MISS.
//! A benchmark prints; it asserts nothing.
//!
//! `cargo run --release -p cinder-e2e --bin soakbench -- --cinders 20 --passes 10000`

mod args;
mod churn;
mod curve;
mod run;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    cinder_e2e::operator_replica::bench_main("soakbench", || async {
        let args = args::Args::parse();
        run::run(&args).await
    })
}
