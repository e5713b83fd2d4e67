//! `soakbench`: the operator binary as its own process against an embedded cluster, 20 Cinders
//! (each with an NFS backend) churned round after round (a spec update, a credential rotation, a
//! deletion and re-creation, in turn), and the operator's resident memory sampled after every
//! round. Prints the curve and the growth after warm-up; asserts nothing about time or memory.
//!
//! `cargo run --release -p cinder-e2e --bin soakbench -- [ROUNDS] [CINDERS]` (defaults 200, 20;
//! each round touches every Cinder once, so 200 rounds of 20 Cinders is 4 000 changes and
//! about 10 000 passes).

use cinder_e2e::database_helpers::*;
use cinder_e2e::operator_process::OperatorProcess;
use cinder_e2e::*;
use cinder_operator::crd::Cinder;
use cinder_sim::EmbeddedCluster;
use kube::Api;
use kube::api::{Patch, PatchParams};
use std::time::{Duration, Instant};

fn arg(n: usize, default: usize) -> anyhow::Result<usize> {
    match std::env::args().nth(n) {
        None => Ok(default),
        Some(s) => s
            .parse()
            .map_err(|_| anyhow::anyhow!("argument {n} must be a count, got {s:?}")),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> std::process::ExitCode {
    match soak().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("soakbench: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}

async fn soak() -> anyhow::Result<()> {
    let rounds = arg(1, 200)?;
    let cinders = arg(2, 20)?;
    let logs = tempfile::tempdir()?;
    let kubeconfig = logs.path().join("kubeconfig");
    let mut config = HarnessConfig::default().cluster;
    config.kubeconfig_path = Some(kubeconfig.clone());
    config.request_log_capacity = 1_000;
    let cluster = EmbeddedCluster::start(config).await?;
    let client = cluster.client().await;
    install_crds(&client).await?;
    create_namespace(&client, NS).await?;
    quick_schema_jobs(&cluster)?;
    database_environment(&client, "soak").await?;
    let operator = OperatorProcess::start(&kubeconfig, "soak", NS, 15, logs.path())?;
    let names: Vec<String> = (0..cinders).map(|i| format!("soak{i}")).collect();
    for name in &names {
        create_cinder(&client, name, serde_json::json!({})).await?;
        create_nfs_backend(&client, &format!("{name}-nfs"), name).await?;
    }
    let api: Api<Cinder> = Api::namespaced(client.clone(), NS);
    let started = Instant::now();
    let mut samples: Vec<u64> = Vec::new();
    for round in 0..rounds {
        for (i, name) in names.iter().enumerate() {
            match (round + i) % 3 {
                0 => {
                    let patch = serde_json::json!({"spec": {"extraConfig": {"DEFAULT": {"soak_round": round.to_string()}}}});
                    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await?;
                }
                1 => {
                    put_secret(
                        &client,
                        "cinder-keystone",
                        &[("password", &format!("soak-{round}"))],
                    )
                    .await?;
                }
                _ => {
                    api.delete(name, &Default::default()).await?;
                    let gone = eventually("the Cinder is gone", || {
                        let api = api.clone();
                        async move { api.get_opt(name).await.ok()?.is_none().then_some(()) }
                    })
                    .await;
                    if gone.is_ok() {
                        create_cinder(&client, name, serde_json::json!({})).await?;
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let kib = operator
            .resident_kib()
            .ok_or_else(|| anyhow::anyhow!("the operator exited: {}", operator.log_tail(20)))?;
        samples.push(kib);
        if round % 10 == 0 || round + 1 == rounds {
            println!(
                "round {round:>5}  {:>7.1} s  operator RSS {:>8} KiB",
                started.elapsed().as_secs_f64(),
                kib
            );
        }
    }
    let warm = samples.len() / 5;
    let after_warm_up = samples.get(warm).copied().unwrap_or(0);
    let last = samples.last().copied().unwrap_or(0);
    let peak = samples.iter().copied().max().unwrap_or(0);
    println!(
        "{rounds} rounds x {cinders} Cinders in {:.1} s: RSS after warm-up (round {warm}) {after_warm_up} KiB, last {last} KiB, peak {peak} KiB, growth after warm-up {:+.1}%",
        started.elapsed().as_secs_f64(),
        (last as f64 - after_warm_up as f64) * 100.0 / (after_warm_up.max(1) as f64)
    );
    drop(operator);
    cluster.shutdown().await;
    Ok(())
}
