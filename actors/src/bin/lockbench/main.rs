//! `lockbench`: runs the same workloads (overhead, create-publish, backend-update, scale) on
//! three lock engines in one process — a global mutex, ordered per-resource rwlocks (the
//! reference design) and the project's actor coordinator — and prints a table, or with
//! `--json` one JSON object, with every figure and each target of the lock core as PASS/MISS.
//!
//! Usage: `cargo run --release -p cinder-actors --bin lockbench -- [--json] [--quick] [--arbiters N]`.

mod actors_engine;
mod args;
mod baseline;
mod device;
mod engine;
mod query;
mod report;
mod runtime;
mod stats;
mod workload;

use std::process::{Command, ExitCode};

/// The allocator of the operator's binaries (`operator/src/lib.rs`), so the lock core is measured
/// as the operator runs it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use actors_engine::Actors;
use args::{Options, Parsed};
use baseline::{Baseline, Flavor};
use engine::{EngineError, EngineResult};
use report::Report;
use runtime::Runtimes;
use workload::create_publish::{self, Shape};
use workload::scale::Scale;
use workload::throughput::{self, Throughput};
use workload::{backend_update, overhead, scale};

/// Run `$body` with `$e` bound to a fresh engine named `$name`, each engine on its runtime
/// (see [`Runtimes`]).
macro_rules! with_engine {
    ($runtimes:expr, $name:expr, $arbiters:expr, |$e:ident| $body:expr) => {
        match $name {
            "global" => $runtimes.baseline($arbiters, async {
                let $e = Baseline::new(Flavor::Global);
                $body.await
            }),
            "ordered_rwlock" => $runtimes.baseline($arbiters, async {
                let $e = Baseline::new(Flavor::OrderedRwLock);
                $body.await
            }),
            "actors" => $runtimes.actors(async {
                let $e = Actors::start($arbiters);
                $body.await
            }),
            other => Err(EngineError(format!("unknown engine {other:?}"))),
        }
    };
}

fn run_in_process(runtimes: &Runtimes, o: &Options, report: &mut Report) {
    let wants = |w: &str| o.workloads.iter().any(|x| x == w);
    let shape = Shape::from_options(o);
    if wants("overhead") {
        for name in &o.engines {
            let outcome = with_engine!(runtimes, name.as_str(), o.arbiters, |e| overhead::run(
                &e,
                o.overhead_txns
            ));
            match outcome {
                Ok(r) => {
                    report.overhead.insert(name.clone(), r);
                }
                Err(e) => report.errors.push(format!("overhead on {name}: {e}")),
            }
        }
    }
    if wants("create_publish") {
        report.limit = Some(create_publish::limit(&shape));
        for name in &o.engines {
            let sample = if name == "global" {
                o.global_sample
            } else {
                1.0
            };
            let outcome =
                with_engine!(
                    runtimes,
                    name.as_str(),
                    o.arbiters,
                    |e| create_publish::run(&e, shape, o.workers, sample)
                );
            match outcome {
                Ok(r) => {
                    report.create_publish.insert(name.clone(), r);
                }
                Err(e) => report.errors.push(format!("create_publish on {name}: {e}")),
            }
        }
    }
    if wants("backend_update") {
        // The global engine is serial by construction; it is left out of this workload.
        for name in o.engines.iter().filter(|n| *n != "global") {
            let outcome =
                with_engine!(
                    runtimes,
                    name.as_str(),
                    o.arbiters,
                    |e| backend_update::run(&e, shape, o.update_volumes, o.update_creates)
                );
            match outcome {
                Ok(r) => {
                    report.backend_update.insert(name.clone(), r);
                }
                Err(e) => report.errors.push(format!("backend_update on {name}: {e}")),
            }
        }
    }
}

/// The throughput workload: create_publish with calls of no time on every setting of
/// [`throughput::SETTINGS`], the actors on that many arbiters and the baselines on that many
/// workers (the global engine is left out: serial by construction).
fn run_throughput(runtimes: &Runtimes, o: &Options, report: &mut Report) {
    let shape = throughput::shape(Shape::from_options(o), o.throughput_volumes);
    for n in throughput::SETTINGS {
        for name in o.engines.iter().filter(|n| *n != "global") {
            let outcome: EngineResult<Throughput> =
                with_engine!(runtimes, name.as_str(), n, |e| throughput::run(&e, shape));
            match outcome {
                Ok(r) => {
                    report.throughput.insert((n, name.clone()), r);
                }
                Err(e) => report
                    .errors
                    .push(format!("throughput on {name} with {n} arbiter(s): {e}")),
            }
        }
    }
}

