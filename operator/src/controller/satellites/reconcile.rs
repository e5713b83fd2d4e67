//! The reconcile both satellite controllers run: the CinderBackend finalizer (added here; the
//! VolumeServices step releases it after the detach, and this reconcile releases it with a
//! ServiceRemoveSkipped event for a backend whose parent Cinder is gone), then CredentialsReady (RBD key Secret
//! present with its key; NFS needs none; parent missing → WaitingForParent; parent's target
//! cluster unresolvable → TargetClusterUnavailable), ConfigProjected (a Deployment of the parent
//! mounts one of this satellite's projection Secrets) and Ready, written only when changed
//! through the backend actor.

use super::kind::SatelliteKind;
use super::status::{
    Credentials, actor_id, actor_value, conditions_for, forget_actor, next_status,
    write_through_actor,
};
use crate::children::projection::{PROJECTION_LABEL, credentials_for};
use crate::children::selector;
use crate::conditions::event_reason;
use crate::conditions::{Cond, kind};
use crate::context::OperatorContext;
use crate::crd::{Cinder, SatelliteStatus};
use crate::kube_ext::{FIELD_MANAGER, finalizer};
use crate::names;
use crate::pipeline::TargetCluster;
use crate::pipeline::backoff_actor::{Failed, Holding, Succeeded};
use crate::requeue::Requeue;
use crate::target_cluster::Unresolvable;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Api, ResourceExt};
use std::sync::Arc;
use std::time::Duration;

/// A satellite reconcile that failed, with its retry (`error_policy` requeues after it).
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub(crate) struct SatelliteFailed {
    #[source]
    pub error: SatelliteError,
    pub retry: Duration,
}

/// A satellite reconcile that could not finish.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SatelliteError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("{0}")]
    Actor(String),
}

/// The key of satellite `kind` `ns/name` in the satellites' back-off actor.
pub(crate) fn backoff_key(kind: &str, ns: &str, name: &str) -> String {
    format!("{kind}/{ns}/{name}")
}

fn backoff_key_of<S: SatelliteKind>(obj: &S) -> String {
    backoff_key(
        S::KIND,
        &obj.namespace().unwrap_or_default(),
        &obj.name_any(),
    )
}

/// The retry after a failed reconcile: exponential per satellite, with a ceiling
/// ([`crate::pipeline::backoff_actor`]), as the back-off actor gave it.
pub(crate) fn error_policy<S: SatelliteKind>(
    _obj: Arc<S>,
    failed: &SatelliteFailed,
    _ctx: Arc<OperatorContext>,
) -> Action {
    Action::requeue(failed.retry)
}

/// Where the parent's children live: its resolved target cluster, the management cluster
/// (`Ok(None)`), or why its target does not resolve.
type ParentPlacement = Result<Option<TargetCluster>, Unresolvable>;

async fn credentials<S: SatelliteKind>(
    obj: &S,
    parent: Option<(&Cinder, &ParentPlacement)>,
    ctx: &OperatorContext,
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
        match credentials_for(&ctx.client, &ctx.reads, ns, obj.backend_type(), obj.rbd()).await? {
            Ok(None) => Credentials::Ready("no credentials needed".to_string()),
            Ok(Some(_)) => Credentials::Ready("the RBD key Secret is present".to_string()),
            Err(why) => Credentials::Waiting(why),
        },
    )
}

/// Ready reason of a deleted CinderBackend while its parent detaches it.
const DETACHING: &str = "Detaching";

