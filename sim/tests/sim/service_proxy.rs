//! The service proxy and the Service proxy subresource against real listeners. These tests
//! need root (network namespaces, veth pairs, the proxy's host interface), iproute2, python3
//! (the listeners are Python HTTP file servers), curl and ss; without them they say so and pass,
//! except under `CI=true`, where they fail.
//!
//! Each test makes network namespaces standing in for pods (a veth pair: the host side is the
//! pod's gateway, the pod side its IP), a Node whose runtime is not the simulated one, and Pods
//! whose status the test writes (the simulated kubelet is off), so the EndpointSlice controller
//! lists them and the proxy forwards to them.

use std::net::Ipv4Addr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use cinder_sim::controllers::{ControllersConfig, Switch};
use cinder_sim::{ClusterConfig, EmbeddedCluster, ServiceFault};
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{eventually, raw};

/// Whether the tools these tests need are here; under CI their absence fails the test.
fn prerequisites() -> bool {
    let root = unsafe { libc::geteuid() } == 0;
    let tool = |name: &str, arg: &str| {
        Command::new(name)
            .arg(arg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let missing: Vec<&str> = [
        (!root).then_some("root"),
        (!tool("ip", "-V")).then_some("iproute2"),
        (!tool("python3", "--version")).then_some("python3"),
        (!tool("curl", "--version")).then_some("curl"),
        (!tool("ss", "-V")).then_some("ss"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if missing.is_empty() {
        return true;
    }
    let why = format!("service proxy tests need {}", missing.join(", "));
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{why} (CI=true: not skipped)");
    }
    eprintln!("skipped: {why}");
    false
}

fn run_ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A network namespace joined to the host by a veth pair (/30: host side .1, inside .2, the
/// default route through the host side), optionally with an HTTP listener inside that serves
/// `whoami` (its name).
struct PodNet {
    name: String,
    ip: Ipv4Addr,
    listener: Option<Child>,
    dir: tempfile::TempDir,
}

impl PodNet {
    fn new(tag: &str) -> PodNet {
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let index = (std::process::id() * 16 + n) % 16_384;
        let (third, fourth) = (index / 64, (index % 64) * 4);
        let name = format!("cst{}{tag}{n}", std::process::id() % 100_000);
        let host_if = format!("h{}", &name[3..]);
        let pod_if = format!("p{}", &name[3..]);
        let gateway = format!("10.252.{third}.{}", fourth + 1);
        let ip: Ipv4Addr = format!("10.252.{third}.{}", fourth + 2).parse().unwrap();
        run_ip(&["netns", "add", &name]);
        run_ip(&[
            "link", "add", &host_if, "type", "veth", "peer", "name", &pod_if,
        ]);
        run_ip(&["link", "set", &pod_if, "netns", &name]);
        run_ip(&["addr", "add", &format!("{gateway}/30"), "dev", &host_if]);
        run_ip(&["link", "set", &host_if, "up"]);
        let inside = |args: &[&str]| {
            let mut all = vec!["netns", "exec", &name, "ip"];
            all.extend_from_slice(args);
            run_ip(&all);
        };
        inside(&["addr", "add", &format!("{ip}/30"), "dev", &pod_if]);
        inside(&["link", "set", &pod_if, "up"]);
        inside(&["link", "set", "lo", "up"]);
        inside(&["route", "add", "default", "via", &gateway]);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("whoami"), tag).unwrap();
        PodNet {
            name,
            ip,
            listener: None,
            dir,
        }
    }

    /// Starts an HTTP file server on the namespace's address.
    fn listen(&mut self, port: u16) {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.name]);
        let child = http_server(command, &self.ip.to_string(), port, self.dir.path());
        self.listener = Some(child);
        let address = format!("{}:{port}", self.ip);
        for _ in 0..100 {
            if std::net::TcpStream::connect(&address).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the listener on {address} did not start");
    }

    /// `curl` run inside the namespace: (exit code, body).
    fn curl(&self, url: &str) -> (i32, String) {
        curl_in(Some(&self.name), url)
    }
}

impl Drop for PodNet {
    fn drop(&mut self) {
        if let Some(mut child) = self.listener.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Deleting the namespace deletes its veth end, and so the pair.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// A Python HTTP server of `dir` on `address:port`, run by `command` (`ip netns exec NS`, or
/// nothing). `http.server`'s own start looks its address up in DNS, which a namespace without a
/// resolver waits for: this one does not.
fn http_server(mut command: Command, address: &str, port: u16, dir: &std::path::Path) -> Child {
    const SERVER: &str = r#"
import functools, http.server, socketserver, sys
class Server(http.server.ThreadingHTTPServer):
    def server_bind(self):
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = 'pod', self.server_address[1]
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[3])
Server((sys.argv[1], int(sys.argv[2])), handler).serve_forever()
"#;
    if command.get_program() == "ip" {
        command.arg("python3");
    }
    command
        .args(["-c", SERVER, address, &port.to_string()])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// `curl -s --max-time 5 URL`, on the host or inside `netns`: (exit code, body).
fn curl_in(netns: Option<&str>, url: &str) -> (i32, String) {
    let mut command = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "curl"]);
            c
        }
        None => Command::new("curl"),
    };
    let out = command
        .args(["-s", "--max-time", "5", url])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

async fn proxy_cluster() -> EmbeddedCluster {
    let mut controllers = ControllersConfig::all_off();
    controllers.endpoints = Switch::default();
    EmbeddedCluster::start(ClusterConfig {
        controllers,
        service_proxy: true,
        ..ClusterConfig::default()
    })
    .await
    .unwrap()
}

/// A Node served by something other than the simulated kubelet.
async fn process_node(client: &kube::Client) {
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "proc-1", "labels": {"topology.kubernetes.io/zone": "local"}},
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    nodes
        .patch_status(
            "proc-1",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"nodeInfo": {"containerRuntimeVersion": "process://test"}}}),
            ),
        )
        .await
        .unwrap();
}

