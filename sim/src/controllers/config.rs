//! Configuration of the simulated controllers: which ones run, how slowly, and the per-name
//! outcomes tests choose (Job exit codes, stores or MariaDB clusters that stay not ready,
//! refused routes). Everything here is plain data; the controllers read it on every pass, so a
//! change made through the handle takes effect mid-test.

use std::collections::BTreeSet;
use std::time::Duration;

use regex::Regex;

/// Whether one simulated controller runs, and how long it waits before converging an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Switch {
    /// When false the controller leaves its objects untouched.
    pub enabled: bool,
    /// How long an object (or a new generation of it) waits before the controller converges it.
    pub delay: Duration,
}

impl Switch {
    /// A running controller that converges objects after `delay`.
    pub fn on(delay: Duration) -> Self {
        Self {
            enabled: true,
            delay,
        }
    }

    /// A controller that does nothing.
    pub fn off() -> Self {
        Self {
            enabled: false,
            delay: Duration::ZERO,
        }
    }
}

impl Default for Switch {
    fn default() -> Self {
        Self::on(DEFAULT_DELAY)
    }
}

/// The small delay every controller waits by default, so callers see objects "not yet ready".
pub const DEFAULT_DELAY: Duration = Duration::from_millis(200);

/// A set of object names; an entry is either `name` (any namespace) or `namespace/name`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NameSet(BTreeSet<String>);

impl NameSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `name` or `namespace/name`.
    pub fn insert(&mut self, entry: impl Into<String>) {
        self.0.insert(entry.into());
    }

    /// Removes an entry previously inserted.
    pub fn remove(&mut self, entry: &str) -> bool {
        self.0.remove(entry)
    }

    /// Whether the object `namespace/name` (namespace empty for cluster-scoped) is in the set.
    pub fn matches(&self, namespace: Option<&str>, name: &str) -> bool {
        if self.0.contains(name) {
            return true;
        }
        match namespace {
            Some(ns) => self.0.contains(&format!("{ns}/{name}")),
            None => false,
        }
    }
}

impl<S: Into<String>> FromIterator<S> for NameSet {
    fn from_iter<T: IntoIterator<Item = S>>(iter: T) -> Self {
        Self(iter.into_iter().map(Into::into).collect())
    }
}

/// How one pod of a Job ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodOutcome {
    /// Container exit code; 0 is success.
    pub exit_code: i32,
    /// The container's termination message (`state.terminated.message`).
    pub message: String,
}

impl PodOutcome {
    /// Exit 0 with an empty termination message.
    pub fn success() -> Self {
        Self::exit(0, "")
    }

    /// Exit with `code` and `message`.
    pub fn exit(code: i32, message: impl Into<String>) -> Self {
        Self {
            exit_code: code,
            message: message.into(),
        }
    }
}

/// The outcome of the Jobs whose name matches `pattern`.
#[derive(Clone, Debug)]
pub struct JobRule {
    /// Matched against the Job name (`Regex::is_match`, anchor it yourself).
    pub pattern: Regex,
    /// Outcome of attempt 0, 1, ...; the last entry repeats for later attempts.
    pub attempts: Vec<PodOutcome>,
    /// How long each pod runs; `None` uses the Jobs switch delay.
    pub delay: Option<Duration>,
}

impl JobRule {
    /// Every pod of a matching Job ends with `outcome`.
    pub fn new(pattern: Regex, outcome: PodOutcome) -> Self {
        Self {
            pattern,
            attempts: vec![outcome],
            delay: None,
        }
    }

    /// The next attempt (after the ones already given) ends with `outcome`.
    pub fn then(mut self, outcome: PodOutcome) -> Self {
        self.attempts.push(outcome);
        self
    }

    /// Each pod of a matching Job runs for `delay` before it terminates.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }

    /// The outcome of attempt `attempt` (0-based).
    pub fn outcome_for(&self, attempt: usize) -> PodOutcome {
        self.attempts
            .get(attempt)
            .or_else(|| self.attempts.last())
            .cloned()
            .unwrap_or_else(PodOutcome::success)
    }
}

/// Deployments controller settings.
#[derive(Clone, Debug, Default)]
pub struct DeploymentsConfig {
    /// On/off and the rollout delay.
    pub switch: Switch,
    /// Deployments that never finish their rollout.
    pub held: NameSet,
}

/// The simulated nodes: how many register, and how often they renew their heartbeat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodesConfig {
    /// How many Nodes the simulated kubelets register (`sim-worker-1` ...); 0 registers none.
    pub count: usize,
    /// How often each node renews its Lease in kube-node-lease and its Ready heartbeat.
    pub heartbeat: Duration,
    /// How many nodes of runtime `process` the node agent registers (`process-worker-1` ...),
    /// whose pods run as local processes (`crate::agent`); 0 (the default) starts no agent.
    pub process: usize,
}

