//! The HealthCheck member of the parallel group (CinderAPIReady): `GET /healthcheck` of the API
//! Service, its condition cached by the step actor per Cinder and endpoint (a pass reused for
//! [`PROBE_CACHE_TTL`], 30 s; a failure for [`HEALTH_CHECK_RETRY`], 10 s), so several passes in
//! that window send one probe; the step requeues after the same intervals, so health keeps
//! being watched.
//!
//! In a cluster ([`HealthCheckRoute::ClusterLocal`], the default) the probe is the operator's
//! own `GET http://{name}-api.{ns}.svc:8776/healthcheck` ([`probe_cluster_local`]): cluster DNS
//! and the pod network, no API server in the path and no RBAC beyond the Cinder's
//! NetworkPolicy admitting the operator. An operator running outside the cluster, where
//! Service names do not resolve (`--health-check-through-api-server`, `run --embedded`), and a
//! Cinder whose children live on a target cluster go through that cluster's API server Service
//! proxy instead (`/api/v1/namespaces/{ns}/services/{name}-api:8776/proxy/healthcheck`,
//! [`probe_through_api_server`]; `services/proxy` get on that cluster).
//!
//! Reasons: APIHealthy (2xx); EndpointNotReady when no ready backend stands behind the Service
//! (cluster-local: the connection is refused, as kube-proxy refuses it, or the answer is 503;
//! through the API server: the Service does not exist, 404, or the proxy answers 503);
//! APIUnhealthy for any other non-2xx; HealthCheckTimeout when no answer comes within
//! [`PROBE_TIMEOUT`]; ConnectionFailed when no connection can be made (the Service name does
//! not resolve, the address is unreachable, the API server cannot be reached); HealthCheckFailed
//! for anything else (an answer that is not HTTP, a malformed request).

use crate::conditions::{Cond, kind, reason};
use crate::context::{HealthCheckRoute, OperatorContext};
use crate::kube_ext::ApiErrorExt;
use crate::names;
use crate::pipeline::{StepContext, StepResult};
use crate::requeue::{HEALTH_CHECK_RETRY, PROBE_CACHE_TTL};
use kube::Client;
use kube::api::GetParams;
use std::sync::Arc;
use std::time::Duration;

/// What one /healthcheck probe found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ProbeResult {
    /// 2xx.
    Healthy,
    /// The endpoint answered with a non-2xx status other than "no ready backend".
    Unhealthy { status: u16 },
    /// No Service, or 503 from the proxy: no ready backend behind the Service.
    EndpointNotReady { detail: String },
    /// No answer within the probe timeout.
    Timeout,
    /// The connection could not be made.
    ConnectionFailed { detail: String },
    /// Anything else (a malformed request, an unexpected client error).
    Failed { detail: String },
}

impl ProbeResult {
    pub(crate) fn is_healthy(&self) -> bool {
        matches!(self, ProbeResult::Healthy)
    }
    /// How long the result may be reused.
    pub(crate) fn ttl(&self) -> Duration {
        if self.is_healthy() {
            PROBE_CACHE_TTL
        } else {
            HEALTH_CHECK_RETRY
        }
    }
}

/// How long one probe may take.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The proxy path the probe requests.
pub(crate) fn proxy_path(namespace: &str, cinder: &str) -> String {
    format!(
        "/api/v1/namespaces/{namespace}/services/{}:{}/proxy/healthcheck",
        names::api_service(cinder),
        names::API_PORT
    )
}

