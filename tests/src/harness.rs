//! A cluster with the CRDs and the test namespace, and the operator running in-process
//! ([`Harness`]); a second operator against the same cluster ([`SecondOperator`]). The cluster
//! is the embedded one, or a real control plane when `CINDER_E2E_CLUSTER=real`
//! ([`crate::test_cluster`]).

use crate::clients::client_with_user_agent;
use crate::fixtures::{create_namespace, install_crds};
use crate::log_capture::{LogCapture, capture_logs};
use crate::test_cluster::TestCluster;
use crate::test_env::{EVENTUALLY, NS};
use crate::waiting::eventually;
use anyhow::Context as _;
use cinder_operator::context::{OperatorContext, OperatorOptions};
use cinder_operator::controller::run_operator;
use cinder_operator::metrics::Metrics;
use cinder_sim::ClusterConfig;
use kube::{Api, Client};
use std::sync::Arc;
use std::time::Duration;

/// A cluster with the CRDs installed and the operator running in-process.
pub struct Harness {
    pub cluster: TestCluster,
    pub client: Client,
    pub ctx: Arc<OperatorContext>,
    pub logs: LogCapture,
    shutdown: tokio::sync::watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

/// Options of [`Harness::start_with`].
pub struct HarnessConfig {
    pub cluster: ClusterConfig,
    pub options: OperatorOptions,
    /// Give the operator its own client sending this user agent (None: the operator shares the
    /// test's client, which sends none, like the simulated controllers).
    pub operator_user_agent: Option<String>,
}

impl Default for HarnessConfig {
    fn default() -> Self {
        let mut cluster = ClusterConfig::default();
        // Fast simulated controllers: stores validate quickly.
        cluster.controllers.secret_stores.switch =
            cinder_sim::controllers::config::Switch::on(Duration::from_millis(50));
        HarnessConfig {
            cluster,
            options: OperatorOptions {
                // The embedded cluster's Service names do not resolve on this host.
                health_check: cinder_operator::context::HealthCheckRoute::ApiServerProxy,
                lease_namespace: NS.to_string(),
                ..Default::default()
            },
            operator_user_agent: None,
        }
    }
}

impl Harness {
    /// Default cluster and options.
    pub async fn start() -> anyhow::Result<Harness> {
        Harness::start_with(HarnessConfig::default()).await
    }

    /// Starts the cluster, installs the CRDs and the namespace, starts the operator and waits
    /// until it reports ready.
    pub async fn start_with(config: HarnessConfig) -> anyhow::Result<Harness> {
        let logs = capture_logs();
        let cluster = TestCluster::start(config.cluster).await?;
        let client = cluster.client().await;
        install_crds(&client).await?;
        create_namespace(&client, NS).await?;
        let operator_client = match &config.operator_user_agent {
            Some(agent) => client_with_user_agent(&cluster, agent).await?,
            None => client.clone(),
        };
        let (_registry, metrics) = Metrics::new_registry();
        let ctx = OperatorContext::new(operator_client, config.options, Arc::new(metrics)).await?;
        let (shutdown, rx) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(run_operator(ctx.clone(), rx));
        let harness = Harness {
            cluster,
            client,
            ctx,
            logs,
            shutdown,
            task: Some(task),
        };
        let ctx = harness.ctx.clone();
        let ready = eventually("the operator is ready", || {
            let ctx = ctx.clone();
            async move { ctx.is_ready().then_some(()) }
        })
        .await;
        if let Err(e) = ready {
            let text = harness.logs.text();
            let tail: Vec<&str> = text.lines().rev().take(60).collect();
            anyhow::bail!("{e}; last log lines (newest first):\n{}", tail.join("\n"));
        }
        Ok(harness)
    }

    /// An API over `K` in [`NS`].
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), NS)
    }

    /// Stops the operator (draining in-flight passes); the cluster keeps running.
    pub async fn stop_operator(&mut self) -> anyhow::Result<()> {
        let _ = self.shutdown.send(true);
        if let Some(task) = self.task.take() {
            tokio::time::timeout(EVENTUALLY, task)
                .await
                .context("run_operator did not return after shutdown")???;
        }
        Ok(())
    }

    /// Stops the operator (draining in-flight passes) and the cluster.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.stop_operator().await?;
        self.cluster.shutdown().await;
        Ok(())
    }
}

/// A second operator process (its own context, identity and actor thread, in this process)
/// running against the same cluster, without leader election.
pub struct SecondOperator {
    pub ctx: Arc<OperatorContext>,
    shutdown: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl SecondOperator {
    /// Starts the controllers through `client` with the identity `identity` (device Leases in [`NS`]).
    pub async fn start(client: Client, identity: &str) -> anyhow::Result<SecondOperator> {
        let (_registry, metrics) = Metrics::new_registry();
        let ctx = OperatorContext::new(
            client,
            OperatorOptions {
                // The embedded cluster's Service names do not resolve on this host.
                health_check: cinder_operator::context::HealthCheckRoute::ApiServerProxy,
                identity: identity.to_string(),
                lease_namespace: NS.to_string(),
                ..Default::default()
            },
            Arc::new(metrics),
        )
        .await?;
        let (shutdown, rx) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(run_operator(ctx.clone(), rx));
        Ok(SecondOperator {
            ctx,
            shutdown,
            task,
        })
    }

    /// Stops it and waits until its controllers returned.
    pub async fn stop(self) -> anyhow::Result<()> {
        let _ = self.shutdown.send(true);
        tokio::time::timeout(EVENTUALLY, self.task)
            .await
            .context("the second operator did not return after shutdown")???;
        Ok(())
    }
}