impl Default for NodesConfig {
    fn default() -> Self {
        Self {
            count: DEFAULT_NODES,
            heartbeat: Duration::from_secs(10),
            process: 0,
        }
    }
}

/// How many nodes an embedded cluster has unless told otherwise.
pub const DEFAULT_NODES: usize = 3;

/// The default [`ControllersConfig::grace_second`].
pub const DEFAULT_GRACE_SECOND: Duration = Duration::from_millis(10);

/// Jobs controller settings.
#[derive(Clone, Debug, Default)]
pub struct JobsConfig {
    /// On/off and how long a pod runs by default.
    pub switch: Switch,
    /// First matching rule wins; no match means exit 0 with an empty message.
    pub rules: Vec<JobRule>,
}

impl JobsConfig {
    /// The rule for the Job named `name`, if any.
    pub fn rule_for(&self, name: &str) -> Option<&JobRule> {
        self.rules.iter().find(|rule| rule.pattern.is_match(name))
    }
}

/// CronJobs controller settings.
#[derive(Clone, Debug, Default)]
pub struct CronJobsConfig {
    /// On/off (the delay is unused: runs start when due).
    pub switch: Switch,
    /// Accelerated schedule: every CronJob fires this often; `None` fires only on a trigger
    /// through the handle.
    pub every: Option<Duration>,
}

/// mariadb-operator simulation settings (MariaDB, Database, User, Grant).
#[derive(Clone, Debug)]
pub struct MariaDbConfig {
    /// On/off and the delay before a MariaDB or a Database/User/Grant becomes Ready.
    pub switch: Switch,
    /// MariaDB clusters that stay not ready.
    pub not_ready: NameSet,
    /// How long a deleted object keeps the operator's finalizer.
    pub finalizer_delay: Duration,
    /// A real server to reconcile against (`controllers/mariadb_real.rs`): every MariaDB
    /// cluster is this server (its Service leads there), Databases, Users and Grants are
    /// created on it and dropped from it, and Ready says what the server answered. The delays
    /// and `not_ready` do not apply then.
    pub real: Option<std::sync::Arc<crate::real_servers::MariaDbServer>>,
    /// With `real`: the MAX_USER_CONNECTIONS every User gets on the server in place of its
    /// spec's `maxUserConnections` (a test lowering the cap below what its processes open).
    pub user_cap: Option<i64>,
}

impl Default for MariaDbConfig {
    fn default() -> Self {
        Self {
            switch: Switch::default(),
            not_ready: NameSet::new(),
            finalizer_delay: DEFAULT_DELAY,
            real: None,
            user_cap: None,
        }
    }
}

/// external-secrets simulation settings (SecretStore, ClusterSecretStore).
#[derive(Clone, Debug, Default)]
pub struct SecretStoresConfig {
    /// On/off and the validation delay.
    pub switch: Switch,
    /// Stores that fail validation (Ready=False).
    pub not_ready: NameSet,
}

/// Gateway API simulation settings (Gateway, HTTPRoute).
#[derive(Clone, Debug, Default)]
pub struct GatewaysConfig {
    /// On/off and the acceptance delay.
    pub switch: Switch,
    /// Gateways that are not accepted.
    pub refused_gateways: NameSet,
    /// HTTPRoutes whose parents refuse them (Accepted=False).
    pub refused_routes: NameSet,
}

/// Which third-party CRD fixtures exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixtureSet {
    /// external-secrets.io SecretStore, ClusterSecretStore.
    pub external_secrets: bool,
    /// k8s.mariadb.com MariaDB, Database, User, Grant.
    pub mariadb: bool,
    /// gateway.networking.k8s.io Gateway, HTTPRoute.
    pub gateway_api: bool,
    /// autoscaling.k8s.io VerticalPodAutoscaler.
    pub vpa: bool,
}

impl FixtureSet {
    /// Every fixture.
    pub const ALL: Self = Self {
        external_secrets: true,
        mariadb: true,
        gateway_api: true,
        vpa: true,
    };
    /// No fixture.
    pub const NONE: Self = Self {
        external_secrets: false,
        mariadb: false,
        gateway_api: false,
        vpa: false,
    };
}

impl Default for FixtureSet {
    fn default() -> Self {
        Self::ALL
    }
}

