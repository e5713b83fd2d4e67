//! Two operator replicas in-process against ONE embedded cluster (bootstrapped like
//! `run --embedded`), each with its own client (told apart by user agent), context, endpoints and
//! leader elector, started the way `run --leader-elect` starts them: the standby's /readyz is 200
//! (a rolling update of the operator's Deployment needs every replica Ready), its
//! `cinder_operator_leader` is 0 (the leader's 1), it runs no pass and writes nothing; after the
//! leader stops (gracefully: drain, then release of the leader Lease) the other leads (its gauge
//! turns 1) and reconciles.

use crate::support::*;
use cinder_lease::{DeviceLockMetrics, HolderIdentity, LeaderElector, LeaderHandle, LeaseSettings};
use cinder_operator::cmd_run::{
    admin_sources, follow_leadership, leader_readiness, run_when_leader,
};
use cinder_operator::context::{OperatorContext, OperatorOptions};
use cinder_operator::embedded;
use cinder_operator::http::{Binds, Endpoints, MetricsEndpoint};
use cinder_operator::metrics::{Metrics, register_leader_gauge};
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use std::sync::Arc;
use std::time::Duration;

const NS: &str = "default";

/// A client of `cluster` whose requests carry `user-agent: <agent>`.
async fn client_as(cluster: &EmbeddedCluster, agent: &str) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&cluster.kubeconfig_yaml()).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    // The `http` types are named through inference (the operator has no direct dependency).
    config
        .headers
        .push(("user-agent".try_into().unwrap(), agent.try_into().unwrap()));
    kube::Client::try_from(config).unwrap()
}

