//! Nodes of runtime `process`: the node agent runs pods' containers as local processes in
//! namespace sandboxes (needs root: without it these tests say so and pass outside CI, and fail
//! in CI, where they must run).

use std::time::Duration;

use cinder_sim::agent::RUNTIME_LABEL;
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

use super::common::eventually;

/// A cluster with one simulated and one process node, or None (with the reason printed) when
/// this is not root outside CI.
async fn process_cluster() -> Option<EmbeddedCluster> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "process-node tests need root (network and mount namespaces); CI runs as root"
        );
        eprintln!("skipping: process-node tests need root");
        return None;
    }
    let mut config = ClusterConfig::default();
    config.controllers.nodes.count = 1;
    config.controllers.nodes.process = 1;
    config.process_runtime.crash_backoff = Duration::from_millis(500);
    Some(
        EmbeddedCluster::start(config)
            .await
            .expect("cluster with a process node"),
    )
}

/// [`process_cluster`] and its pods in `default`.
async fn process_cluster_pods() -> Option<(EmbeddedCluster, Api<Pod>)> {
    let cluster = process_cluster().await?;
    let pods = Api::namespaced(cluster.client().await, "default");
    Some((cluster, pods))
}

/// The agent's memory cgroup directory (CI machines have a memory controller).
fn agent_cgroups(cluster: &EmbeddedCluster) -> std::path::PathBuf {
    let agent = cluster.agent().expect("the process node's agent");
    let dir = agent.cgroup_dir();
    dir.expect("the agent's memory cgroup (CI machines have a memory controller)")
        .to_path_buf()
}

fn pod_manifest(name: &str, restart: &str, containers: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": restart,
            "nodeSelector": {RUNTIME_LABEL: "process"},
            "terminationGracePeriodSeconds": 5,
            "containers": containers,
        }
    })
}

/// One container `c` running `image`, with its other `fields` (command, probes, limits, …).
fn one(image: &str, fields: Value) -> Value {
    let mut container = json!({"name": "c", "image": image});
    if let (Some(c), Value::Object(f)) = (container.as_object_mut(), fields) {
        c.extend(f);
    }
    json!([container])
}

/// Creates the pod `name` (restartPolicy `restart`) running `containers`.
async fn start(pods: &Api<Pod>, name: &str, restart: &str, containers: Value) -> Pod {
    create(pods, pod_manifest(name, restart, containers)).await
}

async fn create<K>(api: &Api<K>, object: Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let typed: K = serde_json::from_value(object).unwrap();
    api.create(&PostParams::default(), &typed).await.unwrap()
}

fn pod_of(cluster: &EmbeddedCluster, name: &str) -> Value {
    cluster
        .store()
        .get("", "pods", "default", name)
        .unwrap_or(Value::Null)
}

async fn wait_phase(cluster: &EmbeddedCluster, name: &str, phase: &str) -> Value {
    eventually(&format!("pod {name} {phase}"), || async {
        pod_of(cluster, name)["status"]["phase"] == phase
    })
    .await;
    pod_of(cluster, name)
}

