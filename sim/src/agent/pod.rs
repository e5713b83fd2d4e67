//! One pod on a process node, owned by one task (this module's [`run`]): it alone changes the
//! pod's sandbox and container states, from the messages it receives (pod updates from the
//! watch, container exits from its waiters, shutdown) and its own timers. It makes the sandbox
//! (images, volumes, network namespace), runs init containers in order and then the containers,
//! restarts them as restartPolicy says with the kubelet's back-off, runs their probes, writes
//! `pods/status` whenever the status changes and posts the kubelet's Events; a Terminating pod
//! gets preStop, SIGTERM, SIGKILL after its grace period, and is then deleted with grace 0.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::api_access::{self, ApiService};
use super::cgroups::ContainerCgroup;
use super::context::{AgentContext, event, now};
use super::env::{self, PodFacts, Sources};
use super::images::{ImageRoot, ImageRule};
use super::probes::{self, Timing};
use super::sandbox::{self, Launch, Mount, PodNetwork};
use super::status::{ContainerView, PodView, State, pod_status};
use super::volumes::{self, Made};

/// What a pod task is told.
#[derive(Debug)]
pub enum PodMsg {
    /// The pod as the watch last saw it.
    Update(Value),
    /// A container process ended (`attempt` is the restart count it was started at).
    Exited {
        index: usize,
        attempt: u32,
        code: i32,
        signal: Option<i32>,
    },
    /// The pod is gone from the API: stop everything at once.
    Gone,
    /// The agent stops: stop everything at once, write nothing.
    Shutdown,
}

const PATH_DEFAULT: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// How often a pod waiting for a volume, a reference or its sandbox is tried again.
const RETRY: Duration = Duration::from_secs(2);
/// The kubelet's longest crash-loop back-off.
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// How long a graceful deletion waits for a SIGKILLed container to be reaped.
const KILLED_REAP_WAIT: Duration = Duration::from_secs(10);

#[derive(Debug, Default, Clone, Copy)]
struct ProbeState {
    next: Option<Instant>,
    successes: u32,
    failures: u32,
}

#[derive(Debug)]
struct Ctr {
    spec: Value,
    name: String,
    image: String,
    init: bool,
    state: State,
    last: Option<State>,
    restarts: u32,
    ready: bool,
    started: bool,
    pid: Option<u32>,
    /// The host pid of the container's PID 1 (its command), which `containerID` names; `pid`
    /// is its keeper's (see `sandbox::enter_pid_namespace`).
    init_pid: Option<u32>,
    started_at: Option<Instant>,
    /// When the container may start (again).
    not_before: Option<Instant>,
    /// When a container being stopped (liveness, startup) gets SIGKILL.
    kill_at: Option<Instant>,
    /// Why the running process is being stopped (its termination reason then).
    stopping: bool,
    startup: ProbeState,
    readiness: ProbeState,
    liveness: ProbeState,
    termination_file: Option<PathBuf>,
    /// The memory cgroup of the running process, when the agent has cgroups.
    cgroup: Option<ContainerCgroup>,
}

impl Ctr {
    fn new(spec: &Value, init: bool) -> Ctr {
        Ctr {
            spec: spec.clone(),
            name: spec["name"].as_str().unwrap_or_default().to_owned(),
            image: spec["image"].as_str().unwrap_or_default().to_owned(),
            init,
            state: State::waiting(
                if init {
                    "PodInitializing"
                } else {
                    "ContainerCreating"
                },
                None,
            ),
            last: None,
            restarts: 0,
            ready: false,
            started: false,
            pid: None,
            init_pid: None,
            started_at: None,
            not_before: None,
            kill_at: None,
            stopping: false,
            startup: ProbeState::default(),
            readiness: ProbeState::default(),
            liveness: ProbeState::default(),
            termination_file: None,
            cgroup: None,
        }
    }

    fn view(&self) -> ContainerView {
        ContainerView {
            name: self.name.clone(),
            image: self.image.clone(),
            state: self.state.clone(),
            last: self.last.clone(),
            restarts: self.restarts,
            ready: self.ready,
            started: self.started,
            container_id: self
                .pid
                .and(self.init_pid)
                .map(|pid| format!("process://{pid}"))
                .or_else(|| {
                    matches!(self.state, State::Terminated { .. })
                        .then(|| "process://exited".to_owned())
                }),
        }
    }

    fn running(&self) -> bool {
        matches!(self.state, State::Running { .. })
    }
}

struct Worker {
    ctx: Arc<AgentContext>,
    pod: Value,
    uid: String,
    name: String,
    namespace: String,
    host: u8,
    dir: PathBuf,
    net: Option<PodNetwork>,
    volumes: Option<Made>,
    ctrs: Vec<Ctr>,
    rules: Option<Vec<ImageRule>>,
    pull_failures: u32,
    start_time: String,
    transitions: BTreeMap<String, (String, String)>,
    last_status: Value,
    reported: BTreeSet<String>,
    finished: bool,
    tx: mpsc::UnboundedSender<PodMsg>,
    /// The `kubernetes` Service when the pod gets the API access volume and variables.
    api: Option<ApiService>,
}

