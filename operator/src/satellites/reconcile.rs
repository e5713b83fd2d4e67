//! The reconcile both satellite controllers run: the CinderBackend finalizer (added here; its
//! release with a detach is a later issue, except for a backend whose parent Cinder is gone,
//! which releases it with a ServiceRemoveSkipped event), then CredentialsReady (RBD key Secret
//! present with its key; NFS needs none; parent missing → WaitingForParent; parent's target
//! cluster unresolvable → TargetClusterUnavailable), ConfigProjected (the parent's projection
//! Secrets show this satellite) and Ready, written only when changed through the backend actor.

use super::kind::SatelliteKind;
use super::status::{
    Credentials, actor_id, actor_value, conditions_for, forget_actor, next_status,
    write_through_actor,
};
use crate::conditions::event_reason;
use crate::conditions::{Cond, kind};
use crate::context::OperatorContext;
use crate::controller::target_cluster::Unresolvable;
use crate::controller::{finalizer, status::FIELD_MANAGER};
use crate::crd::Cinder;
use crate::names;
use crate::pipeline::TargetCluster;
use crate::requeue::Requeue;
use crate::steps::children::selector;
use crate::steps::projection::{PROJECTION_LABEL, credentials_for};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Api, ResourceExt};
use std::sync::Arc;

/// What a satellite reconcile needs.
pub struct SatelliteContext {
    pub op: Arc<OperatorContext>,
    pub recorder: Recorder,
}

/// A satellite reconcile that could not finish.
#[derive(Debug, thiserror::Error)]
pub enum SatelliteError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("{0}")]
    Actor(String),
}

/// The retry after a failed reconcile.
pub fn error_policy<S>(_obj: Arc<S>, _e: &SatelliteError, _ctx: Arc<SatelliteContext>) -> Action {
    Action::requeue(Requeue::RequeueSecretPolling.jittered())
}

/// Where the parent's children live: its resolved target cluster, the management cluster
/// (`Ok(None)`), or why its target does not resolve.
type ParentPlacement = Result<Option<TargetCluster>, Unresolvable>;

async fn credentials<S: SatelliteKind>(
    obj: &S,
    parent: Option<(&Cinder, &ParentPlacement)>,
    ctx: &SatelliteContext,
    ns: &str,
) -> Result<Credentials, kube::Error> {
    if let Err(m) = obj.validate() {
        return Ok(Credentials::InvalidSpec(m));
    }
    let Some(parent) = parent else {
        return Ok(Credentials::NoParent(format!(
            "spec.cinderRef: Cinder {:?} does not exist",
            obj.parent()
        )));
    };
    if let (_, Err(why)) = parent {
        return Ok(Credentials::TargetClusterUnavailable(format!(
            "the parent's spec.targetClusterRef: {why}"
        )));
    }
    Ok(
        match credentials_for(&ctx.op.client, ns, obj.backend_type(), obj.rbd()).await? {
            Ok(None) => Credentials::Ready("no credentials needed".to_string()),
            Ok(Some(_)) => Credentials::Ready("the RBD key Secret is present".to_string()),
            Err(why) => Credentials::Waiting(why),
        },
    )
}

/// Ready reason of a deleted CinderBackend while its parent detaches it.
const DETACHING: &str = "Detaching";