fn events_of(cluster: &EmbeddedCluster, name: &str) -> Vec<(String, String)> {
    cluster
        .store()
        .list("", "events", Some("default"))
        .into_iter()
        .filter(|e| e["involvedObject"]["name"] == name)
        .map(|e| {
            (
                e["reason"].as_str().unwrap_or_default().to_owned(),
                e["message"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// `pods/log` through kube-rs (container, previous, tailLines as `query` spells them):
/// 200 and the text, or the error's code and message.
async fn log(cluster: &EmbeddedCluster, name: &str, query: &str) -> (u16, String) {
    let mut params = kube::api::LogParams::default();
    for pair in query
        .trim_start_matches('?')
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "container" => params.container = Some(value.to_owned()),
            "previous" => params.previous = value == "true",
            "tailLines" => params.tail_lines = value.parse().ok(),
            _ => panic!("unknown log parameter {key}"),
        }
    }
    let pods: Api<Pod> = Api::namespaced(cluster.client().await, "default");
    match pods.logs(name, &params).await {
        Ok(text) => (200, text),
        Err(kube::Error::Api(status)) => (status.code, status.message),
        Err(other) => (0, other.to_string()),
    }
}

fn terminated(pod: &Value, index: usize) -> Value {
    pod["status"]["containerStatuses"][index]["state"]["terminated"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_run_for_real_with_their_exit_codes_ips_and_logs() {
    let Some((cluster, pods)) = process_cluster_pods().await else {
        return;
    };
    let script = "echo hello from $HOSTNAME; echo second line; exit 3";
    start(
        &pods,
        "fails",
        "Never",
        one("busybox", json!({"command": ["sh", "-c", script]})),
    )
    .await;
    let c = one(
        "debian:12",
        json!({
            "command": ["sh", "-c", "test \"$(hostname)\" = works && exit 0; exit 9"]
        }),
    );
    start(&pods, "works", "Never", c).await;
    let failed = wait_phase(&cluster, "fails", "Failed").await;
    assert_eq!(terminated(&failed, 0)["exitCode"], 3, "{failed}");
    assert_eq!(terminated(&failed, 0)["reason"], "Error");
    let ip = failed["status"]["podIP"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let subnet = cluster.agent().unwrap().network().subnet;
    assert!(ip.starts_with(&format!("10.200.{subnet}.")), "pod IP {ip}");
    assert_eq!(failed["spec"]["nodeName"], "process-worker-1");
    let works = wait_phase(&cluster, "works", "Succeeded").await;
    assert_eq!(terminated(&works, 0)["reason"], "Completed");
    assert_ne!(works["status"]["podIP"], failed["status"]["podIP"]);
    let (code, text) = log(&cluster, "fails", "").await;
    assert_eq!(code, 200, "{text}");
    assert_eq!(text, "hello from fails\nsecond line\n");
    let (_, tail) = log(&cluster, "fails", "?tailLines=1").await;
    assert_eq!(tail, "second line\n");
    let (code, text) = log(&cluster, "fails", "?container=nope").await;
    assert_eq!(code, 400, "{text}");
    let reasons: Vec<String> = events_of(&cluster, "fails")
        .into_iter()
        .map(|e| e.0)
        .collect();
    for reason in ["Scheduled", "Pulled", "Created", "Started"] {
        assert!(
            reasons.iter().any(|r| r == reason),
            "{reason} in {reasons:?}"
        );
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volumes_env_init_containers_and_hosts_are_materialised() {
    let Some(cluster) = process_cluster().await else {
        return;
    };
    let client = cluster.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    create(
        &maps,
        json!({"metadata": {"name": "cfg"}, "data": {"mode": "fast", "other.conf": "x=1"}}),
    )
    .await;
    create(
        &secrets,
        json!({"metadata": {"name": "db"}, "stringData": {"password": "s3cret"}}),
    )
    .await;
    create(
        &services,
        json!({"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}}),
    )
    .await;
    let script = r#"set -ex
test "$(cat /etc/cinder/mode)" = fast
test "$(cat /etc/other.conf)" = x=1
test "$(stat -c %a:%g /secrets/pw)" = 440:2000
test "$(cat /secrets/pw)" = s3cret
test "$PW" = s3cret
test "$MODE_mode" = fast
test "$WHO" = '$$(POD)-default-s3cret'
test "$(cat /shared/init)" = first
test "$(cat /podinfo/name)" = vol
test -s /var/run/secrets/kubernetes.io/serviceaccount/token
grep -q "web.default.svc.cluster.local" /etc/hosts
test "$(pwd)" = /work/dir
test "$(id -u):$(id -g)" = 1000:1000
echo "groups: $(id -G)"
id -G | grep -qw 2000
touch /shared/written
echo all-good > /dev/termination-log
"#;
    create(&pods, json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "vol"},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {RUNTIME_LABEL: "process"},
            "securityContext": {"fsGroup": 2000},
            "initContainers": [
                {"name": "one", "image": "busybox", "command": ["sh", "-c", "echo first > /shared/init"],
                 "volumeMounts": [{"name": "shared", "mountPath": "/shared"}]},
                {"name": "two", "image": "busybox", "command": ["sh", "-c", "test -f /shared/init"],
                 "volumeMounts": [{"name": "shared", "mountPath": "/shared"}]},
            ],
            "containers": [{
                "name": "main", "image": "python:3.12", "command": ["sh", "-c", script],
                "workingDir": "/work/dir",
                "securityContext": {"runAsUser": 1000, "runAsGroup": 1000},
                "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "MODE_"}],
                "env": [
                    {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
                    {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                    {"name": "WHO", "value": "$(POD)-$(NS)-$(PW)"},
                    {"name": "POD", "value": "ignored"},
                ],
                "volumeMounts": [
                    {"name": "cfg", "mountPath": "/etc/cinder"},
                    {"name": "cfg", "mountPath": "/etc/other.conf", "subPath": "other.conf"},
                    {"name": "sec", "mountPath": "/secrets", "readOnly": true},
                    {"name": "shared", "mountPath": "/shared"},
                    {"name": "info", "mountPath": "/podinfo"},
                    {"name": "token", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"},
                ],
            }],
            "volumes": [
                {"name": "cfg", "configMap": {"name": "cfg"}},
                {"name": "sec", "secret": {"secretName": "db", "items": [{"key": "password", "path": "pw", "mode": 0o440}]}},
                {"name": "shared", "emptyDir": {}},
                {"name": "info", "downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}},
                {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
            ],
        }
    })).await;
    eventually("pod vol finished", || async {
        matches!(
            pod_of(&cluster, "vol")["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed")
        )
    })
    .await;
    let pod = pod_of(&cluster, "vol");
    let (_, text) = log(&cluster, "vol", "?container=main").await;
    assert_eq!(pod["status"]["phase"], "Succeeded", "{pod}\nlog: {text}");
    assert_eq!(terminated(&pod, 0)["message"], "all-good\n");
    assert_eq!(
        pod["status"]["initContainerStatuses"][1]["state"]["terminated"]["reason"],
        "Completed"
    );
    // ($(POD) is defined after WHO, so it stays as written.) The host saw none of the mounts.
    assert!(!std::path::Path::new("/etc/cinder").exists());
    assert!(!std::path::Path::new("/work/dir").exists());
    assert!(!std::path::Path::new("/run/secrets/kubernetes.io").exists());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_the_kubelet_reasons_and_events() {
    let Some((cluster, pods)) = process_cluster_pods().await else {
        return;
    };
    let sleep = |name: &str, image: &str| json!([{"name": name, "image": image, "command": ["sleep", "60"]}]);
    create(
        &pods,
        pod_manifest(
            "unknown-image",
            "Never",
            sleep("c", "quay.io/nobody/nothing:1"),
        ),
    )
    .await;
    let mut missing_volume = pod_manifest(
        "missing-volume",
        "Never",
        json!([{"name": "c", "image": "busybox",
        "command": ["sleep", "60"], "volumeMounts": [{"name": "v", "mountPath": "/v"}]}]),
    );
    missing_volume["spec"]["volumes"] = json!([{"name": "v", "configMap": {"name": "absent"}}]);
    create(&pods, missing_volume).await;
    let c = one(
        "busybox",
        json!({
            "command": ["sleep", "60"],
            "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "k"}}}]
        }),
    );
    start(&pods, "missing-key", "Never", c).await;
    let c = one("busybox", json!({"command": ["no-such-program-anywhere"]}));
    start(&pods, "no-command", "Never", c).await;
    create(&pods, pod_manifest("port-taken", "Never", json!([
        {"name": "a", "image": "python", "command": ["python3", "-m", "http.server", "8080"]},
        {"name": "b", "image": "python", "command": ["sh", "-c", "sleep 1; exec python3 -m http.server 8080"]},
    ]))).await;
    let waiting = |name: &'static str| {
        let cluster = &cluster;
        async move {
            pod_of(cluster, name)["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        }
    };
    eventually("ImagePullBackOff", || async {
        waiting("unknown-image").await == "ImagePullBackOff"
    })
    .await;
    let pulls = events_of(&cluster, "unknown-image");
    assert!(
        pulls.iter().any(|(r, m)| r == "Failed"
            && m.starts_with("Failed to pull image \"quay.io/nobody/nothing:1\"")),
        "{pulls:?}"
    );
    assert!(
        pulls
            .iter()
            .any(|(r, m)| r == "Failed" && m == "Error: ErrImagePull"),
        "{pulls:?}"
    );
    eventually("FailedMount", || async {
        events_of(&cluster, "missing-volume").iter().any(|(r, m)| {
            r == "FailedMount"
                && m == "MountVolume.SetUp failed for volume \"v\" : configmap \"absent\" not found"
        })
    })
    .await;
    // The event and the status patch are two writes of the agent: either may land first.
    eventually("ContainerCreating", || async {
        waiting("missing-volume").await == "ContainerCreating"
    })
    .await;
    assert_eq!(
        pod_of(&cluster, "missing-volume")["status"]["phase"],
        "Pending"
    );
    eventually("CreateContainerConfigError", || async {
        waiting("missing-key").await == "CreateContainerConfigError"
    })
    .await;
    let pod = pod_of(&cluster, "missing-key");
    assert_eq!(
        pod["status"]["containerStatuses"][0]["state"]["waiting"]["message"],
        "secret \"absent\" not found"
    );
    let failed = wait_phase(&cluster, "no-command", "Failed").await;
    assert_eq!(terminated(&failed, 0)["reason"], "StartError");
    assert_eq!(terminated(&failed, 0)["exitCode"], 128);
    assert!(
        terminated(&failed, 0)["message"]
            .as_str()
            .unwrap_or_default()
            .contains("exec: \"no-such-program-anywhere\": executable file not found in $PATH")
    );
    eventually("second server fails on the taken port", || async {
        pod_of(&cluster, "port-taken")["status"]["containerStatuses"][1]["state"]["terminated"]["exitCode"] == 1
    })
    .await;
    let pod = pod_of(&cluster, "port-taken");
    assert!(
        pod["status"]["containerStatuses"][0]["state"]["running"].is_object(),
        "{pod}"
    );
    let (_, text) = log(&cluster, "port-taken", "?container=b").await;
    assert!(text.contains("Address already in use"), "{text}");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_restarts_and_pod_to_pod_traffic() {
    let Some((cluster, pods)) = process_cluster_pods().await else {
        return;
    };
    let server = |name: &str| {
        pod_manifest(
            name,
            "Always",
            json!([{"name": "web", "image": "python:3.12",
        "command": ["sh", "-c", "mkdir -p /tmp/www && cd /tmp/www && echo ok > healthz && exec python3 -m http.server 8080"],
        "ports": [{"name": "http", "containerPort": 8080}],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 1}}]),
        )
    };
    create(&pods, server("web-a")).await;
    create(&pods, server("web-b")).await;
    let c = one(
        "busybox",
        json!({
            "command": ["sleep", "600"],
            "readinessProbe": {"tcpSocket": {"port": 9999}, "periodSeconds": 1}
        }),
    );
    start(&pods, "never-ready", "Always", c).await;
    let c = one(
        "busybox",
        json!({"command": ["sh", "-c", "echo run; exit 1"]}),
    );
    start(&pods, "crashes", "Always", c).await;
    let ready = |name: &'static str| {
        let cluster = &cluster;
        async move {
            pod_of(cluster, name)["status"]["conditions"]
                .as_array()
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
        }
    };
    eventually("web-a Ready", || ready("web-a")).await;
    eventually("web-b Ready", || ready("web-b")).await;
    let ip_b = pod_of(&cluster, "web-b")["status"]["podIP"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    // From the host: both pods listen on 8080 in their own network namespaces.
    let body = reqwest_get(&format!("{ip_b}:8080"), "/healthz").await;
    assert!(body.ends_with("ok\n"), "{body}");
    // From another pod.
    let fetch = format!(
        "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://{ip_b}:8080/healthz', timeout=5).read()==b'ok\\n' else 4)"
    );
    create(
        &pods,
        pod_manifest(
            "client",
            "Never",
            json!([{"name": "c", "image": "python", "command": ["python3", "-c", fetch]}]),
        ),
    )
    .await;
    let client_pod = wait_phase(&cluster, "client", "Succeeded").await;
    assert_eq!(terminated(&client_pod, 0)["exitCode"], 0);
    let never = pod_of(&cluster, "never-ready");
    assert_eq!(never["status"]["phase"], "Running");
    assert!(!ready("never-ready").await);
    assert!(
        events_of(&cluster, "never-ready")
            .iter()
            .any(|(r, m)| r == "Unhealthy" && m.starts_with("Readiness probe failed: dial tcp"))
    );
    eventually("crash loop", || async {
        let pod = pod_of(&cluster, "crashes");
        let status = &pod["status"]["containerStatuses"][0];
        status["restartCount"].as_u64().unwrap_or(0) >= 2
            && status["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    })
    .await;
    let pod = pod_of(&cluster, "crashes");
    assert_eq!(
        pod["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"],
        1
    );
    let (code, previous) = log(&cluster, "crashes", "?previous=true").await;
    assert_eq!((code, previous.as_str()), (200, "run\n"));
    cluster.shutdown().await;
}

/// A GET over a fresh connection; the whole answer.
async fn reqwest_get(address: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_take_the_real_exit_code() {
    let Some(cluster) = process_cluster().await else {
        return;
    };
    let client = cluster.client().await;
    let jobs: Api<Job> = Api::namespaced(client, "default");
    let job = |name: &str, script: &str| {
        json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name},
            "spec": {"backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never",
                "nodeSelector": {RUNTIME_LABEL: "process"},
                "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", script]}]}}}
        })
    };
    create(&jobs, job("ok", "sleep 1; exit 0")).await;
    create(&jobs, job("bad", "exit 1")).await;
    let condition = |name: &'static str, kind: &'static str| {
        let cluster = &cluster;
        async move {
            cluster
                .store()
                .get("batch", "jobs", "default", name)
                .is_some_and(|j| {
                    j["status"]["conditions"].as_array().is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c["type"] == kind && c["status"] == "True")
                    })
                })
        }
    };
    eventually("job ok Complete", || condition("ok", "Complete")).await;
    eventually("job bad Failed", || condition("bad", "Failed")).await;
    let runs = cluster.controllers().unwrap().job_runs();
    let bad = runs.iter().find(|r| r.name == "bad").unwrap();
    assert_eq!(bad.attempts[0].exit_code, Some(1));
    cluster.shutdown().await;
}

/// The cgroups under `dir` (itself included; 0 when it is gone).
fn cgroups_under(dir: &std::path::Path) -> usize {
    if !dir.is_dir() {
        return 0;
    }
    1 + std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| cgroups_under(&e.path()))
                .sum::<usize>()
        })
        .unwrap_or(0)
}

/// Every host object of an agent instance: its network namespaces, veths and bridge.
fn host_objects(id: &str) -> usize {
    let links = std::process::Command::new("ip")
        .args(["-o", "link", "show"])
        .output()
        .unwrap();
    let links = String::from_utf8_lossy(&links.stdout).matches(id).count();
    let netns = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().contains(id))
                .count()
        })
        .unwrap_or(0);
    links + netns
}