/// Which simulated controllers run, and how fast.
#[derive(Clone, Debug)]
pub struct ControllersConfig {
    /// The simulated nodes.
    pub nodes: NodesConfig,
    /// The simulated scheduler and kubelet; the delay is how long a pod (neither a Job's nor a
    /// ReplicaSet's) shows ContainerCreating before it runs.
    pub pods: Switch,
    /// How long one second of a deleted pod's grace period lasts in the simulation: the
    /// simulated kubelet stops a Terminating pod and removes it after
    /// `deletionGracePeriodSeconds` times this (default 10 ms, so the default 30 s take 300 ms).
    pub grace_second: Duration,
    /// ReplicaSets and ReplicationControllers keep their pods.
    pub replica_sets: Switch,
    /// DaemonSets keep one pod per eligible node.
    pub daemon_sets: Switch,
    /// StatefulSets keep their ordinal pods and roll them out.
    pub stateful_sets: Switch,
    /// Deployments roll out through ReplicaSets; the delay is how long their pods take to start.
    pub deployments: DeploymentsConfig,
    /// Jobs run pods that exit with a chosen code.
    pub jobs: JobsConfig,
    /// CronJobs spawn Jobs.
    pub cronjobs: CronJobsConfig,
    /// MariaDB / Database / User / Grant become Ready.
    pub mariadb: MariaDbConfig,
    /// SecretStore / ClusterSecretStore become Ready.
    pub secret_stores: SecretStoresConfig,
    /// Gateways and HTTPRoutes are accepted.
    pub gateways: GatewaysConfig,
    /// HorizontalPodAutoscaler and VerticalPodAutoscaler status filling.
    pub autoscalers: Switch,
    /// EndpointSlices and Endpoints kept from the pods every Service with a selector selects
    /// (the delay is unused: endpoints follow pods at once).
    pub endpoints: Switch,
    /// kube-controller-manager's root-ca-cert-publisher and serviceaccount controller: the
    /// `kube-root-ca.crt` ConfigMap and the `default` ServiceAccount in every namespace (the
    /// delay is unused: both follow the namespace at once).
    pub namespace_defaults: Switch,
    /// Which CRD fixtures an embedded cluster installs.
    pub fixtures: FixtureSet,
    /// How often every controller re-reads its objects against the config, as a backstop for
    /// config edits made without [`crate::controllers::ControllersHandle::update_config`].
    pub resync: Duration,
    /// The API server is a real control plane, whose kube-controller-manager and
    /// kube-scheduler do their own work: the simulated scheduler binds nothing, the Job
    /// controller only ends the pods of Jobs on simulated nodes (as their kubelet would, with
    /// the outcome [`JobsConfig::rules`] give) and leaves creating pods and the Jobs' status to
    /// the real one, and HorizontalPodAutoscaler status is left to the real one. Set by
    /// [`ControllersConfig::beside_real_control_plane`].
    pub real_control_plane: bool,
}

impl Default for ControllersConfig {
    fn default() -> Self {
        Self {
            nodes: NodesConfig::default(),
            pods: Switch::default(),
            grace_second: DEFAULT_GRACE_SECOND,
            replica_sets: Switch::default(),
            daemon_sets: Switch::default(),
            stateful_sets: Switch::default(),
            deployments: DeploymentsConfig::default(),
            jobs: JobsConfig::default(),
            cronjobs: CronJobsConfig::default(),
            mariadb: MariaDbConfig::default(),
            secret_stores: SecretStoresConfig::default(),
            gateways: GatewaysConfig::default(),
            autoscalers: Switch::default(),
            endpoints: Switch::default(),
            namespace_defaults: Switch::default(),
            fixtures: FixtureSet::ALL,
            resync: Duration::from_secs(5),
            real_control_plane: false,
        }
    }
}

impl ControllersConfig {
    /// Every controller switched off (fixtures still all installed).
    pub fn all_off() -> Self {
        let mut config = Self::default();
        config.nodes.count = 0;
        config.pods = Switch::off();
        config.replica_sets = Switch::off();
        config.daemon_sets = Switch::off();
        config.stateful_sets = Switch::off();
        config.deployments.switch = Switch::off();
        config.jobs.switch = Switch::off();
        config.cronjobs.switch = Switch::off();
        config.mariadb.switch = Switch::off();
        config.secret_stores.switch = Switch::off();
        config.gateways.switch = Switch::off();
        config.autoscalers = Switch::off();
        config.endpoints = Switch::off();
        config.namespace_defaults = Switch::off();
        config
    }