/// Runs the pod task until the pod is gone, deleted or the agent stops; the sandbox is removed
/// before it returns.
pub async fn run(
    ctx: Arc<AgentContext>,
    pod: Value,
    host: u8,
    tx: mpsc::UnboundedSender<PodMsg>,
    mut rx: mpsc::UnboundedReceiver<PodMsg>,
) {
    let mut pod = pod;
    let api = match api_access::api_service(&ctx.client).await {
        Some(api) if api_access::automount(&ctx.client, &pod).await => Some(api),
        _ => None,
    };
    if api.is_some() {
        api_access::add_volume(&mut pod);
    }
    let meta = |k: &str| pod["metadata"][k].as_str().unwrap_or_default().to_owned();
    let (uid, name, namespace) = (meta("uid"), meta("name"), meta("namespace"));
    let dir = ctx.state_dir.join("pods").join(&uid);
    let spec_list = |key: &str| {
        pod.pointer(&format!("/spec/{key}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let mut ctrs: Vec<Ctr> = spec_list("initContainers")
        .iter()
        .map(|c| Ctr::new(c, true))
        .collect();
    ctrs.extend(spec_list("containers").iter().map(|c| Ctr::new(c, false)));
    let mut worker = Worker {
        ctx,
        pod,
        uid,
        name,
        namespace,
        host,
        dir,
        net: None,
        volumes: None,
        ctrs,
        rules: None,
        pull_failures: 0,
        start_time: now(),
        transitions: BTreeMap::new(),
        last_status: Value::Null,
        reported: BTreeSet::new(),
        finished: false,
        tx,
        api,
    };
    loop {
        if worker.pod.pointer("/metadata/deletionTimestamp").is_some() {
            worker.terminate(&mut rx).await;
            return;
        }
        let wake = worker.step().await;
        worker.publish().await;
        let sleep = async {
            match wake {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            msg = rx.recv() => match msg {
                Some(PodMsg::Update(mut pod)) => {
                    if worker.api.is_some() {
                        api_access::add_volume(&mut pod);
                    }
                    worker.pod = pod;
                }
                Some(PodMsg::Exited { index, attempt, code, signal }) => worker.exited(index, attempt, code, signal),
                Some(PodMsg::Gone) | Some(PodMsg::Shutdown) | None => {
                    worker.stop_now().await;
                    return;
                }
            },
            () = sleep => {}
        }
    }
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl Worker {
    fn policy(&self) -> String {
        self.pod
            .pointer("/spec/restartPolicy")
            .and_then(Value::as_str)
            .unwrap_or("Always")
            .to_owned()
    }

    async fn event(&mut self, kind: &str, reason: &str, message: &str, once_key: Option<String>) {
        if let Some(key) = once_key
            && !self.reported.insert(key)
        {
            return;
        }
        event(&self.ctx, &self.pod, kind, reason, message).await;
    }

    fn facts(&self) -> PodFacts {
        PodFacts {
            pod_ip: self
                .net
                .as_ref()
                .map(|n| n.ip.to_string())
                .unwrap_or_default(),
            host_ip: self.ctx.network.gateway().to_string(),
            node_cpu: 4.0,
            node_memory: 16_331_504.0 * 1024.0,
        }
    }

    fn set_waiting_all(&mut self, reason: &str) {
        for c in &mut self.ctrs {
            if matches!(&c.state, State::Waiting { .. }) && c.restarts == 0 {
                let r = if c.init {
                    reason
                } else if reason == "PodInitializing" {
                    "PodInitializing"
                } else {
                    reason
                };
                c.state = State::waiting(r, None);
            }
        }
    }

    /// One pass over the pod; the time of the next pass (None: only when a message comes).
    async fn step(&mut self) -> Option<Instant> {
        if self.finished {
            return None;
        }
        if self.rules.is_none() && !self.check_images().await {
            let backoff =
                self.ctx.config.crash_backoff * 2u32.saturating_pow(self.pull_failures.min(5));
            return Some(Instant::now() + backoff.min(MAX_BACKOFF));
        }
        if self.volumes.is_none() {
            let _ = std::fs::create_dir_all(&self.dir);
            let facts = self.facts();
            let claims = self.ctx.state_dir.join("claims");
            match volumes::make(
                &self.ctx.client,
                &self.pod,
                &self.dir.join("volumes"),
                &claims,
                &facts,
            )
            .await
            {
                Ok(made) => self.volumes = Some(made),
                Err(error) => {
                    self.set_waiting_all("ContainerCreating");
                    self.event(
                        "Warning",
                        "FailedMount",
                        &error.0,
                        Some(format!("mount:{}", error.0)),
                    )
                    .await;
                    return Some(Instant::now() + RETRY);
                }
            }
        }
        if self.net.is_none() {
            match PodNetwork::create(&self.ctx.network, self.host).await {
                Ok(net) => {
                    self.net = Some(net);
                    let services = self.ctx.services(&self.namespace).await;
                    if let Err(error) = self.write_etc_files(&services) {
                        self.event(
                            "Warning",
                            "FailedCreatePodSandBox",
                            &error,
                            Some(format!("sandbox:{error}")),
                        )
                        .await;
                        return Some(Instant::now() + RETRY);
                    }
                }
                Err(error) => {
                    let message = format!("Failed to create pod sandbox: {error}");
                    self.event(
                        "Warning",
                        "FailedCreatePodSandBox",
                        &message,
                        Some(format!("sandbox:{message}")),
                    )
                    .await;
                    return Some(Instant::now() + RETRY);
                }
            }
        }
        let mut wake = None;
        // Init containers, in order: the first that has not succeeded is the one to run.
        let inits: Vec<usize> = (0..self.ctrs.len())
            .filter(|i| self.ctrs[*i].init)
            .collect();
        for index in inits {
            if self.ctrs[index].state.exit_code() == Some(0) {
                continue;
            }
            let w = self.drive(index).await;
            wake = earliest(wake, w);
            self.set_app_waiting_initializing();
            return self.finish_or(wake).await;
        }
        let apps: Vec<usize> = (0..self.ctrs.len())
            .filter(|i| !self.ctrs[*i].init)
            .collect();
        for index in apps {
            let w = self.drive(index).await;
            wake = earliest(wake, w);
        }
        self.finish_or(wake).await
    }

    fn set_app_waiting_initializing(&mut self) {
        for c in self.ctrs.iter_mut().filter(|c| !c.init) {
            if matches!(&c.state, State::Waiting { .. }) && c.restarts == 0 {
                c.state = State::waiting("PodInitializing", None);
            }
        }
    }

    /// After a pass: a pod whose phase is final has its sandbox removed.
    async fn finish_or(&mut self, wake: Option<Instant>) -> Option<Instant> {
        let (init, apps) = self.views();
        let phase = super::status::phase(&self.policy(), &init, &apps);
        if matches!(phase, "Succeeded" | "Failed") {
            self.finished = true;
            self.teardown();
            return None;
        }
        wake
    }

    fn views(&self) -> (Vec<ContainerView>, Vec<ContainerView>) {
        let init = self.ctrs.iter().filter(|c| c.init).map(Ctr::view).collect();
        let apps = self
            .ctrs
            .iter()
            .filter(|c| !c.init)
            .map(Ctr::view)
            .collect();
        (init, apps)
    }

    async fn check_images(&mut self) -> bool {
        let mut rules = Vec::new();
        for index in 0..self.ctrs.len() {
            let image = self.ctrs[index].image.clone();
            match self.ctx.config.images.resolve(&image) {
                Ok(rule) => rules.push(rule.clone()),
                Err(error) => {
                    self.pull_failures += 1;
                    let name = self.ctrs[index].name.clone();
                    if self.pull_failures == 1 {
                        self.ctrs[index].state =
                            State::waiting("ErrImagePull", Some(error.0.clone()));
                        self.event(
                            "Normal",
                            "Pulling",
                            &format!("Pulling image \"{image}\""),
                            None,
                        )
                        .await;
                        self.event(
                            "Warning",
                            "Failed",
                            &format!("Failed to pull image \"{image}\": {}", error.0),
                            None,
                        )
                        .await;
                        self.event("Warning", "Failed", "Error: ErrImagePull", None)
                            .await;
                    } else {
                        let message = format!("Back-off pulling image \"{image}\"");
                        self.ctrs[index].state =
                            State::waiting("ImagePullBackOff", Some(message.clone()));
                        self.event(
                            "Normal",
                            "BackOff",
                            &message,
                            Some(format!("pull-backoff:{name}")),
                        )
                        .await;
                        self.event(
                            "Warning",
                            "Failed",
                            "Error: ImagePullBackOff",
                            Some(format!("pull-backoff-error:{name}")),
                        )
                        .await;
                    }
                    return false;
                }
            }
        }
        self.rules = Some(rules);
        true
    }

    /// /etc/hosts (the pod's name and the namespace's Services), /etc/hostname, resolv.conf.
    fn write_etc_files(&self, services: &[(String, String)]) -> Result<(), String> {
        let ip = self
            .net
            .as_ref()
            .map(|n| n.ip.to_string())
            .unwrap_or_default();
        let hostname = self
            .pod
            .pointer("/spec/hostname")
            .and_then(Value::as_str)
            .unwrap_or(&self.name)
            .to_owned();
        let mut hosts = format!(
            "# Kubernetes-managed hosts file (process runtime).\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n{ip}\t{hostname}\n"
        );
        for (name, cluster_ip) in services {
            let ns = &self.namespace;
            hosts.push_str(&format!(
                "{cluster_ip}\t{name}.{ns}.svc.cluster.local {name}.{ns}.svc {name}\n"
            ));
        }
        for alias in self
            .pod
            .pointer("/spec/hostAliases")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice)
        {
            let names: Vec<&str> = alias["hostnames"]
                .as_array()
                .map(|h| h.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            hosts.push_str(&format!(
                "{}\t{}\n",
                alias["ip"].as_str().unwrap_or_default(),
                names.join(" ")
            ));
        }
        let etc = self.dir.join("etc");
        std::fs::create_dir_all(&etc).map_err(|e| e.to_string())?;
        std::fs::write(etc.join("hosts"), hosts).map_err(|e| e.to_string())?;
        std::fs::write(etc.join("hostname"), format!("{hostname}\n")).map_err(|e| e.to_string())?;
        let ns = &self.namespace;
        std::fs::write(
            etc.join("resolv.conf"),
            format!(
                "search {ns}.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n"
            ),
        )
        .map_err(|e| e.to_string())?;
        Ok(())
    }

    /// Moves container `index` on: start it when due, restart it after its back-off, kill it
    /// when its stop deadline passed, probe it when a probe is due.
    async fn drive(&mut self, index: usize) -> Option<Instant> {
        let now_i = Instant::now();
        let policy = self.policy();
        let c = &self.ctrs[index];
        match &c.state {
            State::Running { .. } => {
                if let (Some(at), Some(pid)) = (c.kill_at, c.pid) {
                    if at <= now_i {
                        kill_container(pid, c.init_pid);
                        return Some(now_i + Duration::from_millis(500));
                    }
                    return Some(at);
                }
                self.probe(index).await
            }
            State::Terminated { exit_code, .. } => {
                let restart = match policy.as_str() {
                    "Always" => !c.init || *exit_code != 0,
                    "OnFailure" => *exit_code != 0,
                    _ => false,
                };
                if !restart {
                    return None;
                }
                let backoff = backoff_for(self.ctx.config.crash_backoff, c.restarts);
                let name = c.name.clone();
                let last = c.state.clone();
                let message = format!(
                    "back-off {} restarting failed container={name} pod={}_{}({})",
                    humanize(backoff),
                    self.name,
                    self.namespace,
                    self.uid
                );
                let c = &mut self.ctrs[index];
                c.last = Some(last);
                c.restarts += 1;
                c.not_before = Some(now_i + backoff);
                c.state = State::waiting("CrashLoopBackOff", Some(message));
                let event = format!(
                    "Back-off restarting failed container {name} in pod {}_{}({})",
                    self.name, self.namespace, self.uid
                );
                self.event("Warning", "BackOff", &event, None).await;
                Some(now_i + backoff)
            }
            State::Waiting { .. } => {
                if let Some(at) = c.not_before.filter(|at| *at > now_i) {
                    return Some(at);
                }
                self.start(index).await
            }
        }
    }

    /// Starts container `index`; the wake time for its probes or its retry.
    async fn start(&mut self, index: usize) -> Option<Instant> {
        let rule = self.rules.as_ref().and_then(|r| r.get(index)).cloned()?;
        let spec = self.ctrs[index].spec.clone();
        let name = self.ctrs[index].name.clone();
        let image = self.ctrs[index].image.clone();
        // Environment.
        let (secret_names, map_names) = env::references(&spec);
        let mut sources = Sources::default();
        for secret in secret_names {
            match volumes::secret_data(&self.ctx.client, &self.namespace, &secret).await {
                Ok(Some(data)) => {
                    sources.secrets.insert(secret, text_map(data));
                }
                Ok(None) => {}
                Err(_) => return Some(Instant::now() + RETRY),
            }
        }
        for map in map_names {
            match volumes::config_map_data(&self.ctx.client, &self.namespace, &map).await {
                Ok(Some(data)) => {
                    sources.config_maps.insert(map, text_map(data));
                }
                Ok(None) => {}
                Err(_) => return Some(Instant::now() + RETRY),
            }
        }
        let facts = self.facts();
        let env = match env::resolve(&self.pod, &spec, &sources, &facts) {
            Ok(env) => env,
            Err(message) => {
                self.ctrs[index].state =
                    State::waiting("CreateContainerConfigError", Some(message.clone()));
                let key = format!("config:{name}:{message}");
                self.event("Warning", "Failed", &format!("Error: {message}"), Some(key))
                    .await;
                return Some(Instant::now() + RETRY);
            }
        };
        let strings = |key: &str| -> Vec<String> {
            spec.get(key)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let lookup = |n: &str| env.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        let mut command: Vec<String> = strings("command")
            .iter()
            .map(|s| env::expand(s, lookup))
            .collect();
        let args: Vec<String> = strings("args")
            .iter()
            .map(|s| env::expand(s, lookup))
            .collect();
        if command.is_empty() {
            command = match &rule.root {
                ImageRoot::Program(program) => vec![program.display().to_string()],
                _ if args.is_empty() => rule.default_command.clone(),
                _ => Vec::new(),
            };
        }
        command.extend(args);
        if command.is_empty() {
            let message = "failed to generate container spec: no command specified".to_owned();
            self.ctrs[index].state = State::waiting("CreateContainerError", Some(message.clone()));
            self.event(
                "Warning",
                "Failed",
                &format!("Error: {message}"),
                Some(format!("create:{name}")),
            )
            .await;
            return Some(Instant::now() + RETRY);
        }
        // Mounts: volumes, the termination message file, /etc files.
        let made = self.volumes.clone().unwrap_or_default();
        let mut mounts = match volumes::mounts_of(&spec, &made) {
            Ok(m) => m,
            Err(message) => {
                self.ctrs[index].state =
                    State::waiting("CreateContainerConfigError", Some(message.clone()));
                self.event(
                    "Warning",
                    "Failed",
                    &format!("Error: {message}"),
                    Some(format!("config:{name}:{message}")),
                )
                .await;
                return Some(Instant::now() + RETRY);
            }
        };
        let attempt = self.ctrs[index].restarts;
        let run_dir = self.dir.join("run").join(&name);
        let termination = run_dir.join(format!("termination-{attempt}"));
        let tmp_dir = self.dir.join("tmp").join(&name);
        let root_dir = run_dir.join("root");
        let scratch_dir = run_dir.join("scratch");
        for dir in [&run_dir, &tmp_dir, &root_dir, &scratch_dir] {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = std::fs::set_permissions(
            &tmp_dir,
            std::os::unix::fs::PermissionsExt::from_mode(0o1777),
        );
        let _ = std::fs::write(&termination, b"");
        // Any user of the container may write its termination message, as with the kubelet's.
        let _ = std::fs::set_permissions(
            &termination,
            std::os::unix::fs::PermissionsExt::from_mode(0o666),
        );
        let message_path = spec["terminationMessagePath"]
            .as_str()
            .unwrap_or("/dev/termination-log");
        let etc = self.dir.join("etc");
        let user_mounts: BTreeSet<PathBuf> = mounts.iter().map(|m| m.target.clone()).collect();
        for file in ["hosts", "hostname", "resolv.conf"] {
            let target = Path::new("/etc").join(file);
            if !user_mounts.contains(&target) {
                mounts.push(Mount {
                    source: etc.join(file),
                    target,
                    read_only: false,
                });
            }
        }
        mounts.push(Mount {
            source: termination.clone(),
            target: PathBuf::from(message_path),
            read_only: false,
        });
        // The program.
        let mut env = env;
        if let Some(api) = &self.api {
            api_access::add_env(&mut env, api);
        }
        let mut path_var = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| PATH_DEFAULT.to_owned());
        if let ImageRoot::Tree(tree) = &rule.root {
            path_var = format!("{}:{path_var}", tree.join("bin").display());
            env.retain(|(k, _)| k != "VIRTUAL_ENV");
            env.push(("VIRTUAL_ENV".to_owned(), tree.display().to_string()));
        }
        env.retain(|(k, _)| k != "PATH");
        env.insert(0, ("PATH".to_owned(), path_var.clone()));
        if !env.iter().any(|(k, _)| k == "HOSTNAME") {
            env.insert(1, ("HOSTNAME".to_owned(), self.name.clone()));
        }
        let security = |key: &str| {
            spec.pointer(&format!("/securityContext/{key}"))
                .or_else(|| self.pod.pointer(&format!("/spec/securityContext/{key}")))
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
        };
        let (uid, gid) = (security("runAsUser"), security("runAsGroup"));
        if !env.iter().any(|(k, _)| k == "HOME") {
            env.push((
                "HOME".to_owned(),
                if uid.unwrap_or(0) == 0 { "/root" } else { "/" }.to_owned(),
            ));
        }
        let program = sandbox::find_program(&command[0], &path_var, |inside| {
            sandbox::host_path(inside, &mounts)
        });
        let started_text = now();
        let Some(program) = program else {
            let what = &command[0];
            let detail = if what.contains('/') {
                format!("exec: \"{what}\": stat {what}: no such file or directory")
            } else {
                format!("exec: \"{what}\": executable file not found in $PATH")
            };
            let message = format!(
                "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: {detail}: unknown"
            );
            return self.start_failed(index, message, started_text).await;
        };
        let logs = self
            .ctx
            .log_dir(&self.namespace, &self.name, &self.uid)
            .join(&name);
        let _ = std::fs::create_dir_all(&logs);
        let log = match std::fs::File::create(logs.join(format!("{attempt}.log"))) {
            Ok(f) => f,
            Err(e) => {
                return self
                    .start_failed(
                        index,
                        format!("failed to create the container log: {e}"),
                        started_text,
                    )
                    .await;
            }
        };
        let _ = std::fs::remove_file(logs.join(format!("{attempt}.log.done")));
        let working_dir = PathBuf::from(
            spec["workingDir"]
                .as_str()
                .filter(|w| !w.is_empty())
                .unwrap_or("/"),
        );
        let limit = spec
            .pointer("/resources/limits/memory")
            .and_then(|q| match q {
                Value::String(text) => crate::controllers::pods::quantity::parse(text),
                other => other.as_f64(),
            })
            .filter(|bytes| *bytes >= 1.0)
            .map(|bytes| bytes.ceil() as u64);
        let (cgroup, procs) = match &self.ctx.cgroups {
            None => (None, None),
            Some(cgroups) => {
                let made = cgroups
                    .container(&self.uid, &name, attempt, limit)
                    .and_then(|group| {
                        let procs = std::fs::OpenOptions::new()
                            .write(true)
                            .open(group.procs())
                            .map_err(|e| format!("{}: {e}", group.procs().display()))?;
                        Ok((group, procs))
                    });
                match made {
                    Ok((group, procs)) => (Some(group), Some(procs)),
                    Err(error) => {
                        let message = format!(
                            "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to apply cgroup configuration: {error}: unknown"
                        );
                        return self.start_failed(index, message, started_text).await;
                    }
                }
            }
        };
        let launch = Launch {
            cgroup: procs,
            program,
            arg0: command[0].clone(),
            args: command[1..].to_vec(),
            env,
            working_dir,
            hostname: self
                .pod
                .pointer("/spec/hostname")
                .and_then(Value::as_str)
                .unwrap_or(&self.name)
                .to_owned(),
            uid,
            gid,
            groups: supplementary_groups(&self.pod),
            mounts,
            root_dir,
            scratch_dir,
            tmp_dir,
            log,
        };
        self.event(
            "Normal",
            "Pulled",
            &format!("Container image \"{image}\" already present on machine"),
            None,
        )
        .await;
        let Some(net) = self.net.clone() else {
            return Some(Instant::now() + RETRY);
        };
        let child = match sandbox::spawn(launch, &net.path()) {
            Ok(child) => child,
            Err(error) => {
                if let Some(group) = cgroup {
                    group.remove();
                }
                let message = format!(
                    "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: {error}: unknown"
                );
                return self.start_failed(index, message, started_text).await;
            }
        };
        let pid = child.id();
        // The spawn returned once PID 1 exec'd the command, so the keeper's child is there.
        let init_pid = pid.map(sandbox::container_init);
        if let Some(init) = init_pid {
            // Where exec finds the running process ([`super::exec`]).
            let _ = std::fs::write(logs.join(format!("{attempt}.pid")), init.to_string());
        }
        self.event(
            "Normal",
            "Created",
            &format!("Created container {name}"),
            None,
        )
        .await;
        self.event(
            "Normal",
            "Started",
            &format!("Started container {name}"),
            None,
        )
        .await;
        let tx = self.tx.clone();
        let done_marker = logs.join(format!("{attempt}.log.done"));
        tokio::spawn(async move {
            let mut child = child;
            let status = child.wait().await;
            let _ = std::fs::write(&done_marker, b"");
            let (code, signal) = match status {
                Ok(s) => {
                    use std::os::unix::process::ExitStatusExt;
                    match (s.code(), s.signal()) {
                        (Some(code), _) => (code, None),
                        (None, Some(sig)) => (128 + sig, Some(sig)),
                        _ => (255, None),
                    }
                }
                Err(_) => (255, None),
            };
            let _ = tx.send(PodMsg::Exited {
                index,
                attempt,
                code,
                signal,
            });
        });
        let now_i = Instant::now();
        let c = &mut self.ctrs[index];
        c.state = State::Running {
            started_at: started_text,
        };
        c.pid = pid;
        c.init_pid = init_pid;
        c.started_at = Some(now_i);
        c.termination_file = Some(termination);
        c.cgroup = cgroup;
        c.kill_at = None;
        c.stopping = false;
        let has = |k: &str| c.spec.get(k).is_some_and(Value::is_object);
        c.started = !has("startupProbe");
        c.ready = !c.init && c.started && !has("readinessProbe");
        let first = |key: &str| {
            c.spec
                .get(key)
                .filter(|p| p.is_object())
                .map(|p| now_i + Timing::of(p).initial_delay)
        };
        c.startup = ProbeState {
            next: first("startupProbe"),
            ..ProbeState::default()
        };
        c.readiness = ProbeState {
            next: first("readinessProbe"),
            ..ProbeState::default()
        };
        c.liveness = ProbeState {
            next: first("livenessProbe"),
            ..ProbeState::default()
        };
        earliest(earliest(c.startup.next, c.readiness.next), c.liveness.next)
    }

    async fn start_failed(
        &mut self,
        index: usize,
        message: String,
        started: String,
    ) -> Option<Instant> {
        let name = self.ctrs[index].name.clone();
        self.ctrs[index].state = State::Terminated {
            exit_code: 128,
            reason: "StartError".to_owned(),
            message: Some(message.clone()),
            started_at: "1970-01-01T00:00:00Z".to_owned(),
            finished_at: started,
        };
        self.event(
            "Warning",
            "Failed",
            &format!("Error: {message}"),
            Some(format!("start:{name}:{}", self.ctrs[index].restarts)),
        )
        .await;
        Some(Instant::now())
    }

    /// Runs the probes of running container `index` that are due; the next due time.
    async fn probe(&mut self, index: usize) -> Option<Instant> {
        let now_i = Instant::now();
        let ip = self.net.as_ref().map(|n| n.ip)?;
        let spec = self.ctrs[index].spec.clone();
        let name = self.ctrs[index].name.clone();
        let pid = self.ctrs[index].pid;
        let mut wake = None;
        for kind in ["startupProbe", "livenessProbe", "readinessProbe"] {
            let Some(probe) = spec.get(kind).filter(|p| p.is_object()) else {
                continue;
            };
            let c = &self.ctrs[index];
            if kind != "startupProbe" && !c.started {
                continue;
            }
            if kind == "startupProbe" && c.started {
                continue;
            }
            let state = match kind {
                "startupProbe" => c.startup,
                "livenessProbe" => c.liveness,
                _ => c.readiness,
            };
            let timing = Timing::of(probe);
            let next = state.next.unwrap_or(now_i);
            if next > now_i {
                wake = earliest(wake, Some(next));
                continue;
            }
            let result = probes::run(probe, &spec, ip, pid, timing.timeout).await;
            let mut state = state;
            state.next = Some(Instant::now() + timing.period);
            wake = earliest(wake, state.next);
            let title = match kind {
                "startupProbe" => "Startup",
                "livenessProbe" => "Liveness",
                _ => "Readiness",
            };
            match result {
                Ok(()) => {
                    state.successes += 1;
                    state.failures = 0;
                }
                Err(message) => {
                    state.failures += 1;
                    state.successes = 0;
                    self.event(
                        "Warning",
                        "Unhealthy",
                        &format!("{title} probe failed: {message}"),
                        None,
                    )
                    .await;
                }
            }
            let grace = self
                .pod
                .pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_u64)
                .unwrap_or(30);
            let c = &mut self.ctrs[index];
            match kind {
                "startupProbe" => {
                    c.startup = state;
                    if state.successes >= 1 {
                        c.started = true;
                        c.ready =
                            !c.init && !c.spec.get("readinessProbe").is_some_and(Value::is_object);
                        let at = Instant::now();
                        let first = |key: &str| {
                            c.spec
                                .get(key)
                                .filter(|p| p.is_object())
                                .map(|p| at + Timing::of(p).initial_delay)
                        };
                        c.readiness.next = first("readinessProbe");
                        c.liveness.next = first("livenessProbe");
                        wake = earliest(wake, earliest(c.readiness.next, c.liveness.next));
                    } else if state.failures >= timing.failure_threshold {
                        self.stop_container(
                            index,
                            grace,
                            &format!("Container {name} failed startup probe, will be restarted"),
                        )
                        .await;
                        return Some(Instant::now() + Duration::from_millis(100));
                    }
                }
                "livenessProbe" => {
                    c.liveness = state;
                    if state.failures >= timing.failure_threshold {
                        self.stop_container(
                            index,
                            grace,
                            &format!("Container {name} failed liveness probe, will be restarted"),
                        )
                        .await;
                        return Some(Instant::now() + Duration::from_millis(100));
                    }
                }
                _ => {
                    c.readiness = state;
                    if state.successes >= timing.success_threshold {
                        c.ready = true;
                    } else if state.failures >= timing.failure_threshold {
                        c.ready = false;
                    }
                }
            }
        }
        wake
    }

    /// SIGTERM now, SIGKILL after `grace` seconds (liveness and startup failures).
    async fn stop_container(&mut self, index: usize, grace: u64, why: &str) {
        self.event("Normal", "Killing", why, None).await;
        let c = &mut self.ctrs[index];
        if let Some(pid) = c.pid {
            kill_group(pid, libc::SIGTERM);
        }
        c.stopping = true;
        c.ready = false;
        c.kill_at = Some(Instant::now() + Duration::from_secs(grace));
    }

    fn exited(&mut self, index: usize, attempt: u32, code: i32, signal: Option<i32>) {
        let Some(c) = self.ctrs.get_mut(index) else {
            return;
        };
        if c.restarts != attempt || !c.running() {
            return;
        }
        let State::Running { started_at } = c.state.clone() else {
            return;
        };
        // A process of the container ended by the kernel's OOM killer in its cgroup, as
        // containerd reads memory.events.
        let oom_killed = code != 0 && c.cgroup.as_ref().is_some_and(|g| g.oom_kills() > 0);
        let _ = signal;
        let mut message = c
            .termination_file
            .as_ref()
            .and_then(|f| std::fs::read(f).ok())
            .map(|b| String::from_utf8_lossy(&b[..b.len().min(4096)]).into_owned())
            .unwrap_or_default();
        let policy = c.spec["terminationMessagePolicy"]
            .as_str()
            .unwrap_or("File");
        if message.is_empty() && code != 0 && policy == "FallbackToLogsOnError" {
            let log = self
                .ctx
                .log_dir(&self.namespace, &self.name, &self.uid)
                .join(&c.name)
                .join(format!("{attempt}.log"));
            message = tail_text(&std::fs::read(log).unwrap_or_default(), 80, 2048);
        }
        c.state = State::Terminated {
            exit_code: code,
            reason: if code == 0 {
                "Completed"
            } else if oom_killed {
                "OOMKilled"
            } else {
                "Error"
            }
            .to_owned(),
            message: (!message.is_empty()).then_some(message),
            started_at,
            finished_at: now(),
        };
        c.ready = c.init && code == 0;
        // Processes the container left in its group go with it, as with a container's init.
        if let Some(pid) = c.pid.take() {
            kill_group(pid, libc::SIGKILL);
        }
        if let Some(group) = c.cgroup.take() {
            tokio::task::spawn_blocking(move || group.remove());
        }
        c.kill_at = None;
        c.stopping = false;
    }

    /// Writes the status when it differs from the last one written.
    async fn publish(&mut self) {
        let (init, apps) = self.views();
        let ip = self.net.as_ref().map(|n| n.ip.to_string());
        let host = self.ctx.network.gateway().to_string();
        let at = now();
        let status = pod_status(PodView {
            pod: &self.pod,
            init: &init,
            containers: &apps,
            sandbox_ready: self.net.is_some() && !self.finished,
            host_ip: &host,
            pod_ip: ip.as_deref().or(self.last_status["podIP"].as_str()),
            start_time: &self.start_time,
            now: &at,
            transitions: &mut self.transitions,
        });
        if status == self.last_status {
            return;
        }
        let api: Api<Pod> = Api::namespaced(self.ctx.client.clone(), &self.namespace);
        let body = json!({"status": status});
        match api
            .patch_status(&self.name, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(_) => self.last_status = status,
            Err(error) => {
                tracing::debug!(%error, pod = %self.name, "process node: status write failed")
            }
        }
    }

    /// Graceful deletion: preStop, SIGTERM, SIGKILL after the grace period, sandbox removed,
    /// then the pod deleted with grace 0 (for this uid).
    async fn terminate(&mut self, rx: &mut mpsc::UnboundedReceiver<PodMsg>) {
        let grace = self
            .pod
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_u64)
            .unwrap_or(30);
        let deadline = Instant::now() + Duration::from_secs(grace);
        let ip = self.net.as_ref().map(|n| n.ip);
        for index in 0..self.ctrs.len() {
            if !self.ctrs[index].running() {
                continue;
            }
            let name = self.ctrs[index].name.clone();
            self.event(
                "Normal",
                "Killing",
                &format!("Stopping container {name}"),
                None,
            )
            .await;
            if let (Some(hook), Some(ip)) = (
                self.ctrs[index].spec.pointer("/lifecycle/preStop").cloned(),
                ip,
            ) {
                let left = deadline
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_secs(1));
                let spec = self.ctrs[index].spec.clone();
                if let Err(message) =
                    probes::run(&hook, &spec, ip, self.ctrs[index].pid, left).await
                {
                    let text = format!("PreStopHook failed: {message}");
                    self.event("Warning", "FailedPreStopHook", &text, None)
                        .await;
                }
            }
            if let Some(pid) = self.ctrs[index].pid {
                kill_group(pid, libc::SIGTERM);
            }
        }
        self.wait_for_exits(rx, deadline).await;
        // What ignored SIGTERM gets SIGKILL, and the pod object goes only once the kernel has
        // reaped its containers, as a kubelet deletes it only after the runtime confirms
        // StopContainer.
        for c in self.ctrs.iter().filter(|c| c.running()) {
            if let Some(pid) = c.pid {
                kill_container(pid, c.init_pid);
            }
        }
        self.wait_for_exits(rx, Instant::now() + KILLED_REAP_WAIT)
            .await;
        self.teardown();
        let api: Api<Pod> = Api::namespaced(self.ctx.client.clone(), &self.namespace);
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(self.uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        if let Err(error) = api.delete(&self.name, &params).await {
            tracing::debug!(%error, pod = %self.name, "process node: final delete failed");
        }
    }

    async fn wait_for_exits(
        &mut self,
        rx: &mut mpsc::UnboundedReceiver<PodMsg>,
        deadline: Instant,
    ) {
        while self.ctrs.iter().any(Ctr::running) {
            let wait = tokio::time::timeout_at(deadline.into(), rx.recv()).await;
            match wait {
                Ok(Some(PodMsg::Exited {
                    index,
                    attempt,
                    code,
                    signal,
                })) => self.exited(index, attempt, code, signal),
                Ok(Some(PodMsg::Update(pod))) => self.pod = pod,
                Ok(Some(_)) | Ok(None) | Err(_) => return,
            }
        }
    }

    /// Kills every process of the pod at once and removes its sandbox.
    async fn stop_now(&mut self) {
        for c in &self.ctrs {
            if let Some(pid) = c.pid {
                kill_group(pid, libc::SIGKILL);
            }
        }
        self.teardown();
    }

    fn teardown(&mut self) {
        for c in &mut self.ctrs {
            if let Some(pid) = c.pid.take() {
                kill_container(pid, c.init_pid.take());
            }
        }
        if let Some(net) = self.net.take() {
            // Anything still in the pod's network namespace goes too, before its network.
            sandbox::empty_namespace_blocking(&net.path());
            net.remove_blocking();
        }
        if let Some(cgroups) = &self.ctx.cgroups {
            for c in &mut self.ctrs {
                c.cgroup = None;
            }
            cgroups.remove_pod(&self.uid);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The pod's fsGroup and supplementalGroups.
fn supplementary_groups(pod: &Value) -> Vec<u32> {
    let context = pod.pointer("/spec/securityContext");
    let mut groups: Vec<u32> = context
        .and_then(|c| c.get("supplementalGroups"))
        .and_then(Value::as_array)
        .map(|g| {
            g.iter()
                .filter_map(Value::as_u64)
                .filter_map(|g| u32::try_from(g).ok())
                .collect()
        })
        .unwrap_or_default();
    if let Some(group) = context
        .and_then(|c| c.get("fsGroup"))
        .and_then(Value::as_u64)
        .and_then(|g| u32::try_from(g).ok())
    {
        groups.push(group);
    }
    groups
}

fn text_map(data: BTreeMap<String, Vec<u8>>) -> BTreeMap<String, String> {
    data.into_iter()
        .map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()))
        .collect()
}

/// SIGKILLs the container whose keeper is `pid` and whose PID 1 is `init`: PID 1 alone when it
/// has its own (the kernel then kills every process of its PID namespace, and the keeper reaps
/// PID 1 and ends by the same signal, so nothing is left for the host's init to reap), else the
/// keeper's process group.
pub fn kill_container(pid: u32, init: Option<u32>) {
    match init
        .filter(|i| *i != pid)
        .and_then(|i| i32::try_from(i).ok())
    {
        // SAFETY: kill has no memory-safety preconditions.
        Some(init) => unsafe {
            libc::kill(init, libc::SIGKILL);
        },
        None => kill_group(pid, libc::SIGKILL),
    }
}

/// Sends `signal` to the process group of `pid` (each container's keeper leads its own, PID 1
/// is in it).
pub fn kill_group(pid: u32, signal: i32) {
    if let Ok(pid) = i32::try_from(pid) {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(-pid, signal);
        }
    }
}

/// The kubelet's crash-loop back-off before restart number `restarts + 1`: the initial delay,
/// doubled per restart, at most five minutes.
pub fn backoff_for(initial: Duration, restarts: u32) -> Duration {
    initial
        .saturating_mul(2u32.saturating_pow(restarts.min(16)))
        .min(MAX_BACKOFF)
}

fn humanize(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 {
        format!("{}m{}s", s / 60, s % 60)
    } else if s > 0 {
        format!("{s}s")
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// The last `lines` lines of `bytes`, at most `max` bytes (FallbackToLogsOnError).
pub fn tail_text(bytes: &[u8], lines: usize, max: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let all: Vec<&str> = text.lines().collect();
    let start = all.len().saturating_sub(lines);
    let mut out = all[start..].join("\n");
    if out.len() > max {
        let mut cut = out.len() - max;
        while !out.is_char_boundary(cut) {
            cut += 1;
        }
        out = out[cut..].to_owned();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_five_minutes() {
        let ten = Duration::from_secs(10);
        assert_eq!(backoff_for(ten, 0), ten);
        assert_eq!(backoff_for(ten, 1), Duration::from_secs(20));
        assert_eq!(backoff_for(ten, 10), MAX_BACKOFF);
        assert_eq!(humanize(Duration::from_secs(20)), "20s");
        assert_eq!(humanize(Duration::from_secs(300)), "5m0s");
    }

    #[test]
    fn fallback_message_is_the_log_tail() {
        let log = (0..100)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        let tail = tail_text(log.as_bytes(), 80, 2048);
        assert!(tail.starts_with("line 20\n"), "{tail}");
        assert!(tail.ends_with("line 99"));
        assert_eq!(tail_text(b"abcdef", 80, 3), "def");
    }
}
