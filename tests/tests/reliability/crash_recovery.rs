//! Crash recovery within a bound: the operator binary, with 5 s Leases, is SIGKILLed four times
//! at seeded random moments of the first twenty seconds of a first convergence (restarted at
//! once each time), then left alone; the Cinder must be Ready within [`RECOVERY_BOUND`] of the
//! last kill. Three seeds for each of two topologies (the fixture Cinder with one backend, and
//! `deploy/samples`), each run on its own cluster (embedded, or real with
//! `CINDER_E2E_CLUSTER=real`), whose db-sync Job (10 s) and rollouts (5 s each; on a real
//! control plane each ReplicaSet pod's start) make the convergence outlast the kill window. What a killed process
//! leaves behind is bounded: its device Leases expire one Lease duration after its last renewal,
//! a Job it created is found by name and waited for by its successor, and back-off state lives
//! in the process only. The bound leaves twice the convergence (about 30 s) for it.
//!
//! `CINDER_RECOVERY_SEED` repeats the kill points of a failed run (its seed is in the failure).

use cinder_e2e::database_helpers::*;
use cinder_e2e::deploy_helpers::repo_root;
use cinder_e2e::operator_process::*;
use cinder_e2e::test_cluster::TestCluster;
use cinder_e2e::*;
use cinder_operator::embedded::{apply, read_bootstrap};
use cinder_sim::ClusterConfig;
use cinder_sim::controllers::PodOutcome;
use cinder_sim::controllers::config::Switch;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};

const CINDER: &str = "recover";
/// `--lease-duration` of every process, as in the run the bound was first missed on.
const LEASE_SECONDS: u64 = 5;
/// How long after the last kill the Cinder must be Ready.
const RECOVERY_BOUND: Duration = Duration::from_secs(60);
/// Kills per run, all within the first [`KILL_WINDOW`].
const KILLS: usize = 4;
const KILL_WINDOW: Duration = Duration::from_secs(20);
const SEEDS: u64 = 3;
/// How long the db-sync Job and each Deployment rollout take.
const DB_SYNC: Duration = Duration::from_secs(10);
const ROLLOUT: Duration = Duration::from_secs(5);

/// The kill moments of `seed`: [`KILLS`] points uniform in the window, in order.
fn kill_points(seed: u64) -> Vec<Duration> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let window = KILL_WINDOW.as_millis() as u64;
    let mut points: Vec<Duration> = (0..KILLS)
        .map(|_| Duration::from_millis(rng.random_range(200..=window)))
        .collect();
    points.sort();
    points
}

/// What converges while the kills land.
#[derive(Clone, Copy, Debug)]
enum Topology {
    /// The test fixtures' Cinder with one NFS backend.
    Fixture,
    /// `deploy/samples` (two backends, a backup target) on the cluster `run --embedded` starts
    /// (its secret stores and MariaDB at their default pace).
    Samples,
}

impl Topology {
    /// The namespace and name of the Cinder that must become Ready.
    fn cinder(self) -> (&'static str, &'static str) {
        match self {
            Topology::Fixture => (NS, CINDER),
            Topology::Samples => ("openstack", "cinder"),
        }
    }
}

/// The conditions of the Cinder `topology` converges.
async fn conditions_of(client: &kube::Client, topology: Topology) -> Vec<Condition> {
    let (ns, name) = topology.cinder();
    cinder_e2e::waiting::cinder_conditions_in(client, ns, name).await
}

/// One run: kills at the seed's points, then the time from the last kill to Ready.
async fn run(seed: u64, topology: Topology) -> anyhow::Result<Duration> {
    let kubeconfig = std::env::temp_dir().join(format!("cinder-recovery-{seed}.kubeconfig"));
    let mut config = match topology {
        Topology::Fixture => HarnessConfig::default().cluster,
        Topology::Samples => ClusterConfig::default(),
    };
    config.kubeconfig_path = Some(kubeconfig.clone());
    // A convergence longer than the kill window: every kill lands in it (on a real control
    // plane the delay is how long a ReplicaSet's pod takes to start).
    config.controllers.deployments.switch = Switch::on(ROLLOUT);
    let cluster = TestCluster::start(config).await?;
    let outcome =
        converge_through_kills(&cluster, &cluster.kubeconfig_path(), seed, topology).await;
    cluster.shutdown().await;
    let _ = std::fs::remove_file(&kubeconfig);
    outcome
}

