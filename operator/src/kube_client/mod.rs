//! The operator's Kubernetes clients: every client the operator builds (management cluster and
//! target clusters) goes through [`throttle::Throttle`], a client-side token bucket
//! (`--kube-qps` / `--kube-burst`) that also honours a 429's Retry-After, so a fleet's first
//! sync does not reach the API server all at once.

pub mod throttle;
pub mod token_bucket;

use kube::Client;
use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// The client-side request limits of one client (one API server).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClientLimits {
    /// Sustained requests per second.
    pub qps: f32,
    /// Requests that may start at once after a quiet period.
    pub burst: u32,
    /// How often one request is retried after a 429, 503 or 504 (waiting its Retry-After each
    /// time).
    pub max_retries: u32,
}

impl Default for ClientLimits {
    /// controller-runtime's defaults: 20 requests per second, bursts of 30.
    fn default() -> Self {
        ClientLimits {
            qps: 20.0,
            burst: 30,
            max_retries: 10,
        }
    }
}

/// The product part of the user agent of the operator's requests (audit logs and API priority and
/// fairness see who asks; the simulator's request record tells the operator's requests from
/// others).
pub const USER_AGENT: &str = concat!("cinder-operator/", env!("CARGO_PKG_VERSION"));

/// The user agent this process sends: [`USER_AGENT`] and, in parentheses, the replica's holder
/// identity (`cinder-operator/<version> (<pod>-<uuid>)`), so the API server's records tell
/// replicas apart (the shard takeover test checks no object is written by two at once).
pub fn user_agent() -> http::HeaderValue {
    let identity = cinder_lease::HolderIdentity::process();
    http::HeaderValue::from_str(&format!("{USER_AGENT} ({identity})"))
        .unwrap_or_else(|_| http::HeaderValue::from_static(USER_AGENT))
}

/// A client for `config` whose requests go through the limits and carry [`user_agent`] (unless
/// the config names another). kube's own retry layer is off: it sits below the throttle, where a
/// 429 could not pause the bucket, so [`throttle::Throttle`] does the retrying.
pub fn throttled(mut config: kube::Config, limits: ClientLimits) -> Result<Client, kube::Error> {
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
    Ok(builder
        .with_layer(&throttle::ThrottleLayer::new(limits))
        .build())
}

/// A throttled client from kubeconfig YAML (its current context).
pub async fn throttled_from_kubeconfig(yaml: &str, limits: ClientLimits) -> Result<Client, String> {
    let kubeconfig = Kubeconfig::from_yaml(yaml).map_err(|e| e.to_string())?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    throttled(config, limits).map_err(|e| e.to_string())
}
