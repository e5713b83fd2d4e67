//! The command line of `cinder-operator`: the subcommands of design section 7. A command line
//! that does not parse exits with status 2 and one line on stderr (`--help` and `--version`
//! print in full).

use crate::telemetry::{LogFormat, TelemetryOptions};
use clap::error::ErrorKind;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};
use std::path::PathBuf;

/// The parsed command line.
#[derive(Debug)]
pub struct Cli {
    pub command: Command,
}

/// The clap definition behind [`Cli`] (kept apart so that [`Cli::parse`] can shorten errors).
#[derive(Debug, Parser)]
#[command(
    name = "cinder-operator",
    version = crate::metrics::VERSION_WITH_COMMIT,
    about = "Runs OpenStack Cinder on Kubernetes from three custom resources"
)]
struct Definition {
    #[command(subcommand)]
    command: Command,
}

impl CommandFactory for Cli {
    fn command() -> clap::Command {
        Definition::command()
    }

    fn command_for_update() -> clap::Command {
        Definition::command_for_update()
    }
}

impl FromArgMatches for Cli {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        Definition::from_arg_matches(matches).map(|d| Cli { command: d.command })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        self.command.update_from_arg_matches(matches)
    }
}

impl Parser for Cli {
    /// Parses `std::env::args_os()`; on a usage error prints its first line and exits 2.
    fn parse() -> Self {
        match Self::try_parse() {
            Ok(cli) => cli,
            Err(e) => exit_on(e),
        }
    }
}

/// Exits for a parse error: help and version print in full (status 0), a usage error as one
/// line on stderr (status 2).
fn exit_on(e: clap::Error) -> ! {
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit()
    }
    eprintln!("{}", one_line_error(&e));
    std::process::exit(2)
}

