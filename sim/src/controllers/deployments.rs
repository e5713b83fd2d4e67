//! The simulated Deployment controller: rolls each Deployment out through ReplicaSets as the
//! real one does (planning in [`super::rollout`]): a ReplicaSet per pod template
//! (`pod-template-hash`), revisions in `deployment.kubernetes.io/revision`, RollingUpdate steps
//! bounded by maxSurge / maxUnavailable or Recreate, old ReplicaSets kept up to
//! revisionHistoryLimit, and the status (replicas, updated, ready, available, conditions) from
//! the ReplicaSets (read from the ReplicaSet store), whose pods the simulated kubelet makes ready. A held Deployment (see
//! [`super::DeploymentsConfig::held`]) keeps its new ReplicaSet at zero: its roll-out never
//! finishes until released.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::events::{Note, record};
use super::rollout::{self, REVISION};
use super::runtime::{ReconcileError, Shared, drain, patch_status, retry};
use super::status::already_applied;

/// Runs the Deployment controller until the task is aborted.
pub async fn run(shared: Arc<Shared>) {
    let api: Api<Deployment> = Api::all(shared.client.clone());
    let replica_sets = shared.informers.replica_sets.subscribe();
    let stream = Controller::new(api, watcher::Config::default())
        .owns_shared_stream(replica_sets)
        .reconcile_all_on(shared.triggers())
        .run(reconcile, retry, Arc::clone(&shared));
    drain(&shared, "deployments", stream).await;
}

async fn reconcile(
    deployment: Arc<Deployment>,
    shared: Arc<Shared>,
) -> Result<Action, ReconcileError> {
    let namespace = deployment
        .namespace()
        .ok_or(ReconcileError::Missing("namespace"))?;
    let name = deployment.name_any();
    let (enabled, held) = shared.read(|c| {
        (
            c.deployments.switch.enabled,
            c.deployments.held.matches(Some(&namespace), &name),
        )
    });
    if !enabled || deployment.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let object = serde_json::to_value(deployment.as_ref())?;
    if !rollout::selector_matches_template(&object) {
        return Ok(Action::await_change());
    }
    let uid = deployment.uid().ok_or(ReconcileError::Missing("uid"))?;
    let client = &shared.client;
    let rs_api: Api<ReplicaSet> = Api::namespaced(client.clone(), &namespace);
    let all: Vec<Value> = shared
        .informers
        .replica_sets
        .owned_by(Some(&namespace), &uid, |_| true)
        .await
        .iter()
        .map(|rs| serde_json::to_value(rs.as_ref()))
        .collect::<Result<_, _>>()?;
    let owned = rollout::owned(&object, &all);
    // Recreate: whether a pod of an old ReplicaSet still runs (terminating ones included).
    let recreate = object.pointer("/spec/strategy/type") == Some(&json!("Recreate"));
    let template = object
        .pointer("/spec/template")
        .cloned()
        .unwrap_or(Value::Null);
    let mut old_pods_running = false;
    if recreate {
        for rs in owned
            .iter()
            .filter(|rs| !rollout::carries_template(rs, &template))
        {
            let Some(rs_uid) = rs.pointer("/metadata/uid").and_then(Value::as_str) else {
                continue;
            };
            let running = shared
                .informers
                .pods
                .owned_by(Some(&namespace), rs_uid, |pod| {
                    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
                    !matches!(phase, Some("Succeeded" | "Failed"))
                })
                .await;
            old_pods_running |= !running.is_empty();
        }
    }
    let plan = rollout::plan_with_old_pods(&object, &owned, held, old_pods_running);
    let scaled = |rs: &str, from: i64, to: i64| {
        let verb = if to > from { "up" } else { "down" };
        format!("Scaled {verb} replica set {rs} from {from} to {to}")
    };
    if let Some(manifest) = &plan.create {
        let rs: ReplicaSet = serde_json::from_value(manifest.clone())?;
        match rs_api.create(&PostParams::default(), &rs).await {
            Ok(_) => {}
            // Created by an earlier pass the store did not show yet: the next pass sees it.
            Err(kube::Error::Api(status)) if status.code == 409 => {
                return Ok(Action::requeue(super::runtime::RETRY_AFTER));
            }
            Err(error) => return Err(error.into()),
        }
        let replicas = manifest["spec"]["replicas"].as_i64().unwrap_or(0);
        if replicas > 0 {
            let rs_name = manifest["metadata"]["name"].as_str().unwrap_or_default();
            record(client, &object, scaling(&scaled(rs_name, 0, replicas))).await?;
        }
    }
    if let Some((rs, revision)) = &plan.revise {
        let body = json!({"metadata": {"annotations": {REVISION: revision.to_string()}}});
        rs_api
            .patch(rs, &PatchParams::default(), &Patch::Merge(&body))
            .await?;
    }
    for (rs, replicas) in &plan.scale {
        let from = owned
            .iter()
            .find(|o| o["metadata"]["name"] == rs.as_str())
            .and_then(|o| o.pointer("/spec/replicas"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let body = json!({"spec": {"replicas": replicas}});
        rs_api
            .patch(rs, &PatchParams::default(), &Patch::Merge(&body))
            .await?;
        record(client, &object, scaling(&scaled(rs, from, *replicas))).await?;
    }
    for rs in &plan.delete {
        match rs_api.delete(rs, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(error.into()),
        }
    }
    // The Deployment carries the revision of the ReplicaSet with its template, written with
    // its status as kube-controller-manager writes it (kubectl's rollout commands read it).
    let api: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
    let revision = json!(plan.revision.to_string());
    let revised = plan.revision > 0
        && object.pointer(&format!(
            "/metadata/annotations/{}",
            REVISION.replace('/', "~1")
        )) != Some(&revision);
    if revised {
        let body =
            json!({"metadata": {"annotations": {REVISION: revision}}, "status": plan.status});
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&body))
            .await?;
    } else if !already_applied(&plan.status, object.get("status")) {
        patch_status(&api, &name, plan.status).await?;
    }
    if old_pods_running {
        // A pod going away changes no ReplicaSet's status: look again.
        return Ok(Action::requeue(OLD_PODS_POLL));
    }
    Ok(Action::await_change())
}

/// How often a Recreate roll-out waiting for its old pods looks again.
const OLD_PODS_POLL: std::time::Duration = std::time::Duration::from_millis(250);

fn scaling(message: &str) -> Note<'_> {
    Note {
        kind: "Normal",
        reason: "ScalingReplicaSet",
        message,
        component: "deployment-controller",
    }
}
