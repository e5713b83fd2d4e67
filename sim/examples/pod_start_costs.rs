//! What a pod on a process node costs, beside the same figures for a pod on a simulated node
//! measured in the same run (the baseline: the cluster's own bookkeeping, with no process
//! started). Needs root and iproute2, like the process nodes.
//!
//! - creation → Running of one host-image pod (`busybox`, `sleep`), median and worst of
//!   `ROUNDS` pods created one after the other (target ≤ 1 s);
//! - creation → Running of the last of `BATCH` such pods created at once (target ≤ 20 s on the
//!   machine's 2 cores);
//! - memory per idle pod sandbox, with the `BATCH` pods running (target ≤ 5 MiB): the
//!   proportional set size of the processes in each pod's network namespace, the growth of
//!   this process's resident set (API server, store and agent) per pod, and the growth of the
//!   kernel's unreclaimable slab per pod (namespaces, veths, the sandbox's mounts; the machine
//!   is shared, so this line also carries the neighbours' noise); beside them, what the kernel
//!   charges to each pod's memory cgroup (its processes' user and kernel memory).
//!
//! `cargo run -p cinder-sim --example pod_start_costs` prints one line per figure, each with
//! PASS or MISS against its target.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use cinder_sim::agent::RUNTIME_LABEL;
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

const ROUNDS: usize = 10;
const BATCH: usize = 50;
const MIB: f64 = 1024.0 * 1024.0;

fn pod(name: &str, runtime: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {RUNTIME_LABEL: runtime},
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "idle", "image": "busybox", "command": ["sleep", "3600"]}],
        }
    }))
    .expect("a pod")
}

