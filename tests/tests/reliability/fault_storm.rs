//! API fault storms: with 10% of the operator's writes failing (500, 409 and 429 with
//! Retry-After, a third each), 50 ms of latency on every request and 2% of watch events closing
//! their watch, a Cinder with an NFS backend still reaches Ready, an upgrade and a detach still
//! complete, and the operator sends at most three times the requests of the same scenario
//! without faults. The hot-loop detector over the simulator's request record (no object gets
//! more than five requests within any second) is its own test: the steps read the Cinder's
//! credential Secrets, MariaDB objects and children from the watches' stores, a device lock
//! cycle costs its Lease two writes (the device keeps its last-written Lease between passes), a
//! refused Lease write is retried after a jittered pause, a detach pass with nothing to write
//! takes no lock, and a database Job is replaced under one hold of the lock. A 429 answer's
//! Retry-After is honoured: the same request is not repeated within it.

use cinder_e2e::database_helpers::*;
use cinder_e2e::group_helpers::*;
use cinder_e2e::operator_process::seed_from_env;
use cinder_e2e::request_checks::*;
use cinder_e2e::workload_helpers::*;
use cinder_e2e::*;
use cinder_sim::{ErrorRule, FaultConfig};
use std::time::Duration;

const AGENT: &str = "cinder-operator-storm";
/// No object gets more requests than this within one second.
const HOT_LOOP_LIMIT: usize = 5;

fn harness_config(faults: FaultConfig) -> HarnessConfig {
    let mut config = HarnessConfig {
        operator_user_agent: Some(AGENT.to_string()),
        ..Default::default()
    };
    config.cluster.faults = faults;
    config.cluster.request_log_capacity = 400_000;
    config
}

/// 10% of the operator's writes fail; 50 ms latency; 2% watch drops.
fn storm(seed: u64) -> FaultConfig {
    let mut errors = Vec::new();
    for verb in ["create", "update", "patch", "delete"] {
        for code in [500, 409, 429] {
            errors.push(ErrorRule {
                verb: Some(verb.to_string()),
                resource: None,
                user_agent: Some(AGENT.to_string()),
                code,
                probability: 0.1 / 3.0,
            });
        }
    }
    FaultConfig {
        latency: Duration::from_millis(50),
        errors,
        watch_drop_probability: 0.02,
        seed: Some(seed),
        ..Default::default()
    }
}

/// Waits (three times the usual patience: the storm slows everything) for Ready.
async fn ready(h: &Harness, name: &str) -> anyhow::Result<()> {
    let mut last = None;
    for _ in 0..3 {
        match wait_cinder_condition(&h.client, name, "Ready", "True", "AllReady").await {
            Ok(_) => return Ok(()),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("{name} never became Ready")))
}

