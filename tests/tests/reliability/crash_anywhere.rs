//! Crash anywhere, lose nothing: the operator binary runs as its own process against an
//! embedded cluster and is SIGKILLed at seeded random points (then restarted) during the first
//! convergence, the release upgrade (Expanding, Migrating, RollingUpdate, Contracting), a
//! backend detach, a credential rotation and the Cinder's deletion. After the last restart
//! everything converges, and the simulator's Job run and write records show: no two database
//! Jobs at once; each schema Job ran once, to success, in order; the detached backend's
//! service-remove ran once and its Deployment was never re-created; nothing the operator created
//! is left once the Cinder is gone; no finalizer of the operator's is left; no Lease is renewed by
//! a dead holder (so none is held beyond its duration after the death), and no Lease passes to
//! another holder before the previous hold expired. The two record checks have their own tests
//! over made-up records.
//!
//! The expand, migrate and contract Jobs run about as long as a phase's kills take, so the kills
//! land inside the upgrade's phases: the phase the status shows is noted before each kill, and
//! each phase a Job holds must have had kills.
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
use cinder_sim::{EmbeddedCluster, LeaseSnapshot, LeaseState, WriteRecord};
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
            self.kill_now()?;
        }
        Ok(())
    }

    /// [`Crasher::kill_during`] in the upgrade: before each kill, notes in `seen` the upgrade
    /// phase the Cinder's status shows.
    async fn kill_during_upgrade(
        &mut self,
        kills: usize,
        client: &kube::Client,
        seen: &mut BTreeMap<String, usize>,
    ) -> anyhow::Result<()> {
        for _ in 0..kills {
            tokio::time::sleep(self.schedule.next_delay()).await;
            let phase = cinder_status(client, CINDER).await.upgrade_phase;
            *seen.entry(phase_name(phase)).or_default() += 1;
            self.kill_now()?;
        }
        Ok(())
    }

    /// SIGKILLs the current process (an error when it already exited by itself) and starts the
    /// next one.
    fn kill_now(&mut self) -> anyhow::Result<()> {
        {
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
        }
        self.start_next()
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
    // between them until the next phase shows in the status). The expand, migrate and contract
    // Jobs run about as long as a phase's kills take, so the kills land inside their phases.
    let phase_job = Duration::from_millis(1400 * kills as u64).max(Duration::from_secs(4));
    for suffix in ["-db-expand", "-db-migrate", "-db-contract"] {
        job_rule(cluster, suffix, PodOutcome::success(), phase_job)?;
    }
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
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
            .kill_during_upgrade(kills, &client, &mut seen)
            .await
            .with_context(|| format!("upgrade, {phase:?}"))?;
    }
    eprintln!("crash test: kills by the upgrade phase the status showed: {seen:?}");
    // The phases a Job holds each got kills; RollingUpdate lasts as long as the roll.
    for phase in [
        UpgradePhase::Expanding,
        UpgradePhase::Migrating,
        UpgradePhase::Contracting,
    ] {
        anyhow::ensure!(
            seen.get(&phase_name(Some(phase))).copied().unwrap_or(0) > 0,
            "no kill landed in {phase:?}: {seen:?}"
        );
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

/// The upgrade phase as the kill counts name it (`none` outside the upgrade).
fn phase_name(phase: Option<UpgradePhase>) -> String {
    phase.map_or_else(|| "none".to_string(), |p| format!("{p:?}"))
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

    // No finalizer of the operator's is left on anything the run wrote.
    let left =
        operator_finalizers_left(&writes, |group, resource| store.list(group, resource, None));
    anyhow::ensure!(left.is_empty(), "finalizers left: {left:?}");

    // No Lease held by a dead holder beyond its duration, none taken over before it expired.
    let deaths: BTreeMap<&str, DateTime<Utc>> = crasher
        .deaths
        .iter()
        .map(|(p, t)| (p.as_str(), *t))
        .collect();
    let leases = lease_violations(&writes, &deaths);
    eprintln!(
        "crash test: {} Lease states read, {} of them naming a dead holder, {} handovers between holders",
        leases.states, leases.dead_held, leases.handovers
    );
    anyhow::ensure!(
        leases.violations.is_empty(),
        "Lease violations: {:#?}",
        leases.violations
    );
    Ok(())
}

/// `namespace/name: finalizer` of every object, of each kind `writes` wrote, that still carries a
/// finalizer of the operator's (`list` lists a kind in every namespace).
fn operator_finalizers_left(
    writes: &[WriteRecord],
    list: impl Fn(&str, &str) -> Vec<serde_json::Value>,
) -> Vec<String> {
    let kinds: BTreeSet<(&str, &str)> = writes
        .iter()
        .map(|w| (w.group.as_str(), w.resource.as_str()))
        .collect();
    let mut left = Vec::new();
    for (group, resource) in kinds {
        for object in list(group, resource) {
            let meta = &object["metadata"];
            let finalizers = meta["finalizers"].as_array().into_iter().flatten();
            for f in finalizers.filter_map(serde_json::Value::as_str) {
                if f.starts_with(OPERATOR_FINALIZER_PREFIX) {
                    left.push(format!(
                        "{resource} {}/{}: {f}",
                        meta["namespace"].as_str().unwrap_or(""),
                        meta["name"].as_str().unwrap_or("")
                    ));
                }
            }
        }
    }
    left
}

/// The domain of the operator's finalizers (the Cinder's and the detach's).
const OPERATOR_FINALIZER_PREFIX: &str = "cinder.openstack.c5c3.io/";

/// Slack for the clocks of two processes on one machine.
const CLOCK_SLACK_MS: i64 = 100;

/// What [`lease_violations`] looked at and found.
struct LeaseReport {
    /// Lease states read (one per Lease per distinct resourceVersion).
    states: usize,
    /// States whose holder was a dead process.
    dead_held: usize,
    /// Changes from one holder straight to another.
    handovers: usize,
    violations: Vec<String>,
}

/// Over every Lease state the write record saw (each write's reads before and after it, in
/// resourceVersion order): a Lease whose holder is a dead process (`deaths`: pod name and when
/// it died) was not renewed after the death, so its hold ends at most one duration after it; and
/// a Lease passes from one holder to another only once the first one's hold expired (renewal
/// plus duration), never while it lasted.
fn lease_violations(writes: &[WriteRecord], deaths: &BTreeMap<&str, DateTime<Utc>>) -> LeaseReport {
    let mut snapshots: Vec<&LeaseSnapshot> =
        writes.iter().flat_map(|w| [&w.before, &w.after]).collect();
    snapshots.sort_by_key(|s| s.resource_version);
    snapshots.dedup_by_key(|s| s.resource_version);
    let slack = chrono::Duration::milliseconds(CLOCK_SLACK_MS);
    let mut violations = BTreeSet::new();
    let (mut states, mut dead_held, mut handovers) = (0, 0, 0);
    let mut last: BTreeMap<(&str, &str), &LeaseState> = BTreeMap::new();
    for snapshot in snapshots {
        // A deleted Lease starts afresh when it is created again.
        last.retain(|(ns, name), _| {
            snapshot
                .leases
                .iter()
                .any(|l| l.namespace == *ns && l.name == *name)
        });
        for lease in &snapshot.leases {
            states += 1;
            let renewed = lease.renew_time.or(lease.acquire_time);
            let dead = dead_holder(lease, deaths);
            dead_held += usize::from(dead.is_some());
            if let (Some((pod, died)), Some(renewed)) = (dead, renewed)
                && renewed > died + slack
            {
                violations.insert(format!(
                    "Lease {} renewed by {pod} at {renewed}, after it died at {died}",
                    lease.name
                ));
            }
            let key = (lease.namespace.as_str(), lease.name.as_str());
            if let Some(before) = last.get(&key)
                && let (Some(old), Some(new)) = (&before.holder, &lease.holder)
                && old != new
            {
                handovers += 1;
                let lasts = chrono::Duration::seconds(before.duration_seconds.unwrap_or(0));
                let expired = before.renew_time.or(before.acquire_time).map(|t| t + lasts);
                let taken = lease.acquire_time.or(lease.renew_time);
                if let (Some(expired), Some(taken)) = (expired, taken)
                    && taken + slack < expired
                {
                    violations.insert(format!(
                        "Lease {} taken by {new} at {taken} from {old}, whose hold lasted until {expired}",
                        lease.name
                    ));
                }
            }
            last.insert(key, lease);
        }
    }
    LeaseReport {
        states,
        dead_held,
        handovers,
        violations: violations.into_iter().collect(),
    }
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

/// A write whose reads saw Lease `dev` at resourceVersion `rv`: held by `holder`, acquired and
/// renewed at `acquired` and `renewed` seconds, lasting 2 s.
fn lease_seen(rv: u64, holder: Option<&str>, acquired: i64, renewed: i64) -> WriteRecord {
    let t0 = DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::days(20_000);
    let snapshot = LeaseSnapshot {
        resource_version: rv,
        time: t0 + chrono::Duration::seconds(renewed),
        leases: vec![LeaseState {
            namespace: NS.to_string(),
            name: "dev".to_string(),
            holder: holder.map(str::to_string),
            acquire_time: Some(t0 + chrono::Duration::seconds(acquired)),
            renew_time: Some(t0 + chrono::Duration::seconds(renewed)),
            duration_seconds: Some(2),
        }],
    };
    WriteRecord {
        verb: "update".to_string(),
        group: "coordination.k8s.io".to_string(),
        resource: "leases".to_string(),
        subresource: String::new(),
        namespace: NS.to_string(),
        name: "dev".to_string(),
        user_agent: "cinder-operator/test".to_string(),
        status: 200,
        before: snapshot.clone(),
        after: snapshot,
    }
}

#[test]
fn the_lease_check_catches_a_renewal_after_death_and_an_early_takeover() {
    let t0 = DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::days(20_000);
    let deaths = BTreeMap::from([("crash-1", t0 + chrono::Duration::seconds(5))]);
    // crash-1 renews at 4 s, dies at 5 s; crash-2 takes over at 6 s (4 + 2): all well.
    let fine = [
        lease_seen(10, Some("crash-1-a"), 0, 4),
        lease_seen(11, None, 0, 4),
        lease_seen(12, Some("crash-2-b"), 6, 6),
    ];
    let report = lease_violations(&fine, &deaths);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert_eq!(
        (report.states, report.dead_held, report.handovers),
        (3, 1, 0)
    );
    let fine_direct = [
        lease_seen(10, Some("crash-1-a"), 0, 4),
        lease_seen(12, Some("crash-2-b"), 6, 6),
    ];
    let report = lease_violations(&fine_direct, &deaths);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert_eq!(report.handovers, 1);
    // A renewal at 7 s by the process that died at 5 s.
    let renewed = [lease_seen(10, Some("crash-1-a"), 0, 7)];
    let found = lease_violations(&renewed, &deaths).violations;
    assert!(
        found.len() == 1 && found[0].contains("after it died"),
        "{found:?}"
    );
    // crash-2 takes the Lease at 5 s, while crash-1's hold lasts until 6 s.
    let early = [
        lease_seen(10, Some("crash-1-a"), 0, 4),
        lease_seen(12, Some("crash-2-b"), 5, 5),
    ];
    let found = lease_violations(&early, &deaths).violations;
    assert!(
        found.len() == 1 && found[0].contains("taken by"),
        "{found:?}"
    );
}

#[test]
fn the_finalizer_check_names_what_keeps_one() {
    let writes = [lease_seen(1, None, 0, 0)];
    let objects = |finalizers: serde_json::Value| {
        move |_: &str, _: &str| {
            vec![
                serde_json::json!({"metadata": {"namespace": NS, "name": "x",
                "finalizers": finalizers.clone()}}),
            ]
        }
    };
    let mine = operator_finalizers_left(
        &writes,
        objects(serde_json::json!([
            "cinder.openstack.c5c3.io/service-remove"
        ])),
    );
    assert_eq!(
        mine,
        [format!(
            "leases {NS}/x: cinder.openstack.c5c3.io/service-remove"
        )]
    );
    assert!(
        operator_finalizers_left(&writes, objects(serde_json::json!(["kubernetes"]))).is_empty()
    );
    assert!(operator_finalizers_left(&writes, objects(serde_json::Value::Null)).is_empty());
}
