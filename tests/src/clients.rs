//! Clients of a test cluster (embedded or real) that say who they are: their own user agent
//! (the request record tells them apart) and, optionally, a bearer token.

use crate::test_cluster::TestCluster;
use kube::Client;

/// A client for `cluster` that sends `user_agent` on every request.
pub async fn client_with_user_agent(
    cluster: &TestCluster,
    user_agent: &str,
) -> anyhow::Result<Client> {
    client_with_token(cluster, user_agent, None).await
}

/// A client for `cluster` sending `user_agent` and authenticating with `token` (None: the
/// administrator of the cluster's kubeconfig).
pub async fn client_with_token(
    cluster: &TestCluster,
    user_agent: &str,
    token: Option<&str>,
) -> anyhow::Result<Client> {
    let yaml = cluster.kubeconfig_yaml_with(token)?;
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&yaml)?;
    let mut config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await?;
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_str(user_agent)?,
    ));
    Ok(Client::try_from(config)?)
}
