//! The run: clusters, shared fixtures, replicas, the N Cinders, the wait for Ready, the steady
//! window, and the figures.

use crate::args::Args;
use crate::measure::{
    OPERATOR_USER_AGENT, Requests, by_operator, is_write, quantile, requests_between,
    watches_opened,
};
use crate::report::{ReplicaFigures, Report};
use anyhow::{Context as _, bail};
use chrono::Utc;
use cinder_e2e::bench_cluster::{
    create_bench_cinder, prepare_management, ready_count, scaled_controllers,
};
use cinder_e2e::operator_replica::{Replica, ReplicaOptions};
use cinder_e2e::target_helpers::register_with;
use cinder_operator::context::ACTOR_THREAD_NAME as ACTOR_THREAD;
use cinder_sim::controllers::config::ControllersConfig;
use cinder_sim::faults::RateLimit;
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use futures::{StreamExt, TryStreamExt};
use kube::Client;
use std::time::{Duration, Instant};

/// Creates in flight at once while the fleet is created.
const CREATE_PARALLELISM: usize = 16;

/// The longest chain of simulated delays one Cinder waits through: the store validates, the
/// MariaDB cluster and then its Database/User/Grant become Ready, the db-sync Job runs, the
/// Deployments roll out (in parallel with each other).
pub fn delay_chain(c: &ControllersConfig) -> Duration {
    c.secret_stores.switch.delay
        + c.mariadb.switch.delay * 2
        + c.jobs.switch.delay
        + c.deployments.switch.delay
}

/// Cinders whose pods one simulated node holds (its 3.8 cpus and 15 GiB against a Cinder's
/// default requests: about 0.75 cpu and 1.5 GiB for the API, scheduler and two volume
/// services), with room for a roll-out's surge.
const CINDERS_PER_NODE: usize = 3;

/// Nodes per cluster: the default three, or enough for the busiest cluster's pods (a target's
/// Cinders, or the management cluster's db-sync Job pods).
fn node_count(args: &Args) -> usize {
    let per_cluster = args.cinders as usize / (args.targets as usize).max(1);
    let default = ControllersConfig::default().nodes.count;
    default.max(per_cluster.div_ceil(CINDERS_PER_NODE) + 1)
}

/// The simulated controllers' resync period in the benchmark's clusters.
const SIMULATOR_RESYNC: Duration = Duration::from_secs(300);

fn cluster_config(args: &Args) -> ClusterConfig {
    let capacity = (args.cinders as usize * 600).max(200_000);
    let mut controllers = scaled_controllers(args.delay_scale);
    controllers.nodes.count = node_count(args);
    // Nothing edits the simulated controllers' config behind the handle's back here, so their
    // resync backstop (every controller re-reading every object) only costs the simulator CPU.
    controllers.resync = SIMULATOR_RESYNC;
    ClusterConfig {
        controllers,
        request_log_capacity: capacity,
        // Only the operator's requests are counted; the simulated controllers' are not kept.
        request_log_user_agent: Some(OPERATOR_USER_AGENT.to_string()),
        faults: cinder_sim::FaultConfig {
            rate_limit: args.api_qps.map(|qps| RateLimit {
                qps,
                burst: args.api_burst,
                user_agent: Some(OPERATOR_USER_AGENT.to_string()),
            }),
            ..Default::default()
        },
        ..ClusterConfig::default()
    }
}

fn cinder_name(i: u32) -> String {
    format!("c{i:05}")
}

/// Cinder `i` (see [`create_bench_cinder`]), on target `i mod targets` when there are targets.
async fn create_one(client: &Client, i: u32, args: &Args) -> anyhow::Result<()> {
    let target = (args.targets > 0).then(|| format!("t{}", i % args.targets));
    create_bench_cinder(
        client,
        &cinder_name(i),
        args.backends,
        target.as_deref(),
        "fleet-db",
        serde_json::json!({}),
    )
    .await
}

/// Prints the operator's most frequent requests, and its writes, of the window `[from, to)`
/// (`label`: steady, settling), by verb and resource, with the answer's status.
fn print_window(
    label: &str,
    records: &[Vec<cinder_sim::RequestRecord>],
    from: chrono::DateTime<Utc>,
    to: chrono::DateTime<Utc>,
) {
    let mut requests: std::collections::BTreeMap<(String, String, u16), u64> = Default::default();
    let mut writes: std::collections::BTreeMap<(String, String, u16), u64> = Default::default();
    for r in records.iter().flatten() {
        if !(by_operator(r) && r.time >= from && r.time < to) {
            continue;
        }
        let resource = if r.subresource.is_empty() {
            r.resource.clone()
        } else {
            format!("{}/{}", r.resource, r.subresource)
        };
        let key = (r.verb.clone(), resource, r.status);
        if cinder_sim::writes::is_mutating(&r.verb) {
            *writes.entry(key.clone()).or_default() += 1;
        }
        *requests.entry(key).or_default() += 1;
    }
    for (what, counts) in [("request", requests), ("write", writes)] {
        let mut counts: Vec<_> = counts.into_iter().collect();
        counts.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        for ((verb, resource, status), n) in counts.iter().take(15) {
            eprintln!("fleetbench: {label} {what}s: {n} x {verb} {resource} -> {status}");
        }
    }
}