/// A running pod on proc-1 at `ip`, Ready as told.
async fn running_pod(client: &kube::Client, name: &str, ip: Ipv4Addr, ready: bool) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "echo"}},
        "spec": {"nodeName": "proc-1", "containers": [{"name": "main", "image": "python:3",
                  "ports": [{"name": "http", "containerPort": 8080}]}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    set_ready(client, name, ip, ready).await;
}

async fn set_ready(client: &kube::Client, name: &str, ip: Ipv4Addr, ready: bool) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let status = if ready { "True" } else { "False" };
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "phase": "Running", "podIP": ip.to_string(), "podIPs": [{"ip": ip.to_string()}],
            "conditions": [{"type": "Ready", "status": status}],
        }})),
    )
    .await
    .unwrap();
}

async fn echo_service(client: &kube::Client) -> Ipv4Addr {
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "echo"},
        "spec": {"selector": {"app": "echo"},
                 "ports": [{"name": "http", "port": 80, "targetPort": "http"}]},
    }))
    .unwrap();
    let created = services
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
    created.spec.unwrap().cluster_ip.unwrap().parse().unwrap()
}

/// The bodies of `n` requests from the host to `url`.
fn answers(n: usize, url: &str) -> Vec<String> {
    (0..n).map(|_| curl_in(None, url).1).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_ips_reach_ready_endpoints_from_host_and_pods() {
    if !prerequisites() {
        return;
    }
    let mut a = PodNet::new("a");
    let mut b = PodNet::new("b");
    let client_ns = PodNet::new("c");
    a.listen(8080);
    b.listen(8080);
    let c = proxy_cluster().await;
    let client = c.client().await;
    let proxy = c.service_proxy().unwrap();
    process_node(&client).await;
    running_pod(&client, "echo-a", a.ip, true).await;
    running_pod(&client, "echo-b", b.ip, true).await;
    let cluster_ip = echo_service(&client).await;
    assert!(c.service_cidr().allocatable(cluster_ip));
    let front: std::net::SocketAddrV4 = format!("{cluster_ip}:80").parse().unwrap();
    let backend = |ip: Ipv4Addr| std::net::SocketAddrV4::new(ip, 8080);
    let mut both = vec![backend(a.ip), backend(b.ip)];
    both.sort();
    let want = both.clone();
    tokio::time::timeout(
        Duration::from_secs(30),
        proxy.wait_for(|p| p.frontends.get(&front) == Some(&want)),
    )
    .await
    .expect("the proxy serves both endpoints");
    let url = format!("http://{cluster_ip}/whoami");

    // From the host: round robin over both.
    let seen = tokio::task::spawn_blocking({
        let url = url.clone();
        move || answers(6, &url)
    })
    .await
    .unwrap();
    assert!(
        seen.iter().any(|s| s == "a") && seen.iter().any(|s| s == "b"),
        "{seen:?}"
    );
    assert!(seen.iter().all(|s| s == "a" || s == "b"), "{seen:?}");

    // From another pod, through its gateway.
    let (code, body) = client_ns.curl(&url);
    assert_eq!(code, 0, "curl from the pod namespace failed");
    assert!(body == "a" || body == "b", "{body:?}");

    // echo-b stops being ready: only a answers.
    set_ready(&client, "echo-b", b.ip, false).await;
    let only_a = vec![backend(a.ip)];
    tokio::time::timeout(
        Duration::from_secs(30),
        proxy.wait_for(|p| p.frontends.get(&front) == Some(&only_a)),
    )
    .await
    .expect("the proxy drops the endpoint that is not ready");
    let seen = tokio::task::spawn_blocking({
        let url = url.clone();
        move || answers(4, &url)
    })
    .await
    .unwrap();
    assert_eq!(seen, vec!["a"; 4]);

    // The Service proxy subresource forwards to a real endpoint (kubectl get --raw).
    let raw_path = "/api/v1/namespaces/default/services/echo:http/proxy/whoami";
    let kubectl = Command::new("kubectl")
        .args(["--kubeconfig"])
        .arg(c.kubeconfig_path())
        .args(["get", "--raw", raw_path])
        .output();
    match kubectl {
        Ok(out) => {
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(String::from_utf8_lossy(&out.stdout), "a");
        }
        Err(error) => eprintln!("kubectl not run ({error}); checked over HTTP below"),
    }
    let answered = raw(&c.url(), "GET", &format!("{raw_path}?x=1"), &[], "").await;
    assert_eq!((answered.code, answered.body.as_str()), (200, "a"));
    // The method and body reach the endpoint (http.server answers POST with 501).
    let posted = raw(
        &c.url(),
        "POST",
        "/api/v1/namespaces/default/services/echo:80/proxy/whoami",
        &[("Content-Type", "text/plain")],
        "hello",
    )
    .await;
    assert_eq!(posted.code, 501, "{}", posted.body);
    assert!(
        posted.body.contains("Unsupported method ('POST')"),
        "{}",
        posted.body
    );
    // Fault injection still decides first.
    c.faults().set_service_fault(ServiceFault {
        namespace: "default".into(),
        name: "echo".into(),
        status: Some(500),
        delay: Duration::ZERO,
    });
    let forced = raw(&c.url(), "GET", raw_path, &[], "").await;
    assert_eq!(forced.code, 500);
    c.faults().clear_service_fault("default", "echo");

    // No endpoint ready: connections are refused; the subresource answers 503 with a Status.
    set_ready(&client, "echo-a", a.ip, false).await;
    tokio::time::timeout(
        Duration::from_secs(30),
        proxy.wait_for(|p| !p.frontends.contains_key(&front) && p.addresses.contains(&cluster_ip)),
    )
    .await
    .expect("the proxy stops listening");
    let (code, _) = tokio::task::spawn_blocking({
        let url = url.clone();
        move || curl_in(None, &url)
    })
    .await
    .unwrap();
    assert_eq!(code, 7, "curl should fail to connect (exit 7)");
    let unavailable = raw(&c.url(), "GET", raw_path, &[], "").await;
    assert_eq!(unavailable.code, 503);
    assert_eq!(unavailable.json()["kind"], "Status");
    assert_eq!(unavailable.json()["reason"], "ServiceUnavailable");
    assert_eq!(
        unavailable.json()["message"],
        "no endpoints available for service \"echo\""
    );

    // Ready again: served again.
    set_ready(&client, "echo-b", b.ip, true).await;
    eventually("b answers again", || {
        let url = url.clone();
        async move {
            tokio::task::spawn_blocking(move || curl_in(None, &url).1 == "b")
                .await
                .unwrap()
        }
    })
    .await;
    c.shutdown().await;
}

fn link_exists(name: &str) -> bool {
    Command::new("ip")
        .args(["link", "show", "dev", name])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether a TCP socket listens on `address` (`ip:port`) on the host.
fn listening(address: &str) -> bool {
    let out = Command::new("ss").args(["-Hltn"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|line| line.split_whitespace().nth(3) == Some(address))
}

fn host_addresses() -> String {
    String::from_utf8_lossy(
        &Command::new("ip")
            .args(["-o", "addr"])
            .output()
            .unwrap()
            .stdout,
    )
    .into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_removes_the_interface_and_listeners() {
    if !prerequisites() {
        return;
    }
    // A host program as the endpoint.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("whoami"), "host").unwrap();
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let _server = Stopped(http_server(
        Command::new("python3"),
        "127.0.0.1",
        port,
        dir.path(),
    ));
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }

    let first = proxy_cluster().await;
    let second = proxy_cluster().await;
    let names = (
        first.service_proxy().unwrap().interface_name().to_string(),
        second.service_proxy().unwrap().interface_name().to_string(),
    );
    assert_ne!(names.0, names.1);
    assert_ne!(first.service_cidr(), second.service_cidr());
    assert!(link_exists(&names.0) && link_exists(&names.1));

    let client = first.client().await;
    process_node(&client).await;
    running_pod(&client, "echo-host", Ipv4Addr::LOCALHOST, true).await;
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "echo"},
        "spec": {"selector": {"app": "echo"}, "ports": [{"name": "http", "port": 8776, "targetPort": port}]},
    }))
    .unwrap();
    let cluster_ip: Ipv4Addr = services
        .create(&PostParams::default(), &service)
        .await
        .unwrap()
        .spec
        .unwrap()
        .cluster_ip
        .unwrap()
        .parse()
        .unwrap();
    let front: std::net::SocketAddrV4 = format!("{cluster_ip}:8776").parse().unwrap();
    tokio::time::timeout(
        Duration::from_secs(30),
        first
            .service_proxy()
            .unwrap()
            .wait_for(|p| p.frontends.contains_key(&front)),
    )
    .await
    .expect("the proxy listens");
    let url = format!("http://{cluster_ip}:8776/whoami");
    let served = tokio::task::spawn_blocking({
        let url = url.clone();
        move || curl_in(None, &url)
    })
    .await
    .unwrap();
    assert_eq!(served, (0, "host".to_string()));
    assert!(listening(&front.to_string()), "no listener on {front}");
    assert!(host_addresses().contains(&format!("{cluster_ip}/32")));

    first.shutdown().await;
    assert!(!link_exists(&names.0), "{} left behind", names.0);
    assert!(!host_addresses().contains(&format!("{cluster_ip}/32")));
    assert!(
        !listening(&front.to_string()),
        "something still listens on {front}"
    );
    // (This network may answer any address it routes; what matters is that the endpoint no
    // longer does.)
    let after = tokio::task::spawn_blocking(move || curl_in(None, &url))
        .await
        .unwrap();
    assert_ne!(
        after.1, "host",
        "the ClusterIP still reaches the endpoint after shutdown"
    );
    // A cluster dropped without shutdown removes its interface too.
    drop(second);
    eventually("the dropped cluster's interface goes", || {
        let name = names.1.clone();
        async move { !link_exists(&name) }
    })
    .await;
}

/// A child process stopped (by its own id) when the guard goes, a failed assertion included.
struct Stopped(Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
