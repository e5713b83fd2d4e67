//! Shared helpers of the lease tests: an embedded cluster, Lease reads, request counting.
#![allow(dead_code)]

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
