//! The operator's own Deployment on process nodes, as a user runs it: an embedded cluster with
//! RBAC enforced, the service proxy, two process nodes (tainted, so only the operator runs
//! there) and simulated nodes for the Cinder's children; `kubectl apply -k` of a kustomize
//! overlay of deploy/ that adds a nodeSelector and a toleration, the image mapped to the test
//! package's `operator-under-test` binary; `kubectl rollout status` of the two `--leader-elect`
//! replicas, which run under deploy/'s ServiceAccount token and RBAC through the `kubernetes`
//! Service; a Cinder converged under the in-cluster operator, whose health check GETs the API
//! Service by its cluster name (no `services/proxy`); the leader's process killed by its
//! pid (the pod's container ID) and the standby holding the leader Lease within one Lease
//! duration of the leader's last renewal (plus one retry period of the standby); and
//! `kubectl rollout restart` completed with no poll seeing two replicas report
//! `cinder_operator_leader 1`. After the cluster's shutdown no process, network namespace or
//! bridge of its pods is left.
//!
//! Needs root (process nodes, service proxy), iproute2, kubectl and curl: without them it says
//! so and passes, except under `CI=true`, where it fails.

use cinder_e2e::database_helpers::database_environment;
use cinder_e2e::deploy_helpers::{
    DEPLOY_ACCOUNT, DEPLOY_NAMESPACE, apply_service_account, describe_request, repo_root,
};
use cinder_e2e::observability_helpers::on_path;
use cinder_e2e::operator_process::operator_binary;
use cinder_e2e::{
    HarnessConfig, NS, cinder_conditions, create_cinder, create_namespace, create_nfs_backend,
    eventually, wait_cinder_condition,
};
use cinder_lease::LEADER_LEASE_NAME;
use cinder_sim::agent::{ImageMap, RUNTIME_LABEL};
use cinder_sim::auth::AuthorizationMode;
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const IMAGE: &str = concat!("ghcr.io/c5c3/cinder-operator:", env!("CARGO_PKG_VERSION"));
const DEPLOYMENT: &str = "cinder-operator";
const SELECTOR: &str = "app.kubernetes.io/name=cinder-operator";
/// The taint that keeps everything but the operator off the process nodes.
const TAINT_KEY: &str = "cinder-e2e/operator-only";
/// The kubelet's first restart back-off of the process nodes: longer than a takeover, so the
/// killed replica's restart does not compete with the standby for the Lease.
const CRASH_BACKOFF: Duration = Duration::from_secs(30);

/// Why the scenario cannot run here, if it cannot.
fn missing_tool() -> Option<String> {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root {
        return Some("process nodes and the service proxy need root".to_string());
    }
    ["kubectl", "curl", "ip"]
        .into_iter()
        .find(|tool| on_path(tool).is_none())
        .map(|tool| format!("{tool} is not on PATH"))
}

/// `kubectl args` against the cluster: its stdout, or an error with its stderr.
fn kubectl(kubeconfig: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdin(Stdio::null())
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "kubectl {}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `kubectl args` on a blocking thread (rollout status waits).
async fn kubectl_async(kubeconfig: &Path, args: &[&str]) -> anyhow::Result<String> {
    let kubeconfig = kubeconfig.to_path_buf();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        kubectl(&kubeconfig, &args)
    })
    .await?
}

/// A path from `from` (absolute) to `to` (absolute) through `..`: kustomize takes only
/// relative resource paths.
fn relative(from: &Path, to: &Path) -> PathBuf {
    let mut path = PathBuf::new();
    for _ in from.components().skip(1) {
        path.push("..");
    }
    path.join(to.strip_prefix("/").unwrap_or(to))
}

/// The overlay a user writes: deploy/ with the operator's pods on the process nodes.
fn write_overlay(dir: &Path) -> anyhow::Result<()> {
    let deploy = relative(dir, &repo_root().join("deploy"));
    let text = format!(
        r#"apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - {deploy}
patches:
  - target: {{kind: Deployment, name: {DEPLOYMENT}}}
    patch: |
      apiVersion: apps/v1
      kind: Deployment
      metadata: {{name: {DEPLOYMENT}, namespace: {DEPLOY_NAMESPACE}}}
      spec:
        template:
          spec:
            nodeSelector: {{{RUNTIME_LABEL}: process}}
            tolerations: [{{key: {TAINT_KEY}, operator: Exists, effect: NoSchedule}}]
"#,
        deploy = deploy.display()
    );
    std::fs::write(dir.join("kustomization.yaml"), text)?;
    Ok(())
}

