//! `realcinderbench`: the time of a first convergence and of the upgrade on real Cinder, and
//! where it goes. The set-up of the real-Cinder tests ([`RealCinderCluster`]: a real MariaDB and
//! RabbitMQ, the embedded cluster with one process node, the operator in-process, the samples of
//! `run --embedded --real-cinder`); the roots tests/real-cinder/setup.sh prepares are not part
//! of the time. The samples are applied at the first release, and once the Cinder is Ready
//! `spec.openStackRelease` and the image tag move to the next; what the objects went through is
//! recorded every 100 ms and printed: each Job (created, active, succeeded), each Deployment's
//! roll (template changed, every replica updated and ready), each pod (running, ready), each
//! upgrade phase, and the Cinder user's connections on the server. A benchmark prints; it
//! asserts nothing.
//!
//! `cargo run -p cinder-e2e --bin realcinderbench` (as root, after tests/real-cinder/setup.sh;
//! `--first-only` skips the upgrade)

use anyhow::{Context as _, bail};
use cinder_e2e::real_cinder::prepared_roots;
use cinder_e2e::real_cinder_cluster::{
    CINDER, RealCinderCluster, RealCinderOptions, SAMPLES_NS, Timeline, peak,
};
use cinder_operator::crd::Cinder;
use clap::Parser;
use kube::api::{Api, Patch, PatchParams};
use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(about = "Time a first convergence and the upgrade on real Cinder")]
struct Args {
    /// Only the first convergence.
    #[arg(long)]
    first_only: bool,
    /// How long each stage may take.
    #[arg(long, default_value_t = 1200)]
    timeout_secs: u64,
}