/// Ready, an upgrade, a detach; the operator's requests over the whole of it.
async fn scenario(
    name: &str,
    faults: FaultConfig,
) -> anyhow::Result<Vec<cinder_sim::RequestRecord>> {
    let h = Harness::start_with(harness_config(faults)).await?;
    quick_schema_jobs(&h.cluster)?;
    service_remove_rule(
        &h.cluster,
        cinder_sim::controllers::PodOutcome::success(),
        Duration::from_millis(700),
    )?;
    group_cinder(
        &h.client,
        name,
        serde_json::json!({"openStackRelease": "2025.2", "image": {"repository": "registry.example/cinder", "tag": "2025.2"}}),
    )
    .await?;
    ready(&h, name).await?;
    set_release(&h.client, name, "2026.1").await?;
    wait_status(&h.client, name, "installedRelease 2026.1", |s| {
        s.installed_release.as_deref() == Some("2026.1") && s.upgrade_phase.is_none()
    })
    .await?;
    let backend = format!("{name}-nfs");
    delete_backend(&h.client, &backend).await?;
    wait_backend_gone(&h.client, &backend).await?;
    // With its only backend detached, the Cinder runs no volume service: not Ready, by design.
    wait_cinder_condition(
        &h.client,
        name,
        "VolumeServicesReady",
        "False",
        "NoBackends",
    )
    .await?;
    let requests: Vec<_> = h
        .cluster
        .requests()
        .into_iter()
        .filter(|r| r.user_agent == AGENT && r.verb != "watch")
        .collect();
    h.stop().await?;
    Ok(requests)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_storm_converges_with_a_bounded_request_rate() {
    let seed = seed_from_env("CINDER_STORM_SEED");
    eprintln!("fault storm: seed {seed} (CINDER_STORM_SEED={seed} repeats it)");
    let (calm, stormy) = tokio::join!(
        scenario("calm", FaultConfig::default()),
        scenario("storm", storm(seed))
    );
    let calm = calm.unwrap_or_else(|e| panic!("without faults: {e:#}"));
    let stormy = stormy.unwrap_or_else(|e| panic!("seed {seed}, under faults: {e:#}"));
    let failed = stormy.iter().filter(|r| r.status >= 400).count();
    eprintln!(
        "fault storm: {} requests without faults, {} under faults ({failed} answered with an error), ratio {:.2}",
        calm.len(),
        stormy.len(),
        stormy.len() as f64 / calm.len().max(1) as f64
    );
    assert!(failed > 0, "the storm injected nothing");
    assert!(
        stormy.len() <= 3 * calm.len(),
        "seed {seed}: {} requests under faults, more than 3 x {}",
        stormy.len(),
        calm.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_hot_loop_under_a_fault_storm() {
    let seed = seed_from_env("CINDER_STORM_SEED");
    eprintln!("hot loops: seed {seed} (CINDER_STORM_SEED={seed} repeats it)");
    let stormy = scenario("hot", storm(seed))
        .await
        .unwrap_or_else(|e| panic!("seed {seed}, under faults: {e:#}"));
    let refs: Vec<_> = stormy.iter().collect();
    let hot = hot_loops(&refs, HOT_LOOP_LIMIT);
    let leases: Vec<_> = refs
        .iter()
        .copied()
        .filter(|r| r.resource == "leases")
        .collect();
    let busiest = hot_loops(&refs, 0)
        .into_iter()
        .max_by_key(|h| h.peak_per_second)
        .map(|h| (h.peak_per_second, h.object))
        .unwrap_or_default();
    let busiest_lease = hot_loops(&leases, 0)
        .into_iter()
        .map(|h| h.peak_per_second)
        .max()
        .unwrap_or(0);
    eprintln!(
        "hot loops: at most {} requests to one object within a second ({}; {busiest_lease} to one device Lease); {} Lease requests in all",
        busiest.0,
        busiest.1,
        leases.len()
    );
    // Every request to the hot objects, so a failure shows what repeated.
    let theirs: Vec<_> = refs
        .iter()
        .copied()
        .filter(|r| hot.iter().any(|h| h.is_about(r)))
        .collect();
    assert!(
        hot.is_empty(),
        "seed {seed}: hot loops under faults: {hot:?}: {:#?}",
        describe(&theirs)
    );
}

/// The gaps (ms) between each 429 answer and the operator's next request to the same object
/// with the same verb.
fn gaps_after_429(requests: &[&cinder_sim::RequestRecord]) -> Vec<(String, i64)> {
    let mut gaps = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        if r.status != 429 || r.name.is_empty() {
            continue;
        }
        let again = requests[i + 1..].iter().find(|n| {
            n.verb == r.verb
                && n.resource == r.resource
                && n.namespace == r.namespace
                && n.name == r.name
                && n.subresource == r.subresource
        });
        if let Some(n) = again {
            gaps.push((
                format!("{} {}/{}", r.verb, r.resource, r.name),
                (n.time - r.time).num_milliseconds(),
            ));
        }
    }
    gaps
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_of_a_429_is_honoured() {
    // Half of the operator's patches are answered 429 with `Retry-After: 1`.
    let faults = FaultConfig {
        errors: vec![ErrorRule {
            verb: Some("patch".to_string()),
            resource: None,
            user_agent: Some(AGENT.to_string()),
            code: 429,
            probability: 0.5,
        }],
        seed: Some(seed_from_env("CINDER_STORM_SEED")),
        ..Default::default()
    };
    let h = Harness::start_with(harness_config(faults)).await.unwrap();
    group_cinder(&h.client, "patient", serde_json::json!({}))
        .await
        .unwrap();
    wait_cinder_condition(&h.client, "patient", "Ready", "True", "AllReady")
        .await
        .unwrap();
    let requests = h.cluster.requests();
    let mine = of_agent(&requests, AGENT);
    let gaps = gaps_after_429(&mine);
    assert!(!gaps.is_empty(), "no 429 was answered and retried");
    // Retry-After is one second; 900 ms leaves room for the clocks of two tasks.
    let early: Vec<_> = gaps.iter().filter(|(_, ms)| *ms < 900).collect();
    assert!(
        early.is_empty(),
        "requests repeated before Retry-After passed: {early:?}"
    );
    h.stop().await.unwrap();
}