async fn converge_through_kills(
    cluster: &TestCluster,
    kubeconfig: &std::path::Path,
    seed: u64,
    topology: Topology,
) -> anyhow::Result<Duration> {
    let client = cluster.client().await;
    install_crds(&client).await?;
    create_namespace(&client, NS).await?;
    let logs = tempfile::tempdir()?;
    let start = |n: usize| {
        OperatorProcess::start(
            kubeconfig,
            &format!("recover-{n}"),
            NS,
            LEASE_SECONDS,
            logs.path(),
        )
    };
    job_rule(cluster, "-db-sync", PodOutcome::success(), DB_SYNC)?;
    let mut current;
    match topology {
        Topology::Fixture => {
            current = start(0)?;
            database_environment(&client, CINDER).await?;
            create_cinder(&client, CINDER, serde_json::json!({})).await?;
            create_nfs_backend(&client, "recover-nfs", CINDER).await?;
        }
        Topology::Samples => {
            current = start(0)?;
            // What run --embedded applies: the samples and the embedded cluster's fixtures.
            let samples = read_bootstrap(&repo_root().join("deploy/samples"))?;
            apply(&client, &samples).await?;
        }
    }
    let began = Instant::now();
    for (n, at) in kill_points(seed).into_iter().enumerate() {
        tokio::time::sleep(at.saturating_sub(began.elapsed())).await;
        if let Some(status) = current.exited() {
            anyhow::bail!(
                "operator {} exited by itself ({status}); its log ends:\n{}",
                current.pod,
                current.log_tail(30)
            );
        }
        current.kill()?;
        current = start(n + 1)?;
    }
    let last_kill = Instant::now();
    let conditions = conditions_of(&client, topology).await;
    anyhow::ensure!(
        condition(&conditions, "Ready").is_none_or(|c| c.status != "True"),
        "Ready before the last kill: the kills missed the convergence"
    );
    let ready = tokio::time::timeout(RECOVERY_BOUND, async {
        loop {
            let conditions = conditions_of(&client, topology).await;
            if condition(&conditions, "Ready").is_some_and(|c| c.status == "True") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    let took = last_kill.elapsed();
    if ready.is_err() {
        let conditions = conditions_of(&client, topology).await;
        anyhow::bail!(
            "not Ready {took:?} after the last kill (bound {RECOVERY_BOUND:?}); \
             conditions {:#?}; the operator's log ends:\n{}",
            conditions
                .iter()
                .map(|c| format!("{}={}/{}: {}", c.type_, c.status, c.reason, c.message))
                .collect::<Vec<_>>(),
            current.log_tail(40)
        );
    }
    Ok(took)
}

/// Runs every seed on `topology`.
async fn every_seed(topology: Topology) {
    let first = seed_from_env("CINDER_RECOVERY_SEED");
    let seeds: Vec<u64> = if std::env::var("CINDER_RECOVERY_SEED").is_ok() {
        vec![first]
    } else {
        (0..SEEDS).map(|i| first.wrapping_add(i)).collect()
    };
    for seed in seeds {
        match run(seed, topology).await {
            Ok(took) => eprintln!(
                "crash recovery ({topology:?}): seed {seed}, kills at {:?}: Ready {took:?} after \
                 the last kill",
                kill_points(seed)
            ),
            Err(e) => panic!(
                "crash recovery with seed {seed} (CINDER_RECOVERY_SEED={seed} repeats it): {e:#}"
            ),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_within_the_bound_after_the_last_kill() {
    every_seed(Topology::Fixture).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_samples_ready_within_the_bound_after_the_last_kill() {
    every_seed(Topology::Samples).await;
}
