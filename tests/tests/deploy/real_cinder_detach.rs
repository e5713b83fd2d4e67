//! Detach on real parts (the set-up of `real_cinder_convergence`), at 2026.1: the samples
//! converge, then the CinderBackend `ceph` is deleted. Shown:
//!
//! - the real `cinder-manage service remove cinder-volume cinder@ceph` of the
//!   `cinder-ceph-service-remove` Job runs only after the `cinder-volume` process of the backend
//!   has exited: the host's process table is read every 20 ms from before the deletion, and
//!   the first sighting of the Job's `cinder-manage service remove` process must come after the
//!   last sighting of the volume process (a Job that started while the process lived fails the
//!   test);
//! - the Job succeeded, the backend is gone (its finalizer released), and the services row of
//!   `cinder-volume` on `cinder@ceph` is gone from the real `cinder-manage service list`, while
//!   the scheduler's and the backup service's stay.

use cinder_e2e::real_cinder_cluster::{
    RealCinderCluster, RealCinderOptions, SAMPLES_NS, real_cinder_roots,
};
use cinder_operator::crd::CinderBackend;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams};
use std::time::{Duration, Instant};

const CONVERGENCE: Duration = Duration::from_secs(20 * 60);
const DETACH: Duration = Duration::from_secs(5 * 60);

/// A process of the host: its command line (words joined by spaces) and its mount table.
struct Process {
    cmdline: String,
    mounts: String,
}

/// Every process whose command line `matches`, with its mount table.
fn processes(matches: &dyn Fn(&str) -> bool) -> Vec<Process> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        e.file_name().to_str()?.parse::<u32>().ok()?;
        let raw = std::fs::read(e.path().join("cmdline")).ok()?;
        let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
        if !matches(&cmdline) {
            return None;
        }
        let mounts = std::fs::read_to_string(e.path().join("mountinfo")).unwrap_or_default();
        Some(Process { cmdline, mounts })
    })
    .collect()
}

fn is_volume_service(line: &str) -> bool {
    line.contains("cinder-volume") && line.contains("/etc/cinder-backends/ceph")
}

fn is_service_remove(line: &str) -> bool {
    line.contains("cinder-manage service remove cinder-volume cinder@ceph")
}

/// Whether `p` runs in a pod of a process node (its mounts come from a node agent's state
/// directory), not on the host (as the real_cinder_jobs test runs cinder-manage).
fn in_a_pod(p: &Process) -> bool {
    p.mounts.contains("cinder-agent-")
}

/// When the volume process was last seen and the service-remove process first, watched every
/// 20 ms until `stop` is set or both are known and the remove process is gone.
#[derive(Debug, Default)]
struct Sightings {
    volume_last: Option<Instant>,
    remove_first: Option<Instant>,
    remove_last: Option<Instant>,
}

/// The volume process is the one in the pod `volume_pod` (its UID in the mount table): other
/// tests of the binary run their own.
fn watch(volume_pod: String, stop: std::sync::mpsc::Receiver<()>) -> Sightings {
    let mut s = Sightings::default();
    loop {
        let now = Instant::now();
        for p in processes(&|l| is_volume_service(l) || is_service_remove(l)) {
            if is_volume_service(&p.cmdline) && p.mounts.contains(&volume_pod) {
                s.volume_last = Some(now);
            } else if is_service_remove(&p.cmdline) && in_a_pod(&p) {
                s.remove_first.get_or_insert(now);
                s.remove_last = Some(now);
            }
        }
        if stop.try_recv().is_ok() {
            return s;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detach_removes_the_service_after_the_volume_process_exited() {
    let Some(roots) =
        real_cinder_roots("detach_removes_the_service_after_the_volume_process_exited")
    else {
        return;
    };
    let cluster = RealCinderCluster::start(&roots[0], RealCinderOptions::default())
        .await
        .unwrap();
    cluster.wait_ready(CONVERGENCE).await.unwrap();
    let rows = cluster.service_list().await.unwrap();
    assert!(
        rows.iter()
            .any(|r| r.binary == "cinder-volume" && r.host == "cinder@ceph"),
        "{rows:#?}"
    );
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), SAMPLES_NS);
    let volume_pod = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|p| {
            p.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("cinder-volume-ceph-"))
        })
        .and_then(|p| p.metadata.uid)
        .expect("the volume pod");
    let running = processes(&is_volume_service);
    assert!(
        running.iter().any(|p| p.mounts.contains(&volume_pod)),
        "the volume process of cinder@ceph runs in pod {volume_pod} before the deletion \
         (mount tables of the volume processes:\n{})",
        running
            .iter()
            .map(|p| p.mounts.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );

    let (stop, stopped) = std::sync::mpsc::channel();
    let watcher = std::thread::spawn(move || watch(volume_pod, stopped));
    let backends: Api<CinderBackend> = Api::namespaced(cluster.client.clone(), SAMPLES_NS);
    let deleted = Instant::now();
    backends
        .delete("ceph", &DeleteParams::default())
        .await
        .unwrap();
    let jobs: Api<Job> = Api::namespaced(cluster.client.clone(), SAMPLES_NS);
    let since = Instant::now();
    loop {
        let gone = backends.get_opt("ceph").await.unwrap().is_none();
        if gone {
            break;
        }
        if since.elapsed() > DETACH {
            let _ = stop.send(());
            panic!(
                "the backend was not released within {} s\n  {}\n  pods: {}",
                DETACH.as_secs(),
                cluster.conditions_line().await,
                cluster.pods_line().await
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let released = deleted.elapsed();
    // The remove process has exited by now (the Job succeeded before the release).
    let _ = stop.send(());
    let seen = watcher.join().unwrap();
    let job = jobs.get_opt("cinder-ceph-service-remove").await.unwrap();
    eprintln!(
        "released after {:.1} s; job {:?}; sightings {seen:?}",
        released.as_secs_f64(),
        job.as_ref().and_then(|j| j.status.clone())
    );
    let volume_last = seen
        .volume_last
        .expect("the volume process was seen after the deletion");
    let remove_first = seen
        .remove_first
        .expect("the service-remove process was seen");
    eprintln!(
        "volume process last seen {:.2} s after the deletion, cinder-manage service remove first \
         seen {:.2} s after it",
        (volume_last - deleted).as_secs_f64(),
        (remove_first - deleted).as_secs_f64()
    );
    assert!(
        remove_first > volume_last,
        "cinder-manage service remove started while the volume process lived"
    );

    let rows = cluster.service_list().await.unwrap();
    eprintln!("service list after the detach: {rows:#?}");
    assert!(
        !rows.iter().any(|r| r.binary == "cinder-volume"),
        "the cinder-volume row is gone: {rows:#?}"
    );
    for binary in ["cinder-scheduler", "cinder-backup"] {
        assert!(rows.iter().any(|r| r.binary == binary), "{binary} stays");
    }
    cluster.stop().await.unwrap();
}
