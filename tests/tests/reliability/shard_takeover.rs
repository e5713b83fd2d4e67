//! Two replicas sharded on Leases (`run --shards 4`, 5 s Leases) converge a fleet; one is
//! SIGKILLed mid-convergence. The other takes over the dead replica's shard Leases within one
//! Lease duration of their expiry, the fleet converges, and the simulator's write record shows
//! nothing reconciled by two replicas at once: every write of the operator to an object of a
//! Cinder (the Cinder, its children, satellites, Database/User/Grant) came from the replica that
//! held that Cinder's shard Lease when the server received and answered it, and the change
//! windows of the two replicas on one shard never overlap ([`check_exclusion`]).

use anyhow::Context as _;
use cinder_e2e::bench_cluster::{create_bench_cinder, prepare_management, ready_count};
use cinder_e2e::operator_process::OperatorProcess;
use cinder_e2e::write_checks::{Guard, Writer, check_exclusion};
use cinder_e2e::*;
use cinder_operator::shards::shard_of;
use cinder_sim::{EmbeddedCluster, WriteRecord};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

const SHARDS: u32 = 4;
const LEASE_SECONDS: u64 = 5;
/// Cinders per shard (names are picked until every shard has this many).
const PER_SHARD: usize = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replicas_shards_are_taken_over_and_no_cinder_is_reconciled_twice() {
    let kubeconfig =
        std::env::temp_dir().join(format!("cinder-shards-{}.kubeconfig", std::process::id()));
    let mut config = HarnessConfig::default().cluster;
    config.record_writes = true;
    config.request_log_capacity = 400_000;
    config.kubeconfig_path = Some(kubeconfig.clone());
    let cluster = EmbeddedCluster::start(config).await.unwrap();
    let logs = tempfile::tempdir().unwrap();
    let outcome = scenario(&cluster, &kubeconfig, logs.path()).await;
    cluster.shutdown().await;
    let _ = std::fs::remove_file(&kubeconfig);
    if let Err(e) = outcome {
        panic!("{e:#}");
    }
}

/// Names `sh<i>` until every shard has [`PER_SHARD`] of them: name -> shard.
fn fleet() -> BTreeMap<String, u32> {
    let mut per: BTreeMap<u32, usize> = BTreeMap::new();
    let mut names = BTreeMap::new();
    for i in 0.. {
        let name = format!("sh{i}");
        let shard = shard_of(NS, &name, SHARDS);
        let n = per.entry(shard).or_default();
        if *n < PER_SHARD {
            *n += 1;
            names.insert(name, shard);
        }
        if per.len() == SHARDS as usize && per.values().all(|n| *n == PER_SHARD) {
            break;
        }
    }
    names
}

/// The shard Leases: shard -> (holder, renewTime, acquireTime).
type Holders = BTreeMap<
    u32,
    (
        String,
        chrono::DateTime<chrono::Utc>,
        chrono::DateTime<chrono::Utc>,
    ),
>;

async fn shard_leases(client: &kube::Client) -> Holders {
    let Ok(list) = Api::<Lease>::namespaced(client.clone(), NS)
        .list(&Default::default())
        .await
    else {
        return Holders::new();
    };
    let mut out = Holders::new();
    for lease in list.items {
        let name = lease.metadata.name.unwrap_or_default();
        let Some(i) = name
            .strip_prefix("cinder-operator-shard-")
            .and_then(|i| i.parse::<u32>().ok())
        else {
            continue;
        };
        let spec = lease.spec.unwrap_or_default();
        let time = |t: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime>| {
            t.and_then(|t| chrono::DateTime::from_timestamp_micros(t.0.as_microsecond()))
                .unwrap_or_default()
        };
        if let Some(holder) = spec.holder_identity.filter(|h| !h.is_empty()) {
            out.insert(i, (holder, time(spec.renew_time), time(spec.acquire_time)));
        }
    }
    out
}

fn held_by(holders: &Holders, pod: &str) -> BTreeSet<u32> {
    let prefix = format!("{pod}-");
    holders
        .iter()
        .filter(|(_, (h, _, _))| h.starts_with(&prefix))
        .map(|(i, _)| *i)
        .collect()
}

