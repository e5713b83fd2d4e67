//! Events the simulated scheduler, kubelet and workload controllers record (core/v1, as their
//! real counterparts do), about the object they act on.

use chrono::Utc;
use k8s_openapi::api::core::v1::Event;
use kube::Client;
use kube::api::{Api, PostParams};
use rand::Rng;
use serde_json::{Value, json};

use super::runtime::ReconcileError;
use super::status::timestamp;

/// One event to record: `kind` is Normal or Warning, `component` the reporting controller
/// (`default-scheduler`, `kubelet`, `replicaset-controller`, ...).
#[derive(Clone, Copy, Debug)]
pub struct Note<'a> {
    pub kind: &'a str,
    pub reason: &'a str,
    pub message: &'a str,
    pub component: &'a str,
}

/// Records `note` about `object` (its apiVersion, kind and metadata are read from the JSON).
pub async fn record(client: &Client, object: &Value, note: Note<'_>) -> Result<(), ReconcileError> {
    let str_at = |p: &str| {
        object
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let namespace = match str_at("/metadata/namespace") {
        "" => "default",
        ns => ns,
    };
    let name = str_at("/metadata/name");
    let suffix: u64 = rand::rng().random();
    let at = timestamp(Utc::now());
    let event: Event = serde_json::from_value(json!({
        "metadata": {"name": format!("{name}.{suffix:016x}"), "namespace": namespace},
        "involvedObject": {
            "apiVersion": str_at("/apiVersion"),
            "kind": str_at("/kind"),
            "name": name,
            "namespace": str_at("/metadata/namespace"),
            "uid": str_at("/metadata/uid"),
            "resourceVersion": str_at("/metadata/resourceVersion"),
        },
        "type": note.kind,
        "reason": note.reason,
        "message": note.message,
        "source": {"component": note.component},
        "reportingComponent": note.component,
        "reportingInstance": "",
        "firstTimestamp": at,
        "lastTimestamp": at,
        "count": 1,
    }))?;
    Api::<Event>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &event)
        .await?;
    Ok(())
}
