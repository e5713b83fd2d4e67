//! The Service proxy subresource: `/api/v1/namespaces/{ns}/services/{name}[:port]/proxy/{path}`.
//!
//! A Service with endpoints on real nodes (its EndpointSlices list pods on a node whose
//! container runtime is not the simulated kubelet's `sim://`: process nodes, or any node of a
//! real cluster) is proxied for real: the request (method, path, query, body, headers other
//! than hop-by-hop ones and the caller's credentials) goes over HTTP to one of its ready
//! endpoints (chosen at random) on the Service port the segment names, and the endpoint's
//! answer comes back; no ready endpoint is 503 ServiceUnavailable `no endpoints available for
//! service "x"`, an endpoint that cannot be reached 503 `error trying to reach service: ...`, as
//! the real API server answers. Any other Service keeps the simulated answer: `healthcheck`
//! (and `healthz`, empty path) answers 200 "OK" when a Deployment in the namespace whose pod
//! template labels match the Service's selector has readyReplicas ≥ 1, else 503; other paths
//! answer 200 with a small JSON document when ready. Fault injection forces the status or
//! delays the answer of either kind.

use super::context::AppState;
use crate::controllers::endpointslices::SERVICE_NAME_LABEL;
use crate::error::ApiError;
use crate::store::selectors::map_selects;
use actix_web::{HttpRequest, HttpResponse};
use serde_json::Value;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// How long connecting to an endpoint may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long an endpoint may take to answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);
/// Headers of one hop, never forwarded (RFC 9110), and the caller's credentials for the API
/// server, which are not the endpoint's business.
const NOT_FORWARDED: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "authorization",
];

/// The Service name of a proxy path segment (`name`, `name:port`, `http:name:port`).
pub fn service_name(segment: &str) -> &str {
    let parts: Vec<&str> = segment.split(':').collect();
    match parts.as_slice() {
        ["http" | "https", name, ..] => name,
        [name, ..] => name,
        [] => segment,
    }
}

/// Whether a Deployment of `namespace` whose pod template the Service selects has a ready
/// replica (the Service has endpoints). The Deployments are looked at in the store by reference,
/// none copied: a probe costs a walk of the namespace's Deployments, no allocation per one.
fn backend_ready(app: &AppState, namespace: &str, service: &Value) -> bool {
    let selector = service
        .get("spec")
        .and_then(|spec| spec.get("selector"))
        .unwrap_or(&Value::Null);
    app.engine
        .store
        .any("apps", "deployments", Some(namespace), |d| {
            let spec = d.get("spec");
            let labels = spec
                .and_then(|s| s.get("template"))
                .and_then(|t| t.get("metadata"))
                .and_then(|m| m.get("labels"))
                .unwrap_or(&Value::Null);
            map_selects(selector, labels)
                && d.get("status")
                    .and_then(|s| s.get("readyReplicas"))
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
                    >= 1
        })
}

/// The port part of a proxy path segment (`name:port`, `http:name:port`), if any.
fn port_part(segment: &str) -> Option<&str> {
    let parts: Vec<&str> = segment.split(':').collect();
    match parts.as_slice() {
        ["http" | "https", _, port, ..] => Some(*port).filter(|p| !p.is_empty()),
        ["http" | "https", _] => None,
        [_, port] => Some(*port).filter(|p| !p.is_empty()),
        _ => None,
    }
}

/// The scheme a proxy path segment asks for (`https:name:port`), default http.
fn scheme_part(segment: &str) -> &str {
    match segment.split(':').next() {
        Some("https") if segment.matches(':').count() >= 2 => "https",
        _ => "http",
    }
}

/// Whether the Node `name` exists and is not served by the simulated kubelet (whose pods' IPs
/// lead nowhere). The Nodes are looked at by reference, none copied.
fn real_node(app: &AppState, name: &str) -> bool {
    app.engine.store.any("", "nodes", None, |node| {
        node.pointer("/metadata/name").and_then(Value::as_str) == Some(name)
            && node
                .pointer("/status/nodeInfo/containerRuntimeVersion")
                .and_then(Value::as_str)
                .is_none_or(|runtime| !runtime.starts_with("sim://"))
    })
}

/// What the Service's EndpointSlices say for the Service port `port` (name or number; None:
/// the first port): None when no endpoint is on a real node (the Service stays simulated),
/// else the ready endpoints' addresses on that port (possibly none).
fn real_endpoints(
    app: &AppState,
    namespace: &str,
    service: &Value,
    port: Option<&str>,
) -> Option<Vec<SocketAddr>> {
    let name = service.pointer("/metadata/name").and_then(Value::as_str)?;
    // Only the Service's own slices are copied out of the store.
    let slices: Vec<Value> = app
        .engine
        .store
        .select(
            "discovery.k8s.io",
            "endpointslices",
            Some(namespace),
            |s| {
                s.pointer("/metadata/labels")
                    .and_then(|l| l.get(SERVICE_NAME_LABEL))
                    .and_then(Value::as_str)
                    == Some(name)
            },
            0,
            None,
        )
        .items;
    let endpoints = || {
        slices.iter().flat_map(|s| {
            s.get("endpoints")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(move |e| (s, e))
        })
    };
    let nodes: std::collections::BTreeSet<&str> = endpoints()
        .filter_map(|(_, e)| e.get("nodeName").and_then(Value::as_str))
        .collect();
    let real = nodes.into_iter().any(|node| real_node(app, node));
    if !real {
        return None;
    }
    let service_ports: Vec<&Value> = service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|ports| ports.iter().collect())
        .unwrap_or_default();
    let chosen = match port {
        None => service_ports.first().copied(),
        Some(port) => service_ports.iter().copied().find(|p| {
            p.get("name").and_then(Value::as_str) == Some(port)
                || p.get("port")
                    .and_then(Value::as_i64)
                    .map(|n| n.to_string())
                    .as_deref()
                    == Some(port)
        }),
    };
    let Some(chosen) = chosen else {
        return Some(Vec::new());
    };
    let port_name = chosen.get("name").and_then(Value::as_str).unwrap_or("");
    let mut ready = Vec::new();
    for (slice, endpoint) in endpoints() {
        if endpoint.pointer("/conditions/ready") == Some(&Value::Bool(false)) {
            continue;
        }
        let Some(target) = slice
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|p| p.get("name").and_then(Value::as_str).unwrap_or("") == port_name)
            .and_then(|p| p.get("port"))
            .and_then(Value::as_u64)
            .and_then(|p| u16::try_from(p).ok())
        else {
            continue;
        };
        ready.extend(
            endpoint
                .get("addresses")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .filter_map(|a| a.parse::<IpAddr>().ok())
                .map(|ip| SocketAddr::new(ip, target)),
        );
    }
    Some(ready)
}

