//! What the userspace service proxy costs and how fast it follows endpoints, in wall time (needs
//! root and iproute2, like the proxy itself):
//!
//! - an HTTP request over a fresh connection to a ClusterIP against the same request straight to
//!   the endpoint (a host listener), and their ratio;
//! - from a Service's creation to its ClusterIP answering;
//! - from an endpoint's readiness flip (a `pods/status` write) to the ClusterIP refusing
//!   connections, and from the flip back to it answering again (median and worst of the rounds).
//!
//! `cargo run -p cinder-sim --example service_proxy_costs` prints one line per figure.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use cinder_sim::controllers::{ControllersConfig, Switch};
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const REQUESTS: usize = 500;
const FLIPS: usize = 20;

/// A minimal HTTP server: every request gets `200 OK` with a two-byte body, then close.
async fn serve(listener: TcpListener) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            let _ = stream.read(&mut buf).await;
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                .await;
        });
    }
}

/// One request over a fresh connection; whether it was answered 200.
async fn request(address: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect(address).await else {
        return false;
    };
    if stream
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .is_err()
    {
        return false;
    }
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    answer.starts_with(b"HTTP/1.1 200")
}

/// Mean wall time of `REQUESTS` sequential requests to `address`.
async fn mean_request(address: SocketAddr) -> Duration {
    let start = Instant::now();
    for _ in 0..REQUESTS {
        assert!(request(address).await, "{address} did not answer");
    }
    start.elapsed() / REQUESTS as u32
}

/// How long until `done(address)` holds, polled every millisecond.
async fn until(address: SocketAddr, answered: bool) -> Duration {
    let start = Instant::now();
    while request(address).await != answered {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{address} never changed"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    start.elapsed()
}

async fn set_ready(pods: &Api<Pod>, ready: bool) {
    let status = if ready { "True" } else { "False" };
    pods.patch_status(
        "backend",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running", "podIP": "127.0.0.1",
            "podIPs": [{"ip": "127.0.0.1"}], "conditions": [{"type": "Ready", "status": status}]}})),
    )
    .await
    .expect("pod status written");
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut controllers = ControllersConfig::all_off();
    controllers.endpoints = Switch::default();
    let cluster = match EmbeddedCluster::start(ClusterConfig {
        controllers,
        service_proxy: true,
        ..ClusterConfig::default()
    })
    .await
    {
        Ok(cluster) => cluster,
        Err(error) => {
            eprintln!("service_proxy_costs: {error}");
            std::process::exit(1);
        }
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
    let direct = listener.local_addr().expect("its address");
    tokio::spawn(serve(listener));

    let client = cluster.client().await;
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "host"}})).expect("node");
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("node created");
    nodes
        .patch_status(
            "host",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"nodeInfo": {"containerRuntimeVersion": "process://bench"}}}),
            ),
        )
        .await
        .expect("node status");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "backend", "labels": {"app": "backend"}},
        "spec": {"nodeName": "host", "containers": [{"name": "c", "image": "host"}]},
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod created");
    set_ready(&pods, true).await;

    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "backend"},
        "spec": {"selector": {"app": "backend"}, "ports": [{"port": 80, "targetPort": direct.port()}]},
    }))
    .expect("service");
    let created_at = Instant::now();
    let ip: Ipv4Addr = services
        .create(&PostParams::default(), &service)
        .await
        .expect("service created")
        .spec
        .and_then(|s| s.cluster_ip)
        .and_then(|ip| ip.parse().ok())
        .expect("a ClusterIP");
    let front = SocketAddr::from((ip, 80));
    while !request(front).await {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let startup = created_at.elapsed();

    let straight = mean_request(direct).await;
    let proxied = mean_request(front).await;

    let mut refused = Vec::new();
    let mut served = Vec::new();
    for _ in 0..FLIPS {
        set_ready(&pods, false).await;
        refused.push(until(front, false).await);
        set_ready(&pods, true).await;
        served.push(until(front, true).await);
    }
    refused.sort();
    served.sort();
    println!(
        "request straight to the endpoint      {:>8.3} ms",
        ms(straight)
    );
    println!(
        "request through the ClusterIP         {:>8.3} ms  (ratio {:.2})",
        ms(proxied),
        proxied.as_secs_f64() / straight.as_secs_f64()
    );
    println!(
        "Service created → ClusterIP answers   {:>8.1} ms",
        ms(startup)
    );
    println!(
        "not ready → connections refused       {:>8.1} ms median, {:.1} ms worst of {FLIPS}",
        ms(refused[FLIPS / 2]),
        ms(refused[FLIPS - 1])
    );
    println!(
        "ready again → ClusterIP answers       {:>8.1} ms median, {:.1} ms worst of {FLIPS}",
        ms(served[FLIPS / 2]),
        ms(served[FLIPS - 1])
    );
    cluster.shutdown().await;
}
