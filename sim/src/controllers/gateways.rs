//! The simulated Gateway API implementation: a Gateway gets Accepted=True and Programmed=True
//! (or Accepted=False when refused by config); an HTTPRoute gets, for each parentRef naming an
//! existing accepted Gateway, a status.parents entry with this controller's name and
//! Accepted=True / ResolvedRefs=True after the delay (Accepted=False NotAllowedByListeners when
//! the route is refused by config). Parents that do not exist get no entry, as with a real
//! implementation that does not own them.

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use super::dynamic::{api_for, run as run_dynamic, status_of, timer_key};
use super::kinds::{self, Kind};
use super::runtime::{FirstSeen, ReconcileError, Shared, patch_status};
use super::status::{Wanted, already_applied, condition_status, conditions};

/// The controllerName the simulated implementation reports on routes.
pub const CONTROLLER_NAME: &str = "sim.cinder.c5c3.io/gateway-controller";
/// The address a simulated Gateway reports.
pub const GATEWAY_ADDRESS: &str = "10.96.0.80";
/// How often a route whose parent is missing or not accepted looks again.
const WAIT_POLL: Duration = Duration::from_millis(500);

struct Context {
    shared: Arc<Shared>,
    kind: Kind,
    seen: FirstSeen,
}

/// Runs the Gateway and HTTPRoute controllers until aborted.
pub async fn run(shared: Arc<Shared>) {
    let context = |kind| {
        Arc::new(Context {
            shared: Arc::clone(&shared),
            kind,
            seen: FirstSeen::default(),
        })
    };
    futures::join!(
        run_dynamic(
            "gateways",
            Arc::clone(&shared),
            kinds::GATEWAY,
            context(kinds::GATEWAY),
            reconcile_gateway
        ),
        run_dynamic(
            "httproutes",
            Arc::clone(&shared),
            kinds::HTTP_ROUTE,
            context(kinds::HTTP_ROUTE),
            reconcile_route
        ),
    );
}

/// The status of a Gateway.
pub fn gateway_status(accepted: bool, previous: Option<&Value>, generation: i64) -> Value {
    let wanted = if accepted {
        [
            Wanted::new("Accepted", true, "Accepted", "Gateway accepted"),
            Wanted::new("Programmed", true, "Programmed", "Gateway programmed"),
        ]
    } else {
        [
            Wanted::new(
                "Accepted",
                false,
                "Invalid",
                "Gateway refused by the simulated implementation",
            ),
            Wanted::new("Programmed", false, "Invalid", "Gateway not programmed"),
        ]
    };
    json!({
        "addresses": if accepted { json!([{"type": "IPAddress", "value": GATEWAY_ADDRESS}]) } else { Value::Null },
        "conditions": conditions(previous.and_then(|s| s.get("conditions")), &wanted, Some(generation)),
    })
}

async fn reconcile_gateway(
    gateway: Arc<DynamicObject>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let namespace = gateway.namespace();
    let name = gateway.name_any();
    let (switch, refused) = ctx.shared.read(|c| {
        (
            c.gateways.switch.clone(),
            c.gateways
                .refused_gateways
                .matches(namespace.as_deref(), &name),
        )
    });
    if !switch.enabled || gateway.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let generation = gateway.metadata.generation.unwrap_or(1);
    if let Some(left) = ctx
        .seen
        .remaining(&timer_key(&gateway), generation, switch.delay)
    {
        return Ok(Action::requeue(left));
    }
    let previous = status_of(&gateway);
    let status = gateway_status(!refused, previous, generation);
    if !already_applied(&status, previous) {
        patch_status(
            &api_for(&ctx.shared, ctx.kind, namespace.as_deref()),
            &name,
            status,
        )
        .await?;
    }
    Ok(Action::await_change())
}

/// A parentRef that names a Gateway, with its namespace resolved.
fn gateway_parent(parent: &Value, route_namespace: &str) -> Option<(String, String)> {
    let group = parent
        .get("group")
        .and_then(Value::as_str)
        .unwrap_or(kinds::GATEWAY.group);
    let kind = parent
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or(kinds::GATEWAY.kind);
    if group != kinds::GATEWAY.group || kind != kinds::GATEWAY.kind {
        return None;
    }
    let name = parent.get("name").and_then(Value::as_str)?;
    let namespace = parent
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or(route_namespace);
    Some((namespace.to_owned(), name.to_owned()))
}

