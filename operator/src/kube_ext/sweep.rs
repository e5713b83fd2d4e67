//! Deleting what a step no longer wants: the objects a label selector finds except those to keep
//! (superseded content-addressed Secrets and ConfigMaps, VPAs), or one object if it exists (an
//! optional child whose spec block was unset).

use super::api_error::{ApiErrorExt, ExpectedRefusal};
use crate::kube_ext::reader::ClusterStores;
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use serde::de::DeserializeOwned;

/// Deletes the objects of `api` (on the children's cluster) matching `selector`, as the cached
/// reader lists them, for which `keep` is false (objects already
/// being deleted are left alone; a 404 counts as gone); returns the names deleted.
pub(crate) async fn sweep<K>(
    api: &Api<K>,
    reads: &ClusterStores,
    selector: &str,
    keep: impl Fn(&str) -> bool,
) -> Result<Vec<String>, kube::Error>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    let list = reads
        .list(api, &ListParams::default().labels(selector))
        .await?;
    let mut deleted = Vec::new();
    for item in list {
        let Some(name) = item.meta().name.clone() else {
            continue;
        };
        if keep(&name) || item.meta().deletion_timestamp.is_some() {
            continue;
        }
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => deleted.push(name),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(deleted)
}

/// Deletes `name` (with `params`) if it exists: `Ok(true)` when it was deleted, `Ok(false)`
/// when it was not there (a 404, also when its kind is not served).
pub(crate) async fn delete_if_present<K>(
    api: &Api<K>,
    name: &str,
    params: &DeleteParams,
) -> Result<bool, kube::Error>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    api.delete(name, params)
        .await
        .done_unless(ApiErrorExt::is_not_found)
}
