//! What the admin pages show, read from the admin sources: each Cinder with its pipeline record
//! (the `/pipelines` JSON, read leniently: `history` and `lastPassDurationMs` may be absent), its
//! conditions, and which step of the lane and group it is on or waits in.

use crate::crd::{Cinder, CinderBackend};
use crate::pipeline::{GROUP, LANE, PipelineRecord, StepName};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use serde_json::Value;
use std::collections::BTreeMap;

/// The rows of a `/pipelines` value (entries that do not parse are skipped).
pub(crate) fn pipeline_rows(value: &Value) -> Vec<PipelineRecord> {
    value
        .get("pipelines")
        .and_then(Value::as_array)
        .map(|rows| {
            rows.iter()
                .filter_map(|r| serde_json::from_value(r.clone()).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// How one step stands: from the newest pass that ran it, else from its condition.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StepState {
    pub step: &'static str,
    pub condition_type: &'static str,
    pub in_group: bool,
    /// `True`, `False` or `Unknown` (not run, no condition).
    pub status: String,
    pub reason: String,
    pub message: String,
    /// Its duration in the newest pass that ran it.
    pub duration_ms: Option<f64>,
    /// The step running right now.
    pub running: bool,
}

/// A Cinder as the pages show it.
#[derive(Clone, Debug, Default)]
pub(crate) struct CinderView {
    pub namespace: String,
    pub name: String,
    /// Its labels (`metadata.labels`), sorted by key.
    pub labels: BTreeMap<String, String>,
    pub conditions: Vec<Condition>,
    pub upgrade_phase: Option<String>,
    pub installed_release: Option<String>,
    pub target_release: Option<String>,
    /// The database device (lock id) of the Cinder.
    pub database_device: Option<String>,
    /// Its CinderBackends' names.
    pub backends: Vec<String>,
    pub pipeline: PipelineRecord,
}

impl CinderView {
    /// The condition of type `type_`.
    pub(crate) fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    /// Ready's status and reason (`Unknown` before the first status).
    pub(crate) fn ready(&self) -> (String, String, String) {
        self.condition(crate::conditions::kind::READY).map_or_else(
            || {
                (
                    "Unknown".to_string(),
                    "NoStatusYet".to_string(),
                    String::new(),
                )
            },
            |c| (c.status.clone(), c.reason.clone(), c.message.clone()),
        )
    }

    /// Every step of the lane and the group, in table order, with how it stands.
    pub(crate) fn steps(&self) -> Vec<StepState> {
        let running = self
            .pipeline
            .in_pass
            .then(|| self.pipeline.current_step.clone())
            .flatten();
        LANE.iter()
            .chain(GROUP.iter())
            .map(|&s| self.step_state(s, running.as_deref()))
            .collect()
    }

    fn step_state(&self, step: StepName, running: Option<&str>) -> StepState {
        let name = step.as_str();
        let recorded = self
            .pipeline
            .history
            .iter()
            .find_map(|p| p.steps.iter().find(|r| r.step == name));
        let (status, reason, message, duration_ms) = match recorded {
            Some(r) => (
                r.status.clone(),
                r.reason.clone(),
                r.message.clone(),
                Some(r.duration_ms as f64),
            ),
            None => match self.condition(step.condition_type()) {
                Some(c) => (c.status.clone(), c.reason.clone(), c.message.clone(), None),
                None => (
                    "Unknown".to_string(),
                    "NotRun".to_string(),
                    String::new(),
                    None,
                ),
            },
        };
        StepState {
            step: name,
            condition_type: step.condition_type(),
            in_group: step.in_group(),
            status,
            reason,
            message,
            duration_ms,
            running: running == Some(name),
        }
    }

    /// The step the Cinder is on (a pass runs it) or waits in (the first lane step that is not
    /// True, else the first group member that is not), with its reason; `None` when all are
    /// True.
    pub(crate) fn focus(&self) -> Option<(String, String)> {
        if self.pipeline.in_pass
            && let Some(step) = &self.pipeline.current_step
        {
            return Some((format!("running {step}"), String::new()));
        }
        self.steps()
            .into_iter()
            .find(|s| s.status != "True")
            .map(|s| (format!("waits in {}", s.step), s.reason))
    }
}

/// The Cinders of `cinders` and of `rows` (a Cinder the API lists without a pipeline record,
/// and a record whose Cinder is not listed, both show), sorted by namespace and name.
pub(crate) fn cinder_views(
    cinders: &[Cinder],
    backends: &[CinderBackend],
    rows: Vec<PipelineRecord>,
) -> Vec<CinderView> {
    let mut views: Vec<CinderView> = cinders
        .iter()
        .map(|c| {
            let namespace = c.namespace().unwrap_or_default();
            let name = c.name_any();
            let status = c.status.clone().unwrap_or_default();
            CinderView {
                database_device: Some(cinder_lease::devices::database(
                    &namespace,
                    &c.spec.database.database,
                )),
                backends: backends
                    .iter()
                    .filter(|b| {
                        b.namespace().as_deref() == Some(namespace.as_str())
                            && b.spec.satellite.cinder_ref.name == name
                    })
                    .map(ResourceExt::name_any)
                    .collect(),
                namespace,
                name,
                labels: c.labels().clone(),
                conditions: status.conditions,
                upgrade_phase: status.upgrade_phase.map(|p| p.as_str().to_string()),
                installed_release: status.installed_release,
                target_release: status.target_release,
                pipeline: PipelineRecord::default(),
            }
        })
        .collect();
    for row in rows {
        match views
            .iter_mut()
            .find(|v| v.namespace == row.namespace && v.name == row.name)
        {
            Some(v) => v.pipeline = row,
            None => views.push(CinderView {
                namespace: row.namespace.clone(),
                name: row.name.clone(),
                pipeline: row,
                ..Default::default()
            }),
        }
    }
    views.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    views
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cinder(conditions: Value) -> Cinder {
        serde_json::from_value(json!({
            "apiVersion": "cinder.openstack.c5c3.io/v1alpha1", "kind": "Cinder",
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"openStackRelease": "2026.1", "image": {"repository": "r", "tag": "2026.1"},
                "database": {"clusterRef": {"name": "m"}, "secretRef": {"name": "d"}},
                "messaging": {"clusterRef": {"name": "q"}}, "serviceUser": {"secretRef": {"name": "s"}},
                "keystoneEndpoint": "https://k:5000/v3"},
            "status": {"conditions": conditions}
        }))
        .unwrap()
    }

    fn cond(type_: &str, status: &str, reason: &str) -> Value {
        json!({"type": type_, "status": status, "reason": reason, "message": "m",
            "lastTransitionTime": "2026-01-01T00:00:00Z"})
    }

    #[test]
    fn pipelines_without_history_still_read() {
        let rows = pipeline_rows(&json!({"pipelines": [
            {"namespace": "ns", "name": "c", "currentStep": null, "inPass": false, "passes": 3,
             "lastOutcome": "completed", "lastPassAt": "2026-01-01T00:00:00Z", "lastRequeueSeconds": null}
        ]}));
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].passes, 3);
        assert!(rows[0].history.is_empty());
        assert!(pipeline_rows(&json!({"error": "x"})).is_empty());
    }

    #[test]
    fn the_focus_is_the_running_step_or_the_first_that_is_not_true() {
        let c = cinder(json!([
            cond("SecretsReady", "True", "SecretsAvailable"),
            cond("BackendsReady", "True", "AllBackendsProjected"),
            cond("BackupBackendReady", "True", "NoBackupBackend"),
            cond("DatabaseReady", "False", "DatabaseProvisioning"),
            cond("Ready", "False", "NotAllReady"),
        ]));
        let views = cinder_views(&[c], &[], Vec::new());
        assert_eq!(
            views[0].focus(),
            Some((
                "waits in Database".to_string(),
                "DatabaseProvisioning".to_string()
            ))
        );
        assert_eq!(views[0].database_device.as_deref(), Some("db:ns/cinder"));
        let mut running = views[0].clone();
        running.pipeline.in_pass = true;
        running.pipeline.current_step = Some("Config".into());
        assert_eq!(
            running.focus().map(|f| f.0).as_deref(),
            Some("running Config")
        );
        let steps = running.steps();
        assert_eq!(steps.len(), 17);
        assert!(steps.iter().any(|s| s.step == "Config" && s.running));
    }

    #[test]
    fn history_wins_over_conditions_for_a_step() {
        let c = cinder(json!([cond("SecretsReady", "True", "SecretsAvailable")]));
        let rows = pipeline_rows(&json!({"pipelines": [{"namespace": "ns", "name": "c",
            "history": [{"startedAt": "t", "durationMs": 12, "outcome": "o", "requeueSeconds": null,
              "steps": [{"step": "Secrets", "durationMs": 5, "status": "False", "reason": "SecretNotFound", "message": "x"}]}]}]}));
        let views = cinder_views(&[c], &[], rows);
        let secrets = &views[0].steps()[0];
        assert_eq!(secrets.status, "False");
        assert_eq!(secrets.duration_ms, Some(5.0));
        // A record without a listed Cinder still shows.
        let orphan = cinder_views(
            &[],
            &[],
            pipeline_rows(&json!({"pipelines": [{"namespace": "a", "name": "b"}]})),
        );
        assert_eq!(orphan[0].name, "b");
    }
}
