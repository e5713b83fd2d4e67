//! Which stores the reads of a running step, pass or cleanup use: a [`ReadScope`] holds the
//! management cluster's stores and those of the cluster holding the Cinder's children (the
//! same unless the Cinder names a target cluster), set for the running task with [`within`].
//! Outside a scope (a task spawned from a step, a test calling a helper directly) every read
//! goes to the API server.

use super::stores::ClusterStores;
use kube::api::ListParams;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;

/// The stores a task reads from.
#[derive(Clone, Debug, Default)]
pub struct ReadScope {
    /// The management cluster's (the Cinder, its satellites, credential Secrets, MariaDB
    /// objects).
    pub management: ClusterStores,
    /// The cluster holding the Cinder's children.
    pub children: ClusterStores,
}

impl ReadScope {
    /// A scope where everything lives on the management cluster.
    pub fn management(stores: &ClusterStores) -> Self {
        ReadScope {
            management: stores.clone(),
            children: stores.clone(),
        }
    }
}

tokio::task_local! {
    static SCOPE: ReadScope;
}

/// Runs `f` reading from `scope`.
pub async fn within<F: Future>(scope: ReadScope, f: F) -> F::Output {
    SCOPE.scope(scope, f).await
}

fn stores(children: bool) -> ClusterStores {
    SCOPE
        .try_with(|s| {
            if children {
                s.children.clone()
            } else {
                s.management.clone()
            }
        })
        .unwrap_or_default()
}

/// `api.get_opt(name)` of a child of the Cinder (`api` on the children's cluster), from its
/// store when the scope has one.
pub async fn get_child<K>(api: &Api<K>, name: &str) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    stores(true).get_opt(api, name).await
}

/// `api.get_opt(name)` of an object on the management cluster, from its store when the scope
/// has one.
pub async fn get_management<K>(api: &Api<K>, name: &str) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    stores(false).get_opt(api, name).await
}

/// The items of `api.list(params)` on the children's cluster, from its store when it can.
pub async fn list_children<K>(api: &Api<K>, params: &ListParams) -> Result<Vec<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    stores(true).list(api, params).await
}

/// The items of `api.list(params)` on the management cluster, from its store when it can.
pub async fn list_management<K>(api: &Api<K>, params: &ListParams) -> Result<Vec<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    stores(false).list(api, params).await
}
