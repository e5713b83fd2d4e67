//! Shared helpers of the lease tests: an embedded cluster, Lease reads, request counting.

use cinder_lease::{HolderIdentity, LeaseLock, LeaseSettings};
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::Api;
use std::time::Duration;

pub const NS: &str = "default";

pub async fn cluster() -> EmbeddedCluster {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_test_writer()
        .try_init();
    EmbeddedCluster::start(ClusterConfig::default())
        .await
        .expect("embedded cluster starts")
}

pub async fn lock(
    cluster: &EmbeddedCluster,
    device: &str,
    identity: &HolderIdentity,
    settings: &LeaseSettings,
) -> LeaseLock {
    LeaseLock::new(
        cluster.client().await,
        NS,
        device,
        identity.clone(),
        settings,
    )
    .expect("valid settings")
}

pub async fn read(cluster: &EmbeddedCluster, name: &str) -> Option<Lease> {
    let api: Api<Lease> = Api::namespaced(cluster.client().await, NS);
    api.get_opt(name).await.expect("get lease")
}

pub fn spec(lease: &Lease) -> LeaseSpec {
    lease.spec.clone().unwrap_or_default()
}

pub fn rv(lease: &Lease) -> String {
    lease.metadata.resource_version.clone().unwrap_or_default()
}

/// Lease API requests recorded by the embedded cluster.
pub fn lease_requests(cluster: &EmbeddedCluster) -> usize {
    cluster
        .requests()
        .iter()
        .filter(|r| r.resource == "leases")
        .count()
}

/// Polls `check` every 50 ms for up to 60 s.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..1200 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for: {what}");
}

/// Starts a lock coordinator (standard schema) on its own actix system thread, as the operator
/// runs it, and returns its handle.
pub fn coordinator(config: cinder_actors::CoordinatorConfig) -> cinder_actors::CoordinatorHandle {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let system = actix::System::new();
        system.block_on(async move {
            let handle =
                cinder_actors::CoordinatorHandle::start(cinder_actors::Schema::standard(), config);
            let _ = tx.send(handle);
            std::future::pending::<()>().await;
        });
    });
    rx.recv().expect("coordinator thread starts")
}

/// A device-lock service (one replica) with its own coordinator and identity.
pub async fn replica(
    cluster: &EmbeddedCluster,
    name: &str,
    lease: LeaseSettings,
    short_delay: Duration,
    age_step: Option<Duration>,
) -> cinder_lease::DeviceLocks {
    let mut config = cinder_lease::DeviceLocksConfig::new(NS);
    config.identity = HolderIdentity::for_pod(name);
    config.lease = lease;
    config.short_delay = short_delay;
    replica_with(cluster, config, age_step).await
}

/// A device-lock service (one replica) with its own coordinator and the given settings.
pub async fn replica_with(
    cluster: &EmbeddedCluster,
    config: cinder_lease::DeviceLocksConfig,
    age_step: Option<Duration>,
) -> cinder_lease::DeviceLocks {
    let mut coordinator_config = cinder_actors::CoordinatorConfig::default();
    if let Some(step) = age_step {
        coordinator_config.age_step = step;
    }
    cinder_lease::DeviceLocks::new(
        coordinator(coordinator_config),
        cluster.client().await,
        config,
        cinder_lease::DeviceLockMetrics::default(),
    )
    .expect("valid settings")
}