struct Replica {
    agent: String,
    ctx: Arc<OperatorContext>,
    leader: LeaderHandle,
    endpoints: Endpoints,
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Replica {
    async fn start(cluster: &EmbeddedCluster, agent: &str) -> Replica {
        let client = client_as(cluster, agent).await;
        let (mut registry, metrics) = Metrics::new_registry();
        let device_lock_metrics = DeviceLockMetrics::default();
        device_lock_metrics.register(&mut registry);
        let gauge = register_leader_gauge(&mut registry);
        let options = OperatorOptions {
            // The embedded cluster's Service names do not resolve on this host.
            health_check: cinder_operator::context::HealthCheckRoute::ApiServerProxy,
            identity: agent.to_string(),
            lease_namespace: NS.to_string(),
            device_lock_metrics,
            lease_duration: Duration::from_secs(15),
            ..OperatorOptions::default()
        };
        let ctx = OperatorContext::new(client.clone(), options, Arc::new(metrics))
            .await
            .unwrap();
        let leader = LeaderElector::new(
            client,
            NS,
            HolderIdentity::for_pod(agent),
            &LeaseSettings::with_duration(Duration::from_secs(15)),
        )
        .unwrap()
        .start();
        tokio::spawn(follow_leadership(
            leader.subscribe(),
            gauge,
            agent.to_string(),
        ));
        let endpoints = Endpoints::start(
            &Binds {
                metrics: "127.0.0.1:0".into(),
                probes: "127.0.0.1:0".into(),
                admin: "127.0.0.1:0".into(),
            },
            MetricsEndpoint::new(registry, ctx.metrics.clone(), Some(ctx.coordinator.clone())),
            leader_readiness(&ctx, Some(leader.subscribe())),
            admin_sources(&ctx),
        )
        .unwrap();
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(run_when_leader(ctx.clone(), leader.subscribe(), stop_rx));
        Replica {
            agent: agent.to_string(),
            ctx,
            leader,
            endpoints,
            stop,
            task,
        }
    }

    /// How `run` stops on SIGTERM: controllers, coordinator drain, then the leader Lease.
    async fn shutdown(self) {
        self.stop.send(true).unwrap();
        self.task.await.unwrap().unwrap();
        let drained = self.ctx.coordinator.shutdown().await.unwrap();
        drained.release().await;
        self.leader.release().await.unwrap();
        self.endpoints.stop().await;
    }

    /// The value of `cinder_operator_leader` on the replica's /metrics.
    async fn leader_gauge(&self) -> Option<i64> {
        let metrics = get(self.endpoints.metrics_addr, "/metrics").await;
        metrics
            .body
            .lines()
            .find_map(|l| l.strip_prefix("cinder_operator_leader "))
            .and_then(|v| v.trim().parse().ok())
    }

    async fn passes(&self) -> usize {
        self.ctx.pipelines_snapshot().await["pipelines"]
            .as_array()
            .map_or(0, Vec::len)
    }
}

/// Successful writes (create, update, patch, delete) sent with `agent`'s user agent.
fn writes_by(cluster: &EmbeddedCluster, agent: &str) -> Vec<String> {
    cluster
        .requests()
        .into_iter()
        .filter(|r| r.user_agent.contains(agent) && r.status < 400)
        .filter(|r| {
            matches!(
                r.verb.as_str(),
                "create" | "update" | "patch" | "delete" | "deletecollection"
            )
        })
        .map(|r| format!("{} {} {}/{}", r.verb, r.resource, r.namespace, r.name))
        .collect()
}

fn requests_by(cluster: &EmbeddedCluster, agent: &str) -> usize {
    cluster
        .requests()
        .iter()
        .filter(|r| r.user_agent.contains(agent))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_reconciles_and_the_other_takes_over_when_it_stops() {
    let cluster = EmbeddedCluster::start(ClusterConfig::default())
        .await
        .unwrap();
    let admin = cluster.client().await;
    embedded::install_crds(&admin).await.unwrap();
    let samples = embedded::read_bootstrap(&samples_dir()).unwrap();
    embedded::apply(&admin, &samples).await.unwrap();

    let a = Replica::start(&cluster, "replica-a").await;
    let b = Replica::start(&cluster, "replica-b").await;
    eventually("one replica leads", || async {
        a.leader.is_leader() || b.leader.is_leader()
    })
    .await;
    let (leader, follower) = if a.leader.is_leader() { (a, b) } else { (b, a) };
    assert!(!follower.leader.is_leader(), "both replicas lead");

    // The leader becomes ready and reconciles the sample Cinder.
    eventually("the leader's /readyz answers 200", || async {
        get(leader.endpoints.probes_addr, "/readyz").await.status == 200
    })
    .await;
    eventually("the leader ran a pass", || async {
        leader.passes().await > 0
    })
    .await;
    assert!(
        !writes_by(&cluster, &leader.agent).is_empty(),
        "the leader's writes are recorded under its user agent"
    );
    eventually("the leader's gauge is 1", || async {
        leader.leader_gauge().await == Some(1)
    })
    .await;
    // The follower has looked at the leader Lease since; it is ready (a standby serves) and
    // idle, and its gauge says it does not lead.
    let seen = requests_by(&cluster, &follower.agent);
    eventually("the follower campaigned again", || async {
        requests_by(&cluster, &follower.agent) > seen
    })
    .await;
    let readyz = get(follower.endpoints.probes_addr, "/readyz").await;
    assert_eq!(readyz.status, 200, "{}", readyz.body);
    assert_eq!(follower.leader_gauge().await, Some(0));
    assert_eq!(follower.passes().await, 0, "the follower ran a pass");
    assert_eq!(
        writes_by(&cluster, &follower.agent),
        Vec::<String>::new(),
        "the follower wrote"
    );

    // The leader stops (SIGTERM): the other replica leads, becomes ready and reconciles.
    leader.shutdown().await;
    eventually("the other replica leads", || async {
        follower.leader.is_leader()
    })
    .await;
    eventually("the new leader's /readyz answers 200", || async {
        get(follower.endpoints.probes_addr, "/readyz").await.status == 200
    })
    .await;
    eventually("the new leader's gauge is 1", || async {
        follower.leader_gauge().await == Some(1)
    })
    .await;
    eventually("the new leader ran a pass", || async {
        follower.passes().await > 0
    })
    .await;
    follower.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_leadership_stops_the_controllers_and_ends_in_leadership_lost() {
    let cluster = EmbeddedCluster::start(ClusterConfig::default())
        .await
        .unwrap();
    let client = cluster.client().await;
    embedded::install_crds(&client).await.unwrap();
    let ctx = OperatorContext::new(
        client,
        OperatorOptions {
            health_check: cinder_operator::context::HealthCheckRoute::ApiServerProxy,
            ..OperatorOptions::default()
        },
        Arc::new(Metrics::new_registry().1),
    )
    .await
    .unwrap();
    let (leading_tx, leading) = tokio::sync::watch::channel(true);
    let (_stop, stop_rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(run_when_leader(ctx.clone(), leading, stop_rx));
    eventually("the controllers synced", || async { ctx.is_ready() }).await;
    leading_tx.send(false).unwrap();
    let ended = task
        .await
        .unwrap()
        .expect_err("a lost leadership is an error");
    assert!(
        ended.is::<cinder_operator::cmd_run::LeadershipLost>(),
        "{ended:#}"
    );
    assert!(!ctx.is_ready(), "still ready after losing leadership");
    ctx.coordinator.shutdown().await.unwrap().release().await;
    cluster.shutdown().await;
}
