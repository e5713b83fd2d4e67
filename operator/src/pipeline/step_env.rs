//! [`StepEnv`]: what the product steps need from the operator context, which builds it and
//! hands a copy to every step of the product table.

use std::sync::Arc;

/// What the steps need from the outside.
#[derive(Clone)]
pub struct StepEnv {
    pub client: kube::Client,
    /// The management cluster's reflector stores (the steps' reads come from them).
    pub reads: crate::kube_ext::reader::ClusterStores,
    /// `--namespace`, when the operator watches one namespace only.
    pub watch_namespace: Option<String>,
    /// The operator context's device locks (so `/devices` shows the database and backend locks).
    pub device_locks: cinder_lease::DeviceLocks,
    /// The metrics the `/metrics` endpoint serves (the Job pairs).
    pub metrics: Arc<crate::metrics::Metrics>,
}
