//! Running a simulated controller over a third-party kind (a `DynamicObject` controller that
//! starts once the kind's CRD exists), and the small accessors those controllers share.

use std::future::Future;
use std::sync::Arc;

use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::kinds::Kind;
use super::runtime::{ReconcileError, Shared, drain, retry, wait_for_crd};

/// Waits for `kind`'s CRD, then runs `reconcile` over every object of the kind until aborted.
pub async fn run<C, F, Fut>(
    name: &'static str,
    shared: Arc<Shared>,
    kind: Kind,
    context: Arc<C>,
    reconcile: F,
) where
    C: Send + Sync + 'static,
    F: FnMut(Arc<DynamicObject>, Arc<C>) -> Fut,
    Fut: Future<Output = Result<Action, ReconcileError>> + Send + 'static,
{
    wait_for_crd(shared.client.clone(), &kind.crd_name()).await;
    let resource = kind.resource();
    let api: Api<DynamicObject> = Api::all_with(shared.client.clone(), &resource);
    let stream = Controller::new_with(api, watcher::Config::default(), resource)
        .reconcile_all_on(shared.triggers())
        .run(reconcile, retry, context);
    drain(&shared, name, stream).await;
}

/// The API of `kind` in the object's namespace (or cluster-wide for cluster-scoped kinds).
pub fn api_for(shared: &Shared, kind: Kind, namespace: Option<&str>) -> Api<DynamicObject> {
    let resource = kind.resource();
    match (kind.namespaced, namespace) {
        (true, Some(ns)) => Api::namespaced_with(shared.client.clone(), ns, &resource),
        _ => Api::all_with(shared.client.clone(), &resource),
    }
}

/// The object's `status`, if any.
pub fn status_of(object: &DynamicObject) -> Option<&Value> {
    object.data.get("status").filter(|s| !s.is_null())
}

/// A string at `path` under the object's `spec`.
pub fn spec_str<'a>(object: &'a DynamicObject, path: &[&str]) -> Option<&'a str> {
    let mut value = object.data.get("spec")?;
    for key in path {
        value = value.get(key)?;
    }
    value.as_str()
}

/// A key identifying the object for delay timers.
pub fn timer_key(object: &DynamicObject) -> String {
    object.uid().unwrap_or_else(|| {
        format!(
            "{}/{}",
            object.namespace().unwrap_or_default(),
            object.name_any()
        )
    })
}

/// Replaces the object's finalizers, guarded by its resourceVersion (a conflict retries).
pub async fn set_finalizers(
    api: &Api<DynamicObject>,
    object: &DynamicObject,
    finalizers: &[String],
) -> Result<(), ReconcileError> {
    let patch = json!({
        "metadata": {
            "resourceVersion": object.resource_version(),
            "finalizers": finalizers,
        }
    });
    api.patch(
        &object.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}
