//! Adding and removing finalizers with a merge patch that carries the object's
//! `resourceVersion`, so a concurrent edit of the list fails the patch with a conflict (and the
//! pass retries) instead of being lost.

use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;

async fn set_finalizers<K>(api: &Api<K>, obj: &K, list: Vec<String>) -> Result<(), kube::Error>
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
    .await?;
    Ok(())
}

/// Adds `finalizer` to `obj` (no-op when present).
pub async fn add<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    if has(obj, finalizer) {
        return Ok(());
    }
    let mut list = obj.finalizers().to_vec();
    list.push(finalizer.to_string());
    set_finalizers(api, obj, list).await
}

/// Removes `finalizer` from `obj` (no-op when absent).
pub async fn remove<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<(), kube::Error>
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
    set_finalizers(api, obj, list).await
}

/// True when `obj` carries `finalizer`.
pub fn has<K: Resource>(obj: &K, finalizer: &str) -> bool {
    obj.finalizers().iter().any(|f| f == finalizer)
}
