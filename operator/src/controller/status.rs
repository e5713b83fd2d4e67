//! The Cinder status writer: writes through the status subresource, only when the status
//! changed, and computes the gate statuses written before the pipeline runs.

use crate::conditions::{self, Cond};
use crate::crd::{Cinder, CinderStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};

/// The field manager of every write the operator makes.
pub const FIELD_MANAGER: &str = "cinder-operator";

/// `cinder`'s status with `gate` set, the aggregate Ready recomputed and observedGeneration
/// stamped (used for the checks that run ahead of the steps).
pub fn gate_status(cinder: &Cinder, gate: &Cond) -> CinderStatus {
    let generation = cinder.metadata.generation;
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let mut status = cinder.status.clone().unwrap_or_default();
    conditions::set_condition(&mut status.conditions, gate, generation, &now);
    let ready = conditions::aggregate_ready(&status.conditions);
    conditions::set_condition(&mut status.conditions, &ready, generation, &now);
    status.observed_generation = generation;
    status
}

/// Writes `status` when it differs from what `cinder` carries; returns whether it wrote.
pub async fn write_if_changed(
    api: &Api<Cinder>,
    cinder: &Cinder,
    status: &CinderStatus,
) -> Result<bool, kube::Error> {
    if cinder.status.as_ref() == Some(status) {
        return Ok(false);
    }
    let patch = serde_json::json!({ "status": status });
    api.patch_status(
        &cinder.name_any(),
        &PatchParams::apply(FIELD_MANAGER),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(true)
}
