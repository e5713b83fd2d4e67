//! The tower layer around a kube client's HTTP stack: every request first waits for the client's
//! [`RequestBudget`] (governor's rate limiter); a 429 answer pauses the budget for its
//! Retry-After (every request of this client waits, as the API server asked) and the request is
//! retried, up to [`ClientLimits::max_retries`] times, before the 429 goes back to the caller
//! (whose reconcile then backs off).
//!
//! Lease requests (`coordination.k8s.io`: leader election, shards, device locks) take no share:
//! a renewal must not queue behind a fleet's reconcile traffic, or a busy replica loses its
//! Leases for being busy (API priority and fairness likewise gives leader election its own
//! priority level). They are a few requests per Lease and renew period.

use super::limits::ClientLimits;
use super::request_budget::RequestBudget;
use futures::future::BoxFuture;
use http::{HeaderMap, Request, Response, StatusCode};
use kube::client::Body;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tower::buffer::Buffer;
use tower::{BoxError, Layer, Service, ServiceExt};

/// The longest Retry-After honoured (a longer one is cut to this).
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// The wait after a 429 without a usable Retry-After.
pub(crate) const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);
/// Requests queued in front of the inner stack.
const BUFFER: usize = 1024;

/// Builds [`Throttle`] services sharing one budget.
#[derive(Clone, Debug)]
pub(crate) struct ThrottleLayer {
    budget: Arc<RequestBudget>,
    max_retries: u32,
}

impl ThrottleLayer {
    /// A layer with a full budget of `limits`.
    pub(crate) fn new(limits: ClientLimits) -> Self {
        ThrottleLayer {
            budget: Arc::new(RequestBudget::new(&limits)),
            max_retries: limits.max_retries,
        }
    }
}

impl<S, B> Layer<S> for ThrottleLayer
where
    S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError> + Send + Sync,
    B: Send + 'static,
{
    type Service = Throttle<Buffer<Request<Body>, S::Future>>;

    fn layer(&self, inner: S) -> Self::Service {
        Throttle {
            inner: Buffer::new(inner, BUFFER),
            budget: self.budget.clone(),
            max_retries: self.max_retries,
        }
    }
}

/// The throttled service.
#[derive(Clone)]
pub(crate) struct Throttle<S> {
    inner: S,
    budget: Arc<RequestBudget>,
    max_retries: u32,
}

/// The wait a 429's Retry-After asks for (whole seconds), capped at [`MAX_RETRY_AFTER`].
pub(crate) fn retry_after(headers: &HeaderMap) -> Duration {
    headers
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_RETRY_AFTER)
        .min(MAX_RETRY_AFTER)
}

/// Whether `req` is a Lease request (exempt from the budget).
fn is_lease_request<B>(req: &Request<B>) -> bool {
    req.uri().path().starts_with("/apis/coordination.k8s.io/")
}

/// A copy of `req` to send again (`None` when its body is a stream).
fn copy_request(req: &Request<Body>) -> Option<Request<Body>> {
    let body = req.body().try_clone()?;
    let mut copy = Request::new(body);
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.version_mut() = req.version();
    *copy.headers_mut() = req.headers().clone();
    *copy.extensions_mut() = req.extensions().clone();
    Some(copy)
}

