//! `cachebench`: the operator's resident memory with many objects in the cluster that are not
//! its own. One embedded cluster in this process holds one Cinder with an NFS backend (in
//! `openstack`); the operator runs as a child process of this binary (`cachebench operator run
//! ...`) three times, each until the Cinder is Ready and the operator has finished a pass of
//! it, then for `--settle-secs`, when its VmRSS is read:
//!
//! 1. `selected, empty`: the watches as shipped (the kinds the operator creates selected by the
//!    managed-by label, credential Secrets by the credential label), no other objects;
//! 2. `selected`: the same, with `--objects` unrelated Secrets and as many ConfigMaps of
//!    `--size` bytes each in namespace `unrelated`;
//! 3. `unselected`: `--unselected-watches` (every object of those kinds cached, the baseline).
//!
//! Prints each figure, the growth the unrelated objects caused, and the ratio unselected /
//! selected.

use anyhow::{Context as _, bail};
use cinder_e2e::bench_cluster::{
    create_bench_cinder, prepare_management, ready_count, scaled_controllers,
};
use cinder_e2e::create_namespace;
use cinder_e2e::operator_replica::{Replica, ReplicaOptions, bench_main};
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use clap::Parser;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The namespace of the objects that are not the operator's.
const UNRELATED: &str = "unrelated";

#[derive(Debug, Parser)]
#[command(
    name = "cachebench",
    about = "The operator's memory with unrelated Secrets and ConfigMaps in the cluster"
)]
struct Args {
    /// Unrelated Secrets, and as many ConfigMaps.
    #[arg(long, default_value_t = 1000)]
    objects: u32,
    /// Bytes of data in each unrelated object.
    #[arg(long, default_value_t = 4096)]
    size: usize,
    /// Seconds between the operator's pass and the memory reading.
    #[arg(long, default_value_t = 5)]
    settle_secs: u64,
    /// Seconds a run may take to bring the Cinder to Ready.
    #[arg(long, default_value_t = 300)]
    timeout_secs: u64,
}

fn main() -> ExitCode {
    bench_main("cachebench", || async {
        let args = Args::parse();
        run(&args).await
    })
}

/// Creates `count` Secrets and as many ConfigMaps of `size` bytes in [`UNRELATED`].
async fn create_unrelated(client: &Client, count: u32, size: usize) -> anyhow::Result<()> {
    create_namespace(client, UNRELATED).await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), UNRELATED);
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), UNRELATED);
    let filler = "x".repeat(size);
    futures::stream::iter(0..count)
        .map(|i| {
            let (secrets, maps, filler) = (secrets.clone(), maps.clone(), filler.clone());
            async move {
                let meta = |kind: &str| ObjectMeta {
                    name: Some(format!("{kind}-{i:05}")),
                    labels: Some([("app".to_string(), "someone-else".to_string())].into()),
                    ..Default::default()
                };
                let secret = Secret {
                    metadata: meta("secret"),
                    data: Some(
                        [(
                            "tls.crt".to_string(),
                            ByteString(filler.clone().into_bytes()),
                        )]
                        .into(),
                    ),
                    ..Default::default()
                };
                secrets.create(&PostParams::default(), &secret).await?;
                let map = ConfigMap {
                    metadata: meta("config"),
                    data: Some([("settings".to_string(), filler)].into()),
                    ..Default::default()
                };
                maps.create(&PostParams::default(), &map).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await
        .context("creating the unrelated objects")?;
    Ok(())
}

/// Runs the operator with `extra` arguments until the Cinder is Ready and a pass of it
/// finished, lets it settle, and answers its resident memory in bytes.
async fn measure(
    cluster: &EmbeddedCluster,
    client: &Client,
    extra: &[&str],
    args: &Args,
) -> anyhow::Result<u64> {
    let options = ReplicaOptions {
        kube_qps: 1000.0,
        kube_burst: 2000,
        max_concurrent_reconciles: 8,
        shards: None,
    };
    let replica = Replica::start_with(cluster.kubeconfig_path(), &options, extra).await?;
    let deadline = Instant::now() + Duration::from_secs(args.timeout_secs);
    replica
        .wait_ready(Duration::from_secs(args.timeout_secs))
        .await?;
    loop {
        let passed = replica
            .pipelines()
            .await
            .map(|p| p.iter().any(|r| r.passes > 0 && !r.in_pass))
            .unwrap_or(false);
        if passed && ready_count(client).await.unwrap_or(0) >= 1 {
            break;
        }
        if Instant::now() > deadline {
            bail!("the Cinder was not Ready within {} s", args.timeout_secs);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    tokio::time::sleep(Duration::from_secs(args.settle_secs)).await;
    let rss = replica.rss_bytes()?;
    replica.stop(Duration::from_secs(10)).await;
    Ok(rss)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

async fn run(args: &Args) -> anyhow::Result<String> {
    let config = ClusterConfig {
        controllers: scaled_controllers(0.1),
        ..ClusterConfig::default()
    };
    let cluster = EmbeddedCluster::start(config)
        .await
        .context("cannot start the embedded cluster")?;
    let client = cluster.client().await;
    prepare_management(&client).await?;
    create_bench_cinder(&client, "c0", 1, None, "bench-db", serde_json::json!({})).await?;

    eprintln!("cachebench: selected watches, no unrelated objects");
    let empty = measure(&cluster, &client, &[], args).await?;
    eprintln!(
        "cachebench: creating {} unrelated Secrets and {} ConfigMaps of {} bytes",
        args.objects, args.objects, args.size
    );
    create_unrelated(&client, args.objects, args.size).await?;
    eprintln!("cachebench: selected watches");
    let selected = measure(&cluster, &client, &[], args).await?;
    eprintln!("cachebench: unselected watches (--unselected-watches)");
    let unselected = measure(&cluster, &client, &["--unselected-watches"], args).await?;
    cluster.shutdown().await;

    let growth = |rss: u64| mib(rss) - mib(empty);
    let mut out = String::new();
    out.push_str(&format!(
        "unrelated objects: {} Secrets + {} ConfigMaps, {} bytes each\n",
        args.objects, args.objects, args.size
    ));
    out.push_str(&format!(
        "operator RSS, selected watches, no unrelated objects: {:8.1} MiB\n",
        mib(empty)
    ));
    out.push_str(&format!(
        "operator RSS, selected watches:                       {:8.1} MiB ({:+.1} MiB)\n",
        mib(selected),
        growth(selected)
    ));
    out.push_str(&format!(
        "operator RSS, unselected watches (baseline):          {:8.1} MiB ({:+.1} MiB)\n",
        mib(unselected),
        growth(unselected)
    ));
    out.push_str(&format!(
        "ratio unselected / selected: {:.2}\n",
        unselected as f64 / selected.max(1) as f64
    ));
    Ok(out)
}