/// Writes `status` when it differs from what `obj` carries, through the backend actor (its value
/// first, then the status subresource); with `refresh_actor`, also when the actor does not hold
/// the satellite yet (then only the actor's value is written if the status is unchanged).
async fn write_status<S: SatelliteKind>(
    ctx: &OperatorContext,
    api: &Api<S>,
    obj: &S,
    status: &SatelliteStatus,
    refresh_actor: bool,
) -> Result<(), SatelliteError> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let id = actor_id(S::KIND, &ns, &name);
    let changed = obj.status() != Some(status);
    let in_actor = !refresh_actor
        || ctx
            .coordinator
            .peek(cinder_actors::Kind::Backend, &id)
            .await
            .is_some();
    if !changed && in_actor {
        return Ok(());
    }
    if !changed {
        // Only the actor would be refreshed: not for a satellite that left meanwhile (its
        // departure forgot the actor, and a pass still in flight must not bring it back).
        let live = api.get_opt(&name).await?;
        if live.is_none_or(|l| l.meta().deletion_timestamp.is_some()) {
            return Ok(());
        }
    }
    let patch = serde_json::json!({ "status": status });
    let value = actor_value(
        S::KIND,
        &ns,
        &name,
        obj.parent(),
        obj.backend_type().as_str(),
        status,
    );
    write_through_actor(&ctx.coordinator, &id, value, async {
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
    .map_err(|e| SatelliteError::Actor(e.to_string()))
}

/// A deleted satellite that holds the finalizer: released at once (ServiceRemoveSkipped) when
/// its parent Cinder is gone, else reported Detaching while the parent's VolumeServices step
/// runs the detach.
async fn on_deletion<S: SatelliteKind>(
    obj: &S,
    ctx: &OperatorContext,
    api: &Api<S>,
    parent: Option<&Cinder>,
    finalizer_name: &str,
) -> Result<Action, SatelliteError> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
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
        forget_actor(&ctx.coordinator, &actor_id(S::KIND, &ns, &name))
            .await
            .map_err(|e| SatelliteError::Actor(e.to_string()))?;
        finalizer::remove(api, obj, finalizer_name).await?;
        return Ok(Action::await_change());
    }
    let detaching = [Cond::false_(
        kind::READY,
        DETACHING,
        format!(
            "Cinder {:?} is detaching this backend (volume service, service-remove Job)",
            obj.parent()
        ),
    )];
    let status = next_status(obj.status(), &detaching, obj.meta().generation);
    write_status(ctx, api, obj, &status, false).await?;
    Ok(Action::requeue(Requeue::RequeueSecretPolling.jittered()))
}

/// Whether the parent projects this satellite: one of the parent's Deployments mounts one of
/// the satellite's projection Secrets (they live with the parent's children: on its target
/// cluster when it has one). A rendered Secret no workload mounts yet is not projected: the
/// satellite's configuration reaches no process until a Deployment mounts it.
async fn projected<S: SatelliteKind>(
    obj: &S,
    ctx: &OperatorContext,
    placement: Option<&Result<Option<TargetCluster>, Unresolvable>>,
) -> Result<bool, kube::Error> {
    let Some(Ok(target)) = placement else {
        return Ok(false);
    };
    let (client, stores) = target.as_ref().map_or_else(
        || (ctx.client.clone(), ctx.reads.clone()),
        |t| (t.client.clone(), t.stores.clone()),
    );
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let sel = selector(
        obj.parent(),
        &[
            (names::LABEL_BACKEND, name.as_str()),
            (PROJECTION_LABEL, S::PROJECTION),
        ],
    );
    let rendered: Vec<String> = stores
        .list(&secrets, &ListParams::default().labels(&sel))
        .await?
        .into_iter()
        .filter_map(|s| s.metadata.name)
        .collect();
    if rendered.is_empty() {
        return Ok(false);
    }
    let deployments: Api<Deployment> = Api::namespaced(client, &ns);
    let workloads = stores
        .list(
            &deployments,
            &ListParams::default().labels(&selector(obj.parent(), &[])),
        )
        .await?;
    Ok(mounts_any(&workloads, &rendered))
}

/// Whether one of `deployments` mounts (as a Secret volume, or in a projected volume) one of
/// the Secrets `names`.
pub(crate) fn mounts_any(deployments: &[Deployment], names: &[String]) -> bool {
    let mut mounts = crate::children::Mounts::default();
    for d in deployments {
        mounts.add_pod(d.spec.template.spec.as_ref());
    }
    mounts.secrets.iter().any(|s| names.contains(s))
}