/// Classifies the error of a proxied GET.
pub(crate) fn classify_error(e: &kube::Error) -> ProbeResult {
    match e {
        e if e.is_not_found() => ProbeResult::EndpointNotReady {
            detail: "the API Service does not exist".to_string(),
        },
        kube::Error::Api(s) if s.code == 503 => ProbeResult::EndpointNotReady {
            detail: "no ready backend behind the API Service (503)".to_string(),
        },
        kube::Error::Api(s) => ProbeResult::Unhealthy { status: s.code },
        kube::Error::HyperError(h) => ProbeResult::ConnectionFailed {
            detail: h.to_string(),
        },
        kube::Error::Service(s) => ProbeResult::ConnectionFailed {
            detail: s.to_string(),
        },
        other => ProbeResult::Failed {
            detail: other.to_string(),
        },
    }
}

/// The URL the cluster-local probe GETs: `http://{cinder}-api.{namespace}.svc:8776/healthcheck`.
pub(crate) fn cluster_local_url(namespace: &str, cinder: &str) -> String {
    format!("{}/healthcheck", names::api_endpoint(cinder, namespace))
}

/// Whether `e` or one of its sources is an I/O error of `kind`.
fn caused_by(e: &(dyn std::error::Error + 'static), kind: std::io::ErrorKind) -> bool {
    let mut current = Some(e);
    while let Some(err) = current {
        if err
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == kind)
        {
            return true;
        }
        current = err.source();
    }
    false
}

/// `e` with its sources, `: `-joined.
fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut current = e.source();
    while let Some(err) = current {
        parts.push(err.to_string());
        current = err.source();
    }
    parts.join(": ")
}

/// The result of an HTTP answer with `status` from the API itself.
pub(crate) fn classify_status(status: u16) -> ProbeResult {
    match status {
        200..=299 => ProbeResult::Healthy,
        503 => ProbeResult::EndpointNotReady {
            detail: "the API answered 503 (not ready to serve)".to_string(),
        },
        status => ProbeResult::Unhealthy { status },
    }
}

/// Sends one cluster-local probe, `GET url` (no cache).
pub(crate) async fn probe_cluster_local(url: &str) -> ProbeResult {
    use hyper_util::client::legacy::Client as HttpClient;
    use hyper_util::rt::TokioExecutor;
    let request = match http::Request::get(url)
        .header(http::header::USER_AGENT, "cinder-operator")
        .body(String::new())
    {
        Ok(r) => r,
        Err(e) => {
            return ProbeResult::Failed {
                detail: format!("{url} is not a valid request: {e}"),
            };
        }
    };
    let client = HttpClient::builder(TokioExecutor::new()).build_http::<String>();
    match tokio::time::timeout(PROBE_TIMEOUT, client.request(request)).await {
        Err(_elapsed) => ProbeResult::Timeout,
        Ok(Ok(answer)) => classify_status(answer.status().as_u16()),
        Ok(Err(e)) if caused_by(&e, std::io::ErrorKind::ConnectionRefused) => {
            ProbeResult::EndpointNotReady {
                detail: "no ready backend behind the API Service (connection refused)".to_string(),
            }
        }
        Ok(Err(e)) if e.is_connect() => ProbeResult::ConnectionFailed {
            detail: describe(&e),
        },
        Ok(Err(e)) => ProbeResult::Failed {
            detail: describe(&e),
        },
    }
}

/// Sends one probe through the API server's Service proxy with `client` (no cache).
pub(crate) async fn probe_through_api_server(
    client: &Client,
    namespace: &str,
    cinder: &str,
) -> ProbeResult {
    let base = format!(
        "/api/v1/namespaces/{namespace}/services/{}:{}/proxy",
        names::api_service(cinder),
        names::API_PORT
    );
    let request = match kube::core::Request::new(base).get("healthcheck", &GetParams::default()) {
        Ok(r) => r,
        Err(e) => {
            return ProbeResult::Failed {
                detail: e.to_string(),
            };
        }
    };
    match tokio::time::timeout(PROBE_TIMEOUT, client.request_text(request)).await {
        Err(_elapsed) => ProbeResult::Timeout,
        Ok(Ok(_body)) => ProbeResult::Healthy,
        Ok(Err(e)) => classify_error(&e),
    }
}

