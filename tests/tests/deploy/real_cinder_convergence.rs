//! The first convergence on real parts: the operator (in-process) on an embedded cluster whose
//! only node is a process node, the Cinder image of each supported release in turn mapped to that
//! release's real Cinder root (tests/real-cinder/setup.sh), the mariadb-operator fixture on a
//! real MariaDB server and the sample's broker a real RabbitMQ, both reached by the pods through
//! their Services. The samples of `run --embedded --real-cinder` (tests/real-cinder/samples: the
//! deploy/samples Cinder with one API replica of one uWSGI process, so the 2-core machine holds
//! it, the RBD backend and an RBD backup target; no NFS parts, as there is no NFS server here and
//! a kubelet cannot mount the NFS backend's export, so that backend's pod would stay
//! ContainerCreating with FailedMount and the steps after VolumeServices would wait for it) are
//! applied at each release. Then:
//!
//! - the schema Jobs ran the real `cinder-manage db sync`: `cinder-manage db version` on the
//!   server is the release's alembic head;
//! - the API answers `/healthcheck` through its Service's ClusterIP;
//! - the real `cinder-manage service list` has the scheduler, `cinder-volume` on host
//!   `cinder@ceph` and `cinder-backup`, each registered by its real process (their RBD drivers
//!   on the set-up's single-node Ceph, whose working `real_cinder_ceph` checks; what the
//!   services log about their drivers is printed);
//! - the Cinder reaches Ready, and the time from applying the samples is printed;
//! - the Cinder user's connections on the server (sampled every 2 s during the convergence and
//!   after it) stay within its MAX_USER_CONNECTIONS, and no service logs MySQL error 1226.
//!
//! Needs root, the roots, the Debian servers and Ceph: without them it says so and passes, except
//! under `CI=true`, where it fails.

use cinder_e2e::real_cinder::Root;
use cinder_e2e::real_cinder_cluster::{
    RealCinderCluster, RealCinderOptions, ServiceRow, peak, real_cinder_roots,
};
use std::time::Duration;

/// How long the whole convergence may take on a busy 2-core machine.
const CONVERGENCE: Duration = Duration::from_secs(20 * 60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_samples_converge_on_real_cinder_mariadb_and_rabbitmq() {
    let Some(roots) = real_cinder_roots("the_samples_converge_on_real_cinder_mariadb_and_rabbitmq")
    else {
        return;
    };
    for root in &roots {
        converge(root).await;
    }
}

/// The samples at `root`'s release, from nothing to Ready and checked; everything stopped after.
async fn converge(root: &Root) {
    let release = root.release;
    eprintln!("== {release} (cinder {})", root.cinder);
    let cluster = RealCinderCluster::start(root, RealCinderOptions::default())
        .await
        .unwrap();
    assert_eq!(
        cluster.cinder().await.unwrap().spec.open_stack_release,
        release
    );

    // Until Ready (or the time is up); the Cinder user's connections on the server sampled
    // every 2 s, and some more samples with everything up.
    let sampler = cluster.sample_connections(Duration::from_secs(2));
    let ready = cluster.wait_ready(CONVERGENCE).await;
    let took = cluster.applied.elapsed();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let peak = peak(&sampler.stop().await);
    let cap = cluster.user_cap().await.unwrap();
    eprintln!("connections of the Cinder user: peak {peak} (sampled every 2 s), cap {cap}");
    assert!(peak > 0 && peak <= cap, "peak {peak} within the cap {cap}");
    eprintln!(
        "after {:.1} s: ready={}\n  {}\n  pods: {}",
        took.as_secs_f64(),
        ready.is_ok(),
        cluster.conditions_line().await,
        cluster.pods_line().await
    );

    let version = cluster.db_version().await.unwrap();
    let services = cluster.cinder_manage(&["service", "list"]).await.unwrap();
    eprintln!("cinder-manage db version: {version}\ncinder-manage service list:\n{services}");
    assert_eq!(
        version,
        cluster.alembic_head(root).unwrap(),
        "the schema is at {release}'s alembic head"
    );

    assert_eq!(
        cluster.api_health().await.unwrap(),
        "200",
        "GET /healthcheck through the Service"
    );

    let rows = ServiceRow::parse(&services);
    for (binary, host) in [
        ("cinder-scheduler", "cinder"),
        ("cinder-volume", "cinder@ceph"),
        ("cinder-backup", "cinder"),
    ] {
        assert!(
            rows.iter().any(|r| r.binary == binary && r.host == host),
            "{binary} on {host} in:\n{services}"
        );
    }
    if let Err(e) = ready {
        panic!("the Cinder reached Ready: {e}");
    }

    // What the services log about their RBD drivers.
    for (name, text) in cluster.pod_logs().await.unwrap() {
        if !(name.contains("-volume-") || name.contains("-backup-")) {
            continue;
        }
        let driver: Vec<&str> = text
            .lines()
            .filter(|l| l.contains(" ERROR ") || l.contains("Driver") || l.contains("driver"))
            .take(6)
            .collect();
        eprintln!("{name}:\n  {}", driver.join("\n  "));
        assert!(
            !text.contains("1226"),
            "{name} hit max_user_connections:\n{text}"
        );
    }

    cluster.stop().await.unwrap();
}
