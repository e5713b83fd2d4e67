//! The command line of `cinder-operator`: the subcommands of design section 7.

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "cinder-operator",
    version,
    about = "Runs OpenStack Cinder on Kubernetes from three custom resources"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the operator against a kubeconfig, the in-cluster config, or an embedded cluster.
    Run(RunArgs),
    /// Print the CustomResourceDefinitions as a YAML stream (or write one file per CRD).
    Crdgen(CrdgenArgs),
    /// Explain what Lock / NestedLock would do for a JSON document (a file path or `-`).
    LockPlan {
        /// Path of the JSON document, or `-` for standard input.
        file: String,
    },
    /// Run the embedded cluster alone and print a kubeconfig for it.
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
    #[arg(long)]
    pub leader_elect: bool,
}

#[derive(Debug, clap::Args)]
pub struct CrdgenArgs {
    /// Write one file per CRD plus kustomization.yaml into this directory instead of printing.
    #[arg(long)]
    pub out_dir: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// Port to listen on (127.0.0.1); 0 chooses a free one.
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Where to write the kubeconfig.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}
