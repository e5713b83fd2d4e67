//! Building the operator's clients: every client goes through the throttle layer and carries the
//! operator's user agent.

use super::limits::ClientLimits;
use super::throttle::ThrottleLayer;
use kube::Client;
use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// The product part of the user agent of the operator's requests (audit logs and API priority and
/// fairness see who asks; the simulator's request record tells the operator's requests from
/// others).
pub(crate) const USER_AGENT: &str = concat!("cinder-operator/", env!("CARGO_PKG_VERSION"));

/// The user agent this process sends: [`USER_AGENT`] and, in parentheses, the replica's holder
/// identity (`cinder-operator/<version> (<pod>-<uuid>)`), so the API server's records tell
/// replicas apart (the shard takeover test checks no object is written by two at once).
pub(crate) fn user_agent() -> http::HeaderValue {
    let identity = cinder_lease::HolderIdentity::process();
    http::HeaderValue::from_str(&format!("{USER_AGENT} ({identity})"))
        .unwrap_or_else(|_| http::HeaderValue::from_static(USER_AGENT))
}

/// A client for `config` whose requests go through the limits and carry [`user_agent`] (unless
/// the config names another). kube's own retry layer is off: it sits below the throttle, where a
/// 429 could not pause the bucket, so [`Throttle`](super::throttle::Throttle) does the retrying.
pub(crate) fn throttled(
    mut config: kube::Config,
    limits: ClientLimits,
) -> Result<Client, kube::Error> {
    config.default_retry = false;
    if !config
        .headers
        .iter()
        .any(|(name, _)| name == http::header::USER_AGENT)
    {
        config
            .headers
            .push((http::header::USER_AGENT, user_agent()));
    }
    let builder = ClientBuilder::try_from(config)?;
    Ok(builder.with_layer(&ThrottleLayer::new(limits)).build())
}

/// A throttled client from kubeconfig YAML (its current context).
pub(crate) async fn throttled_from_kubeconfig(
    yaml: &str,
    limits: ClientLimits,
) -> Result<Client, String> {
    let kubeconfig = Kubeconfig::from_yaml(yaml).map_err(|e| e.to_string())?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    throttled(config, limits).map_err(|e| e.to_string())
}
