//! Command-line flags of `lockbench`, parsed by hand (the package has no clap): workload sizes,
//! which engines and workloads to run, `--quick` for small sizes, `--json` for one JSON object.

use std::time::Duration;

pub const USAGE: &str = "\
lockbench: the actor lock coordinator against a global mutex and ordered per-resource rwlocks

usage: lockbench [--json] [--quick] [flags]

  --json                     print one JSON object with every figure instead of the table
  --quick                    small sizes (a smoke run of a few seconds)
  --engines LIST             comma-separated: global,ordered_rwlock,actors (default: all)
  --workloads LIST           comma-separated: overhead,create_publish,backend_update,scale,throughput
                             (default: all)
  --overhead-txns N          overhead: uncontended transactions (default 100000)
  --volumes N                create-publish: volumes (default 1000)
  --backends N               backends / devices (default 10)
  --nodes N                  nodes (default 50)
  --call-ms MS               duration of one device call (default 5)
  --device-concurrency N     concurrent calls a device accepts (default 20)
  --snapshot-percent P       share of volumes that also take a snapshot (default 20)
  --global-sample F          fraction of volumes the global engine runs, scaled linearly (default 0.1)
  --workers N                concurrent volume workflows, 0 = one task per volume (default 0)
  --update-volumes N         backend-update: existing volumes updated by nested locks (default 1000)
  --update-creates N         backend-update: creates running meanwhile (default 1000)
  --scale-volumes N          scale: resident volumes (default 100000)
  --throughput-volumes N     throughput: create_publish volumes with calls of no time, on 1, 2
                             and 4 arbiters / workers (default 10000)
  --arbiters N               actors: arbiters (threads) the resource actors are spread over, the
                             coordinator on its own; baselines: with N >= 2 a multi-thread
                             runtime of N workers; 1 = everything on one thread (default 1).
                             With N >= 2 the run also measures ordered_rwlock and actors on one
                             thread, so the N-arbiter figures are compared with one arbiter's
  --help                     this text
";

/// Every knob of a run.
#[derive(Clone, Debug)]
pub struct Options {
    pub json: bool,
    pub quick: bool,
    pub engines: Vec<String>,
    pub workloads: Vec<String>,
    pub overhead_txns: usize,
    pub volumes: usize,
    pub backends: usize,
    pub nodes: usize,
    pub call: Duration,
    pub device_concurrency: usize,
    pub snapshot_percent: usize,
    pub global_sample: f64,
    pub workers: usize,
    pub update_volumes: usize,
    pub update_creates: usize,
    pub scale_volumes: usize,
    pub throughput_volumes: usize,
    pub arbiters: usize,
    /// Internal: run only the scale measurement of this engine and print one JSON line.
    pub scale_child: Option<String>,
}

pub const ENGINES: [&str; 3] = ["global", "ordered_rwlock", "actors"];
pub const WORKLOADS: [&str; 5] = [
    "overhead",
    "create_publish",
    "backend_update",
    "scale",
    "throughput",
];

impl Default for Options {
    fn default() -> Self {
        Options {
            json: false,
            quick: false,
            engines: ENGINES.iter().map(|s| s.to_string()).collect(),
            workloads: WORKLOADS.iter().map(|s| s.to_string()).collect(),
            overhead_txns: 100_000,
            volumes: 1000,
            backends: 10,
            nodes: 50,
            call: Duration::from_millis(5),
            device_concurrency: 20,
            snapshot_percent: 20,
            global_sample: 0.1,
            workers: 0,
            update_volumes: 1000,
            update_creates: 1000,
            scale_volumes: 100_000,
            throughput_volumes: 10_000,
            arbiters: 1,
            scale_child: None,
        }
    }
}

/// What the command line asks for.
pub enum Parsed {
    Run(Box<Options>),
    Help,
}

fn number<T: std::str::FromStr>(flag: &str, value: Option<String>) -> Result<T, String> {
    let value = value.ok_or_else(|| format!("{flag} needs a value"))?;
    value
        .parse()
        .map_err(|_| format!("{flag}: {value:?} is not a valid number"))
}

fn list(flag: &str, value: Option<String>, allowed: &[&str]) -> Result<Vec<String>, String> {
    let value = value.ok_or_else(|| format!("{flag} needs a value"))?;
    let items: Vec<String> = value
        .split(',')
        .map(|s| s.trim().replace('-', "_"))
        .collect();
    if let Some(bad) = items.iter().find(|i| !allowed.contains(&i.as_str())) {
        return Err(format!(
            "{flag}: unknown {bad:?} (known: {})",
            allowed.join(",")
        ));
    }
    Ok(items)
}

