//! The run: the cluster and its shared fixtures, the operator process, the churn until the
//! passes are reached or the time is up, the samples, and the report.

use crate::args::Args;
use crate::churn::Churn;
use crate::curve::{Sample, table, verdict, verdict_line};
use anyhow::{Context as _, bail};
use cinder_e2e::NS;
use cinder_e2e::bench_cluster::{prepare_management, scaled_controllers};
use cinder_e2e::operator_replica::{Replica, ReplicaOptions};
use cinder_operator::crd::Cinder;
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use kube::Api;
use kube::api::ListParams;
use std::time::{Duration, Instant};

/// The step-duration histogram whose counts are the step runs; the most frequent step runs
/// once per pass that reaches the steps.
const STEP_COUNT: &str = "cinder_operator_reconcile_duration_seconds_count";

/// The passes the operator ran, from its `/metrics` text: the highest step-run count (the first
/// step of the lane runs in every pass that reaches the steps).
pub fn passes_from_metrics(text: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(STEP_COUNT))
        .filter_map(|l| l.rsplit(' ').next()?.trim().parse::<f64>().ok())
        .map(|v| v as u64)
        .max()
        .unwrap_or(0)
}

async fn cinder_count(client: &kube::Client) -> anyhow::Result<usize> {
    Ok(Api::<Cinder>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await?
        .items
        .len())
}

async fn sample(
    replica: &Replica,
    client: &kube::Client,
    passes: u64,
    clock: Instant,
) -> anyhow::Result<Sample> {
    Ok(Sample {
        passes,
        seconds: clock.elapsed().as_secs_f64(),
        rss_bytes: replica.rss_bytes()?,
        cinders: cinder_count(client).await?,
        pipelines: replica.pipelines().await?.len(),
    })
}

/// Runs the soak and returns the report text.
pub async fn run(args: &Args) -> anyhow::Result<String> {
    if !(args.delay_scale.is_finite() && args.delay_scale >= 0.0) {
        bail!("--delay-scale must be a number of at least 0");
    }
    let config = ClusterConfig {
        controllers: scaled_controllers(args.delay_scale),
        request_log_capacity: 10_000,
        ..ClusterConfig::default()
    };
    let cluster = EmbeddedCluster::start(config)
        .await
        .context("cannot start the embedded cluster")?;
    let client = cluster.client().await;
    prepare_management(&client).await?;
    let options = ReplicaOptions {
        kube_qps: args.kube_qps,
        kube_burst: args.kube_burst,
        max_concurrent_reconciles: args.max_concurrent_reconciles,
        shards: None,
    };
    let replica = Replica::start(cluster.kubeconfig_path(), &options).await?;
    replica.wait_ready(Duration::from_secs(120)).await?;

    let clock = Instant::now();
    let deadline = clock + Duration::from_secs(args.max_minutes * 60);
    let mut samples = vec![sample(&replica, &client, 0, clock).await?];
    let mut churn = Churn::start(&client, args.cinders, args.backends).await?;
    let mut next_sample = args.sample_every;
    let mut tick = 0;
    let mut passes = 0;
    let mut last_read = Instant::now();
    let mut timed_out = false;
    while passes < args.passes {
        if Instant::now() > deadline {
            timed_out = true;
            break;
        }
        churn.act(tick).await;
        tick += 1;
        tokio::time::sleep(Duration::from_millis(args.churn_ms)).await;
        if last_read.elapsed() < Duration::from_secs(1) {
            continue;
        }
        last_read = Instant::now();
        passes = passes_from_metrics(&replica.metrics_text().await?);
        if passes >= next_sample {
            // A sample the API server fails to answer for is taken at the next reading.
            match sample(&replica, &client, passes, clock).await {
                Ok(s) => {
                    eprintln!(
                        "soakbench: {} passes, {:.0} s, {:.1} MiB",
                        s.passes,
                        s.seconds,
                        s.rss_bytes as f64 / 1048576.0
                    );
                    samples.push(s);
                    next_sample = passes - passes % args.sample_every + args.sample_every;
                }
                Err(e) => eprintln!("soakbench: sampling at {passes} passes failed: {e:#}"),
            }
        }
    }
    match sample(&replica, &client, passes, clock).await {
        Ok(last) if samples.last().map(|s| s.passes) != Some(last.passes) => samples.push(last),
        Ok(_) => {}
        Err(e) => eprintln!("soakbench: the last sample failed: {e:#}"),
    }
    replica.stop(Duration::from_secs(40)).await;
    cluster.shutdown().await;

    let seconds = clock.elapsed().as_secs_f64();
    let mut out = format!(
        "soakbench: {} Cinders x {} backends, delay scale {}, {} passes in {:.0} s ({:.1} passes/s); churn: {} spec updates, {} rotations, {} re-creations, {} failed actions\n",
        args.cinders,
        args.backends,
        args.delay_scale,
        passes,
        seconds,
        passes as f64 / seconds.max(1e-9),
        churn.updated,
        churn.rotated,
        churn.recreated,
        churn.failed
    );
    if timed_out {
        out.push_str(&format!(
            "soakbench: stopped after {} minutes, short of the {} passes asked\n",
            args.max_minutes, args.passes
        ));
    }
    out.push_str(&table(&samples));
    let warmup = passes * u64::from(args.warmup_percent) / 100;
    match verdict(&samples, warmup) {
        Some(v) => out.push_str(&format!(
            "{} (warm-up: the first {warmup} passes)\n",
            verdict_line(&v)
        )),
        None => out.push_str("no verdict: no sample after warm-up\n"),
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_are_the_most_frequent_step_count() {
        let text = "# TYPE cinder_operator_reconcile_duration_seconds histogram\n\
            cinder_operator_reconcile_duration_seconds_sum{sub_reconciler=\"Secrets\"} 12.5\n\
            cinder_operator_reconcile_duration_seconds_count{sub_reconciler=\"Secrets\"} 812\n\
            cinder_operator_reconcile_duration_seconds_count{sub_reconciler=\"Database\"} 640\n\
            cinder_operator_reconcile_errors_total{sub_reconciler=\"Secrets\"} 3\n";
        assert_eq!(passes_from_metrics(text), 812);
        assert_eq!(passes_from_metrics("# EOF\n"), 0);
    }
}
