//! A sharded replica's membership Lease: held while the replica runs, deleted when it stops
//! (released and then removed: the Lease names that process's identity only, so it would
//! otherwise pile up, one per replica that ever ran).

use crate::support::*;
use cinder_lease::{HolderIdentity, LeaseSettings};
use cinder_operator::shards::membership::member_lease_name;
use cinder_operator::shards::{ShardHolderConfig, ShardHolderHandle, ShardMetrics};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_replica_deletes_its_membership_lease() {
    let (cluster, client) = cluster_with_crds().await;
    let identity = HolderIdentity::for_pod("sharded-a");
    let member = member_lease_name(identity.as_str());
    let holder = ShardHolderHandle::start(ShardHolderConfig {
        client: client.clone(),
        namespace: "default".to_string(),
        count: 2,
        identity,
        settings: LeaseSettings::with_duration(Duration::from_secs(5)),
        metrics: ShardMetrics::default(),
    })
    .unwrap();
    let leases: Api<Lease> = Api::namespaced(client, "default");
    eventually("the membership Lease is held", || async {
        leases
            .get_opt(&member)
            .await
            .unwrap()
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
            .is_some_and(|h| h.starts_with("sharded-a"))
    })
    .await;
    holder.release().await;
    assert!(
        leases.get_opt(&member).await.unwrap().is_none(),
        "the membership Lease outlived its replica"
    );
    cluster.shutdown().await;
}
