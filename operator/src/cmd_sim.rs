//! The `cinder-operator sim` subcommand: runs the embedded cluster alone, writes a kubeconfig for
//! it, prints `export KUBECONFIG=<path>` and the address, and serves until Ctrl-C or SIGTERM.

use crate::cli::{Cli, Command};
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use std::path::PathBuf;
use std::process::ExitCode;

/// Runs the subcommand; exit 0 after a clean shutdown, 1 with one line on stderr on failure.
pub fn run(cli: &Cli) -> ExitCode {
    let Command::Sim(args) = &cli.command else {
        eprintln!("cinder-operator sim: called for another subcommand");
        return ExitCode::from(1);
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cinder-operator sim: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let kubeconfig = args
        .kubeconfig
        .clone()
        .or_else(|| Some(default_kubeconfig_path()));
    match runtime.block_on(serve(args.port, kubeconfig)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cinder-operator sim: {e}");
            ExitCode::from(1)
        }
    }
}

/// `cinder-sim-kubeconfig` in the temporary directory (kept after exit, so kubectl can be
/// pointed at a restarted cluster with the same path).
fn default_kubeconfig_path() -> PathBuf {
    std::env::temp_dir().join("cinder-sim-kubeconfig")
}

async fn serve(port: u16, kubeconfig: Option<PathBuf>) -> Result<(), cinder_sim::SimError> {
    let config = ClusterConfig {
        port,
        kubeconfig_path: kubeconfig,
        ..ClusterConfig::default()
    };
    let cluster = EmbeddedCluster::start(config).await?;
    println!("export KUBECONFIG={}", cluster.kubeconfig_path().display());
    println!(
        "embedded cluster (simulator) listening on {}",
        cluster.url()
    );
    println!("press Ctrl-C to stop");
    crate::cli::wait_for_signal().await;
    cluster.shutdown().await;
    Ok(())
}