/// How many processes run exactly `sleep <seconds>`.
fn sleeping(seconds: &str) -> usize {
    let wanted = format!("sleep\0{seconds}\0");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == wanted.as_bytes()))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_deletion_and_shutdown_leave_nothing_behind() {
    let Some((cluster, pods)) = process_cluster_pods().await else {
        return;
    };
    let id = cluster.agent().unwrap().network().id.clone();
    let cgroups = agent_cgroups(&cluster);
    // The first pod handles SIGTERM; the second ignores it and leaves a child behind.
    let c = one(
        "busybox",
        json!({
            "command": ["sh", "-c", "trap 'echo got TERM; exit 0' TERM; sleep 1000 & wait"]
        }),
    );
    start(&pods, "polite", "Always", c).await;
    let c = one(
        "busybox",
        json!({
            "command": ["sh", "-c", "trap '' TERM; (sleep 1001 &); sleep 1002"]
        }),
    );
    start(&pods, "stubborn", "Always", c).await;
    let c = one(
        "busybox",
        json!({
            "command": ["sleep", "1003"], "resources": {"limits": {"memory": "64Mi"}}
        }),
    );
    start(&pods, "stays", "Always", c).await;
    for name in ["polite", "stubborn", "stays"] {
        wait_phase(&cluster, name, "Running").await;
    }
    eventually("processes started", || async {
        ["1000", "1001", "1002", "1003"]
            .iter()
            .all(|s| sleeping(s) == 1)
    })
    .await;
    assert!(host_objects(&id) >= 7, "bridge, veths and netns exist");
    assert!(
        cgroups_under(&cgroups) >= 7,
        "the instance's, each pod's and each container's cgroup exist"
    );
    pods.delete("polite", &DeleteParams::default())
        .await
        .unwrap();
    let stubborn = DeleteParams {
        grace_period_seconds: Some(1),
        ..DeleteParams::default()
    };
    pods.delete("stubborn", &stubborn).await.unwrap();
    eventually("deleted pods gone", || async {
        pod_of(&cluster, "polite").is_null() && pod_of(&cluster, "stubborn").is_null()
    })
    .await;
    assert_eq!(sleeping("1000"), 0);
    assert_eq!(sleeping("1001"), 0, "the child left behind is killed too");
    assert_eq!(sleeping("1002"), 0);
    assert!(
        events_of(&cluster, "polite")
            .iter()
            .any(|(r, m)| r == "Killing" && m == "Stopping container c")
    );
    cluster.shutdown().await;
    assert_eq!(sleeping("1003"), 0, "shutdown stops every process");
    assert_eq!(
        host_objects(&id),
        0,
        "shutdown removes every netns, veth and the bridge"
    );
    assert_eq!(cgroups_under(&cgroups), 0, "shutdown removes every cgroup");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_limit_is_enforced_by_a_cgroup_and_its_kill_is_oom_killed() {
    let Some((cluster, pods)) = process_cluster_pods().await else {
        return;
    };
    let cgroups = agent_cgroups(&cluster);
    // 256 MiB touched page by page under a 64 MiB limit; 16 MiB is within it.
    let allocate = |mib: u32| {
        format!(
            "import sys; b = bytearray({mib} * 1024 * 1024); b[::4096] = b'x' * len(b[::4096]); print('allocated', len(b)); sys.stdout.flush()"
        )
    };
    for (name, mib) in [("greedy", 256), ("modest", 16)] {
        let c = one(
            "python:3.12",
            json!({
                "command": ["python3", "-c", allocate(mib)],
                "resources": {"limits": {"memory": "64Mi"}}
            }),
        );
        start(&pods, name, "Never", c).await;
    }
    let greedy = wait_phase(&cluster, "greedy", "Failed").await;
    let ended = terminated(&greedy, 0);
    assert_eq!(ended["reason"], "OOMKilled", "{greedy}");
    assert_eq!(ended["exitCode"], 137, "{greedy}");
    let modest = wait_phase(&cluster, "modest", "Succeeded").await;
    assert_eq!(terminated(&modest, 0)["reason"], "Completed", "{modest}");
    let (_, text) = log(&cluster, "modest", "").await;
    assert_eq!(text, format!("allocated {}\n", 16 * 1024 * 1024));
    // A finished pod's cgroups are gone; the instance's own stays until shutdown.
    assert_eq!(cgroups_under(&cgroups), 1);
    cluster.shutdown().await;
    assert_eq!(cgroups_under(&cgroups), 0);
}

/// The lines of `file`, each `WHAT NANOSECONDS` as the pods below write them.
fn stamped(file: &std::path::Path) -> Vec<(String, u128)> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (what, at) = l.split_once(' ')?;
            Some((what.to_owned(), at.trim().parse().ok()?))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_stop_runs_before_sigterm_and_sigkill_comes_after_the_grace_period() {
    let Some((cluster, pods)) = process_cluster_pods().await else {
        return;
    };
    // A host directory the pod writes its record to (it outlives the pod's sandbox).
    let record = tempfile::tempdir().unwrap();
    let log = record.path().join("log");
    let mut manifest = pod_manifest(
        "hooked",
        "Always",
        json!([{"name": "c", "image": "busybox",
            // SIGTERM is recorded and ignored: only SIGKILL ends this container.
            "command": ["sh", "-c", "trap 'echo TERM $(date +%s%N) >> /record/log' TERM; echo UP $(date +%s%N) >> /record/log; while true; do sleep 0.1; done"],
            "volumeMounts": [{"name": "record", "mountPath": "/record"}],
            "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "echo PRESTOP $(date +%s%N) >> /record/log; sleep 1"]}}}}]),
    );
    manifest["spec"]["terminationGracePeriodSeconds"] = json!(3);
    manifest["spec"]["volumes"] = json!([{"name": "record",
        "hostPath": {"path": record.path().to_str().unwrap(), "type": "Directory"}}]);
    create(&pods, manifest).await;
    wait_phase(&cluster, "hooked", "Running").await;
    eventually("container up", || async {
        stamped(&log).iter().any(|(w, _)| w == "UP")
    })
    .await;
    let pid: i32 = pod_of(&cluster, "hooked")["status"]["containerStatuses"][0]["containerID"]
        .as_str()
        .and_then(|id| id.strip_prefix("process://"))
        .and_then(|p| p.parse().ok())
        .expect("a process:// container id");
    let deleted_at = std::time::Instant::now();
    pods.delete("hooked", &DeleteParams::default())
        .await
        .unwrap();
    eventually("pod gone", || async {
        pod_of(&cluster, "hooked").is_null()
    })
    .await;
    let took = deleted_at.elapsed();
    let lines = stamped(&log);
    let at = |what: &str| {
        lines
            .iter()
            .find(|(w, _)| w == what)
            .map(|(_, t)| *t)
            .unwrap_or_else(|| panic!("{what} in {lines:?}"))
    };
    assert!(
        at("PRESTOP") + 900_000_000 <= at("TERM"),
        "SIGTERM only after the preStop hook finished: {lines:?}"
    );
    assert!(
        took >= Duration::from_millis(2800),
        "the container ignoring SIGTERM is killed only after the 3 s grace period (gone after {took:?})"
    );
    assert!(
        took < Duration::from_secs(15),
        "SIGKILL at the end of the grace period (gone after {took:?})"
    );
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the container process {pid} is gone"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_liveness_probe_restarts_the_container_with_back_off() {
    let Some((cluster, pods)) = process_cluster_pods().await else {
        return;
    };
    // Healthy for a second after each start, then the probe's file is gone.
    let c = one(
        "busybox",
        json!({
            "command": ["sh", "-c", "echo start; touch /tmp/healthy; sleep 1; rm /tmp/healthy; exec sleep 600"],
            "livenessProbe": {"exec": {"command": ["test", "-f", "/tmp/healthy"]},
            "periodSeconds": 1, "failureThreshold": 2}
        }),
    );
    start(&pods, "unhealthy", "Always", c).await;
    eventually("restarted twice by its liveness probe", || async {
        let pod = pod_of(&cluster, "unhealthy");
        pod["status"]["containerStatuses"][0]["restartCount"]
            .as_u64()
            .unwrap_or(0)
            >= 2
    })
    .await;
    let pod = pod_of(&cluster, "unhealthy");
    let status = &pod["status"]["containerStatuses"][0];
    let last = &status["lastState"]["terminated"];
    assert_eq!(last["reason"], "Error", "{status}");
    assert!(
        matches!(last["exitCode"].as_i64(), Some(137 | 143)),
        "killed by a signal: {status}"
    );
    let events = events_of(&cluster, "unhealthy");
    assert!(
        events
            .iter()
            .any(|(r, m)| r == "Unhealthy" && m.starts_with("Liveness probe failed")),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|(r, m)| r == "Killing"
                && m == "Container c failed liveness probe, will be restarted"),
        "{events:?}"
    );
    assert!(
        events.iter().any(|(r, m)| r == "BackOff"
            && m.starts_with("Back-off restarting failed container c in pod unhealthy_default")),
        "restarts wait for the back-off: {events:?}"
    );
    let (code, previous) = log(&cluster, "unhealthy", "?previous=true").await;
    assert_eq!((code, previous.as_str()), (200, "start\n"));
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_s_command_is_pid_1_of_its_own_pid_namespace() {
    let Some(cluster) = process_cluster().await else {
        return;
    };
    let client = cluster.client().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    // What a container sees: its command is PID 1 and /proc holds only its own processes
    // (`$$$$` is `$$` after the kubelet's `$(VAR)` expansion).
    let script =
        "echo $$$$; tr '\\0' ' ' < /proc/1/cmdline; echo; ls /proc | grep -c '^[0-9]'; exit 4";
    create(
        &pods,
        pod_manifest(
            "pid1",
            "Never",
            json!([{"name": "c", "image": "busybox", "command": ["sh", "-c", script]}]),
        ),
    )
    .await;
    // An exec readiness probe reads the container's /proc, as a kubelet's runs in the container.
    create(
        &pods,
        pod_manifest(
            "probed",
            "Always",
            json!([{"name": "c", "image": "busybox", "command": ["sleep", "3600"],
                    "readinessProbe": {"exec": {"command": ["sh", "-c", "grep -q sleep /proc/1/cmdline"]},
                                       "periodSeconds": 1}}]),
        ),
    )
    .await;
    let done = wait_phase(&cluster, "pid1", "Failed").await;
    assert_eq!(
        terminated(&done, 0)["exitCode"],
        4,
        "the keeper ends as PID 1 ended"
    );
    let (_, text) = log(&cluster, "pid1", "").await;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.first().copied(), Some("1"), "{text}");
    assert!(
        lines.get(1).is_some_and(|l| l.starts_with("sh -c")),
        "{text}"
    );
    let count: usize = lines
        .get(2)
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(99);
    assert!(
        count <= 4,
        "only the container's processes in /proc: {text}"
    );
    eventually("the exec probe sees PID 1 and the pod is Ready", || async {
        pod_of(&cluster, "probed")["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
    })
    .await;
    cluster.shutdown().await;
}