/// The operator's pods.
async fn operator_pods(client: &kube::Client) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), DEPLOY_NAMESPACE);
    pods.list(&ListParams::default().labels(SELECTOR))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

fn pod_name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

/// The pid of the pod's first container (its container ID is `process://<pid>`).
fn container_pid(pod: &Pod) -> Option<u32> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()?
        .container_id
        .as_deref()?
        .strip_prefix("process://")?
        .parse()
        .ok()
}

fn pod_ip(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .pod_ip
        .clone()
        .filter(|ip| !ip.is_empty())
}

/// The leader Lease.
async fn leader_lease(client: &kube::Client) -> Option<Lease> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), DEPLOY_NAMESPACE);
    leases.get_opt(LEADER_LEASE_NAME).await.ok().flatten()
}

fn holder(lease: &Lease) -> Option<String> {
    lease
        .spec
        .as_ref()?
        .holder_identity
        .clone()
        .filter(|h| !h.is_empty())
}

/// The pod a holder identity (`<pod>-<uuid>`) names.
fn holder_pod(holder: &str, pods: &[Pod]) -> Option<String> {
    pods.iter()
        .map(pod_name)
        .find(|name| holder.starts_with(&format!("{name}-")))
}

/// A token allowed to read the operator's HTTPS `/metrics` (deploy/'s metrics-reader role).
async fn metrics_reader_token(client: &kube::Client) -> anyhow::Result<String> {
    let binding = serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "e2e-scraper"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "cinder-operator-metrics-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": NS}]
    });
    let manifests = cinder_operator::embedded::parse_stream(
        Path::new("scraper.yaml"),
        &serde_norway::to_string(&binding)?,
    )?;
    apply_service_account(client, &manifests, NS, "scraper").await
}

/// `cinder_operator_leader` of the replica at `ip`, None when its `/metrics` does not answer.
async fn leader_gauge(ip: &str, token: &str) -> Option<f64> {
    let out = tokio::process::Command::new("curl")
        .args(["-sk", "--max-time", "3", "-H"])
        .arg(format!("Authorization: Bearer {token}"))
        .arg(format!("https://{ip}:8443/metrics"))
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|line| {
            let rest = line.strip_prefix("cinder_operator_leader")?;
            let value = if rest.starts_with('{') {
                rest.split_once('}')?.1
            } else {
                rest
            };
            value.split_whitespace().next()?.parse().ok()
        })
}

/// What one poll of every replica's gauge saw.
#[derive(Debug)]
struct Poll {
    at: Duration,
    leaders: Vec<String>,
    answered: usize,
    holder: Option<String>,
}