/// The first line of clap's message (`error: …`), pointing at `--help`.
pub fn one_line_error(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    let first = rendered
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("error: invalid command line");
    format!("cinder-operator: {first} (see --help)")
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the operator against a kubeconfig, the in-cluster config, or an embedded cluster.
    Run(Box<RunArgs>),
    /// Print the CustomResourceDefinitions as a YAML stream (or write one file per CRD).
    Crdgen(CrdgenArgs),
    /// Explain what Lock / NestedLock would do for a JSON document (a file path or `-`).
    LockPlan {
        /// Path of the JSON document, or `-` for standard input.
        file: String,
    },
    /// Run the embedded cluster alone and print a kubeconfig for it.
    #[cfg(feature = "embedded")]
    Sim(SimArgs),
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Start an embedded cluster, install the CRDs and the samples, and run against it.
    #[arg(long)]
    pub embedded: bool,
    /// Watch only this namespace (ClusterSecretStores are then unsupported).
    #[arg(long)]
    pub namespace: Option<String>,
    /// Take part in leader election on a Lease before reconciling.
    #[arg(long, conflicts_with = "shards")]
    pub leader_elect: bool,
    /// Split the Cinders over this many shards, each a Lease `cinder-operator-shard-<i>` in the
    /// operator's namespace; this replica reconciles only the Cinders of the shards it holds
    /// (at most ceil(shards / live replicas)). Without it the replica reconciles every Cinder.
    #[arg(long, value_name = "S", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub shards: Option<u32>,
    /// Address of the Prometheus endpoint (`/metrics`).
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub metrics_bind: String,
    /// Address of the probes (`/healthz`, `/readyz`).
    #[arg(long, default_value = "0.0.0.0:8081")]
    pub probe_bind: String,
    /// Serve `/metrics` over HTTPS, only to callers whose bearer token passes a TokenReview and
    /// who may `get` the non-resource URL `/metrics` (SubjectAccessReview).
    #[arg(long)]
    pub metrics_secure: bool,
    /// With --metrics-secure: the folder holding `tls.crt` and `tls.key` (reloaded when they
    /// change); without it a self-signed certificate is generated at start-up.
    #[arg(long, value_name = "DIR")]
    pub metrics_cert_dir: Option<PathBuf>,
    /// Address of the admin endpoint (`/actors`, `/transactions`, `/devices`, `/pipelines`, `/`);
    /// a non-loopback address needs --admin-auth.
    #[arg(long, default_value = "127.0.0.1:9000")]
    pub admin_bind: String,
    /// Admit to the admin endpoint only callers whose bearer token passes a TokenReview and who
    /// may use the verb `admin` on the non-resource URL `/admin` (SubjectAccessReview).
    #[arg(long)]
    pub admin_auth: bool,
    /// With --embedded: enforce RBAC on the embedded cluster, apply the RBAC manifests of
    /// --rbac-manifests, and run the operator with a token of this ServiceAccount
    /// (`NAMESPACE/NAME`, e.g. cinder-system/cinder-operator).
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = parse_service_account)]
    pub as_service_account: Option<(String, String)>,
    /// With --as-service-account: the folder of RBAC manifests applied first.
    #[arg(long, default_value = "deploy/rbac", value_name = "DIR")]
    pub rbac_manifests: PathBuf,
    /// With --embedded: the embedded cluster's port on 127.0.0.1 (0 chooses a free one).
    #[arg(long, default_value_t = 0)]
    pub sim_port: u16,
    /// With --embedded: where to write the embedded cluster's kubeconfig
    /// (default: cinder-operator-embedded.kubeconfig in the system temporary directory).
    #[arg(long)]
    pub kubeconfig_out: Option<PathBuf>,
    /// With --embedded: the folder of sample manifests applied after the CRDs.
    #[arg(long, default_value = "deploy/samples")]
    pub samples: PathBuf,
    /// With --embedded: run the real parts (needs root and tests/real-cinder/setup.sh): a
    /// process node running the real Cinder of each release, a real MariaDB behind the
    /// mariadb-operator fixture, a real RabbitMQ as the sample store's broker. Use it with
    /// `--samples tests/real-cinder/samples` (no NFS server here).
    #[arg(long, requires = "embedded")]
    pub real_cinder: bool,
    /// Duration, in seconds, of the leader-election Lease and of every device Lease (renewed every
    /// third of it while held).
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub lease_duration: u64,
    /// Format of the log lines on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Log level (`error`, `warn`, `info`, `debug`, `trace`) or a directive list such as
    /// `info,cinder_operator=debug`; RUST_LOG directives, when set, refine it [default: warn].
    #[arg(long, value_parser = parse_log_level)]
    pub log_level: Option<String>,
    /// Export OpenTelemetry traces over OTLP/gRPC to this endpoint (e.g. http://collector:4317).
    #[arg(long, value_parser = parse_otlp_endpoint)]
    pub otlp_endpoint: Option<String>,
    /// How many arbiters (one thread each) the lock coordinator spreads its resource actors over
    /// (1: the coordinator's own thread, which measured best; docs/performance.md).
    #[arg(long, default_value_t = crate::context::default_lock_arbiters(),
          value_parser = clap::value_parser!(u16).range(1..=256))]
    pub lock_arbiters: u16,
    /// Client-side request rate to each API server, sustained (requests per second).
    #[arg(long, default_value_t = 20.0, value_parser = parse_kube_qps)]
    pub kube_qps: f32,
    /// Client-side request burst to each API server.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub kube_burst: u32,
    /// How many Cinder passes may run at once (different Cinders; one Cinder is always serial).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_concurrent_reconciles: u16,
    /// Probe each Cinder's /healthcheck through the API server's Service proxy (needs
    /// `services/proxy` get) instead of GETting http://NAME-api.NAMESPACE.svc:8776 directly:
    /// for an operator running outside the cluster. Implied by --embedded.
    #[arg(long)]
    pub health_check_through_api_server: bool,
    /// Watch (and cache) every object of the kinds the operator creates, not only its own:
    /// the baseline of the memory benchmark `cachebench`, not for production.
    #[arg(long, hide = true)]
    pub unselected_watches: bool,
}

