//! Crash anywhere, lose nothing: the operator binary runs as its own process against an
//! embedded cluster and is SIGKILLed at seeded random points (then restarted) during the first
//! convergence, the release upgrade (Expanding, Migrating, RollingUpdate, Contracting), a
//! backend detach, a credential rotation and the Cinder's deletion. After the last restart
//! everything converges, and the simulator's Job run and write records show: no two database
//! Jobs at once; each schema Job ran once, to success, in order; the detached backend's
//! service-remove ran once and its Deployment was never re-created; nothing the operator created
//! is left once the Cinder is gone; no finalizer is left; no Lease is held by a dead holder
//! beyond its duration.
//!
//! `CINDER_CRASH_KILLS` sets the kills per stage, the stages being the first convergence, each
//! of the four upgrade phases, the detach, the rotation and the deletion (3 by default, 24 in
//! all; the longer run, 20 per stage and 160 in all, is
//! `CINDER_CRASH_KILLS=20 cargo test -p cinder-e2e --test reliability crash_anywhere`), and
//! `CINDER_CRASH_SEED` repeats the kill points of a failed run (its seed is in the failure).

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use cinder_e2e::database_helpers::*;
use cinder_e2e::operator_process::*;
use cinder_e2e::workload_helpers::*;
use cinder_e2e::*;
use cinder_operator::crd::{Cinder, UpgradePhase};
use cinder_operator::names;
use cinder_sim::controllers::{JobResult, PodOutcome};
use cinder_sim::{EmbeddedCluster, LeaseState};
use kube::Api;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

const CINDER: &str = "crash";
const BACKEND: &str = "crash-nfs";
/// Short Leases, so a successor takes a dead holder's device over quickly.
const LEASE_SECONDS: u64 = 2;

/// The operator process of the moment, the kill points, and every death.
struct Crasher {
    kubeconfig: PathBuf,
    logs: tempfile::TempDir,
    current: Option<OperatorProcess>,
    started: usize,
    schedule: KillSchedule,
    /// Pod name of each killed process and when it died.
    deaths: Vec<(String, DateTime<Utc>)>,
}

impl Crasher {
    fn new(kubeconfig: PathBuf, seed: u64) -> anyhow::Result<Crasher> {
        Ok(Crasher {
            kubeconfig,
            logs: tempfile::tempdir()?,
            current: None,
            started: 0,
            schedule: KillSchedule::new(
                seed,
                Duration::from_millis(150),
                Duration::from_millis(2500),
            ),
            deaths: Vec::new(),
        })
    }

    fn start_next(&mut self) -> anyhow::Result<()> {
        self.started += 1;
        let pod = format!("crash-{}", self.started);
        self.current = Some(OperatorProcess::start(
            &self.kubeconfig,
            &pod,
            NS,
            LEASE_SECONDS,
            self.logs.path(),
        )?);
        Ok(())
    }

    /// `kills` times: lets the process run for a seeded random while, SIGKILLs it, starts the
    /// next one.
    async fn kill_during(&mut self, kills: usize) -> anyhow::Result<()> {
        for _ in 0..kills {
            tokio::time::sleep(self.schedule.next_delay()).await;
            let process = self
                .current
                .as_mut()
                .context("no operator process is running")?;
            if let Some(status) = process.exited() {
                anyhow::bail!(
                    "operator {} exited by itself ({status}); its log ends:\n{}",
                    process.pod,
                    process.log_tail(30)
                );
            }
            let died = process.kill()?;
            self.deaths.push((process.pod.clone(), died));
            self.start_next()?;
        }
        Ok(())
    }