impl<S, B> Service<Request<Body>> for Throttle<S>
where
    S: Service<Request<Body>, Response = Response<B>, Error = BoxError> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = Response<B>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Response<B>, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // Readiness is awaited per request (on a clone of the buffered inner service).
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let inner = self.inner.clone();
        let budget = self.budget.clone();
        let max_retries = self.max_retries;
        Box::pin(async move {
            let mut req = req;
            let mut retries = 0;
            let exempt = is_lease_request(&req);
            loop {
                if !exempt {
                    budget.ready().await;
                }
                let again = (retries < max_retries)
                    .then(|| copy_request(&req))
                    .flatten();
                let response = inner.clone().oneshot(req).await?;
                if response.status() != StatusCode::TOO_MANY_REQUESTS {
                    return Ok(response);
                }
                let after = retry_after(response.headers());
                budget.pause_for(after);
                match again {
                    Some(next) => {
                        retries += 1;
                        tracing::debug!(
                            retry_after_ms = after.as_millis() as u64,
                            retries,
                            "429 from the API server; retrying"
                        );
                        req = next;
                    }
                    None => return Ok(response),
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube_client::throttled_from_kubeconfig;
    use cinder_sim::controllers::config::ControllersConfig;
    use cinder_sim::faults::RateLimit;
    use cinder_sim::{ClusterConfig, EmbeddedCluster};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::Api;
    use kube::api::ListParams;

    #[test]
    fn lease_requests_are_told_apart() {
        let req = |path: &str| Request::builder().uri(path).body(()).unwrap();
        assert!(is_lease_request(&req(
            "/apis/coordination.k8s.io/v1/namespaces/ns/leases/cinder-operator-shard-0"
        )));
        assert!(!is_lease_request(&req("/api/v1/namespaces/ns/secrets/x")));
        assert!(!is_lease_request(&req("/apis/apps/v1/deployments")));
    }

    /// A cluster answering 429 beyond 2 operator requests per second (bursts of 2).
    async fn limited_cluster() -> EmbeddedCluster {
        let mut config = ClusterConfig {
            controllers: ControllersConfig::all_off(),
            ..ClusterConfig::default()
        };
        config.faults.rate_limit = Some(RateLimit {
            qps: 2.0,
            burst: 2,
            user_agent: Some("cinder-operator/".to_string()),
        });
        EmbeddedCluster::start(config).await.unwrap()
    }

    async fn six_lists(cluster: &EmbeddedCluster, max_retries: u32) -> Vec<bool> {
        let limits = ClientLimits {
            qps: 1000.0,
            burst: 1000,
            max_retries,
        };
        let client = throttled_from_kubeconfig(&cluster.kubeconfig_yaml(), limits)
            .await
            .unwrap();
        let api: Api<ConfigMap> = Api::all(client);
        let lp = ListParams::default();
        let lists = (0..6).map(|_| api.list(&lp));
        futures::future::join_all(lists)
            .await
            .into_iter()
            .map(|r| r.is_ok())
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_429_is_retried_after_its_retry_after_until_it_succeeds() {
        let cluster = limited_cluster().await;
        let started = std::time::Instant::now();
        assert_eq!(six_lists(&cluster, 10).await, vec![true; 6]);
        let records = cluster.requests();
        let throttled = records.iter().filter(|r| r.status == 429).count();
        let served = records
            .iter()
            .filter(|r| r.status == 200 && r.user_agent.starts_with("cinder-operator/"))
            .count();
        assert!(throttled >= 1, "the limiter answered no 429");
        assert_eq!(served, 6);
        assert!(
            records
                .iter()
                .filter(|r| r.status == 429)
                .all(|r| r.user_agent.starts_with("cinder-operator/"))
        );
        // Four requests beyond the burst at 2 per second: the Retry-After (1 s) was waited.
        assert!(started.elapsed() >= Duration::from_secs(1));
        cluster.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn without_retries_the_429_reaches_the_caller() {
        let cluster = limited_cluster().await;
        let outcomes = six_lists(&cluster, 0).await;
        assert!(outcomes.contains(&false), "{outcomes:?}");
        assert!(outcomes.contains(&true), "{outcomes:?}");
        cluster.shutdown().await;
    }

    #[test]
    fn retry_after_reads_seconds_and_caps_them() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), DEFAULT_RETRY_AFTER);
        h.insert(http::header::RETRY_AFTER, "3".parse().unwrap());
        assert_eq!(retry_after(&h), Duration::from_secs(3));
        h.insert(http::header::RETRY_AFTER, "86400".parse().unwrap());
        assert_eq!(retry_after(&h), MAX_RETRY_AFTER);
        h.insert(
            http::header::RETRY_AFTER,
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), DEFAULT_RETRY_AFTER);
    }
}