/// Polls every replica's gauge (all at once) and the leader Lease until `stop`.
async fn poll_leaders(client: kube::Client, token: String, stop: Arc<AtomicBool>) -> Vec<Poll> {
    let start = Instant::now();
    let mut polls = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let pods = operator_pods(&client).await;
        let answers = futures::future::join_all(pods.iter().filter_map(|pod| {
            let ip = pod_ip(pod)?;
            let token = token.clone();
            let name = pod_name(pod);
            Some(async move { (name, leader_gauge(&ip, &token).await) })
        }))
        .await;
        let holder = leader_lease(&client).await.as_ref().and_then(holder);
        polls.push(Poll {
            at: start.elapsed(),
            leaders: answers
                .iter()
                .filter(|(_, g)| *g == Some(1.0))
                .map(|(n, _)| n.clone())
                .collect(),
            answered: answers.iter().filter(|(_, g)| g.is_some()).count(),
            holder,
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    polls
}

/// Every pid the operator's pods ran, as far as their statuses tell.
fn remember_pids(pods: &[Pod], pids: &mut BTreeSet<u32>) {
    pids.extend(pods.iter().filter_map(container_pid));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_deployment_runs_on_process_nodes_fails_over_and_rolls() {
    if let Some(reason) = missing_tool() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "under CI: {reason}"
        );
        println!(
            "SKIPPED the_operator_deployment_runs_on_process_nodes_fails_over_and_rolls: {reason}"
        );
        return;
    }
    let started = Instant::now();
    let binary = operator_binary().unwrap();
    let mut config: ClusterConfig = HarnessConfig::default().cluster;
    config.authorization = AuthorizationMode::Rbac;
    config.service_proxy = true;
    config.controllers.nodes.process = 2;
    config.process_runtime.crash_backoff = CRASH_BACKOFF;
    config.process_runtime.images = ImageMap::from_yaml(&format!(
        "images:\n  - exact: {IMAGE}\n    program: {}\n",
        binary.display()
    ))
    .unwrap();
    let cluster = EmbeddedCluster::start(config).await.unwrap();
    let agent = cluster.agent().expect("the process nodes' agent");
    let netns_prefix = format!("cinder-{}-", agent.network().id);
    let bridge = agent.network().bridge.clone();
    let process_nodes = agent.node_names().to_vec();
    let kubeconfig = cluster.kubeconfig_path().to_path_buf();
    let client = cluster.client().await;
    let mut pids = BTreeSet::new();

    let outcome = scenario(&cluster, &client, &kubeconfig, &process_nodes, &mut pids).await;
    if outcome.is_err() {
        // What the replicas said, for the failure's reader.
        let logs = kubectl(
            &kubeconfig,
            &[
                "logs",
                "-n",
                DEPLOY_NAMESPACE,
                "-l",
                SELECTOR,
                "--prefix",
                "--tail=40",
            ],
        );
        match logs {
            Ok(text) => println!("the operator's logs:\n{text}"),
            Err(e) => println!("the operator's logs: {e:#}"),
        }
    }
    let pods_at_end = operator_pods(&client).await;
    remember_pids(&pods_at_end, &mut pids);
    cluster.shutdown().await;

    // The cluster's shutdown leaves no process, network namespace or bridge of its pods.
    let alive: Vec<u32> = pids
        .iter()
        .copied()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.contains("POD_NAMESPACE=cinder-system"))
        })
        .collect();
    let namespaces = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let left: Vec<&str> = namespaces
        .lines()
        .filter(|l| l.starts_with(&netns_prefix))
        .collect();
    let bridge_left = Command::new("ip")
        .args(["link", "show", &bridge])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    outcome.unwrap();
    assert!(!bridge_left, "the pods' bridge {bridge} is left");
    assert!(alive.is_empty(), "operator processes left: {alive:?}");
    assert!(left.is_empty(), "network namespaces left: {left:?}");
    println!(
        "the operator's Deployment scenario took {:?}",
        started.elapsed()
    );
}

