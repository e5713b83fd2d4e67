//! The Cinder status writer: writes through the status subresource, only when the status
//! changed, as the merge patch from the pass's snapshot to the new status (so a field a step
//! cleared is removed) guarded by the snapshot's resourceVersion (so a pass that started from a
//! stale snapshot, e.g. beside another replica's newer write, never overwrites it); and the
//! gate statuses written before the pipeline runs.

use crate::conditions::{self, Cond};
use crate::crd::{Cinder, CinderStatus};
use crate::kube_ext::{ApiErrorExt, FIELD_MANAGER};
use crate::pipeline::pass::finish_status;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::Value;

/// `cinder`'s status with `gate` set, the aggregate Ready recomputed and observedGeneration
/// stamped (used for the checks that run ahead of the steps).
pub(crate) fn gate_status(cinder: &Cinder, gate: &Cond) -> CinderStatus {
    let generation = cinder.metadata.generation;
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let mut status = cinder.status.clone().unwrap_or_default();
    conditions::set_condition(&mut status.conditions, gate, generation, &now);
    finish_status(&mut status, generation, &now);
    status
}

/// `cinder`'s status as it stands with the aggregate Ready recomputed and observedGeneration
/// stamped: what the pass that adds the finalizer writes (on a new Cinder, Ready False naming
/// every sub-condition still to come), so a Cinder never goes a pass without a status.
pub(crate) fn skeleton_status(cinder: &Cinder) -> CinderStatus {
    let generation = cinder.metadata.generation;
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let mut status = cinder.status.clone().unwrap_or_default();
    finish_status(&mut status, generation, &now);
    status
}

/// The RFC 7386 merge patch that turns `old` into `new`: members that changed carry their new
/// value (objects recursively), members that went away are `null`; arrays are replaced whole.
pub(crate) fn merge_diff(old: &Value, new: &Value) -> Value {
    let (Some(old), Some(new)) = (old.as_object(), new.as_object()) else {
        return new.clone();
    };
    let mut patch = serde_json::Map::new();
    for (key, value) in new {
        match old.get(key) {
            Some(before) if before == value => {}
            Some(before) if before.is_object() && value.is_object() => {
                patch.insert(key.clone(), merge_diff(before, value));
            }
            _ => {
                patch.insert(key.clone(), value.clone());
            }
        }
    }
    for key in old.keys() {
        if !new.contains_key(key) {
            patch.insert(key.clone(), Value::Null);
        }
    }
    Value::Object(patch)
}

/// What [`write_if_changed`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StatusWrite {
    /// The status was written.
    Written,
    /// The status was already as wanted: nothing was sent.
    Unchanged,
    /// The Cinder changed since the snapshot (409): nothing was written; a pass on the newer
    /// version decides.
    Stale,
}

/// The status patch turning `cinder`'s status into `status`, guarded by its resourceVersion.
pub(crate) fn status_patch(
    cinder: &Cinder,
    status: &CinderStatus,
) -> Result<Value, serde_json::Error> {
    let old = serde_json::to_value(cinder.status.clone().unwrap_or_default())?;
    let new = serde_json::to_value(status)?;
    Ok(serde_json::json!({
        "metadata": { "resourceVersion": cinder.resource_version() },
        "status": merge_diff(&old, &new),
    }))
}

/// Writes `status` when it differs from what `cinder` carries.
pub(crate) async fn write_if_changed(
    api: &Api<Cinder>,
    cinder: &Cinder,
    status: &CinderStatus,
) -> Result<StatusWrite, kube::Error> {
    if cinder.status.as_ref() == Some(status) {
        return Ok(StatusWrite::Unchanged);
    }
    let patch = status_patch(cinder, status).map_err(kube::Error::SerdeError)?;
    match api
        .patch_status(
            &cinder.name_any(),
            &PatchParams::apply(FIELD_MANAGER),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(StatusWrite::Written),
        Err(e) if e.is_conflict() => Ok(StatusWrite::Stale),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{UpgradePhase, VolumeServiceStatus};

    #[test]
    fn a_new_cinders_skeleton_says_not_ready_and_its_generation() {
        let mut cinder = crate::test_fixtures::cinder_named("ns", "c");
        cinder.metadata.generation = Some(3);
        cinder.status = None;
        let status = skeleton_status(&cinder);
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(status.conditions.len(), 1);
        let ready = &status.conditions[0];
        assert_eq!(
            (
                ready.type_.as_str(),
                ready.status.as_str(),
                ready.reason.as_str()
            ),
            ("Ready", "False", "NotAllReady")
        );
        assert!(ready.message.contains("SecretsReady"), "{}", ready.message);
    }

    #[test]
    fn the_diff_sets_what_changed_and_nulls_what_went_away() {
        let old = serde_json::json!({"a": 1, "b": {"x": 1, "y": 2}, "c": [1, 2], "gone": "v"});
        let new = serde_json::json!({"a": 1, "b": {"x": 1, "y": 3}, "c": [1], "added": true});
        assert_eq!(
            merge_diff(&old, &new),
            serde_json::json!({"b": {"y": 3}, "c": [1], "added": true, "gone": null})
        );
        assert_eq!(merge_diff(&new, &new), serde_json::json!({}));
        assert_eq!(merge_diff(&serde_json::json!(1), &new), new);
    }

    #[test]
    fn a_finished_upgrade_clears_its_fields_in_the_same_write_as_the_promotion() {
        let mut cinder = crate::test_fixtures::cinder_named("ns", "c");
        cinder.metadata.resource_version = Some("42".to_string());
        cinder.status = Some(CinderStatus {
            installed_release: Some("2025.2".into()),
            target_release: Some("2026.1".into()),
            upgrade_phase: Some(UpgradePhase::Contracting),
            volume_services: vec![VolumeServiceStatus {
                backend: "b".into(),
                host: "c@b".into(),
            }],
            ..Default::default()
        });
        let after = CinderStatus {
            installed_release: Some("2026.1".into()),
            ..Default::default()
        };
        let patch = status_patch(&cinder, &after).unwrap();
        assert_eq!(patch["metadata"]["resourceVersion"], "42");
        assert_eq!(patch["status"]["installedRelease"], "2026.1");
        assert!(patch["status"]["targetRelease"].is_null());
        assert!(patch["status"]["upgradePhase"].is_null());
        assert!(patch["status"]["volumeServices"].is_null());
        assert!(
            patch["status"]
                .as_object()
                .unwrap()
                .contains_key("volumeServices")
        );
    }
}
