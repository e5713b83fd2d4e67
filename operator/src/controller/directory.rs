//! The pipelines directory: what the admin `/pipelines` view shows for each Cinder — the step
//! running now, how the last pass ended, when it ended, the requeue it asked for. Only step
//! names, reasons and times are kept here, never a value read from a Secret.

use crate::pipeline::{Inspect, Pipelines};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// One Cinder's entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PipelineRecord {
    pub namespace: String,
    pub name: String,
    /// The step running now (`None` between passes).
    pub current_step: Option<String>,
    /// True while a pass runs.
    pub in_pass: bool,
    /// How the last pass ended (e.g. `completed`, `stopped at Secrets, requeue after 15s`).
    pub last_outcome: Option<String>,
    /// RFC 3339 time the last pass ended.
    pub last_pass_at: Option<String>,
    /// The nominal requeue the last pass asked for, in seconds.
    pub last_requeue_seconds: Option<f64>,
    /// Passes finished since the operator started.
    pub passes: u64,
}

/// The directory of every Cinder the controller has seen (sorted by namespace, name).
#[derive(Default)]
pub struct PipelineDirectory {
    records: Mutex<BTreeMap<(String, String), PipelineRecord>>,
    engine: OnceLock<actix::Addr<Pipelines>>,
}

impl std::fmt::Debug for PipelineDirectory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelineDirectory").finish_non_exhaustive()
    }
}

impl PipelineDirectory {
    fn with<R>(&self, f: impl FnOnce(&mut BTreeMap<(String, String), PipelineRecord>) -> R) -> R {
        let mut guard = match self.records.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut guard)
    }

    fn entry<'a>(
        map: &'a mut BTreeMap<(String, String), PipelineRecord>,
        namespace: &str,
        name: &str,
    ) -> &'a mut PipelineRecord {
        map.entry((namespace.to_string(), name.to_string()))
            .or_insert_with(|| PipelineRecord {
                namespace: namespace.to_string(),
                name: name.to_string(),
                ..Default::default()
            })
    }

    /// A pass of `namespace/name` starts (at `step`, or the gate before the steps).
    pub fn pass_started(&self, namespace: &str, name: &str, step: &str) {
        self.with(|m| {
            let r = Self::entry(m, namespace, name);
            r.in_pass = true;
            r.current_step = Some(step.to_string());
        });
    }

    /// A step of the running pass starts.
    pub fn step_started(&self, namespace: &str, name: &str, step: &str) {
        self.with(|m| Self::entry(m, namespace, name).current_step = Some(step.to_string()));
    }

    /// A pass ended with `outcome`, asking for `requeue`.
    pub fn pass_finished(
        &self,
        namespace: &str,
        name: &str,
        outcome: impl Into<String>,
        requeue: Option<Duration>,
    ) {
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        self.with(|m| {
            let r = Self::entry(m, namespace, name);
            r.in_pass = false;
            r.current_step = None;
            r.last_outcome = Some(outcome.into());
            r.last_pass_at = Some(now);
            r.last_requeue_seconds = requeue.map(|d| d.as_secs_f64());
            r.passes += 1;
        });
    }

    /// The Cinder is gone: drop its entry.
    pub fn forget(&self, namespace: &str, name: &str) {
        self.with(|m| m.remove(&(namespace.to_string(), name.to_string())));
    }

    /// Every record, sorted.
    pub fn records(&self) -> Vec<PipelineRecord> {
        self.with(|m| m.values().cloned().collect())
    }

    /// Lets the snapshot ask the engine which step each running pass is at.
    pub fn attach_engine(&self, engine: actix::Addr<Pipelines>) {
        let _ = self.engine.set(engine);
    }

    /// Every record, with the step each running pass is at as the engine sees it.
    pub async fn current(&self) -> Vec<PipelineRecord> {
        let views = match self.engine.get() {
            Some(engine) => engine.send(Inspect).await.unwrap_or_default(),
            None => Vec::new(),
        };
        let mut records = self.records();
        for r in &mut records {
            if !r.in_pass {
                continue;
            }
            if let Some(step) = views
                .iter()
                .find(|v| v.namespace == r.namespace && v.name == r.name)
                .and_then(|v| v.current_step.clone())
            {
                r.current_step = Some(step);
            }
        }
        records
    }

    /// The JSON the admin view shows: `{"pipelines": [PipelineRecord…]}`.
    pub async fn snapshot(&self) -> serde_json::Value {
        serde_json::json!({ "pipelines": self.current().await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_follow_passes() {
        let d = PipelineDirectory::default();
        d.pass_started("ns", "b", "Secrets");
        d.pass_started("ns", "a", "Secrets");
        d.step_started("ns", "a", "Backends");
        let r = d.records();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].name, "a");
        assert_eq!(r[0].current_step.as_deref(), Some("Backends"));
        assert!(r[0].in_pass);
        d.pass_finished("ns", "a", "completed", Some(Duration::from_secs(15)));
        let r = d.records();
        assert!(!r[0].in_pass);
        assert_eq!(r[0].current_step, None);
        assert_eq!(r[0].last_outcome.as_deref(), Some("completed"));
        assert_eq!(r[0].last_requeue_seconds, Some(15.0));
        assert_eq!(r[0].passes, 1);
        assert!(r[0].last_pass_at.is_some());
        d.forget("ns", "a");
        assert_eq!(d.records().len(), 1);
    }
}
