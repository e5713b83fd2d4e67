//! The connection cap on real parts (the set-up of `real_cinder_convergence`), at 2026.1:
//!
//! - with the operator's cap, the samples converge; then each pod's open connections to the
//!   MariaDB Service (the service proxy's accepted connections, by the pod address they come
//!   from) are held to the formula's term for that workload (API: uwsgi processes x threads x
//!   2; scheduler, volume, backup: 2 each; the API opens none before a request reads the
//!   database), and the Cinder user's peak on the server (sampled every second) is printed
//!   beside the cap;
//! - the same first convergence with the user's cap on the server lowered below what the
//!   services held once converged shows what the cap does when it is too small: the server refuses connections over it (its
//!   `Aborted_connects`) and a service logs MySQL error 1226. So the measurement of the
//!   first part, and of the convergence and upgrade tests, can fail.

use cinder_e2e::real_cinder_cluster::{
    RealCinderCluster, RealCinderOptions, SAMPLES_NS, peak, real_cinder_roots,
};
use cinder_operator::planning::connection_cap::connection_cap;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, LogParams};
use std::time::{Duration, Instant};

const CONVERGENCE: Duration = Duration::from_secs(20 * 60);
/// How long the lowered cap has to show a refusal in a log.
const REFUSAL: Duration = Duration::from_secs(5 * 60);

/// The formula's term for the pod `name`'s workload, and which term it is.
fn term(name: &str, processes: i64, threads: i64) -> Option<(&'static str, i64)> {
    if name.starts_with("cinder-api-") {
        Some(("API: processes x threads x 2", processes * threads * 2))
    } else if name.starts_with("cinder-scheduler-") {
        Some(("scheduler: 2", 2))
    } else if name.starts_with("cinder-volume-") {
        Some(("volume: 2", 2))
    } else if name.starts_with("cinder-backup-") {
        Some(("backup: 2", 2))
    } else if name.starts_with("cinder-db-") {
        Some(("a database Job: 2", 2))
    } else {
        None
    }
}

/// Every sample pod's log, the previous container's too (a crash-looping service).
async fn all_logs(cluster: &RealCinderCluster) -> Vec<(String, String)> {
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), SAMPLES_NS);
    let mut out = Vec::new();
    for pod in pods
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let mut text = pods
            .logs(&name, &LogParams::default())
            .await
            .unwrap_or_default();
        let previous = LogParams {
            previous: true,
            ..Default::default()
        };
        text.push_str(&pods.logs(&name, &previous).await.unwrap_or_default());
        out.push((name, text));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_cap_holds_and_can_fail() {
    let Some(roots) = real_cinder_roots("the_connection_cap_holds_and_can_fail") else {
        return;
    };
    let root = &roots[0];

    // The operator's cap: per-pod connections against the formula's terms.
    let cluster = RealCinderCluster::start(root, RealCinderOptions::default())
        .await
        .unwrap();
    let sampler = cluster.sample_connections(Duration::from_secs(1));
    let took = cluster.wait_ready(CONVERGENCE).await.unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let by_pod = cluster.database_connections_by_pod().await.unwrap();
    let samples = sampler.stop().await;
    let peak = peak(&samples);
    let cap = cluster.user_cap().await.unwrap();
    let spec = cluster.cinder().await.unwrap().spec;
    let formula = connection_cap(&spec, 1);
    let (processes, threads) = (
        i64::from(spec.api.uwsgi.processes),
        i64::from(spec.api.uwsgi.threads),
    );
    eprintln!(
        "Ready after {:.1} s; the Cinder user's peak {peak} (sampled every 1 s), cap {cap} \
         (the formula: {formula}); connections by pod through the Service:",
        took.as_secs_f64()
    );
    assert_eq!(i64::try_from(cap).unwrap(), formula);
    let mut counted = 0;
    for (pod, n) in &by_pod {
        let t = term(pod, processes, threads);
        eprintln!("  {pod}: {n} (term {t:?})");
        let (what, most) = t.unwrap_or_else(|| panic!("{pod} is no workload of the formula"));
        assert!(
            i64::try_from(*n).unwrap() <= most,
            "{pod} opened {n}, over its term {what}"
        );
        counted += n;
    }
    assert!(counted > 0, "no connection through the Service: {by_pod:?}");
    // The API opens its pool on the first request that reads the database (`/healthcheck`
    // does not, and without a Keystone every other request stops at authentication): none yet.
    for name in ["cinder-scheduler-", "cinder-volume-", "cinder-backup-"] {
        assert!(
            by_pod.keys().any(|p| p.starts_with(name)),
            "no connection from a {name} pod: {by_pod:?}"
        );
    }
    assert!(peak > 0 && peak <= cap);
    assert_eq!(cluster.refused_connections().await.unwrap(), 0);
    cluster.stop().await.unwrap();

    // The same convergence with the cap below what the services hold once converged (the
    // peak may be a moment's overlap that a second run need not repeat).
    let lowered = i64::try_from(peak.min(counted)).unwrap() - 1;
    assert!(
        lowered >= 1,
        "a peak of {peak} and {counted} held leave no lower cap"
    );
    let cluster = RealCinderCluster::start(
        root,
        RealCinderOptions {
            user_cap: Some(lowered),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(
        {
            // The fixture applies the User once the operator created it.
            let since = Instant::now();
            loop {
                if let Ok(c) = cluster.user_cap().await
                    && c == usize::try_from(lowered).unwrap()
                {
                    break c;
                }
                assert!(
                    since.elapsed() < CONVERGENCE,
                    "the lowered cap never applied"
                );
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        },
        usize::try_from(lowered).unwrap()
    );
    let since = Instant::now();
    let (refused, logged) = loop {
        let refused = cluster.refused_connections().await.unwrap();
        let logged: Vec<(String, String)> = all_logs(&cluster)
            .await
            .into_iter()
            .filter_map(|(pod, text)| {
                let line = text.lines().find(|l| l.contains("1226"))?;
                Some((pod, line.to_owned()))
            })
            .collect();
        if refused > 0 && !logged.is_empty() {
            break (refused, logged);
        }
        if since.elapsed() > REFUSAL {
            panic!(
                "with a cap of {lowered} (peak {peak}): {refused} refused, no 1226 in a log\n  {}\n  pods: {}",
                cluster.conditions_line().await,
                cluster.pods_line().await
            );
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    eprintln!(
        "with the cap lowered to {lowered}: the server refused {refused} connection attempt(s) \
         after {:.1} s; logged by:",
        since.elapsed().as_secs_f64()
    );
    for (pod, line) in &logged {
        eprintln!("  {pod}: {line}");
    }
    cluster.stop().await.unwrap();
}
