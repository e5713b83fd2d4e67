//! Adding and removing finalizers with a merge patch that carries the object's
//! `resourceVersion`, so a concurrent edit of the list fails the patch with a conflict (and the
//! pass retries) instead of being lost.

use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;

async fn set_finalizers<K>(api: &Api<K>, obj: &K, list: Vec<String>) -> Result<K, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let patch = serde_json::json!({
        "metadata": { "finalizers": list, "resourceVersion": obj.resource_version() }
    });
    api.patch(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
}

/// Adds `finalizer` to `obj` (no-op when present).
pub(crate) async fn add<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    added(api, obj, finalizer).await.map(|_| ())
}

/// Adds `finalizer` to `obj`; returns the object as the patch left it (`None` when the finalizer
/// was there already and nothing was written).
pub(crate) async fn added<K>(
    api: &Api<K>,
    obj: &K,
    finalizer: &str,
) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    if has(obj, finalizer) {
        return Ok(None);
    }
    let mut list = obj.finalizers().to_vec();
    list.push(finalizer.to_string());
    set_finalizers(api, obj, list).await.map(Some)
}

/// Removes `finalizer` from `obj` (no-op when absent).
pub(crate) async fn remove<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    if !has(obj, finalizer) {
        return Ok(());
    }
    let list: Vec<String> = obj
        .finalizers()
        .iter()
        .filter(|f| *f != finalizer)
        .cloned()
        .collect();
    set_finalizers(api, obj, list).await.map(|_| ())
}

/// True when `obj` carries `finalizer`.
pub(crate) fn has<K: Resource>(obj: &K, finalizer: &str) -> bool {
    obj.finalizers().iter().any(|f| f == finalizer)
}