/// The condition of a probe result.
pub(crate) fn condition(result: &ProbeResult, endpoint: &str) -> Cond {
    let t = kind::CINDER_API_READY;
    match result {
        ProbeResult::Healthy => Cond::true_(
            t,
            reason::API_HEALTHY,
            format!("{endpoint}/healthcheck answered 2xx"),
        ),
        ProbeResult::Unhealthy { status } => Cond::false_(
            t,
            reason::API_UNHEALTHY,
            format!("{endpoint}/healthcheck answered {status}"),
        ),
        ProbeResult::EndpointNotReady { detail } => {
            Cond::false_(t, reason::ENDPOINT_NOT_READY, detail.clone())
        }
        ProbeResult::Timeout => Cond::false_(
            t,
            reason::HEALTH_CHECK_TIMEOUT,
            format!(
                "{endpoint}/healthcheck did not answer within {}s",
                PROBE_TIMEOUT.as_secs()
            ),
        ),
        ProbeResult::ConnectionFailed { detail } => Cond::false_(
            t,
            reason::CONNECTION_FAILED,
            format!("connecting for {endpoint}/healthcheck: {detail}"),
        ),
        ProbeResult::Failed { detail } => Cond::false_(
            t,
            reason::HEALTH_CHECK_FAILED,
            format!("probing {endpoint}/healthcheck: {detail}"),
        ),
    }
}

/// The route of a probe: the operator's own (`configured`), except for a Cinder whose children
/// live on a target cluster (`on_target`), whose Service names resolve only there.
pub(crate) fn route(configured: HealthCheckRoute, on_target: bool) -> HealthCheckRoute {
    if on_target {
        HealthCheckRoute::ApiServerProxy
    } else {
        configured
    }
}

