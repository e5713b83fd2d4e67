//! Helpers of the target-cluster tests: a second embedded cluster to project onto, and the
//! labelled kubeconfig Secret that registers it on the management cluster.

use crate::{Harness, NS};
use cinder_operator::target_cluster::{TARGET_CLUSTER_KUBECONFIG_KEY, TARGET_CLUSTER_LABEL};
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::PostParams;

/// A second embedded cluster and a client of it; with `with_namespace`, [`NS`] exists on it.
pub async fn target_cluster(
    with_namespace: bool,
) -> anyhow::Result<(EmbeddedCluster, kube::Client)> {
    let target = EmbeddedCluster::start(ClusterConfig::default()).await?;
    let client = target.client().await;
    if with_namespace {
        crate::create_namespace(&client, NS).await?;
    }
    Ok((target, client))
}

/// Registers the target cluster `name` with `kubeconfig` by the Secret `target-<name>` in [`NS`].
pub async fn register(h: &Harness, name: &str, kubeconfig: String) -> anyhow::Result<()> {
    let secrets: Api<Secret> = h.api();
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(format!("target-{name}")),
            labels: Some([(TARGET_CLUSTER_LABEL.to_string(), name.to_string())].into()),
            ..Default::default()
        },
        data: Some(
            [(
                TARGET_CLUSTER_KUBECONFIG_KEY.to_string(),
                ByteString(kubeconfig.into_bytes()),
            )]
            .into(),
        ),
        ..Default::default()
    };
    secrets.create(&PostParams::default(), &secret).await?;
    Ok(())
}