    fn last_log(&self) -> String {
        self.current
            .as_ref()
            .map(|p| p.log_tail(40))
            .unwrap_or_default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_anywhere_loses_nothing() {
    let seed = seed_from_env("CINDER_CRASH_SEED");
    let kills = count_from_env("CINDER_CRASH_KILLS", 3);
    eprintln!("crash test: seed {seed}, {kills} kills per stage (CINDER_CRASH_SEED={seed})");
    let kubeconfig = std::env::temp_dir().join(format!("cinder-crash-{seed}.kubeconfig"));
    let mut config = HarnessConfig::default().cluster;
    config.record_writes = true;
    config.request_log_capacity = 400_000;
    config.kubeconfig_path = Some(kubeconfig.clone());
    let cluster = EmbeddedCluster::start(config).await.unwrap();
    let mut crasher = Crasher::new(kubeconfig.clone(), seed).unwrap();
    let outcome = lifecycle(&cluster, &mut crasher, kills).await;
    let outcome = match outcome {
        Ok(()) => check_records(&cluster, &crasher).await,
        Err(e) => Err(e.context(format!(
            "the current operator's log ends:\n{}",
            crasher.last_log()
        ))),
    };
    drop(crasher);
    cluster.shutdown().await;
    let _ = std::fs::remove_file(&kubeconfig);
    if let Err(e) = outcome {
        panic!("crash test with seed {seed} (CINDER_CRASH_SEED={seed} repeats it): {e:#}");
    }
}

/// The eight stages (the upgrade's four phases each count), each with `kills` kill points, each
/// waiting for convergence afterwards.
async fn lifecycle(
    cluster: &EmbeddedCluster,
    crasher: &mut Crasher,
    kills: usize,
) -> anyhow::Result<()> {
    let client = cluster.client().await;
    install_crds(&client).await?;
    create_namespace(&client, NS).await?;
    quick_schema_jobs(cluster)?;
    service_remove_rule(cluster, PodOutcome::success(), Duration::from_millis(700))?;
    crasher.start_next()?;
    let began = std::time::Instant::now();
    let mark = |stage: &str| eprintln!("crash test: {stage} converged at {:?}", began.elapsed());

    // First convergence.
    database_environment(&client, CINDER).await?;
    create_cinder(
        &client,
        CINDER,
        serde_json::json!({"openStackRelease": "2025.2", "image": {"repository": "registry.example/cinder", "tag": "2025.2"}}),
    )
    .await?;
    create_nfs_backend(&client, BACKEND, CINDER).await?;
    crasher
        .kill_during(kills)
        .await
        .context("first convergence")?;
    wait_cinder_condition(&client, CINDER, "Ready", "True", "AllReady")
        .await
        .context("first convergence")?;
    mark("first convergence");

    // The upgrade: `kills` kill points in each of its four phases (the operator runs unkilled
    // between them until the next phase shows in the status).
    set_release(&client, CINDER, "2026.1").await?;
    let rank = |p: UpgradePhase| UpgradePhase::ALL.iter().position(|q| *q == p);
    for phase in UpgradePhase::ALL {
        let at = wait_status(&client, CINDER, &format!("upgrade phase {phase:?}"), |s| {
            s.installed_release.as_deref() == Some("2026.1")
                || s.upgrade_phase.and_then(rank) >= rank(phase)
        })
        .await
        .context("upgrade")?;
        if at.upgrade_phase != Some(phase) {
            eprintln!(
                "crash test: the upgrade was at {:?} when the kills of {phase:?} began",
                at.upgrade_phase
            );
        }
        crasher
            .kill_during(kills)
            .await
            .with_context(|| format!("upgrade, {phase:?}"))?;
    }
    wait_status(&client, CINDER, "installedRelease 2026.1", |s| {
        s.installed_release.as_deref() == Some("2026.1") && s.upgrade_phase.is_none()
    })
    .await
    .context("upgrade")?;
    mark("upgrade");

    // The backend is detached.
    delete_backend(&client, BACKEND).await?;
    crasher.kill_during(kills).await.context("detach")?;
    wait_backend_gone(&client, BACKEND)
        .await
        .context("detach")?;
    mark("detach");

    // The database password is rotated.
    let dsn = names::db_connection_secret(CINDER);
    put_secret(
        &client,
        "cinder-db",
        &[("username", "cinder"), ("password", "rotated-Crash-7")],
    )
    .await?;
    crasher.kill_during(kills).await.context("rotation")?;
    eventually("the DSN carries the rotated password", || async {
        secret_value(&client, &dsn, "connection")
            .await
            .filter(|v| v.contains(":rotated-Crash-7@"))
    })
    .await
    .context("rotation")?;
    mark("rotation");

    // The Cinder is deleted.
    let cinders: Api<Cinder> = Api::namespaced(client.clone(), NS);
    cinders.delete(CINDER, &Default::default()).await?;
    crasher.kill_during(kills).await.context("deletion")?;
    eventually("the Cinder is gone", || {
        let cinders = cinders.clone();
        async move { cinders.get_opt(CINDER).await.ok()?.is_none().then_some(()) }
    })
    .await
    .context("deletion")?;
    mark("deletion");
    Ok(())
}

/// The invariants over the simulator's records.
async fn check_records(cluster: &EmbeddedCluster, crasher: &Crasher) -> anyhow::Result<()> {
    let runs = database_job_runs(cluster, CINDER);
    let overlaps = overlapping(&runs);
    anyhow::ensure!(
        overlaps.is_empty(),
        "database Jobs ran at once: {overlaps:?}"
    );

    // Each schema Job ran to success, in order, and none twice for one release: the
    // installation's db-sync, the upgrade's expand, migrate and contract, then at most the
    // db-sync of the new release (a Job whose image changes is replaced).
    let schema: Vec<(&str, Option<JobResult>)> = runs
        .iter()
        .filter(|r| !r.name.ends_with("-service-remove"))
        .map(|r| (r.name.as_str(), r.result))
        .collect();
    let walk: Vec<String> = [
        "db-sync",
        "db-expand",
        "db-migrate",
        "db-contract",
        "db-sync",
    ]
    .iter()
    .map(|s| format!("{CINDER}-{s}"))
    .collect();
    let names_seen: Vec<&str> = schema.iter().map(|(n, _)| *n).collect();
    anyhow::ensure!(
        names_seen.len() >= 4
            && walk.iter().zip(&names_seen).all(|(w, n)| w == n)
            && names_seen.len() <= walk.len(),
        "schema Jobs ran {schema:?}, expected {walk:?} (the last db-sync being optional)"
    );
    anyhow::ensure!(
        schema.iter().all(|(_, r)| *r == Some(JobResult::Succeeded)),
        "a schema Job did not succeed: {schema:?}"
    );

    // The detach: service-remove once, the volume Deployment never re-created once deleted.
    let remove = format!("{CINDER}-{BACKEND}-service-remove");
    let removes: Vec<_> = runs.iter().filter(|r| r.name == remove).collect();
    anyhow::ensure!(
        removes.len() == 1 && removes[0].result == Some(JobResult::Succeeded),
        "{remove} ran {removes:?}"
    );
    let volume = names::volume_deployment(CINDER, BACKEND);
    let writes = cluster.writes();
    let deployment_writes: Vec<_> = writes
        .iter()
        .filter(|w| w.resource == "deployments" && w.name == volume && w.status < 300)
        .collect();
    if let Some(deleted) = deployment_writes.iter().position(|w| w.verb == "delete") {
        let recreated: Vec<_> = deployment_writes[deleted..]
            .iter()
            .filter(|w| w.verb == "create")
            .collect();
        anyhow::ensure!(
            recreated.is_empty(),
            "{volume} was re-created after its deletion"
        );
    } else {
        anyhow::bail!("{volume} was never deleted: {deployment_writes:?}");
    }

    // Nothing the operator created is left (Events and Leases aside).
    let created: BTreeSet<(String, String, String)> = writes
        .iter()
        .filter(|w| {
            w.verb == "create" && w.status < 300 && w.user_agent.starts_with("cinder-operator/")
        })
        .filter(|w| !matches!(w.resource.as_str(), "events" | "leases"))
        .map(|w| (w.group.clone(), w.resource.clone(), w.name.clone()))
        .collect();
    anyhow::ensure!(!created.is_empty(), "no create of the operator recorded");
    let store = cluster.store();
    let left: Vec<_> = created
        .iter()
        .filter(|(group, resource, name)| store.get(group, resource, NS, name).is_some())
        .collect();
    anyhow::ensure!(left.is_empty(), "orphaned children: {left:?}");

    // No Lease held by a dead holder beyond its duration.
    let deaths: BTreeMap<&str, DateTime<Utc>> = crasher
        .deaths
        .iter()
        .map(|(p, t)| (p.as_str(), *t))
        .collect();
    let now = Utc::now();
    let leases = writes
        .last()
        .map(|w| w.after.leases.clone())
        .unwrap_or_default();
    for lease in leases.iter().filter(|l| l.namespace == NS) {
        if let Some((pod, died)) = dead_holder(lease, &deaths) {
            let lasts = chrono::Duration::seconds(lease.duration_seconds.unwrap_or(0));
            let renewed = lease.renew_time.or(lease.acquire_time).unwrap_or(now);
            anyhow::ensure!(
                renewed <= died + chrono::Duration::milliseconds(100),
                "Lease {} renewed by {pod} after it died",
                lease.name
            );
            anyhow::ensure!(
                renewed + lasts <= now || now - died < lasts,
                "Lease {} still held by dead {pod}",
                lease.name
            );
        }
    }
    Ok(())
}

/// The dead process holding `lease`, if its holder is one.
fn dead_holder<'a>(
    lease: &LeaseState,
    deaths: &'a BTreeMap<&str, DateTime<Utc>>,
) -> Option<(&'a str, DateTime<Utc>)> {
    let holder = lease.holder.as_deref()?;
    deaths
        .iter()
        .find(|(pod, _)| holder.starts_with(&format!("{pod}-")))
        .map(|(pod, died)| (*pod, *died))
}