/// Runs the step once for one Cinder.
pub(crate) async fn run(op: Arc<OperatorContext>, ctx: &mut StepContext) -> StepResult {
    let client = ctx.children(&op.client);
    let ns = ctx.namespace().to_string();
    let name = ctx.name().to_string();
    let endpoint = names::api_endpoint(&name, &ns);
    let route = route(op.health_check, ctx.target.is_some());
    let cache_key = match route {
        HealthCheckRoute::ClusterLocal => cluster_local_url(&ns, &name),
        HealthCheckRoute::ApiServerProxy => proxy_path(&ns, &name),
    };
    let c = match ctx.memory().recall(&cache_key).await {
        Some(cached) => cached,
        None => {
            let result = match route {
                HealthCheckRoute::ClusterLocal => probe_cluster_local(&cache_key).await,
                HealthCheckRoute::ApiServerProxy => {
                    probe_through_api_server(&client, &ns, &name).await
                }
            };
            let c = condition(&result, &endpoint);
            ctx.memory().remember(&cache_key, c.clone(), result.ttl());
            c
        }
    };
    if c.status {
        ctx.requeue(c, PROBE_CACHE_TTL)
    } else {
        ctx.requeue(c, HEALTH_CHECK_RETRY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(Status::failure("x", "y").with_code(code).boxed())
    }

    #[test]
    fn reasons_of_answers() {
        assert!(matches!(
            classify_error(&api(503)),
            ProbeResult::EndpointNotReady { .. }
        ));
        assert!(matches!(
            classify_error(&api(404)),
            ProbeResult::EndpointNotReady { .. }
        ));
        assert_eq!(
            classify_error(&api(500)),
            ProbeResult::Unhealthy { status: 500 }
        );
        let c = condition(&ProbeResult::Unhealthy { status: 500 }, "http://a");
        assert_eq!((c.status, c.reason), (false, reason::API_UNHEALTHY));
        assert_eq!(
            condition(&ProbeResult::Timeout, "e").reason,
            reason::HEALTH_CHECK_TIMEOUT
        );
        assert!(condition(&ProbeResult::Healthy, "e").status);
    }

    /// A listener on loopback answering every connection with `answer` (raw bytes); its URL.
    async fn answering(answer: &'static [u8]) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf).await;
                let _ = conn.write_all(answer).await;
                let _ = conn.shutdown().await;
            }
        });
        format!("http://127.0.0.1:{port}/healthcheck")
    }

    /// The condition of a cluster-local probe of `url`.
    async fn cluster_local(url: &str) -> Cond {
        condition(&probe_cluster_local(url).await, "http://c-api.ns.svc:8776")
    }

    #[test]
    fn in_a_cluster_the_probe_gets_the_service_by_its_cluster_name() {
        assert_eq!(
            cluster_local_url("ns", "c"),
            "http://c-api.ns.svc:8776/healthcheck"
        );
        use HealthCheckRoute::*;
        assert_eq!(route(ClusterLocal, false), ClusterLocal);
        assert_eq!(route(ApiServerProxy, false), ApiServerProxy);
        // A target cluster's Service names resolve only there.
        assert_eq!(route(ClusterLocal, true), ApiServerProxy);
        assert_eq!(HealthCheckRoute::default(), ClusterLocal);
    }

    #[tokio::test]
    async fn cluster_local_answers_give_their_reasons() {
        let ok = answering(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nOK").await;
        let c = cluster_local(&ok).await;
        assert_eq!((c.status, c.reason), (true, reason::API_HEALTHY));
        let sick = answering(b"HTTP/1.1 500 Oops\r\ncontent-length: 0\r\n\r\n").await;
        let c = cluster_local(&sick).await;
        assert_eq!((c.status, c.reason), (false, reason::API_UNHEALTHY));
        assert!(c.message.contains("500"), "{}", c.message);
        let busy = answering(b"HTTP/1.1 503 Busy\r\ncontent-length: 0\r\n\r\n").await;
        assert_eq!(
            cluster_local(&busy).await.reason,
            reason::ENDPOINT_NOT_READY
        );
    }

    #[tokio::test]
    async fn a_refused_connection_is_no_ready_endpoint() {
        // A port nothing listens on, as kube-proxy refuses a Service with no ready endpoint.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let c = cluster_local(&format!("http://127.0.0.1:{port}/healthcheck")).await;
        assert_eq!((c.status, c.reason), (false, reason::ENDPOINT_NOT_READY));
    }

    #[tokio::test]
    async fn a_name_that_does_not_resolve_is_connection_failed() {
        // What an operator outside the cluster meets without --health-check-through-api-server.
        let c = cluster_local("http://c-api.ns.invalid:8776/healthcheck").await;
        assert_eq!(
            (c.status, c.reason),
            (false, reason::CONNECTION_FAILED),
            "{}",
            c.message
        );
        assert!(c.message.contains("connecting for"), "{}", c.message);
    }

    #[tokio::test]
    async fn an_answer_that_is_not_http_is_health_check_failed() {
        let garbage = answering(b"SSH-2.0-OpenSSH_9.6\r\n").await;
        let c = cluster_local(&garbage).await;
        assert_eq!(
            (c.status, c.reason),
            (false, reason::HEALTH_CHECK_FAILED),
            "{}",
            c.message
        );
    }

    #[tokio::test]
    async fn no_answer_within_the_probe_timeout_is_health_check_timeout() {
        // Accepts and never answers.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let held = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((conn, _)) = listener.accept().await {
                open.push(conn);
            }
        });
        let c = cluster_local(&format!("http://127.0.0.1:{port}/healthcheck")).await;
        assert_eq!((c.status, c.reason), (false, reason::HEALTH_CHECK_TIMEOUT));
        held.abort();
    }

    #[test]
    fn proxy_path_names_the_api_service_port() {
        assert_eq!(
            proxy_path("ns", "c"),
            "/api/v1/namespaces/ns/services/c-api:8776/proxy/healthcheck"
        );
    }
}
