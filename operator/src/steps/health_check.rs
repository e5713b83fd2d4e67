//! The HealthCheck member of the parallel group (CinderAPIReady): `GET /healthcheck` of the API
//! Service, its condition cached by the step actor per Cinder and endpoint (a pass reused for
//! [`PROBE_CACHE_TTL`], 30 s; a failure for [`HEALTH_CHECK_RETRY`], 10 s), so several passes in
//! that window send one probe; the step requeues after the same intervals, so health keeps
//! being watched.
//!
//! The probe goes through the API server's Service proxy
//! (`/api/v1/namespaces/{ns}/services/{name}-api:8776/proxy/healthcheck`) with the operator's
//! kube client. That path works the same in a real cluster (RBAC: `services/proxy` get) and in
//! the embedded cluster, and needs no second HTTP client or in-cluster DNS.
//!
//! Reasons: APIHealthy (2xx); EndpointNotReady when the Service does not exist (404) or the
//! proxy answers 503 (no ready backend behind the Service — the API Deployment is not ready);
//! APIUnhealthy for any other non-2xx; HealthCheckTimeout when no answer comes within
//! [`PROBE_TIMEOUT`]; ConnectionFailed when the API server cannot be reached; HealthCheckFailed
//! for anything else.

use crate::conditions::{Cond, kind, reason};
use crate::context::OperatorContext;
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

/// Sends one probe (no cache).
pub(crate) async fn probe(client: &Client, namespace: &str, cinder: &str) -> ProbeResult {
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

/// Runs the step once for one Cinder.
pub(crate) async fn run(op: Arc<OperatorContext>, ctx: &mut StepContext) -> StepResult {
    let client = ctx.children(&op.client);
    let ns = ctx.namespace().to_string();
    let name = ctx.name().to_string();
    let endpoint = names::api_endpoint(&name, &ns);
    let cache_key = proxy_path(&ns, &name);
    let c = match ctx.memory().recall(&cache_key).await {
        Some(cached) => cached,
        None => {
            let result = probe(&client, &ns, &name).await;
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

    #[test]
    fn proxy_path_names_the_api_service_port() {
        assert_eq!(
            proxy_path("ns", "c"),
            "/api/v1/namespaces/ns/services/c-api:8776/proxy/healthcheck"
        );
    }
}