    /// What runs beside a real control plane (kube-apiserver, kube-controller-manager,
    /// kube-scheduler): the simulated nodes and their kubelet (pods started, made ready,
    /// stopped; Job pods ended as the Job rules say), and the fixture controllers of the
    /// third-party kinds no real controller serves there (mariadb-operator, external-secrets
    /// stores, Gateway API, VPA). The simulated counterparts of kube-controller-manager's
    /// controllers (ReplicaSets, ReplicationControllers, DaemonSets, StatefulSets, Deployments,
    /// CronJobs, EndpointSlices, the Jobs' pods and status, HPA status) and of kube-scheduler
    /// are off: two controllers writing one object's status would fight.
    /// Applied to a config a test chose (Job rules, delays, fixtures), it keeps those and
    /// switches the rest as said.
    pub fn beside_real_control_plane(self) -> Self {
        let mut config = self;
        config.real_control_plane = true;
        config.replica_sets = Switch::off();
        config.daemon_sets = Switch::off();
        config.stateful_sets = Switch::off();
        // Off, but its delay stays: how long a ReplicaSet's pod takes to start.
        config.deployments.switch.enabled = false;
        config.cronjobs.switch = Switch::off();
        config.endpoints = Switch::off();
        config.namespace_defaults = Switch::off();
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_set_matches_plain_and_namespaced_entries() {
        let set: NameSet = ["plain", "ns1/scoped"].into_iter().collect();
        assert!(set.matches(Some("any"), "plain"));
        assert!(set.matches(None, "plain"));
        assert!(set.matches(Some("ns1"), "scoped"));
        assert!(!set.matches(Some("ns2"), "scoped"));
        assert!(!set.matches(None, "scoped"));
        assert!(!set.matches(Some("ns1"), "other"));
    }

    #[test]
    fn job_rule_repeats_last_attempt() {
        let rule = JobRule::new(Regex::new("^x-").unwrap(), PodOutcome::exit(2, "first"))
            .then(PodOutcome::success());
        assert_eq!(rule.outcome_for(0), PodOutcome::exit(2, "first"));
        assert_eq!(rule.outcome_for(1), PodOutcome::success());
        assert_eq!(rule.outcome_for(7), PodOutcome::success());
    }

    #[test]
    fn first_matching_job_rule_wins() {
        let config = JobsConfig {
            switch: Switch::default(),
            rules: vec![
                JobRule::new(Regex::new("-db-sync$").unwrap(), PodOutcome::exit(1, "a")),
                JobRule::new(Regex::new("db").unwrap(), PodOutcome::exit(2, "b")),
            ],
        };
        assert_eq!(
            config
                .rule_for("c-db-sync")
                .map(|r| r.outcome_for(0).exit_code),
            Some(1)
        );
        assert_eq!(
            config
                .rule_for("c-db-purge")
                .map(|r| r.outcome_for(0).exit_code),
            Some(2)
        );
        assert!(config.rule_for("other").is_none());
    }

    #[test]
    fn all_off_switches_every_controller_off() {
        let config = ControllersConfig::all_off();
        assert!(!config.deployments.switch.enabled);
        assert!(!config.pods.enabled);
        assert!(!config.replica_sets.enabled);
        assert!(!config.daemon_sets.enabled);
        assert_eq!(config.nodes.count, 0);
        assert!(!config.jobs.switch.enabled);
        assert!(!config.cronjobs.switch.enabled);
        assert!(!config.mariadb.switch.enabled);
        assert!(!config.secret_stores.switch.enabled);
        assert!(!config.gateways.switch.enabled);
        assert!(!config.autoscalers.enabled);
        assert!(!config.endpoints.enabled);
        assert!(!config.namespace_defaults.enabled);
    }

    #[test]
    fn beside_a_real_control_plane_only_nodes_kubelets_and_fixtures_run() {
        let config = ControllersConfig::default().beside_real_control_plane();
        assert!(config.real_control_plane);
        assert!(config.pods.enabled && config.jobs.switch.enabled);
        assert!(config.nodes.count > 0);
        assert!(config.mariadb.switch.enabled && config.secret_stores.switch.enabled);
        assert!(config.gateways.switch.enabled && config.autoscalers.enabled);
        for (name, on) in [
            ("replica_sets", config.replica_sets.enabled),
            ("daemon_sets", config.daemon_sets.enabled),
            ("stateful_sets", config.stateful_sets.enabled),
            ("deployments", config.deployments.switch.enabled),
            ("cronjobs", config.cronjobs.switch.enabled),
            ("endpoints", config.endpoints.enabled),
        ] {
            assert!(!on, "{name} runs beside a real control plane");
        }
        assert!(!ControllersConfig::default().real_control_plane);
    }
}
