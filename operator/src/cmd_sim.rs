//! The `cinder-operator sim` subcommand: runs the embedded cluster alone (with `--nodes`
//! simulated nodes, `--process-nodes` nodes whose pods run as processes and the fault injection its `--fault-*` flags ask for), writes a kubeconfig for it, prints
//! `export KUBECONFIG=<path>` and the address, and serves until Ctrl-C or SIGTERM.

use crate::cli::SimArgs;
use cinder_sim::{ClusterConfig, EmbeddedCluster, ErrorRule, FaultConfig};
use std::path::PathBuf;
use std::process::ExitCode;

/// Runs the subcommand; exit 0 after a clean shutdown, 1 with one line on stderr on failure.
pub(crate) fn run(args: &SimArgs) -> ExitCode {
    let runtime = match crate::cli::async_runtime("sim") {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let faults = match fault_config(args) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("cinder-operator sim: {e}");
            return ExitCode::from(1);
        }
    };
    let images = match image_map(args) {
        Ok(images) => images,
        Err(e) => {
            eprintln!("cinder-operator sim: {e}");
            return ExitCode::from(1);
        }
    };
    let kubeconfig = args
        .kubeconfig
        .clone()
        .or_else(|| Some(default_kubeconfig_path()));
    match runtime.block_on(serve(
        args.port,
        kubeconfig,
        (args.nodes, args.process_nodes, images),
        faults,
        args.authorization,
    )) {
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

const VERBS: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

/// The fault injection settings the `--fault-*` flags ask for.
fn fault_config(args: &SimArgs) -> Result<FaultConfig, String> {
    for (flag, p) in [
        ("--fault-error-rate", args.fault_error_rate),
        ("--fault-watch-drop", args.fault_watch_drop),
    ] {
        if !(0.0..=1.0).contains(&p) {
            return Err(format!("{flag} must be between 0 and 1 (got {p})"));
        }
    }
    if let Some(v) = args
        .fault_verbs
        .iter()
        .find(|v| !VERBS.contains(&v.as_str()))
    {
        return Err(format!(
            "--fault-verbs: unknown verb {v:?} (known: {})",
            VERBS.join(", ")
        ));
    }
    let rule = |verb: Option<&str>| ErrorRule {
        probability: args.fault_error_rate,
        ..ErrorRule::always(verb, None, args.fault_error_code)
    };
    let errors = match (args.fault_error_rate > 0.0, args.fault_verbs.is_empty()) {
        (false, _) => Vec::new(),
        (true, true) => vec![rule(None)],
        (true, false) => args.fault_verbs.iter().map(|v| rule(Some(v))).collect(),
    };
    Ok(FaultConfig {
        latency: args.fault_latency.unwrap_or_default(),
        errors,
        watch_drop_probability: args.fault_watch_drop,
        seed: args.fault_seed,
        ..FaultConfig::default()
    })
}

/// The image map `--image-map` names (the default one without it).
fn image_map(args: &SimArgs) -> Result<cinder_sim::agent::ImageMap, String> {
    let Some(path) = &args.image_map else {
        return Ok(cinder_sim::agent::ImageMap::default());
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--image-map {}: {e}", path.display()))?;
    cinder_sim::agent::ImageMap::from_yaml(&text)
        .map_err(|e| format!("--image-map {}: {e}", path.display()))
}

async fn serve(
    port: u16,
    kubeconfig: Option<PathBuf>,
    (nodes, process_nodes, images): (usize, usize, cinder_sim::agent::ImageMap),
    faults: FaultConfig,
    authorization: cinder_sim::auth::AuthorizationMode,
) -> Result<(), cinder_sim::SimError> {
    let mut config = ClusterConfig {
        port,
        kubeconfig_path: kubeconfig,
        authorization,
        ..ClusterConfig::default()
    };
    config.controllers.nodes.count = nodes;
    config.controllers.nodes.process = process_nodes;
    config.process_runtime.images = images;
    // Process pods have real addresses: their Services get ClusterIPs that lead to them.
    config.service_proxy = process_nodes > 0;
    let cluster = EmbeddedCluster::start(config).await?;
    // faults start once the cluster is up: its own start (CRD fixtures) is not faulted
    cluster.faults().set(faults);
    println!("export KUBECONFIG={}", cluster.kubeconfig_path().display());
    println!(
        "embedded cluster (simulator) listening on {}",
        cluster.url()
    );
    if authorization == cinder_sim::auth::AuthorizationMode::Rbac {
        println!(
            "RBAC enforced: the kubeconfig's user may do anything; `kubectl create token <sa>` gives a ServiceAccount's token"
        );
    }
    println!("press Ctrl-C to stop");
    crate::cli::wait_for_signal().await;
    cluster.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn sim_args(args: &[&str]) -> SimArgs {
        let cli = Cli::try_parse_from([&["cinder-operator", "sim"], args].concat()).unwrap();
        match cli.command {
            Command::Sim(a) => a,
            _ => panic!("not the sim subcommand"),
        }
    }

    #[test]
    fn fault_flags_become_settings() {
        let a = sim_args(&[
            "--fault-error-rate",
            "0.1",
            "--fault-verbs",
            "create,update,patch",
            "--fault-latency",
            "50ms",
            "--fault-watch-drop",
            "0.02",
            "--fault-seed",
            "7",
        ]);
        let f = fault_config(&a).unwrap();
        assert_eq!(f.latency, std::time::Duration::from_millis(50));
        assert_eq!(f.errors.len(), 3);
        assert_eq!(f.errors[1].verb.as_deref(), Some("update"));
        assert_eq!((f.errors[0].code, f.errors[0].probability), (500, 0.1));
        assert_eq!((f.watch_drop_probability, f.seed), (0.02, Some(7)));
        assert!(fault_config(&sim_args(&[])).unwrap().errors.is_empty());
        assert_eq!(
            sim_args(&["--authorization", "rbac"]).authorization,
            cinder_sim::auth::AuthorizationMode::Rbac
        );
        assert_eq!(
            sim_args(&[]).authorization,
            cinder_sim::auth::AuthorizationMode::AlwaysAllow
        );
    }

    #[test]
    fn process_nodes_and_the_image_map_are_chosen_by_flags() {
        assert_eq!(sim_args(&[]).process_nodes, 0);
        assert_eq!(sim_args(&["--process-nodes", "2"]).process_nodes, 2);
        assert!(
            image_map(&sim_args(&[]))
                .unwrap()
                .resolve("busybox")
                .is_ok()
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("images.yaml");
        std::fs::write(
            &path,
            "images: [{repository: quay.io/x/op, program: /bin/true}]",
        )
        .unwrap();
        let path_text = path.display().to_string();
        let map = image_map(&sim_args(&["--image-map", &path_text])).unwrap();
        assert!(map.resolve("quay.io/x/op:v1").is_ok());
        assert!(map.resolve("busybox").is_err());
        std::fs::write(&path, "images: [{repository: a}]").unwrap();
        let error = image_map(&sim_args(&["--image-map", &path_text])).unwrap_err();
        assert!(error.starts_with("--image-map "), "{error}");
    }

    #[test]
    fn nodes_default_to_three() {
        assert_eq!(sim_args(&[]).nodes, 3);
        assert_eq!(sim_args(&["--nodes", "5"]).nodes, 5);
        assert!(Cli::try_parse_from(["cinder-operator", "sim", "--nodes", "-1"]).is_err());
    }

    #[test]
    fn bad_fault_flags_are_refused() {
        assert!(fault_config(&sim_args(&["--fault-error-rate", "1.5"])).is_err());
        assert!(fault_config(&sim_args(&["--fault-verbs", "crate"])).is_err());
        let cli = Cli::try_parse_from(["cinder-operator", "sim", "--fault-latency", "soon"]);
        assert!(cli.is_err());
        let cli = Cli::try_parse_from(["cinder-operator", "sim", "--fault-error-code", "200"]);
        assert!(cli.is_err());
        let cli = Cli::try_parse_from(["cinder-operator", "sim", "--authorization", "abac"]);
        assert!(cli.is_err());
    }
}