/// One reconcile of one satellite.
pub async fn reconcile<S: SatelliteKind>(
    obj: Arc<S>,
    ctx: Arc<SatelliteContext>,
) -> Result<Action, SatelliteError> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let api: Api<S> = Api::namespaced(ctx.op.client.clone(), &ns);
    let cinders: Api<Cinder> = Api::namespaced(ctx.op.client.clone(), &ns);
    let parent = cinders.get_opt(obj.parent()).await?;

    if obj.meta().deletion_timestamp.is_some() {
        if let Some(f) = S::FINALIZER
            && finalizer::has(obj.as_ref(), f)
        {
            if parent.is_none() {
                let event = Event {
                    type_: EventType::Normal,
                    reason: event_reason::SERVICE_REMOVE_SKIPPED.to_string(),
                    note: Some(format!(
                        "parent Cinder {:?} is gone; the service registry went with its database",
                        obj.parent()
                    )),
                    action: "ReleaseFinalizer".to_string(),
                    secondary: None,
                };
                if let Err(e) = ctx.recorder.publish(&event, &obj.object_ref(&())).await {
                    tracing::warn!(backend = %name, error = %e, "publishing ServiceRemoveSkipped failed");
                }
                forget_actor(&ctx.op.coordinator, &actor_id(S::KIND, &ns, &name))
                    .await
                    .map_err(|e| SatelliteError::Actor(e.to_string()))?;
                finalizer::remove(&api, obj.as_ref(), f).await?;
                return Ok(Action::await_change());
            }
            // The parent's VolumeServices step runs the detach; this controller reports it.
            let detaching = [Cond::false_(
                kind::READY,
                DETACHING,
                format!(
                    "Cinder {:?} is detaching this backend (volume service, service-remove Job)",
                    obj.parent()
                ),
            )];
            let status = next_status(obj.status(), &detaching, obj.meta().generation);
            if obj.status() != Some(&status) {
                let patch = serde_json::json!({ "status": status });
                let id = actor_id(S::KIND, &ns, &name);
                let value = actor_value(
                    S::KIND,
                    &ns,
                    &name,
                    obj.parent(),
                    obj.backend_type().as_str(),
                    &status,
                );
                write_through_actor(&ctx.op.coordinator, &id, value, async {
                    api.patch_status(
                        &name,
                        &PatchParams::apply(FIELD_MANAGER),
                        &Patch::Merge(&patch),
                    )
                    .await
                    .map(|_| ())
                })
                .await
                .map_err(|e| SatelliteError::Actor(e.to_string()))?;
            }
            return Ok(Action::requeue(Requeue::RequeueSecretPolling.jittered()));
        }
        return Ok(Action::await_change());
    }
    if let Some(f) = S::FINALIZER {
        finalizer::add(&api, obj.as_ref(), f).await?;
    }

    let placement = match &parent {
        Some(p) => Some(ctx.op.targets.resolve_for(p).await?),
        None => None,
    };
    let creds = credentials(
        obj.as_ref(),
        parent.as_ref().zip(placement.as_ref()),
        &ctx,
        &ns,
    )
    .await?;
    // The projection Secrets live with the parent's children (on its target, when it has one).
    let projected = match &placement {
        None | Some(Err(_)) => false,
        Some(Ok(target)) => {
            let client = target
                .as_ref()
                .map_or_else(|| ctx.op.client.clone(), |t| t.client.clone());
            let secrets: Api<Secret> = Api::namespaced(client, &ns);
            let sel = selector(
                obj.parent(),
                &[
                    (names::LABEL_BACKEND, name.as_str()),
                    (PROJECTION_LABEL, S::PROJECTION),
                ],
            );
            !secrets
                .list_metadata(&ListParams::default().labels(&sel))
                .await?
                .items
                .is_empty()
        }
    };
    let conds = conditions_for(&creds, projected);
    let ready = conds.iter().all(|c| c.status);
    let status = next_status(obj.status(), &conds, obj.meta().generation);
    let id = actor_id(S::KIND, &ns, &name);
    let in_actor = ctx.op.coordinator.peek("backend", &id).await.is_some();
    let changed = obj.status() != Some(&status);
    if changed || !in_actor {
        let patch = serde_json::json!({ "status": status });
        let value = actor_value(
            S::KIND,
            &ns,
            &name,
            obj.parent(),
            obj.backend_type().as_str(),
            &status,
        );
        write_through_actor(&ctx.op.coordinator, &id, value, async {
            if !changed {
                return Ok(());
            }
            api.patch_status(
                &name,
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Merge(&patch),
            )
            .await
            .map(|_| ())
        })
        .await
        .map_err(|e| SatelliteError::Actor(e.to_string()))?;
    }
    Ok(if ready {
        Action::await_change()
    } else {
        // The projection backstop (the parent watch is the main wake signal).
        Action::requeue(Requeue::RequeueSecretPolling.jittered())
    })
}
