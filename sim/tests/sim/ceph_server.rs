//! The real single-node Ceph ([`CephServer`]): it starts, `client.cinder` writes an RBD image in
//! `volumes` and reads it back from the host and from a pod network namespace made as the process
//! nodes make them (its own loopback, a default route through the instance's bridge), the
//! users' caps keep each to its pool, `ceph df` lists the pools for `client.cinder` (what Cinder's
//! RBD driver reads), and dropping the server leaves none of its processes and no directory.
//!
//! Needs root (the network namespace) and the Debian Ceph packages (tests/real-cinder/setup.sh):
//! without them it says so and passes, except under `CI=true`.

use crate::common::{alive, is_root, runs_unless_missing};
use cinder_sim::agent::sandbox::{Network, PodNetwork};
use cinder_sim::real_servers::CephServer;
use cinder_sim::real_servers::ceph::{BACKUP_USER, BACKUPS_POOL, VOLUME_USER, VOLUMES_POOL};
use std::process::Command;
use std::time::{Duration, Instant};

fn prerequisites(test: &str) -> bool {
    let missing = if !is_root() {
        Some("pod network namespaces need root")
    } else if !CephServer::available() {
        Some("the Ceph packages are not installed: run tests/real-cinder/setup.sh")
    } else {
        None
    };
    runs_unless_missing(test, missing)
}

/// `rbd ARGS` as `client.<user>` inside network namespace `netns`.
fn rbd_in(
    netns: &str,
    conf: &std::path::Path,
    user: &str,
    args: &[&str],
) -> Result<String, String> {
    let out = Command::new("ip")
        .args(["netns", "exec", netns, "rbd", "--conf"])
        .arg(conf)
        .args(["--id", user])
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_ceph_serves_rbd_images_to_its_users_from_the_host_and_from_a_pod_namespace() {
    if !prerequisites("a_real_ceph_serves_rbd_images_to_its_users") {
        return;
    }
    let started = Instant::now();
    let ceph = tokio::task::spawn_blocking(CephServer::start)
        .await
        .unwrap()
        .unwrap();
    eprintln!(
        "ceph up after {:.1} s: {ceph:?}",
        started.elapsed().as_secs_f64()
    );
    let pids = ceph.pids();
    assert_eq!(pids.len(), 3, "mon, osd and mgr");
    assert!(pids.iter().all(|p| alive(*p)));
    let dir = ceph.conf().parent().unwrap().to_owned();
    assert!(!ceph.address().is_loopback(), "{}", ceph.address());
    assert!(
        ceph.monitor().starts_with(&format!("{}:", ceph.address())),
        "{}",
        ceph.monitor()
    );

    // Size 1, RBD's pools.
    for pool in [VOLUMES_POOL, BACKUPS_POOL] {
        let size = ceph.ceph(&["osd", "pool", "get", pool, "size"]).unwrap();
        assert_eq!(size.trim(), "size: 1", "{pool}");
        let apps = ceph
            .ceph(&["osd", "pool", "application", "get", pool])
            .unwrap();
        assert!(apps.contains("rbd"), "{pool}: {apps}");
    }

    // client.cinder writes an image from the host and reads it back.
    let data: Vec<u8> = (0..(4u32 << 20)).map(|i| (i % 251) as u8).collect();
    let scratch = tempfile::tempdir().unwrap();
    let input = scratch.path().join("in");
    std::fs::write(&input, &data).unwrap();
    let image = format!("{VOLUMES_POOL}/probe");
    ceph.rbd_as(VOLUME_USER, &["import", input.to_str().unwrap(), &image])
        .unwrap();
    let back = scratch.path().join("back");
    ceph.rbd_as(VOLUME_USER, &["export", &image, back.to_str().unwrap()])
        .unwrap();
    assert!(
        std::fs::read(&back).unwrap() == data,
        "the image read back differs"
    );
    let listed = ceph.rbd_as(VOLUME_USER, &["ls", VOLUMES_POOL]).unwrap();
    assert_eq!(listed.trim(), "probe");
    assert!(ceph.authentications("client.cinder") >= 3);
    assert_eq!(ceph.authentications("client.cinder-backup"), 0);

    // cephx: another key is refused.
    let wrong = scratch.path().join("wrong.keyring");
    std::fs::write(
        &wrong,
        "[client.cinder]\n\tkey = AQBU1RZrcWW2GBAA2PWF4RCOWdmDoab5wZQtSA==\n",
    )
    .unwrap();
    let wrong_conf = scratch.path().join("wrong.conf");
    std::fs::write(
        &wrong_conf,
        format!(
            "[global]\nmon_host = {}\nkeyring = {}\nclient_mount_timeout = 10\n",
            ceph.monitor(),
            wrong.display()
        ),
    )
    .unwrap();
    let refused = Command::new("rbd")
        .arg("--conf")
        .arg(&wrong_conf)
        .args(["--id", VOLUME_USER, "ls", VOLUMES_POOL])
        .output()
        .unwrap();
    assert!(!refused.status.success(), "a wrong key was accepted");

    // Each user is kept to its pool.
    let denied = ceph.rbd_as(VOLUME_USER, &["create", "--size", "8", "backups/x"]);
    assert!(denied.is_err(), "client.cinder wrote in backups");
    ceph.rbd_as(BACKUP_USER, &["create", "--size", "8", "backups/x"])
        .unwrap();
    let denied = ceph.rbd_as(BACKUP_USER, &["create", "--size", "8", "volumes/x"]);
    assert!(denied.is_err(), "client.cinder-backup wrote in volumes");

    // `ceph df` as client.cinder lists its pool (the RBD driver's capacity report).
    let conf = ceph.client_conf(VOLUME_USER).unwrap();
    let out = Command::new("ceph")
        .arg("--conf")
        .arg(&conf)
        .args(["--id", VOLUME_USER, "df", "--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let df: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pool = df["pools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == VOLUMES_POOL)
        .unwrap_or_else(|| panic!("no volumes pool in {df}"));
    assert!(pool["stats"]["max_avail"].as_u64().unwrap() > 0, "{pool}");

    // From a pod's network namespace: the monitor and the OSD at the advertised address.
    let network = Network::create().await.unwrap();
    let pod = PodNetwork::create(&network, 7).await;
    let from_pod = pod.as_ref().map_err(Clone::clone).and_then(|pod| {
        let back = scratch.path().join("from-pod");
        rbd_in(
            &pod.netns,
            &conf,
            VOLUME_USER,
            &["export", &image, back.to_str().unwrap()],
        )?;
        Ok(std::fs::read(&back).map_err(|e| e.to_string())? == data)
    });
    if let Ok(pod) = &pod {
        pod.remove_blocking();
    }
    network.remove_blocking();
    assert_eq!(from_pod, Ok(true), "reading the image from a pod namespace");

    let stopping = Instant::now();
    drop(ceph);
    eprintln!("ceph stopped in {:.1} s", stopping.elapsed().as_secs_f64());
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|p| alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    for pid in pids {
        assert!(!alive(pid), "ceph daemon {pid} left running");
    }
    assert!(!dir.exists(), "{} left behind", dir.display());
}
