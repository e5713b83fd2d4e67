//! The Service proxy subresource: `/api/v1/namespaces/{ns}/services/{name}[:port]/proxy/{path}`.
//! `healthcheck` answers 200 "OK" when a Deployment in the namespace whose pod template labels
//! match the Service's selector has readyReplicas ≥ 1, else 503; fault injection can force the
//! status or delay the answer. Other paths answer 200 with a small JSON document when ready.

use super::context::AppState;
use crate::error::ApiError;
use crate::store::selectors::map_selects;
use actix_web::HttpResponse;
use serde_json::Value;

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

/// Answers a proxied request to a Service.
pub async fn answer(
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
