//! The command line of `fleetbench`.

use clap::Parser;

#[derive(Parser, Debug, Clone)]
#[command(
    name = "fleetbench",
    about = "Measures one operator (or R) converging a fleet of Cinders"
)]
pub struct Args {
    /// Cinders in the fleet.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub cinders: u32,
    /// NFS CinderBackends per Cinder.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=64))]
    pub backends: u32,
    /// Target clusters the Cinders are spread over (0: every Cinder on the management cluster).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=256))]
    pub targets: u32,
    /// Operator replicas (child processes).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub replicas: u32,
    /// The replicas' --shards (each replica then reconciles only the Cinders of the shard
    /// Leases it holds); unsharded when absent (two unsharded replicas both reconcile every
    /// Cinder).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub shards: Option<u32>,
    /// Multiplies every simulated controller delay (Job runs, roll-outs, readiness).
    #[arg(long, default_value_t = 1.0)]
    pub delay_scale: f64,
    /// The simulated API servers answer 429 beyond this many operator requests per second
    /// (each cluster on its own); none when absent.
    #[arg(long)]
    pub api_qps: Option<f64>,
    /// Burst of the simulated API servers' limit.
    #[arg(long, default_value_t = 50)]
    pub api_burst: u32,
    /// The operator's --kube-qps.
    #[arg(long, default_value_t = 20.0)]
    pub kube_qps: f32,
    /// The operator's --kube-burst.
    #[arg(long, default_value_t = 30)]
    pub kube_burst: u32,
    /// The operator's --max-concurrent-reconciles.
    #[arg(long, default_value_t = 8)]
    pub max_concurrent_reconciles: u16,
    /// Seconds of the steady window after the fleet settled.
    #[arg(long, default_value_t = 60)]
    pub steady_secs: u64,
    /// The fleet has settled once every Cinder is Ready and the operator has carried out no
    /// write for this many seconds (the status transitions and Events of the last Cinders to
    /// settle stay out of the steady window).
    #[arg(long, default_value_t = 10)]
    pub settle_quiet_secs: u64,
    /// Starts the steady window anyway when the fleet has not settled this many seconds after
    /// Ready (writes that never stop are then in the window, as they are steady).
    #[arg(long, default_value_t = 180)]
    pub settle_timeout_secs: u64,
    /// Gives up when the fleet is not Ready after this many seconds.
    #[arg(long, default_value_t = 900)]
    pub timeout_secs: u64,
    /// One JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}