impl RunArgs {
    /// How the HealthCheck step reaches the API Services: through the API server when the
    /// operator runs outside the cluster (`--health-check-through-api-server`, `--embedded`).
    pub(crate) fn health_check_route(&self) -> crate::context::HealthCheckRoute {
        if self.embedded || self.health_check_through_api_server {
            crate::context::HealthCheckRoute::ApiServerProxy
        } else {
            crate::context::HealthCheckRoute::ClusterLocal
        }
    }

    /// The client-side limits `--kube-qps` / `--kube-burst` ask for.
    pub(crate) fn client_limits(&self) -> crate::kube_client::ClientLimits {
        crate::kube_client::ClientLimits {
            qps: self.kube_qps,
            burst: self.kube_burst,
            ..Default::default()
        }
    }

    /// The logging and tracing options of the command line.
    pub(crate) fn telemetry(&self) -> TelemetryOptions {
        TelemetryOptions {
            log_format: self.log_format,
            log_level: self.log_level.clone(),
            otlp_endpoint: self.otlp_endpoint.clone(),
        }
    }
}

/// `--kube-qps`: a positive, finite rate of at most 100 000 per second.
fn parse_kube_qps(s: &str) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(q) if q.is_finite() && q > 0.0 && q <= 100_000.0 => Ok(q),
        _ => Err(format!(
            "`{s}` is not a rate in requests per second (a number above 0, at most 100000)"
        )),
    }
}

/// `--as-service-account`: `NAMESPACE/NAME`.
fn parse_service_account(s: &str) -> Result<(String, String), String> {
    match s.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((ns.to_string(), name.to_string()))
        }
        _ => Err(format!("expected NAMESPACE/NAME, got {s:?}")),
    }
}

fn parse_log_level(s: &str) -> Result<String, String> {
    crate::telemetry::log_filter(Some(s), None)
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

fn parse_otlp_endpoint(s: &str) -> Result<String, String> {
    crate::telemetry::check_endpoint(s)
        .map(|()| s.to_string())
        .map_err(|e| e.to_string())
}

#[derive(Debug, clap::Args)]
pub struct CrdgenArgs {
    /// Write one file per CRD plus kustomization.yaml into this directory instead of printing.
    #[arg(long)]
    pub out_dir: Option<PathBuf>,
}

#[cfg(feature = "embedded")]
#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// Port to listen on (127.0.0.1); 0 chooses a free one.
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Where to write the kubeconfig.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// How many simulated nodes register (sim-worker-1 ...); 0 leaves every pod Pending.
    #[arg(long, default_value_t = cinder_sim::controllers::config::DEFAULT_NODES, value_name = "N")]
    pub nodes: usize,
    /// How many nodes of runtime `process` register (process-worker-1 ...): their pods' containers
    /// run as local processes in namespace sandboxes, and a service proxy makes their Services'
    /// ClusterIPs reach them (needs root; see docs/embedded-cluster.md).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub process_nodes: usize,
    /// The process runtime's image map (YAML: `images: [{repository|exact, tag, root,
    /// defaultCommand}]`); without it busybox, alpine, debian, ubuntu and python run host tools.
    #[arg(long, value_name = "FILE")]
    pub image_map: Option<PathBuf>,
    /// Fault injection: the share of requests (0 to 1) answered with an error Status
    /// (of --fault-verbs, with --fault-error-code).
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    pub fault_error_rate: f64,
    /// Fault injection: the HTTP status of injected errors (409 Conflict, 429 TooManyRequests,
    /// 500 InternalError, ...).
    #[arg(long, default_value_t = 500, value_name = "CODE", value_parser = clap::value_parser!(u16).range(400..=599))]
    pub fault_error_code: u16,
    /// Fault injection: the verbs --fault-error-rate applies to, comma-separated (get, list,
    /// watch, create, update, patch, delete, deletecollection); all when not given.
    #[arg(long, value_delimiter = ',', value_name = "VERBS")]
    pub fault_verbs: Vec<String>,
    /// Fault injection: latency added to every request (e.g. 50ms, 1s).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub fault_latency: Option<std::time::Duration>,
    /// Fault injection: the probability (0 to 1), per event sent, that a watch is closed.
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    pub fault_watch_drop: f64,
    /// Fault injection: the seed of the random draws (the same seed repeats the faults).
    #[arg(long, value_name = "N")]
    pub fault_seed: Option<u64>,
    /// How requests are authorized: `always-allow` (every request), or `rbac` (the cluster's
    /// Roles, ClusterRoles and bindings decide; the kubeconfig's administrator may do anything).
    #[arg(long, default_value = "always-allow", value_name = "MODE")]
    pub authorization: cinder_sim::auth::AuthorizationMode,
}