/// One reconcile of one satellite (a success resets its failure count; an event before the
/// retry of a failed one waits for it, unless the satellite's generation changed or it is
/// being deleted).
pub(crate) async fn reconcile<S: SatelliteKind>(
    obj: Arc<S>,
    ctx: Arc<OperatorContext>,
) -> Result<Action, SatelliteFailed> {
    let key = backoff_key_of(obj.as_ref());
    let generation = obj.meta().generation;
    if obj.meta().deletion_timestamp.is_none() {
        let hold = Holding {
            key: key.clone(),
            generation,
        };
        if let Ok(Some(wait)) = ctx.satellite_backoffs.send(hold).await {
            return Ok(Action::requeue(wait));
        }
    }
    match reconcile_once(obj, ctx.clone()).await {
        Ok(action) => {
            ctx.satellite_backoffs.do_send(Succeeded(key));
            Ok(action)
        }
        Err(error) => {
            let retry = ctx
                .satellite_backoffs
                .send(Failed { key, generation })
                .await
                .map_or_else(
                    |_| crate::requeue::jittered(crate::requeue::BACKOFF_CEILING),
                    |r| r.after,
                );
            Err(SatelliteFailed { error, retry })
        }
    }
}

async fn reconcile_once<S: SatelliteKind>(
    obj: Arc<S>,
    ctx: Arc<OperatorContext>,
) -> Result<Action, SatelliteError> {
    let ns = obj.namespace().unwrap_or_default();
    // A satellite follows its Cinder's shard (`--shards`): another replica may hold it.
    if !ctx.shards.owns(&ns, obj.parent()) {
        return Ok(Action::await_change());
    }
    let api: Api<S> = Api::namespaced(ctx.client.clone(), &ns);
    let cinders: Api<Cinder> = Api::namespaced(ctx.client.clone(), &ns);
    let parent = ctx.reads.get_opt(&cinders, obj.parent()).await?;

    if obj.meta().deletion_timestamp.is_some() {
        return match S::FINALIZER {
            Some(f) if finalizer::has(obj.as_ref(), f) => {
                on_deletion(obj.as_ref(), &ctx, &api, parent.as_ref(), f).await
            }
            _ => Ok(Action::await_change()),
        };
    }
    if let Some(f) = S::FINALIZER {
        finalizer::add(&api, obj.as_ref(), f).await?;
    }

    let placement = match &parent {
        Some(p) => Some(ctx.targets.resolve_for(p).await?),
        None => None,
    };
    let creds = credentials(
        obj.as_ref(),
        parent.as_ref().zip(placement.as_ref()),
        &ctx,
        &ns,
    )
    .await?;
    let projected = projected(obj.as_ref(), &ctx, placement.as_ref()).await?;
    let conds = conditions_for(&creds, projected);
    let ready = conds.iter().all(|c| c.status);
    let status = next_status(obj.status(), &conds, obj.meta().generation);
    if !ctx.shards.owns(&ns, obj.parent()) {
        // The shard went to another replica during the reconcile: it writes from now on.
        return Ok(Action::await_change());
    }
    write_status(&ctx, &api, obj.as_ref(), &status, true).await?;
    Ok(if ready {
        Action::await_change()
    } else {
        // The projection backstop (the parent watch is the main wake signal).
        Action::requeue(Requeue::RequeueSecretPolling.jittered())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, SecretVolumeSource, Volume};

    fn mounting(secret: &str) -> Deployment {
        let mut d = Deployment::default();
        d.spec.template.spec = Some(PodSpec {
            volumes: Some(vec![Volume {
                name: "backend".into(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(secret.into()),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        });
        d
    }

    #[test]
    fn projected_means_a_deployment_mounts_a_rendered_secret() {
        let rendered = vec!["c-backend-nfs1-abc".to_string()];
        assert!(
            !mounts_any(&[], &rendered),
            "rendered but mounted by nothing"
        );
        assert!(!mounts_any(&[mounting("c-backend-nfs2-def")], &rendered));
        assert!(mounts_any(
            &[mounting("c-other"), mounting("c-backend-nfs1-abc")],
            &rendered
        ));
    }
}
