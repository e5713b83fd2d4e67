//! Two `cinder-operator run --leader-elect` binaries pointed (through KUBECONFIG) at one embedded
//! cluster started by the test: one holds the Lease `cinder-operator-leader` with the
//! `--lease-duration` given and is ready with `cinder_operator_leader 1`; the other, a standby,
//! is ready too (/readyz 200: the Deployment's rolling update needs every replica Ready) with
//! `cinder_operator_leader 0`; on SIGTERM the leader exits 0 and releases the Lease, and the
//! other takes over (its gauge turns 1).

use crate::support::*;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_cinder-operator");

struct Replica {
    child: Child,
    probes: SocketAddr,
    metrics: SocketAddr,
}

/// Starts `run --leader-elect` as pod `pod`; returns once it printed its probe address.
fn start(kubeconfig: &std::path::Path, pod: &str) -> Replica {
    let mut child = Command::new(BIN)
        .args([
            "run",
            "--health-check-through-api-server",
            "--leader-elect",
            "--lease-duration",
            "20",
            "--metrics-bind",
            "127.0.0.1:0",
            "--probe-bind",
            "127.0.0.1:0",
            "--admin-bind",
            "127.0.0.1:0",
        ])
        .env("KUBECONFIG", kubeconfig)
        .env("POD_NAME", pod)
        .env("POD_NAMESPACE", "default")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary starts");
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    std::thread::spawn(move || {
        let mut sink = String::new();
        let _ = stderr.read_to_string(&mut sink);
        eprint!("{sink}");
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let addr = |rest: &str| -> SocketAddr {
        let hostport = rest.trim().trim_start_matches("http://");
        hostport.split('/').next().unwrap().parse().unwrap()
    };
    let mut metrics = None;
    while Instant::now() < deadline {
        let Ok(line) = lines.recv_timeout(Duration::from_millis(200)) else {
            continue;
        };
        if let Some(rest) = line.strip_prefix("metrics:") {
            metrics = Some(addr(rest));
        }
        if let Some(rest) = line.strip_prefix("probes:")
            && let Some(metrics) = metrics
        {
            return Replica {
                child,
                probes: addr(rest),
                metrics,
            };
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("{pod} printed no probe address");
}

impl Drop for Replica {
    /// A failed test leaves no operator running.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn terminate(replica: &mut Replica) -> Option<i32> {
    let pid = replica.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(status) = replica.child.try_wait().unwrap() {
            return status.code();
        }
        if Instant::now() > deadline {
            let _ = replica.child.kill();
            panic!("the operator did not exit within 90 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The value of `cinder_operator_leader` on `replica`'s /metrics.
async fn leader_gauge(replica: &Replica) -> Option<i64> {
    get(replica.metrics, "/metrics")
        .await
        .body
        .lines()
        .find_map(|l| l.strip_prefix("cinder_operator_leader "))
        .and_then(|v| v.trim().parse().ok())
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get_opt("cinder-operator-leader")
        .await
        .unwrap()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_binary_releases_on_sigterm_and_the_other_takes_over() {
    let (cluster, client) = cluster_with_crds().await;
    let kubeconfig =
        std::env::temp_dir().join(format!("cinder-leader-{}.kubeconfig", uuid::Uuid::new_v4()));
    std::fs::write(&kubeconfig, cluster.kubeconfig_yaml()).unwrap();
    let leases: Api<Lease> = Api::namespaced(client, "default");

    let mut first = start(&kubeconfig, "replica-one");
    eventually("replica-one holds the leader Lease", || async {
        holder(&leases)
            .await
            .is_some_and(|h| h.starts_with("replica-one-"))
    })
    .await;
    let lease = leases.get("cinder-operator-leader").await.unwrap();
    assert_eq!(
        lease.spec.unwrap_or_default().lease_duration_seconds,
        Some(20),
        "--lease-duration sets the leader Lease's duration"
    );
    eventually("replica-one's /readyz answers 200", || async {
        get(first.probes, "/readyz").await.status == 200
    })
    .await;

    eventually("replica-one's gauge is 1", || async {
        leader_gauge(&first).await == Some(1)
    })
    .await;

    let mut second = start(&kubeconfig, "replica-two");
    let readyz = get(second.probes, "/readyz").await;
    assert_eq!(readyz.status, 200, "a standby is Ready: {}", readyz.body);
    assert_eq!(get(second.probes, "/healthz").await.status, 200);
    assert_eq!(leader_gauge(&second).await, Some(0));

    // SIGTERM: the leader exits 0 and releases the Lease; the other leads well before the
    // released Lease would have expired (20 s after its last renewal).
    assert_eq!(terminate(&mut first), Some(0));
    let after_exit = holder(&leases).await;
    assert!(
        after_exit
            .as_deref()
            .is_none_or(|h| h.starts_with("replica-two-")),
        "the exited leader still holds the Lease: {after_exit:?}"
    );
    eventually("replica-two holds the leader Lease", || async {
        holder(&leases)
            .await
            .is_some_and(|h| h.starts_with("replica-two-"))
    })
    .await;
    eventually("replica-two's gauge is 1", || async {
        leader_gauge(&second).await == Some(1)
    })
    .await;
    // A new leader answers 503 only while its controllers sync.
    eventually("replica-two's /readyz answers 200", || async {
        get(second.probes, "/readyz").await.status == 200
    })
    .await;
    assert_eq!(terminate(&mut second), Some(0));
    assert_eq!(holder(&leases).await, None, "released on SIGTERM");
    let _ = std::fs::remove_file(&kubeconfig);
    cluster.shutdown().await;
}
