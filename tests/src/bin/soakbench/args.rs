//! The command line of `soakbench`.

use clap::Parser;

#[derive(Parser, Debug, Clone)]
#[command(
    name = "soakbench",
    about = "Churns Cinders through one operator process for thousands of passes and prints its resident memory over them"
)]
pub struct Args {
    /// Cinders alive at once (each churned in turn).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub cinders: u32,
    /// NFS CinderBackends per Cinder.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=8))]
    pub backends: u32,
    /// Stops once the operator has run this many passes.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub passes: u64,
    /// Stops after this many minutes even when fewer passes ran (the report says so).
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..=1440))]
    pub max_minutes: u64,
    /// Resident memory is sampled every this many passes.
    #[arg(long, default_value_t = 250, value_parser = clap::value_parser!(u64).range(1..))]
    pub sample_every: u64,
    /// The share of the passes (percent) counted as warm-up: the verdict compares the samples
    /// after it.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u8).range(0..=90))]
    pub warmup_percent: u8,
    /// Milliseconds between two churn actions (each acts on the next Cinder in turn).
    #[arg(long, default_value_t = 150)]
    pub churn_ms: u64,
    /// Multiplies every simulated controller delay (Job runs, roll-outs, readiness).
    #[arg(long, default_value_t = 0.05)]
    pub delay_scale: f64,
    /// The operator's --max-concurrent-reconciles.
    #[arg(long, default_value_t = 8)]
    pub max_concurrent_reconciles: u16,
    /// The operator's --kube-qps.
    #[arg(long, default_value_t = 200.0)]
    pub kube_qps: f32,
    /// The operator's --kube-burst.
    #[arg(long, default_value_t = 400)]
    pub kube_burst: u32,
}
