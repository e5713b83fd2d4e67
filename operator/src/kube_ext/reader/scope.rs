//! Which stores the reads of a running step, pass or cleanup use: a [`ReadScope`] holds the
//! management cluster's stores and those of the cluster holding the Cinder's children (the
//! same unless the Cinder names a target cluster), set for the running task with [`within`].
//! Outside a scope (a task spawned from a step, a test calling a helper directly) every read
//! goes to the API server.

use super::stores::ClusterStores;
use std::future::Future;

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

/// The stores of the cluster holding the Cinder's children, for reads of its children (empty
/// outside a scope: every read goes to the API server).
pub fn children() -> ClusterStores {
    SCOPE.try_with(|s| s.children.clone()).unwrap_or_default()
}

/// The stores of the management cluster, for reads of the Cinder, its satellites, credential
/// Secrets and MariaDB objects (empty outside a scope).
pub fn management() -> ClusterStores {
    SCOPE.try_with(|s| s.management.clone()).unwrap_or_default()
}