/// With `--arbiters N` (N >= 2): ordered_rwlock and actors again on one thread (the whole
/// in-process set and the scale children), so that the N-arbiter figures are compared with one
/// arbiter's of the same build in the same process.
fn run_one_arbiter(runtimes: &Runtimes, o: &Options) -> Report {
    let one = Options {
        arbiters: 1,
        engines: o
            .engines
            .iter()
            .filter(|n| *n != "global")
            .cloned()
            .collect(),
        ..o.clone()
    };
    let mut report = Report::default();
    run_in_process(runtimes, &one, &mut report);
    if one.workloads.iter().any(|w| w == "scale") {
        run_scale(&one, &mut report);
    }
    report
}

/// Scale of one engine in this (child) process; prints one JSON line.
fn scale_child(o: &Options, engine: &str) -> ExitCode {
    let outcome: EngineResult<Scale> = Runtimes::new(&[o.arbiters])
        .map_err(|e| EngineError(format!("cannot start a runtime: {e}")))
        .and_then(|runtimes| {
            with_engine!(runtimes, engine, o.arbiters, |e| scale::run(
                &e,
                o.scale_volumes,
                o.backends
            ))
        });
    match outcome.and_then(|s| {
        serde_json::to_string(&s).map_err(|e| EngineError(format!("cannot encode: {e}")))
    }) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("scale on {engine}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Scale of every engine but the global one, each in a fresh child process.
fn run_scale(o: &Options, report: &mut Report) {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            report
                .errors
                .push(format!("scale: cannot find own executable: {e}"));
            return;
        }
    };
    for name in o.engines.iter().filter(|n| *n != "global") {
        let output = Command::new(&exe)
            .args(["--scale-child", name])
            .args(["--scale-volumes", &o.scale_volumes.to_string()])
            .args(["--backends", &o.backends.to_string()])
            .args(["--arbiters", &o.arbiters.to_string()])
            .output();
        let parsed = match output {
            Ok(out) if out.status.success() => serde_json::from_slice::<Scale>(&out.stdout)
                .map_err(|e| format!("unreadable child output: {e}")),
            Ok(out) => Err(String::from_utf8_lossy(&out.stderr).trim().to_owned()),
            Err(e) => Err(format!("cannot start child: {e}")),
        };
        match parsed {
            Ok(s) => {
                report.scale.insert(name.clone(), s);
            }
            Err(e) => report.errors.push(format!("scale on {name}: {e}")),
        }
    }
}

fn main() -> ExitCode {
    let options = match args::parse(std::env::args().skip(1)) {
        Ok(Parsed::Run(o)) => o,
        Ok(Parsed::Help) => {
            print!("{}", args::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("lockbench: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(engine) = &options.scale_child {
        return scale_child(&options, engine);
    }
    let mut report = Report {
        load: (stats::load_average(), None),
        ..Report::default()
    };
    let mut workers = vec![options.arbiters];
    if options.workloads.iter().any(|w| w == "throughput") {
        workers.extend(throughput::SETTINGS);
    }
    let runtimes = match Runtimes::new(&workers) {
        Ok(runtimes) => runtimes,
        Err(e) => {
            eprintln!("lockbench: cannot start a runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    run_in_process(&runtimes, &options, &mut report);
    if options.workloads.iter().any(|w| w == "scale") {
        run_scale(&options, &mut report);
    }
    if options.arbiters >= 2 {
        let one = run_one_arbiter(&runtimes, &options);
        report.errors.extend(
            one.errors
                .iter()
                .map(|e| format!("(one-arbiter comparison) {e}")),
        );
        report.one_arbiter = Some(Box::new(one));
    }
    if options.workloads.iter().any(|w| w == "throughput") {
        run_throughput(&runtimes, &options, &mut report);
    }
    report.load.1 = stats::load_average();
    if options.json {
        println!("{}", report.to_json(&options));
    } else {
        print!("{}", report.to_table(&options));
    }
    if report.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
