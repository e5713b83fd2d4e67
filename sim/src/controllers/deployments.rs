//! The simulated Deployment controller: after the configured delay a Deployment's status reports
//! every replica updated, ready and available at the current generation. A new generation (a
//! template or scale change) is a rollout: first the status reports the new generation observed
//! with no replica updated yet, then it converges. No ReplicaSets or Pods are created.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::runtime::{FirstSeen, ReconcileError, Shared, drain, patch_status, retry};
use super::status::{Wanted, already_applied, workload_conditions};

struct Context {
    shared: Arc<Shared>,
    seen: FirstSeen,
}

/// Runs the Deployment controller until the task is aborted.
pub async fn run(shared: Arc<Shared>) {
    let api: Api<Deployment> = Api::all(shared.client.clone());
    let context = Arc::new(Context {
        shared: Arc::clone(&shared),
        seen: FirstSeen::default(),
    });
    let stream = Controller::new(api, watcher::Config::default())
        .reconcile_all_on(shared.triggers())
        .run(reconcile, retry, context);
    drain(&shared, "deployments", stream).await;
}

async fn reconcile(
    deployment: Arc<Deployment>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let namespace = deployment
        .namespace()
        .ok_or(ReconcileError::Missing("namespace"))?;
    let name = deployment.name_any();
    let (switch, held) = ctx.shared.read(|c| {
        (
            c.deployments.switch.clone(),
            c.deployments.held.matches(Some(&namespace), &name),
        )
    });
    if !switch.enabled || deployment.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let generation = deployment.metadata.generation.unwrap_or(1);
    let desired = deployment.spec.replicas.unwrap_or(1).max(0);
    let previous = deployment
        .status
        .as_ref()
        .map(serde_json::to_value)
        .transpose()?;
    let converged = converged_status(&name, desired, generation, previous.as_ref());
    if !held && already_applied(&converged, previous.as_ref()) {
        return Ok(Action::await_change());
    }
    let key = deployment
        .uid()
        .unwrap_or_else(|| format!("{namespace}/{name}"));
    let remaining = if held {
        Some(switch.delay)
    } else {
        ctx.seen.remaining(&key, generation, switch.delay)
    };
    let api: Api<Deployment> = Api::namespaced(ctx.shared.client.clone(), &namespace);
    match remaining {
        None => {
            patch_status(&api, &name, converged).await?;
            Ok(Action::await_change())
        }
        Some(left) => {
            let rolling = rollout_status(&name, desired, generation, previous.as_ref());
            if !already_applied(&rolling, previous.as_ref()) {
                patch_status(&api, &name, rolling).await?;
            }
            Ok(if held {
                Action::await_change()
            } else {
                Action::requeue(left)
            })
        }
    }
}

fn count(previous: Option<&Value>, field: &str) -> i64 {
    previous
        .and_then(|status| status.get(field))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// The status of a Deployment whose rollout of `generation` finished.
pub fn converged_status(
    name: &str,
    desired: i32,
    generation: i64,
    previous: Option<&Value>,
) -> Value {
    let message = format!("ReplicaSet \"{name}\" has successfully progressed.");
    json!({
        "observedGeneration": generation,
        "replicas": desired,
        "updatedReplicas": desired,
        "readyReplicas": desired,
        "availableReplicas": desired,
        "unavailableReplicas": null,
        "conditions": workload_conditions(
            previous.and_then(|s| s.get("conditions")),
            &[
                Wanted::new("Available", true, "MinimumReplicasAvailable", "Deployment has minimum availability."),
                Wanted::new("Progressing", true, "NewReplicaSetAvailable", &message),
            ],
            "lastUpdateTime",
        ),
    })
}

/// The status of a Deployment rolling out `generation`: observed, no replica updated yet, the
/// previous ready/available counts kept.
pub fn rollout_status(
    name: &str,
    desired: i32,
    generation: i64,
    previous: Option<&Value>,
) -> Value {
    let desired_count = i64::from(desired);
    let ready = count(previous, "readyReplicas").min(desired_count);
    let available = count(previous, "availableReplicas").min(desired_count);
    let message = format!("ReplicaSet \"{name}\" is progressing.");
    let available_condition = if available > 0 || desired == 0 {
        Wanted::new(
            "Available",
            true,
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
        )
    } else {
        Wanted::new(
            "Available",
            false,
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )
    };
    json!({
        "observedGeneration": generation,
        "replicas": desired,
        "updatedReplicas": 0,
        "readyReplicas": ready,
        "availableReplicas": available,
        "unavailableReplicas": desired_count - available,
        "conditions": workload_conditions(
            previous.and_then(|s| s.get("conditions")),
            &[available_condition, Wanted::new("Progressing", true, "ReplicaSetUpdated", &message)],
            "lastUpdateTime",
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rollout_lags_then_converges() {
        let first = converged_status("api", 3, 1, None);
        assert_eq!(first["readyReplicas"], 3);
        assert_eq!(first["conditions"][0]["type"], "Available");
        assert_eq!(first["conditions"][0]["status"], "True");
        let rolling = rollout_status("api", 3, 2, Some(&first));
        assert_eq!(rolling["observedGeneration"], 2);
        assert_eq!(rolling["updatedReplicas"], 0);
        assert_eq!(rolling["readyReplicas"], 3);
        assert_eq!(rolling["conditions"][1]["reason"], "ReplicaSetUpdated");
        assert!(!already_applied(
            &converged_status("api", 3, 2, Some(&rolling)),
            Some(&rolling)
        ));
    }

    #[test]
    fn a_new_deployment_is_unavailable_while_rolling() {
        let rolling = rollout_status("api", 2, 1, None);
        assert_eq!(rolling["availableReplicas"], 0);
        assert_eq!(rolling["unavailableReplicas"], 2);
        assert_eq!(rolling["conditions"][0]["status"], "False");
    }

    #[test]
    fn converged_status_is_stable() {
        let first = converged_status("api", 1, 4, None);
        let again = converged_status("api", 1, 4, Some(&first));
        assert!(already_applied(&again, Some(&first)));
    }
}