fn phase(cluster: &EmbeddedCluster, name: &str) -> String {
    cluster
        .store()
        .get("", "pods", "default", name)
        .and_then(|p| {
            p.pointer("/status/phase")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_default()
}

/// Waits (polling the store every 2 ms) until every pod of `names` is Running; the time since
/// `since`. Exits the program when that takes more than five minutes.
async fn all_running(cluster: &EmbeddedCluster, names: &[String], since: Instant) -> Duration {
    let mut left: HashSet<&String> = names.iter().collect();
    while !left.is_empty() {
        left.retain(|name| phase(cluster, name) != "Running");
        if since.elapsed() > Duration::from_secs(300) {
            eprintln!(
                "pod_start_costs: {} pods not Running after 5 minutes",
                left.len()
            );
            std::process::exit(1);
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    since.elapsed()
}

/// Creation → Running of `ROUNDS` single pods, one after the other (each deleted after).
async fn singles(cluster: &EmbeddedCluster, pods: &Api<Pod>, runtime: &str) -> Vec<Duration> {
    let mut out = Vec::new();
    for round in 0..ROUNDS {
        let name = format!("{runtime}-single-{round}");
        let start = Instant::now();
        pods.create(&PostParams::default(), &pod(&name, runtime))
            .await
            .expect("pod created");
        out.push(all_running(cluster, std::slice::from_ref(&name), start).await);
        let now = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        pods.delete(&name, &now).await.expect("pod deleted");
    }
    out.sort();
    out
}

/// Creation → Running of the last of `BATCH` pods created at once.
async fn batch(cluster: &EmbeddedCluster, pods: &Api<Pod>, runtime: &str) -> Duration {
    let names: Vec<String> = (0..BATCH).map(|i| format!("{runtime}-batch-{i}")).collect();
    let start = Instant::now();
    let creates = names.iter().map(|name| {
        let pods = pods.clone();
        let object = pod(name, runtime);
        async move { pods.create(&PostParams::default(), &object).await }
    });
    for created in futures::future::join_all(creates).await {
        created.expect("pod created");
    }
    all_running(cluster, &names, start).await
}

/// A field of /proc/meminfo or /proc/self/status, in bytes (the files say kB).
fn kib_field(file: &str, field: &str) -> f64 {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            let rest = l.strip_prefix(field)?.strip_prefix(':')?;
            rest.split_whitespace().next()?.parse::<f64>().ok()
        })
        .map_or(0.0, |kib| kib * 1024.0)
}

fn rss() -> f64 {
    kib_field("/proc/self/status", "VmRSS")
}

fn slab() -> f64 {
    kib_field("/proc/meminfo", "SUnreclaim")
}

/// The summed proportional set size of every process in the network namespaces of the agent's
/// instance (the pods' processes), and how many namespaces there are.
fn pods_pss(cluster: &EmbeddedCluster) -> (f64, usize) {
    use std::os::unix::fs::MetadataExt;
    let Some(agent) = cluster.agent() else {
        return (0.0, 0);
    };
    let inodes: HashSet<u64> = agent
        .network()
        .leftover_netns()
        .iter()
        .filter_map(|n| std::fs::metadata(format!("/run/netns/{n}")).ok())
        .map(|m| m.ino())
        .collect();
    let mut total = 0.0;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let path = entry.path();
        let in_pod =
            std::fs::metadata(path.join("ns/net")).is_ok_and(|m| inodes.contains(&m.ino()));
        if in_pod {
            total += kib_field(&path.join("smaps_rollup").to_string_lossy(), "Pss");
        }
    }
    (total, inodes.len())
}

/// The memory the kernel charges to the pods' cgroups (`memory.usage_in_bytes` on v1,
/// `memory.current` on v2), summed, and how many pod cgroups there are.
fn pods_cgroup_memory(cluster: &EmbeddedCluster) -> (f64, usize) {
    let Some(root) = cluster.agent().and_then(|a| a.cgroup_dir()) else {
        return (0.0, 0);
    };
    let mut total = 0.0;
    let mut pods = 0;
    for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let dir = entry.path();
        let read = |file: &str| {
            std::fs::read_to_string(dir.join(file))
                .ok()
                .and_then(|t| t.trim().parse::<f64>().ok())
        };
        if let Some(bytes) = read("memory.usage_in_bytes").or_else(|| read("memory.current")) {
            total += bytes;
            pods += 1;
        }
    }
    (total, pods)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn verdict(ok: bool) -> &'static str {
    if ok { "PASS" } else { "MISS" }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("pod_start_costs: process nodes need root (network and mount namespaces)");
        std::process::exit(1);
    }
    let mut config = ClusterConfig::default();
    config.controllers.nodes.count = 1;
    config.controllers.nodes.process = 1;
    let cluster = match EmbeddedCluster::start(config).await {
        Ok(cluster) => cluster,
        Err(error) => {
            eprintln!("pod_start_costs: {error}");
            std::process::exit(1);
        }
    };
    let pods: Api<Pod> = Api::namespaced(cluster.client().await, "default");

    let sim_single = singles(&cluster, &pods, "simulated").await;
    let proc_single = singles(&cluster, &pods, "process").await;
    // Settle: the deleted single pods' sandboxes are gone before the memory is read.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let (rss0, slab0) = (rss(), slab());
    let sim_batch = batch(&cluster, &pods, "simulated").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (rss1, slab1) = (rss(), slab());
    let proc_batch = batch(&cluster, &pods, "process").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (rss2, slab2) = (rss(), slab());
    let (pss, sandboxes) = pods_pss(&cluster);
    let (charged, charged_pods) = pods_cgroup_memory(&cluster);

    let n = BATCH as f64;
    let sim_rss = (rss1 - rss0) / n;
    let proc_rss = (rss2 - rss1) / n;
    let proc_slab = (slab2 - slab1) / n;
    let sim_slab = (slab1 - slab0) / n;
    let per_pod_pss = pss / sandboxes.max(1) as f64;
    let per_sandbox = per_pod_pss + (proc_rss - sim_rss).max(0.0) + proc_slab.max(0.0);

    let median = |v: &[Duration]| v[v.len() / 2];
    let worst = |v: &[Duration]| v[v.len() - 1];
    println!(
        "one pod, creation → Running        process {:>7.0} ms median, {:>7.0} ms worst of {ROUNDS}   simulated {:>5.0} ms median   ratio {:.1}   target ≤ 1000 ms: {}",
        ms(median(&proc_single)),
        ms(worst(&proc_single)),
        ms(median(&sim_single)),
        median(&proc_single).as_secs_f64() / median(&sim_single).as_secs_f64(),
        verdict(worst(&proc_single) <= Duration::from_secs(1)),
    );
    println!(
        "{BATCH} pods at once, creation → all Running   process {:>7.0} ms   simulated {:>5.0} ms   ratio {:.1}   target ≤ 20000 ms: {}",
        ms(proc_batch),
        ms(sim_batch),
        proc_batch.as_secs_f64() / sim_batch.as_secs_f64(),
        verdict(proc_batch <= Duration::from_secs(20)),
    );
    println!(
        "memory per idle pod sandbox        {:>6.2} MiB   target ≤ 5 MiB: {}",
        per_sandbox / MIB,
        verdict(per_sandbox <= 5.0 * MIB),
    );
    println!(
        "  the pod's processes (PSS)        {:>6.2} MiB   ({sandboxes} sandboxes)",
        per_pod_pss / MIB
    );
    println!(
        "  charged to the pod's cgroup      {:>6.2} MiB   ({charged_pods} pod cgroups; user and kernel memory of its processes)",
        charged / charged_pods.max(1) as f64 / MIB
    );
    println!(
        "  this process's RSS per pod       {:>6.2} MiB process   {:>6.2} MiB simulated (baseline; the difference is the agent's)",
        proc_rss / MIB,
        sim_rss / MIB
    );
    println!(
        "  kernel unreclaimable slab / pod  {:>6.2} MiB process   {:>6.2} MiB simulated (baseline; shared machine: noisy)",
        proc_slab / MIB,
        sim_slab / MIB
    );
    cluster.shutdown().await;
}