/// Runs the benchmark and returns its figures.
pub async fn run(args: &Args) -> anyhow::Result<Report> {
    if !(args.delay_scale.is_finite() && args.delay_scale >= 0.0) {
        bail!("--delay-scale must be a number of at least 0");
    }
    let config = cluster_config(args);
    let chain = delay_chain(&config.controllers);
    let management = EmbeddedCluster::start(config.clone())
        .await
        .context("cannot start the management cluster")?;
    let client = management.client().await;
    prepare_management(&client).await?;
    let mut targets = Vec::new();
    for t in 0..args.targets {
        let target = EmbeddedCluster::start(config.clone())
            .await
            .context("cannot start a target cluster")?;
        register_with(&client, &format!("t{t}"), target.kubeconfig_yaml()).await?;
        targets.push(target);
    }

    let options = ReplicaOptions {
        kube_qps: args.kube_qps,
        kube_burst: args.kube_burst,
        max_concurrent_reconciles: args.max_concurrent_reconciles,
        shards: args.shards,
    };
    let mut replicas = Vec::new();
    for _ in 0..args.replicas {
        let r = Replica::start(management.kubeconfig_path(), &options).await?;
        r.wait_ready(Duration::from_secs(120)).await?;
        replicas.push(r);
    }
    if let Some(shards) = args.shards {
        balanced(&replicas, shards).await?;
    }
    let rss_before: Vec<u64> = replicas
        .iter()
        .map(|r| r.rss_bytes())
        .collect::<Result<_, _>>()?;
    let cpu_before: Vec<Duration> = replicas.iter().map(|r| r.cpu()).collect::<Result<_, _>>()?;
    let actors_before: Vec<Duration> = replicas
        .iter()
        .map(|r| r.thread_cpu(ACTOR_THREAD))
        .collect::<Result<_, _>>()?;

    let started_at = Utc::now();
    let clock = Instant::now();
    futures::stream::iter(0..args.cinders)
        .map(|i| create_one(&client, i, args))
        .buffer_unordered(CREATE_PARALLELISM)
        .try_collect::<Vec<()>>()
        .await
        .context("creating the fleet")?;
    let created_ms = clock.elapsed().as_millis() as u64;
    let deadline = clock + Duration::from_secs(args.timeout_secs);
    let mut last_ready = usize::MAX;
    loop {
        let ready = ready_count(&client).await.unwrap_or(0);
        if ready != last_ready {
            eprintln!(
                "fleetbench: {ready}/{} Ready at {} ms",
                args.cinders,
                clock.elapsed().as_millis()
            );
            last_ready = ready;
        }
        if ready >= args.cinders as usize {
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "{ready} of {} Cinders Ready after {} s",
                args.cinders,
                args.timeout_secs
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let makespan = clock.elapsed();
    let ready_at = Utc::now();
    let rss_after: Vec<u64> = replicas
        .iter()
        .map(|r| r.rss_bytes())
        .collect::<Result<_, _>>()?;
    let cpu_after: Vec<Duration> = replicas.iter().map(|r| r.cpu()).collect::<Result<_, _>>()?;
    let actors_after: Vec<Duration> = replicas
        .iter()
        .map(|r| r.thread_cpu(ACTOR_THREAD))
        .collect::<Result<_, _>>()?;
    let mut durations = Vec::new();
    let mut passes = 0;
    let mut step_time: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    let mut outcomes: std::collections::BTreeMap<String, u64> = Default::default();
    for r in &replicas {
        for p in r.pipelines().await? {
            passes += p.passes;
            durations.extend(p.history.iter().map(|h| h.duration_ms));
            for h in &p.history {
                *outcomes.entry(h.outcome.clone()).or_default() += 1;
                for s in &h.steps {
                    let e = step_time.entry(s.step.clone()).or_default();
                    e.0 += s.duration_ms;
                    e.1 += 1;
                }
            }
        }
    }
    let mut slowest: Vec<_> = step_time.into_iter().collect();
    slowest.sort_by_key(|(_, (ms, _))| std::cmp::Reverse(*ms));
    for (step, (ms, n)) in slowest.iter().take(8) {
        eprintln!("fleetbench: step {step}: {ms} ms in {n} runs (recorded passes)");
    }
    let mut common: Vec<_> = outcomes.into_iter().collect();
    common.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    for (outcome, n) in common.iter().take(8) {
        eprintln!("fleetbench: {n} recorded passes ended: {outcome}");
    }

    let clusters: Vec<&EmbeddedCluster> = std::iter::once(&management).chain(&targets).collect();
    let steady_start = settled(&clusters, args).await;
    let settle_ms = (steady_start - ready_at).num_milliseconds().max(0) as u64;
    eprintln!(
        "fleetbench: settled {settle_ms} ms after Ready; steady window of {} s",
        args.steady_secs
    );
    tokio::time::sleep(Duration::from_secs(args.steady_secs)).await;
    let steady_end = Utc::now();
    let records: Vec<_> = clusters.iter().map(|c| c.requests()).collect();
    print_window("settling", &records, ready_at, steady_start);
    print_window("steady", &records, steady_start, steady_end);
    let first: Requests = requests_between(&records, started_at, ready_at);
    let steady: Requests = requests_between(&records, steady_start, steady_end);
    // The capacity bound: the busiest cluster's operator requests at the rate that cluster takes
    // them (the operator's client limit, or the API server's limit when lower).
    let busiest = records
        .iter()
        .map(|log| {
            log.iter()
                .filter(|r| by_operator(r) && r.time >= started_at && r.time < ready_at)
                .count()
        })
        .max()
        .unwrap_or(0);
    // Every replica has its own client bucket; unsharded replicas share the same work, so only
    // sharded ones add capacity.
    let buckets = if args.shards.is_some() {
        f64::from(args.replicas)
    } else {
        1.0
    };
    let client_rate = f64::from(args.kube_qps) * buckets;
    let rate = args.api_qps.map_or(client_rate, |api| api.min(client_rate));
    let capacity_ms = (busiest as f64 / rate * 1000.0) as u64;
    let watches = watches_opened(&records);

    let figures: Vec<ReplicaFigures> = (0..replicas.len())
        .map(|i| ReplicaFigures {
            rss_before: rss_before[i],
            rss_after: rss_after[i],
            cpu_ms: cpu_after[i].saturating_sub(cpu_before[i]).as_millis() as u64,
            actor_thread_cpu_ms: actors_after[i].saturating_sub(actors_before[i]).as_millis()
                as u64,
        })
        .collect();
    for r in replicas {
        r.stop(Duration::from_secs(40)).await;
    }
    management.shutdown().await;
    for t in targets {
        t.shutdown().await;
    }
    Ok(Report {
        cinders: args.cinders,
        backends: args.backends,
        targets: args.targets,
        replicas: args.replicas,
        shards: args.shards,
        delay_scale: args.delay_scale,
        api_qps: args.api_qps,
        created_ms,
        makespan_ms: makespan.as_millis() as u64,
        chain_ms: chain.as_millis() as u64,
        capacity_ms,
        first,
        steady,
        steady_secs: args.steady_secs,
        settle_ms,
        replica_figures: figures,
        passes,
        pass_p50_ms: quantile(&mut durations, 0.5),
        pass_p99_ms: quantile(&mut durations, 0.99),
        watches_open: watches,
    })
}

/// When the fleet settled (every Cinder is Ready when this is called): the first moment the
/// operator has carried out no write on any cluster for `--settle-quiet-secs`, or
/// `--settle-timeout-secs` after the call when that never happens.
async fn settled(clusters: &[&EmbeddedCluster], args: &Args) -> chrono::DateTime<Utc> {
    let quiet = chrono::Duration::seconds(args.settle_quiet_secs as i64);
    let deadline = Instant::now() + Duration::from_secs(args.settle_timeout_secs);
    loop {
        let now = Utc::now();
        let last_write = clusters
            .iter()
            .flat_map(|c| c.requests())
            .filter(|r| by_operator(r) && is_write(r))
            .map(|r| r.time)
            .max();
        if last_write.is_none_or(|t| now - t >= quiet) {
            return now;
        }
        if Instant::now() > deadline {
            eprintln!(
                "fleetbench: the operator still writes {} s after Ready; the steady window starts anyway",
                args.settle_timeout_secs
            );
            return now;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Waits until the replicas hold every shard between them, each at least one when there are
/// enough shards (so the fleet is not created into one replica that then gives shards back).
async fn balanced(replicas: &[Replica], shards: u32) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let mut held = Vec::new();
        for r in replicas {
            held.push(r.held_shards().await?);
        }
        let total: usize = held.iter().map(Vec::len).sum();
        let each = held.iter().all(|h| !h.is_empty()) || replicas.len() > shards as usize;
        if total == shards as usize && each {
            eprintln!("fleetbench: shards held per replica: {held:?}");
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the replicas did not share the {shards} shards within 120 s: {held:?}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