/// Returns on Ctrl-C or SIGTERM (the stop signals of `run` and `sim`).
#[cfg(unix)]
pub(crate) async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Returns on Ctrl-C.
#[cfg(not(unix))]
pub(crate) async fn wait_for_signal() {
    let _ = tokio::signal::ctrl_c().await;
}

/// The multi-threaded async runtime a long-running subcommand runs on; when it cannot start,
/// one line on stderr names the subcommand and the exit status is 1.
pub(crate) fn async_runtime(
    subcommand: &str,
) -> Result<tokio::runtime::Runtime, std::process::ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("cinder-operator {subcommand}: cannot start the async runtime: {e}");
            std::process::ExitCode::from(1)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn run_args(args: &[&str]) -> Result<RunArgs, clap::Error> {
        let cli = Cli::try_parse_from([&["cinder-operator", "run"], args].concat())?;
        match cli.command {
            Command::Run(a) => Ok(*a),
            _ => unreachable!("the run subcommand parses into RunArgs"),
        }
    }

    #[test]
    fn client_limits_and_concurrency_default_to_controller_runtimes_and_parse() {
        let a = run_args(&[]).unwrap();
        assert_eq!(
            (a.kube_qps, a.kube_burst, a.max_concurrent_reconciles),
            (20.0, 30, 8)
        );
        let a = run_args(&[
            "--kube-qps",
            "2.5",
            "--kube-burst",
            "5",
            "--max-concurrent-reconciles",
            "64",
        ])
        .unwrap();
        assert_eq!(a.client_limits().qps, 2.5);
        assert_eq!(a.client_limits().burst, 5);
        assert_eq!(a.max_concurrent_reconciles, 64);
    }

    #[test]
    fn shards_parse_and_exclude_leader_election() {
        assert_eq!(run_args(&[]).unwrap().shards, None);
        assert_eq!(run_args(&["--shards", "4"]).unwrap().shards, Some(4));
        for bad in [
            &["--shards", "0"][..],
            &["--shards", "x"],
            &["--shards", "2", "--leader-elect"],
        ] {
            let line = one_line_error(&run_args(bad).unwrap_err());
            assert!(!line.contains('\n'), "{line}");
            assert!(
                line.contains("--shards") || line.contains("--leader-elect"),
                "{line}"
            );
        }
    }

    #[test]
    fn bad_client_limits_are_refused_in_one_line() {
        for bad in [
            &["--kube-qps", "0"][..],
            &["--kube-qps", "NaN"],
            &["--kube-burst", "0"],
            &["--max-concurrent-reconciles", "0"],
        ] {
            let e = run_args(bad).unwrap_err();
            let line = one_line_error(&e);
            assert!(!line.contains('\n'), "{line}");
            assert!(line.contains(bad[0]), "{line}");
        }
    }
}