/// Polls `probe` every 200 ms for up to `within`.
async fn wait_for<T, F, Fut>(what: &str, within: Duration, mut probe: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + within;
    loop {
        if let Some(v) = probe().await {
            return Ok(v);
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn scenario(cluster: &EmbeddedCluster, kubeconfig: &Path, logs: &Path) -> anyhow::Result<()> {
    let client = cluster.client().await;
    prepare_management(&client).await?;
    let shards = SHARDS.to_string();
    let flags = ["--shards", shards.as_str()];
    let mut survivor =
        OperatorProcess::start_with(kubeconfig, "shard-a", NS, LEASE_SECONDS, logs, &flags)?;
    let mut victim =
        OperatorProcess::start_with(kubeconfig, "shard-b", NS, LEASE_SECONDS, logs, &flags)?;
    let logs_of = |p: &OperatorProcess| format!("{} log ends:\n{}", p.pod, p.log_tail(30));

    // Balanced before the fleet exists: two shards each.
    let balanced = wait_for(
        "the replicas share the shards",
        Duration::from_secs(120),
        || async {
            let h = shard_leases(&client).await;
            (held_by(&h, "shard-a").len() == 2 && held_by(&h, "shard-b").len() == 2).then_some(h)
        },
    )
    .await
    .with_context(|| logs_of(&victim))?;
    let victim_shards = held_by(&balanced, "shard-b");

    let fleet = fleet();
    for name in fleet.keys() {
        create_bench_cinder(&client, name, 1, None, "fleet-db", serde_json::json!({})).await?;
    }
    // Mid-convergence: the victim has written for its Cinders, and not every Cinder is Ready.
    let victim_ua = wait_for("the victim to write", Duration::from_secs(180), || async {
        cluster
            .writes()
            .iter()
            .find(|w| {
                w.user_agent.contains("(shard-b-")
                    && w.resource != "leases"
                    && w.resource != "events"
            })
            .map(|w| w.user_agent.clone())
    })
    .await
    .with_context(|| logs_of(&victim))?;
    let ready = ready_count(&client).await?;
    anyhow::ensure!(
        ready < fleet.len(),
        "the fleet was Ready before the kill ({ready})"
    );
    let before_kill = shard_leases(&client).await;
    if let Some(status) = victim.exited() {
        anyhow::bail!(
            "the victim exited by itself ({status}): {}",
            logs_of(&victim)
        );
    }
    victim.kill()?;

    // Every shard with the survivor; each of the victim's within one Lease duration of expiry.
    let after = wait_for(
        "the survivor to hold every shard",
        Duration::from_secs(60),
        || async {
            let h = shard_leases(&client).await;
            (held_by(&h, "shard-a").len() == SHARDS as usize).then_some(h)
        },
    )
    .await
    .with_context(|| logs_of(&survivor))?;
    let lease = chrono::Duration::seconds(LEASE_SECONDS as i64);
    for shard in &victim_shards {
        let (_, renewed, _) = &before_kill[shard];
        let (_, _, acquired) = &after[shard];
        let expiry = *renewed + lease;
        anyhow::ensure!(
            *acquired - expiry <= lease,
            "shard {shard}: the victim's Lease expired by {expiry} at the latest, the survivor took it at {acquired}: more than one Lease duration ({LEASE_SECONDS} s) later"
        );
    }

    wait_for(
        "the fleet to be Ready",
        Duration::from_secs(600),
        || async { (ready_count(&client).await.ok()? == fleet.len()).then_some(()) },
    )
    .await
    .with_context(|| logs_of(&survivor))?;
    if let Some(status) = survivor.exited() {
        anyhow::bail!("the survivor exited ({status}): {}", logs_of(&survivor));
    }
    check_writes(cluster, &fleet, &victim_ua, &victim_shards)
}

/// The Cinder an object belongs to: the Cinder itself, or an object named `<cinder>-...`.
fn cinder_of<'a>(fleet: &'a BTreeMap<String, u32>, name: &str) -> Option<&'a String> {
    fleet
        .keys()
        .find(|c| name == c.as_str() || name.starts_with(&format!("{c}-")))
}

fn check_writes(
    cluster: &EmbeddedCluster,
    fleet: &BTreeMap<String, u32>,
    victim_ua: &str,
    victim_shards: &BTreeSet<u32>,
) -> anyhow::Result<()> {
    let record: Vec<WriteRecord> = cluster
        .writes()
        .into_iter()
        .filter(|w| w.user_agent.starts_with("cinder-operator/"))
        .filter(|w| !matches!(w.resource.as_str(), "leases" | "events"))
        .collect();
    let agents: BTreeSet<&str> = record.iter().map(|w| w.user_agent.as_str()).collect();
    let writers: Vec<Writer> = agents
        .iter()
        .filter_map(|ua| {
            let identity = ua.split_once(" (")?.1.strip_suffix(')')?;
            Some(Writer {
                user_agent: ua.to_string(),
                identity: identity.to_string(),
            })
        })
        .collect();
    anyhow::ensure!(
        writers.len() == 2,
        "expected the writes of two replicas, found user agents {agents:?}"
    );
    let unmapped: BTreeSet<String> = record
        .iter()
        .filter(|w| cinder_of(fleet, &w.name).is_none())
        .map(|w| format!("{} {}/{}", w.verb, w.resource, w.name))
        .collect();
    anyhow::ensure!(
        unmapped.is_empty(),
        "the operator wrote objects of no Cinder: {unmapped:?}"
    );
    let mut taken_over = 0;
    for shard in 0..SHARDS {
        let objects: BTreeSet<(String, String, String, String)> = record
            .iter()
            .filter(|w| cinder_of(fleet, &w.name).map(|c| fleet[c]) == Some(shard))
            .map(|w| {
                (
                    w.group.clone(),
                    w.resource.clone(),
                    w.namespace.clone(),
                    w.name.clone(),
                )
            })
            .collect();
        let guard = Guard {
            lease_namespace: NS.to_string(),
            lease_name: format!("cinder-operator-shard-{shard}"),
            objects: objects.into_iter().collect(),
        };
        let report = check_exclusion(&record, &guard, &writers);
        anyhow::ensure!(
            report.violations.is_empty(),
            "shard {shard}: {}",
            report.violations.join("; ")
        );
        let writers_seen: BTreeSet<&str> =
            report.windows.iter().map(|w| w.writer.as_str()).collect();
        if victim_shards.contains(&shard) && writers_seen.len() == 2 {
            taken_over += 1;
        }
        if !victim_shards.contains(&shard) {
            let victim = record
                .iter()
                .filter(|w| w.user_agent == victim_ua && guard_covers(&guard, w))
                .count();
            anyhow::ensure!(
                victim == 0,
                "the victim wrote {victim} times to shard {shard}, which it never held"
            );
        }
    }
    anyhow::ensure!(
        taken_over > 0,
        "no shard of the victim was written by both replicas: the kill was not mid-convergence"
    );
    Ok(())
}

fn guard_covers(guard: &Guard, w: &WriteRecord) -> bool {
    guard.objects.iter().any(|(g, r, ns, n)| {
        w.group == *g && w.resource == *r && w.namespace == *ns && w.name == *n
    })
}
