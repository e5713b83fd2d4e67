//! Clients of a test cluster (embedded or real) that say who they are: their own user agent
//! (the request record tells them apart) and, optionally, a bearer token; and a client that
//! records the status of every answer it gets ([`ClientRecord`]), for a real control plane,
//! which keeps no request record a test can read.

use crate::test_cluster::TestCluster;
use kube::Client;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

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
    Ok(Client::try_from(
        config_for(cluster, user_agent, token).await?,
    )?)
}

/// [`client_with_token`] whose answers are recorded in the returned [`ClientRecord`].
pub async fn recording_client(
    cluster: &TestCluster,
    user_agent: &str,
    token: Option<&str>,
) -> anyhow::Result<(Client, ClientRecord)> {
    let config = config_for(cluster, user_agent, token).await?;
    let record = ClientRecord::default();
    let client = kube::client::ClientBuilder::try_from(config)?
        .with_layer(&RecordLayer(record.clone()))
        .build();
    Ok((client, record))
}

async fn config_for(
    cluster: &TestCluster,
    user_agent: &str,
    token: Option<&str>,
) -> anyhow::Result<kube::Config> {
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
    Ok(config)
}

/// One answer a recording client got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientAnswer {
    pub method: String,
    /// Path and query.
    pub path: String,
    pub status: u16,
}

/// The answers a [`recording_client`] got, in order (requests that got no answer are not in it).
#[derive(Clone, Debug, Default)]
pub struct ClientRecord(Arc<Mutex<Vec<ClientAnswer>>>);

impl ClientRecord {
    /// Every answer so far.
    pub fn answers(&self) -> Vec<ClientAnswer> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn push(&self, answer: ClientAnswer) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(answer);
    }
}

struct RecordLayer(ClientRecord);

impl<S> tower::Layer<S> for RecordLayer {
    type Service = Recording<S>;
    fn layer(&self, inner: S) -> Recording<S> {
        Recording {
            inner,
            record: self.0.clone(),
        }
    }
}

/// A client service that records the status of each answer.
struct Recording<S> {
    inner: S,
    record: ClientRecord,
}

impl<S, B> tower::Service<http::Request<kube::client::Body>> for Recording<S>
where
    S: tower::Service<http::Request<kube::client::Body>, Response = http::Response<B>>,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = http::Response<B>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        let method = request.method().to_string();
        let path = request
            .uri()
            .path_and_query()
            .map(|p| p.to_string())
            .unwrap_or_default();
        let record = self.record.clone();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let response = answer.await?;
            record.push(ClientAnswer {
                method,
                path,
                status: response.status().as_u16(),
            });
            Ok(response)
        })
    }
}