/// Parse the arguments after the program name.
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Parsed, String> {
    let mut args = args.into_iter();
    let mut o = Options::default();
    let mut explicit: Vec<&'static str> = Vec::new();
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--json" => o.json = true,
            "--quick" => o.quick = true,
            "--help" | "-h" => return Ok(Parsed::Help),
            "--engines" => o.engines = list(&flag, args.next(), &ENGINES)?,
            "--workloads" => o.workloads = list(&flag, args.next(), &WORKLOADS)?,
            "--overhead-txns" => {
                o.overhead_txns = number(&flag, args.next())?;
                explicit.push("overhead_txns");
            }
            "--volumes" => {
                o.volumes = number(&flag, args.next())?;
                explicit.push("volumes");
            }
            "--backends" => o.backends = number(&flag, args.next())?,
            "--nodes" => {
                o.nodes = number(&flag, args.next())?;
                explicit.push("nodes");
            }
            "--call-ms" => o.call = Duration::from_millis(number(&flag, args.next())?),
            "--device-concurrency" => o.device_concurrency = number(&flag, args.next())?,
            "--snapshot-percent" => o.snapshot_percent = number(&flag, args.next())?,
            "--global-sample" => o.global_sample = number(&flag, args.next())?,
            "--workers" => o.workers = number(&flag, args.next())?,
            "--arbiters" => {
                o.arbiters = number(&flag, args.next())?;
                if o.arbiters == 0 {
                    return Err("--arbiters must be at least 1".to_string());
                }
            }
            "--update-volumes" => {
                o.update_volumes = number(&flag, args.next())?;
                explicit.push("update_volumes");
            }
            "--update-creates" => {
                o.update_creates = number(&flag, args.next())?;
                explicit.push("update_creates");
            }
            "--scale-volumes" => {
                o.scale_volumes = number(&flag, args.next())?;
                explicit.push("scale_volumes");
            }
            "--throughput-volumes" => {
                o.throughput_volumes = number(&flag, args.next())?;
                explicit.push("throughput_volumes");
            }
            "--scale-child" => o.scale_child = Some(list(&flag, args.next(), &ENGINES)?.join("")),
            other => return Err(format!("unknown flag {other:?} (see --help)")),
        }
    }
    if o.quick {
        let small: [(&str, &mut usize, usize); 7] = [
            ("overhead_txns", &mut o.overhead_txns, 2000),
            ("volumes", &mut o.volumes, 200),
            ("nodes", &mut o.nodes, 10),
            ("update_volumes", &mut o.update_volumes, 200),
            ("update_creates", &mut o.update_creates, 200),
            ("scale_volumes", &mut o.scale_volumes, 5000),
            ("throughput_volumes", &mut o.throughput_volumes, 1000),
        ];
        for (name, slot, value) in small {
            if !explicit.contains(&name) {
                *slot = value;
            }
        }
    }
    if o.backends == 0 || o.nodes == 0 || o.device_concurrency == 0 {
        return Err("--backends, --nodes and --device-concurrency must be at least 1".to_owned());
    }
    if !(o.global_sample > 0.0 && o.global_sample <= 1.0) {
        return Err("--global-sample must be in (0, 1]".to_owned());
    }
    if o.snapshot_percent > 100 {
        return Err("--snapshot-percent must be at most 100".to_owned());
    }
    Ok(Parsed::Run(Box::new(o)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Options {
        match parse(args.iter().map(|s| s.to_string())) {
            Ok(Parsed::Run(o)) => *o,
            Ok(Parsed::Help) => panic!("help"),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn quick_shrinks_sizes_but_keeps_explicit_ones() {
        let o = run(&["--quick", "--volumes", "300"]);
        assert_eq!(o.volumes, 300);
        assert_eq!(o.overhead_txns, 2000);
        assert_eq!(o.scale_volumes, 5000);
    }

    #[test]
    fn defaults_are_the_benchmark_sizes() {
        let o = run(&[]);
        assert_eq!((o.volumes, o.backends, o.nodes), (1000, 10, 50));
        assert_eq!(o.overhead_txns, 100_000);
        assert_eq!(o.scale_volumes, 100_000);
        assert_eq!(o.engines.len(), 3);
    }

    #[test]
    fn rejects_unknown_flags_and_engines() {
        assert!(parse(["--bogus".to_string()]).is_err());
        assert!(parse(["--engines".to_string(), "mutex".to_string()]).is_err());
        assert!(parse(["--volumes".to_string(), "x".to_string()]).is_err());
    }
}