fn main() -> ExitCode {
    cinder_e2e::operator_replica::bench_main("realcinderbench", || async {
        let args = Args::parse();
        run(&args).await
    })
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| {
            let w: Vec<&str> = l.split_whitespace().take(3).collect();
            (w.len() == 3).then(|| w.join(" "))
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Where the time of one stage went, from its timeline.
fn breakdown(out: &mut String, timeline: &Timeline, tag: &str) {
    let keys: std::collections::BTreeSet<&str> = timeline
        .changes
        .iter()
        .map(|(_, k, _)| k.as_str())
        .collect();
    let at = |key: &str, value: &str| {
        timeline
            .first(key, value)
            .map_or_else(|| "-".to_string(), |t| format!("+{}", secs(t)))
    };
    for phase in ["Expanding", "Migrating", "RollingUpdate", "Contracting"] {
        if timeline.first("cinder/phase", phase).is_some() {
            let _ = writeln!(
                out,
                "  phase {phase:<14} entered {}",
                at("cinder/phase", phase)
            );
        }
    }
    // What existed when the recording started and did not change is not this stage's.
    let start = timeline.changes.first().map_or(Duration::ZERO, |c| c.0);
    let fresh = |key: &str| timeline.values(key).iter().any(|(t, _)| *t > start);
    for key in keys.iter().filter(|k| k.starts_with("job/") && fresh(k)) {
        // A Job of the same name run again: its last run.
        let values = timeline.values(key);
        let active = values
            .iter()
            .rev()
            .find(|(t, v)| *t > start && *v == "active")
            .map(|(t, _)| *t);
        let done = values
            .iter()
            .find(|(t, v)| active.is_none_or(|a| *t >= a) && *v == "succeeded")
            .map(|(t, _)| *t);
        let ran = match (active, done) {
            (Some(a), Some(b)) => format!(" (ran {})", secs(b.saturating_sub(a))),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "  {key:<34} active {}, succeeded {}{ran}",
            active.map_or_else(|| "-".into(), |t| format!("+{}", secs(t))),
            done.map_or_else(|| "-".into(), |t| format!("+{}", secs(t))),
        );
    }
    for key in keys
        .iter()
        .filter(|k| k.starts_with("deployment/") && k.ends_with("/image"))
    {
        let name = &key["deployment/".len()..key.len() - "/image".len()];
        let Some(moved) = timeline.first(key, tag) else {
            continue;
        };
        let rolled = timeline
            .values(&format!("deployment/{name}/rolled"))
            .into_iter()
            .find(|(t, v)| *t >= moved && *v == "true")
            .map(|(t, _)| t);
        let _ = writeln!(
            out,
            "  deployment {name:<24} at {tag} +{}, rolled {}{}",
            secs(moved),
            rolled.map_or_else(|| "-".into(), |t| format!("+{}", secs(t))),
            rolled.map_or_else(String::new, |t| format!(" (roll {})", secs(t - moved))),
        );
    }
    for key in keys
        .iter()
        .filter(|k| k.starts_with("pod/") && timeline.values(k)[0].0 > start)
    {
        let seen = timeline.values(key).first().map(|(t, _)| *t);
        let running = timeline.first_where(key, |v| v.starts_with("Running"));
        let ready = timeline.first(key, "Running ready");
        let done = timeline.first_where(key, |v| v == "Succeeded" || v == "Failed");
        let _ = writeln!(
            out,
            "  {key:<42} created {}, running {}, ready {}{}",
            seen.map_or_else(|| "-".into(), |t| format!("+{}", secs(t))),
            running.map_or_else(|| "-".into(), |t| format!("+{}", secs(t))),
            ready.map_or_else(|| "-".into(), |t| format!("+{}", secs(t))),
            done.map_or_else(String::new, |t| format!(", finished +{}", secs(t))),
        );
    }
    if let Some((t, _)) = timeline
        .values("cinder/Ready")
        .into_iter()
        .rev()
        .find(|(_, v)| v.starts_with("True"))
    {
        let _ = writeln!(out, "  cinder Ready                       +{}", secs(t));
    }
}

async fn run(args: &Args) -> anyhow::Result<String> {
    let Some(roots) = prepared_roots("realcinderbench") else {
        bail!("real Cinder is not prepared: run tests/real-cinder/setup.sh");
    };
    let timeout = Duration::from_secs(args.timeout_secs);
    let mut out = String::new();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let _ = writeln!(
        out,
        "realcinderbench: {cores} cores, load average {} at the start; roots at {} (their \
         preparation not timed)",
        load(),
        cinder_e2e::real_cinder::roots_dir().display()
    );
    let (from, to) = (&roots[0], &roots[1]);
    let started = Instant::now();
    let cluster = RealCinderCluster::start(from, RealCinderOptions::default()).await?;
    let up = started.elapsed();
    let sampler = cluster.sample_connections(Duration::from_secs(1));
    let recorder = cluster.record_timeline(Duration::from_millis(100));
    let result = async {
        let ready = cluster.wait_ready(timeout).await?;
        let first = recorder.stop().await;
        let first_peak = peak(&sampler.stop().await);
        let _ = writeln!(
            out,
            "real servers, embedded cluster and operator up: {}\nfirst convergence at {} \
             (cinder {}): Ready {} after the samples were applied; the Cinder user's peak {} \
             connections (1 s samples), cap {}",
            secs(up),
            from.release,
            from.cinder,
            secs(ready),
            first_peak,
            cluster.user_cap().await?
        );
        breakdown(&mut out, &first, from.release);
        if args.first_only {
            return Ok(());
        }
        let sampler = cluster.sample_connections(Duration::from_secs(1));
        let recorder = cluster.record_timeline(Duration::from_millis(100));
        let api: Api<Cinder> = Api::namespaced(cluster.client.clone(), SAMPLES_NS);
        let edited = Instant::now();
        api.patch(
            CINDER,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({
                "spec": {"openStackRelease": to.release, "image": {"tag": to.release}}
            })),
        )
        .await
        .context("the upgrade's edit")?;
        let to_release = to.release;
        cluster
            .wait_cinder("the upgrade", timeout, |c| {
                c.status.as_ref().is_some_and(|s| {
                    s.observed_generation == c.metadata.generation
                        && s.installed_release.as_deref() == Some(to_release)
                        && s.upgrade_phase.is_none()
                        && s.conditions
                            .iter()
                            .any(|c| c.type_ == "Ready" && c.status == "True")
                })
            })
            .await?;
        let took = edited.elapsed();
        // The second roll of the single writers after the promotion.
        tokio::time::sleep(Duration::from_secs(15)).await;
        let upgrade = recorder.stop().await;
        let upgrade_peak = peak(&sampler.stop().await);
        let _ = writeln!(
            out,
            "upgrade {} -> {} (cinder {}): Ready at {} {} after the edit; the Cinder user's \
             peak {} connections (1 s samples), cap {}",
            from.release,
            to.release,
            to.cinder,
            to.release,
            secs(took),
            upgrade_peak,
            cluster.user_cap().await?
        );
        let promoted = upgrade.first("cinder/installedRelease", to.release);
        breakdown(&mut out, &upgrade, to.release);
        if let Some(t) = promoted {
            let _ = writeln!(
                out,
                "  installedRelease {}           +{}",
                to.release,
                secs(t)
            );
        }
        anyhow::Ok(())
    }
    .await;
    let stopped = cluster.stop().await;
    result?;
    stopped?;
    let _ = writeln!(out, "load average at the end: {}", load());
    Ok(out)
}
