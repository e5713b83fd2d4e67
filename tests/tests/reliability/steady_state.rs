//! Steady state is quiet: once a Cinder is Ready and the operator has settled, a minute of its
//! requests (`CINDER_STEADY_SECONDS`, 60 by default) holds no write at all, and its only reads
//! are the periodic pass's API health probe (every 30 s per Cinder, ±10% jitter): at most one
//! per period. The passes read the Cinder's Secrets, MariaDB objects and children from the
//! watches' stores. Watches are the event streams the operator keeps open (re-opened when the
//! server ends them), not polling, and are not counted.

use cinder_e2e::group_helpers::*;
use cinder_e2e::operator_process::count_from_env;
use cinder_e2e::request_checks::*;
use cinder_e2e::*;
use std::collections::BTreeMap;
use std::time::Duration;

const AGENT: &str = "cinder-operator-steady";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_ready_the_operator_only_polls() {
    let h = Harness::start_with(HarnessConfig {
        operator_user_agent: Some(AGENT.to_string()),
        ..Default::default()
    })
    .await
    .unwrap();
    group_cinder(&h.client, "quiet", serde_json::json!({}))
        .await
        .unwrap();
    wait_cinder_condition(&h.client, "quiet", "Ready", "True", "AllReady")
        .await
        .unwrap();
    // Settled: five seconds without a write of the operator (at most a minute of waiting).
    let settled = eventually("five quiet seconds after Ready", || async {
        let requests = h.cluster.requests();
        let last_write = of_agent(&requests, AGENT)
            .into_iter()
            .filter(|r| is_write(r))
            .map(|r| r.time)
            .max()?;
        (chrono::Utc::now() - last_write > chrono::Duration::seconds(5)).then_some(())
    })
    .await;
    settled.unwrap_or_else(|e| {
        let requests = h.cluster.requests();
        let writes: Vec<_> = of_agent(&requests, AGENT)
            .into_iter()
            .filter(|r| is_write(r))
            .collect();
        let tail = &writes[writes.len().saturating_sub(20)..];
        panic!("{e}; the last writes: {:#?}", describe(tail));
    });

    let seconds = count_from_env("CINDER_STEADY_SECONDS", 60) as u64;
    let from = chrono::Utc::now();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let requests = h.cluster.requests();
    let window: Vec<_> = of_agent(&requests, AGENT)
        .into_iter()
        .filter(|r| r.time >= from && r.verb != "watch")
        .collect();
    let writes: Vec<_> = window.iter().copied().filter(|r| is_write(r)).collect();
    assert!(
        writes.is_empty(),
        "writes in steady state: {:#?}",
        describe(&writes)
    );
    // The reads come in bursts, one periodic pass each, at most one per period (27 s with the
    // jitter); a burst is requests less than 5 s apart.
    let periods = seconds / 27 + 1;
    let mut bursts: Vec<(chrono::DateTime<chrono::Utc>, usize)> = Vec::new();
    for r in &window {
        match bursts.last_mut() {
            Some((last, n)) if r.time - *last < chrono::Duration::seconds(5) => {
                *last = r.time;
                *n += 1;
            }
            _ => bursts.push((r.time, 1)),
        }
    }
    assert!(
        bursts.len() as u64 <= periods,
        "{} bursts of reads in {seconds} s, more than one per 27 s: {:#?}",
        bursts.len(),
        describe(&window)
    );
    // Only the health probe (through the Service proxy) reaches the API server, once a period.
    let (probes, others): (Vec<_>, Vec<_>) = window
        .iter()
        .copied()
        .partition(|r| r.resource == "services" && r.subresource == "proxy");
    assert!(
        others.is_empty(),
        "reads other than the health probe in steady state: {:#?}",
        describe(&others)
    );
    assert!(
        probes.len() as u64 <= periods,
        "{} health probes in {seconds} s, more than one per 27 s: {:#?}",
        probes.len(),
        describe(&probes)
    );
    let mut per_target: BTreeMap<String, u64> = BTreeMap::new();
    for r in &window {
        *per_target
            .entry(format!("{} {}/{}", r.verb, r.resource, r.name))
            .or_default() += 1;
    }
    eprintln!(
        "steady state, {seconds} s: {} reads in {} passes: {per_target:?}",
        window.len(),
        bursts.len()
    );
    h.stop().await.unwrap();
}
