//! Finding the Cinder's children: the label selector of its children and the listing of one
//! kind of them (read through the children's watch stores).

use crate::kube_ext::reader::ClusterStores;
use crate::names;
use kube::api::ListParams;
use kube::{Api, Client, Resource};

/// The label selector of `cinder`'s children carrying `extra` too.
pub fn selector(cinder_name: &str, extra: &[(&str, &str)]) -> String {
    let mut parts = vec![format!("{}={cinder_name}", names::LABEL_INSTANCE)];
    parts.push(format!("{}={}", names::LABEL_MANAGED_BY, names::MANAGED_BY));
    for (k, v) in extra {
        parts.push(format!("{k}={v}"));
    }
    parts.join(",")
}

/// The children of kind `K` of Cinder `cinder` in `namespace`, of `component` when given.
pub async fn list_children<K>(
    client: &Client,
    reads: &ClusterStores,
    namespace: &str,
    cinder: &str,
    component: Option<names::Component>,
) -> Result<Vec<K>, kube::Error>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let extra: Vec<_> = component
        .map(|c| (names::LABEL_COMPONENT, c.as_str()))
        .into_iter()
        .collect();
    reads
        .list(
            &api,
            &ListParams::default().labels(&selector(cinder, &extra)),
        )
        .await
}