/// The status.parents entry for one parent.
pub fn route_parent_status(
    parent: &Value,
    accepted: bool,
    previous: Option<&Value>,
    generation: i64,
) -> Value {
    let previous_conditions = previous
        .and_then(|s| s.get("parents"))
        .and_then(Value::as_array)
        .and_then(|parents| parents.iter().find(|p| p.get("parentRef") == Some(parent)))
        .and_then(|p| p.get("conditions"));
    let accepted_condition = if accepted {
        Wanted::new("Accepted", true, "Accepted", "Route is accepted")
    } else {
        Wanted::new(
            "Accepted",
            false,
            "NotAllowedByListeners",
            "Route is not allowed by the parent's listeners",
        )
    };
    json!({
        "parentRef": parent,
        "controllerName": CONTROLLER_NAME,
        "conditions": conditions(
            previous_conditions,
            &[
                accepted_condition,
                Wanted::new("ResolvedRefs", true, "ResolvedRefs", "Resolved all the Object references for the Route"),
            ],
            Some(generation),
        ),
    })
}

async fn reconcile_route(
    route: Arc<DynamicObject>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let namespace = route
        .namespace()
        .ok_or(ReconcileError::Missing("namespace"))?;
    let name = route.name_any();
    let (switch, refused) = ctx.shared.read(|c| {
        (
            c.gateways.switch.clone(),
            c.gateways.refused_routes.matches(Some(&namespace), &name),
        )
    });
    if !switch.enabled || route.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let generation = route.metadata.generation.unwrap_or(1);
    if let Some(left) = ctx
        .seen
        .remaining(&timer_key(&route), generation, switch.delay)
    {
        return Ok(Action::requeue(left));
    }
    let parents: Vec<Value> = route
        .data
        .get("spec")
        .and_then(|s| s.get("parentRefs"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let previous = status_of(&route);
    let mut entries = Vec::new();
    let mut waiting = false;
    for parent in &parents {
        let Some((gateway_namespace, gateway_name)) = gateway_parent(parent, &namespace) else {
            continue;
        };
        let gateway = api_for(&ctx.shared, kinds::GATEWAY, Some(&gateway_namespace))
            .get_opt(&gateway_name)
            .await?;
        let accepted_gateway = gateway.as_ref().is_some_and(|g| {
            condition_status(status_of(g).and_then(|s| s.get("conditions")), "Accepted")
                == Some("True")
        });
        if !accepted_gateway {
            waiting = true;
            continue;
        }
        entries.push(route_parent_status(parent, !refused, previous, generation));
    }
    let status = json!({ "parents": entries });
    if !already_applied(&status, previous) {
        patch_status(
            &api_for(&ctx.shared, ctx.kind, Some(&namespace)),
            &name,
            status,
        )
        .await?;
    }
    // Keep following the parents: a Gateway may appear, go away or change acceptance.
    Ok(Action::requeue(if waiting {
        WAIT_POLL
    } else {
        WAIT_POLL.max(switch.delay)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_refs_default_to_gateway_in_route_namespace() {
        assert_eq!(
            gateway_parent(&json!({"name": "gw"}), "ns"),
            Some(("ns".into(), "gw".into()))
        );
        assert_eq!(
            gateway_parent(&json!({"name": "gw", "namespace": "infra"}), "ns"),
            Some(("infra".into(), "gw".into()))
        );
        assert_eq!(
            gateway_parent(
                &json!({"name": "svc", "kind": "Service", "group": ""}),
                "ns"
            ),
            None
        );
    }

    #[test]
    fn route_parent_status_names_controller_and_acceptance() {
        let parent = json!({"name": "gw"});
        let accepted = route_parent_status(&parent, true, None, 1);
        assert_eq!(accepted["controllerName"], CONTROLLER_NAME);
        assert_eq!(accepted["parentRef"], parent);
        assert_eq!(
            condition_status(accepted.get("conditions"), "Accepted"),
            Some("True")
        );
        let refused = route_parent_status(&parent, false, None, 1);
        assert_eq!(
            condition_status(refused.get("conditions"), "Accepted"),
            Some("False")
        );
        assert_eq!(refused["conditions"][0]["reason"], "NotAllowedByListeners");
    }

    #[test]
    fn gateway_status_sets_both_conditions() {
        let status = gateway_status(true, None, 3);
        assert_eq!(
            condition_status(status.get("conditions"), "Programmed"),
            Some("True")
        );
        assert_eq!(status["addresses"][0]["value"], GATEWAY_ADDRESS);
        let refused = gateway_status(false, Some(&status), 3);
        assert_eq!(
            condition_status(refused.get("conditions"), "Accepted"),
            Some("False")
        );
    }
}
