//! The HTTPRoute member of the parallel group (HTTPRouteReady): with `spec.gateway` set, a
//! Gateway API HTTPRoute `{name}-api` (parentRef, hostname, path prefix → the API Service on
//! 8776, controller ownerReference to the Cinder) is applied server-side and its acceptance read
//! from `status.parents[].conditions` (Accepted). Without `spec.gateway` the route is deleted
//! (HTTPRouteNotRequired, True). The Gateway API CRD is probed on every pass through
//! [`crate::kube_ext::capability`]: absent → GatewayAPINotInstalled (False), probe failure →
//! CapabilityProbeFailed (False); neither stops the rest of the pipeline.

use crate::children::child_meta;
use crate::children::{NotRequired, remove_unwanted};
use crate::conditions::{Cond, kind, reason};
use crate::context::OperatorContext;
use crate::crd::Cinder;
use crate::crd::cinder::GatewaySpec;
use crate::kube_ext::ApiErrorExt;
use crate::kube_ext::apply;
use crate::kube_ext::capability::{self, HTTP_ROUTE};
use crate::names;
use crate::pipeline::{Doing, StepContext, StepResult};
use crate::requeue::REQUEUE_DEPLOYMENT_POLLING;
use kube::api::DynamicObject;
use serde_json::{Value, json};
use std::sync::Arc;

/// The desired HTTPRoute of `cinder` for `gateway`.
pub(crate) fn desired_route(cinder: &Cinder, gateway: &GatewaySpec) -> DynamicObject {
    let name = cinder.metadata.name.clone().unwrap_or_default();
    let ar = HTTP_ROUTE.api_resource();
    let mut parent = json!({ "name": gateway.parent_ref.name });
    if let Some(ns) = &gateway.parent_ref.namespace {
        parent["namespace"] = json!(ns);
    }
    if let Some(section) = &gateway.parent_ref.section_name {
        parent["sectionName"] = json!(section);
    }
    let mut route = DynamicObject::new(&names::http_route(&name), &ar).data(json!({
        "spec": {
            "parentRefs": [parent],
            "hostnames": [gateway.hostname],
            "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": gateway.path}}],
                "backendRefs": [{"name": names::api_service(&name), "port": names::API_PORT}],
            }],
        }
    }));
    route.metadata = child_meta(cinder, &names::http_route(&name), &[]);
    route
}

/// Whether any parent of the route's status says Accepted=True.
pub(crate) fn accepted(route: &DynamicObject) -> bool {
    route
        .data
        .pointer("/status/parents")
        .and_then(Value::as_array)
        .is_some_and(|parents| {
            parents.iter().any(|p| {
                p.get("conditions")
                    .and_then(Value::as_array)
                    .is_some_and(|cs| {
                        cs.iter().any(|c| {
                            c.get("type").and_then(Value::as_str) == Some("Accepted")
                                && c.get("status").and_then(Value::as_str) == Some("True")
                        })
                    })
            })
        })
}

fn not_installed() -> Cond {
    Cond::false_(
        kind::HTTP_ROUTE_READY,
        reason::GATEWAY_API_NOT_INSTALLED,
        format!(
            "spec.gateway is set but {} is not served (Gateway API CRDs absent)",
            HTTP_ROUTE.api_version()
        ),
    )
}

/// The HTTPRoute while `spec.gateway` is unset.
const UNWANTED: NotRequired = NotRequired::new(
    "HTTPRoute",
    kind::HTTP_ROUTE_READY,
    reason::HTTP_ROUTE_NOT_REQUIRED,
    "spec.gateway",
);

/// Runs the step once for one Cinder.
pub(crate) async fn run(op: Arc<OperatorContext>, ctx: &mut StepContext) -> StepResult {
    let client = ctx.children(&op.client);
    let route_name = names::http_route(ctx.name());
    let api = HTTP_ROUTE.namespaced(&client, ctx.namespace());
    let Some(gateway) = ctx.cinder.spec.gateway.clone() else {
        // Not wanted: delete it; a 404 (no route, or no Gateway API at all) is the goal state.
        return remove_unwanted(ctx, &api, &route_name, UNWANTED).await;
    };
    match capability::is_served(&client, HTTP_ROUTE).await {
        Ok(true) => {}
        Ok(false) => return ctx.requeue(not_installed(), REQUEUE_DEPLOYMENT_POLLING),
        Err(e) => {
            return ctx.requeue(
                e.condition(kind::HTTP_ROUTE_READY),
                REQUEUE_DEPLOYMENT_POLLING,
            );
        }
    }
    let desired = desired_route(&ctx.cinder, &gateway);
    let applied = apply(&api, &route_name, &desired).await;
    let live = match applied {
        Ok(live) => live,
        // The CRD went away between the probe and the apply.
        Err(e) if e.is_not_found() => {
            return ctx.requeue(not_installed(), REQUEUE_DEPLOYMENT_POLLING);
        }
        Err(e) => return Err(e).doing(format_args!("applying HTTPRoute {route_name}")),
    };
    if accepted(&live) {
        ctx.proceed(Cond::true_(
            kind::HTTP_ROUTE_READY,
            reason::HTTP_ROUTE_ACCEPTED,
            format!(
                "HTTPRoute {route_name} accepted by Gateway {}",
                gateway.parent_ref.name
            ),
        ))
    } else {
        ctx.requeue(
            Cond::false_(
                kind::HTTP_ROUTE_READY,
                reason::HTTP_ROUTE_NOT_ACCEPTED,
                format!(
                    "HTTPRoute {route_name} is not accepted by Gateway {} yet",
                    gateway.parent_ref.name
                ),
            ),
            REQUEUE_DEPLOYMENT_POLLING,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route_with(conditions: Value) -> DynamicObject {
        DynamicObject::new("r", &HTTP_ROUTE.api_resource())
            .data(json!({"status": {"parents": [{"conditions": conditions}]}}))
    }

    #[test]
    fn acceptance_is_read_from_parent_conditions() {
        assert!(accepted(&route_with(
            json!([{"type": "Accepted", "status": "True"}])
        )));
        assert!(!accepted(&route_with(
            json!([{"type": "Accepted", "status": "False"}])
        )));
        assert!(!accepted(&DynamicObject::new(
            "r",
            &HTTP_ROUTE.api_resource()
        )));
    }
}