async fn scenario(
    cluster: &EmbeddedCluster,
    client: &kube::Client,
    kubeconfig: &Path,
    process_nodes: &[String],
    pids: &mut BTreeSet<u32>,
) -> anyhow::Result<()> {
    // 1. Only the operator may run on the process nodes.
    for node in process_nodes {
        kubectl(
            kubeconfig,
            &[
                "taint",
                "nodes",
                node,
                &format!("{TAINT_KEY}=true:NoSchedule"),
            ],
        )?;
    }
    let overlay = tempfile::tempdir()?;
    write_overlay(overlay.path())?;

    // 2. deploy/ through the overlay; both replicas become ready.
    let overlay_dir = overlay.path().display().to_string();
    kubectl(kubeconfig, &["apply", "-k", &overlay_dir])?;
    let rollout = kubectl_async(
        kubeconfig,
        &[
            "rollout",
            "status",
            &format!("deployment/{DEPLOYMENT}"),
            "-n",
            DEPLOY_NAMESPACE,
            "--timeout=60s",
        ],
    )
    .await;
    let pods = operator_pods(client).await;
    remember_pids(&pods, pids);
    if let Err(e) = rollout {
        anyhow::bail!(
            "{e}\nthe operator's pods: {:#?}",
            pods.iter().map(|p| &p.status).collect::<Vec<_>>()
        );
    }
    // deploy/'s Deployment as written: two replicas electing a leader.
    let deployment = Api::<Deployment>::namespaced(client.clone(), DEPLOY_NAMESPACE)
        .get(DEPLOYMENT)
        .await?;
    let spec = deployment.spec;
    let args = spec
        .template
        .spec
        .and_then(|s| s.containers.into_iter().next())
        .and_then(|c| c.args)
        .unwrap_or_default();
    anyhow::ensure!(
        spec.replicas == Some(2) && args.iter().any(|a| a == "--leader-elect"),
        "deploy/'s Deployment: replicas {:?}, args {args:?}",
        spec.replicas
    );
    anyhow::ensure!(
        pods.len() == 2,
        "two replicas: {:?}",
        pods.iter().map(pod_name).collect::<Vec<_>>()
    );
    for pod in &pods {
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        anyhow::ensure!(
            process_nodes.contains(&node),
            "{} runs on {node}",
            pod_name(pod)
        );
        anyhow::ensure!(
            container_pid(pod).is_some(),
            "{} has no process",
            pod_name(pod)
        );
    }

    // 3. A Cinder converges under the in-cluster operator, which probes its API Service by
    // its cluster name itself (deploy/ grants no services/proxy). The Cinder's API pods run on
    // simulated nodes, where nothing listens, and a pod's resolver here knows only its own
    // namespace's Services: the probe fails (ConnectionFailed, or HealthCheckTimeout where the
    // host's resolver does not answer), and says which URL it tried.
    create_namespace(client, NS).await?;
    database_environment(client, "in-cluster").await?;
    create_cinder(client, "in-cluster", serde_json::json!({})).await?;
    create_nfs_backend(client, "nfs1", "in-cluster").await?;
    let url = "http://in-cluster-api.cinder-e2e.svc:8776/healthcheck";
    eventually(
        "CinderAPIReady False, probing the Service by its name",
        || async {
            let conditions = cinder_conditions(client, "in-cluster").await;
            let c = conditions.iter().find(|c| c.type_ == "CinderAPIReady")?;
            (c.status == "False"
                && ["ConnectionFailed", "HealthCheckTimeout"].contains(&c.reason.as_str())
                && c.message.contains(url))
            .then_some(())
        },
    )
    .await?;
    wait_cinder_condition(
        client,
        "in-cluster",
        "DeploymentReady",
        "True",
        "DeploymentReady",
    )
    .await?;

    // 4. The leader's process is killed; the standby takes the Lease over.
    let lease = leader_lease(client)
        .await
        .ok_or_else(|| anyhow::anyhow!("no leader Lease"))?;
    let before = holder(&lease).ok_or_else(|| anyhow::anyhow!("the leader Lease has no holder"))?;
    let spec = lease.spec.clone().unwrap_or_default();
    let duration = Duration::from_secs(spec.lease_duration_seconds.unwrap_or(15).max(1) as u64);
    let leader = holder_pod(&before, &pods)
        .ok_or_else(|| anyhow::anyhow!("holder {before} is none of the pods"))?;
    let standby = pods
        .iter()
        .map(pod_name)
        .find(|n| *n != leader)
        .unwrap_or_default();
    let leader_pod = pods
        .iter()
        .find(|p| pod_name(p) == leader)
        .unwrap_or(&pods[0]);
    let pid = container_pid(leader_pod).unwrap_or_default();
    let environ = std::fs::read_to_string(format!("/proc/{pid}/environ")).unwrap_or_default();
    anyhow::ensure!(
        environ
            .split('\0')
            .any(|v| v == format!("POD_NAME={leader}")),
        "pid {pid} is not {leader}'s operator"
    );
    let killed = Instant::now();
    let status = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()?;
    anyhow::ensure!(status.success(), "kill -KILL {pid}");
    let after = loop {
        if let Some(h) = leader_lease(client).await.as_ref().and_then(holder)
            && h != before
        {
            break h;
        }
        anyhow::ensure!(
            killed.elapsed() < duration * 3,
            "no new leader within {:?} of the kill",
            duration * 3
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let takeover = killed.elapsed();
    anyhow::ensure!(
        holder_pod(&after, &pods).as_deref() == Some(standby.as_str()),
        "the Lease went to {after}, not to the standby {standby}"
    );
    // The dead leader renewed at most one renew period before the kill; the standby tries every
    // renew period (±10 %) and wins once the Lease has expired.
    let renew = duration / 3;
    let bound = duration + renew.mul_f64(1.1) + Duration::from_secs(2);
    anyhow::ensure!(
        takeover <= bound,
        "the standby took over {takeover:?} after the kill (at most {bound:?})"
    );
    println!("the standby {standby} took over {takeover:?} after the leader's kill");

    // 5. A rolling update completes with never two leaders.
    let token = metrics_reader_token(client).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let poller = tokio::spawn(poll_leaders(client.clone(), token, Arc::clone(&stop)));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let restarted = kubectl(
        kubeconfig,
        &[
            "rollout",
            "restart",
            &format!("deployment/{DEPLOYMENT}"),
            "-n",
            DEPLOY_NAMESPACE,
        ],
    );
    let rolled = match restarted {
        Ok(_) => {
            kubectl_async(
                kubeconfig,
                &[
                    "rollout",
                    "status",
                    &format!("deployment/{DEPLOYMENT}"),
                    "-n",
                    DEPLOY_NAMESPACE,
                    "--timeout=90s",
                ],
            )
            .await
        }
        Err(e) => Err(e),
    };
    remember_pids(&operator_pods(client).await, pids);
    // A leader of the new pods, seen by the poller too.
    let settled = Instant::now();
    while settled.elapsed() < duration * 2 {
        let pods = operator_pods(client).await;
        remember_pids(&pods, pids);
        let lease = leader_lease(client).await;
        if lease
            .as_ref()
            .and_then(holder)
            .and_then(|h| holder_pod(&h, &pods))
            .is_some()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::SeqCst);
    let polls = poller.await?;
    rolled?;
    let double: Vec<&Poll> = polls.iter().filter(|p| p.leaders.len() > 1).collect();
    anyhow::ensure!(
        double.is_empty(),
        "two replicas reported cinder_operator_leader 1 at once: {double:#?}"
    );
    let led = polls.iter().filter(|p| p.leaders.len() == 1).count();
    anyhow::ensure!(
        led > 0 && polls.iter().any(|p| p.answered >= 2),
        "the polls never saw a leader's gauge: {polls:#?}"
    );
    let holders: BTreeSet<&str> = polls.iter().filter_map(|p| p.holder.as_deref()).collect();
    let pods = operator_pods(client).await;
    let names: BTreeSet<String> = pods.iter().map(pod_name).collect();
    anyhow::ensure!(
        pods.len() == 2 && !names.contains(&leader) && !names.contains(&standby),
        "after the rollout: {names:?}"
    );
    let last = leader_lease(client)
        .await
        .as_ref()
        .and_then(holder)
        .unwrap_or_default();
    anyhow::ensure!(
        holder_pod(&last, &pods).is_some(),
        "the leader after the rollout ({last}) is none of the new pods {names:?}"
    );
    // The longest stretch of polls that saw no leader (a handover: the successor acquires the
    // released Lease at its next try).
    let mut leaderless = Duration::ZERO;
    let mut since: Option<Duration> = None;
    for poll in &polls {
        match (poll.leaders.is_empty(), since) {
            (true, None) => since = Some(poll.at),
            (false, Some(from)) => {
                leaderless = leaderless.max(poll.at - from);
                since = None;
            }
            _ => {}
        }
    }
    // Every request of the replicas came with deploy/'s ServiceAccount token and was allowed.
    let account = format!("system:serviceaccount:{DEPLOY_NAMESPACE}:{DEPLOY_ACCOUNT}");
    let requests: Vec<_> = cluster
        .requests()
        .into_iter()
        .filter(|r| r.user == account)
        .collect();
    let refused: BTreeSet<String> = requests
        .iter()
        .filter(|r| r.status == 401 || r.status == 403)
        .map(describe_request)
        .collect();
    anyhow::ensure!(
        !requests.is_empty() && refused.is_empty(),
        "{} requests as {account}; refused: {refused:#?}",
        requests.len()
    );
    println!(
        "rollout: {} polls, {led} with one leader, at most {leaderless:?} without one, holders {holders:?}",
        polls.len()
    );
    Ok(())
}