/// Sends the request to `endpoint` over HTTP/1.1 and returns its answer.
async fn forward(
    req: &HttpRequest,
    body: &[u8],
    endpoint: SocketAddr,
    rest: &str,
) -> Result<HttpResponse, String> {
    use http_body_util::BodyExt;
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(endpoint))
        .await
        .map_err(|_| format!("dial tcp {endpoint}: i/o timeout"))?
        .map_err(|e| format!("dial tcp {endpoint}: {e}"))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
    let driver = tokio::spawn(connection);
    let query = req.query_string();
    let path = format!(
        "/{}{}{}",
        rest.trim_start_matches('/'),
        if query.is_empty() { "" } else { "?" },
        query
    );
    let mut request = hyper::Request::builder()
        .method(req.method().as_str())
        .uri(&path)
        .header("host", endpoint.to_string());
    for (name, value) in req.headers() {
        if !NOT_FORWARDED.contains(&name.as_str()) && !name.as_str().starts_with("impersonate-") {
            request = request.header(name.as_str(), value.as_bytes());
        }
    }
    let request = request
        .body(http_body_util::Full::new(bytes::Bytes::copy_from_slice(
            body,
        )))
        .map_err(|e| e.to_string())?;
    let exchange = async {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok::<_, String>((status, headers, body))
    };
    let outcome = tokio::time::timeout(ANSWER_TIMEOUT, exchange).await;
    driver.abort();
    let (status, headers, body) =
        outcome.map_err(|_| format!("{endpoint} did not answer within {ANSWER_TIMEOUT:?}"))??;
    let code = actix_web::http::StatusCode::from_u16(status)
        .map_err(|_| format!("{endpoint} answered the invalid status {status}"))?;
    let mut answer = HttpResponse::build(code);
    for (name, value) in &headers {
        if !NOT_FORWARDED.contains(&name.as_str()) {
            answer.append_header((name.as_str(), value.as_bytes()));
        }
    }
    Ok(answer.body(body))
}

/// Answers a proxied request to a Service.
pub async fn answer(
    req: &HttpRequest,
    body: &[u8],
    app: &AppState,
    namespace: &str,
    segment: &str,
    rest: &str,
) -> Result<HttpResponse, ApiError> {
    let name = service_name(segment);
    let service = app
        .engine
        .store
        .get("", "services", namespace, name)
        .ok_or_else(|| ApiError::not_found("", "services", name))?;
    if let Some(fault) = app.faults.service_fault(namespace, name) {
        if !fault.delay.is_zero() {
            tokio::time::sleep(fault.delay).await;
        }
        if let Some(code) = fault.status {
            let status = actix_web::http::StatusCode::from_u16(code)
                .unwrap_or(actix_web::http::StatusCode::INTERNAL_SERVER_ERROR);
            return Ok(HttpResponse::build(status)
                .content_type("text/plain")
                .body(format!("injected status {code}")));
        }
    }
    if let Some(endpoints) = real_endpoints(app, namespace, &service, port_part(segment)) {
        let unavailable = || {
            ApiError::service_unavailable(format!("no endpoints available for service \"{name}\""))
        };
        if scheme_part(segment) == "https" {
            return Err(ApiError::service_unavailable(format!(
                "error trying to reach service: the simulator proxies to endpoints over http only (asked: {segment})"
            )));
        }
        let count = endpoints.len();
        if count == 0 {
            return Err(unavailable());
        }
        let endpoint = endpoints[rand::random_range(0..count)];
        return forward(req, body, endpoint, rest).await.map_err(|error| {
            ApiError::service_unavailable(format!("error trying to reach service: {error}"))
        });
    }
    let ready = backend_ready(app, namespace, &service);
    let path = rest.trim_matches('/');
    Ok(match (ready, path) {
        (true, "healthcheck" | "healthz" | "") => {
            HttpResponse::Ok().content_type("text/plain").body("OK")
        }
        (true, _) => HttpResponse::Ok()
            .content_type("application/json")
            .body(format!("{{\"path\":{:?}}}", path)),
        (false, _) => HttpResponse::ServiceUnavailable()
            .content_type("text/plain")
            .body(format!("no endpoints available for service \"{name}\"")),
    })
}
