//! What the admin `/pipelines` view shows for one Cinder: the step running now, how the last
//! pass ended, when, how long it took, the requeue it asked for, and the last
//! [`HISTORY_LEN`] finished passes with each step's duration and condition. Plain data updated
//! by the Cinder's pipeline actor, which owns it; only step names, reasons, messages and times
//! are kept, never a value read from a Secret (condition messages never carry one).

use crate::conditions::Cond;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::time::Duration;

/// How many finished passes a record keeps.
pub const HISTORY_LEN: usize = 20;

/// One step run of a finished pass, with the condition it produced. Read back leniently (a
/// missing field takes its default), as the admin pages read `/pipelines`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StepRecord {
    pub step: String,
    pub duration_ms: u64,
    /// "True", "False" or "Unknown" (no condition of the step's type).
    pub status: String,
    pub reason: String,
    pub message: String,
}

impl StepRecord {
    /// The run of `step` that took `duration` and produced `condition`.
    pub fn new(step: &str, duration: Duration, condition: Option<&Cond>) -> Self {
        StepRecord {
            step: step.to_string(),
            duration_ms: millis(duration),
            status: match condition {
                Some(c) if c.status => "True",
                Some(_) => "False",
                None => "Unknown",
            }
            .to_string(),
            reason: condition.map(|c| c.reason.to_string()).unwrap_or_default(),
            message: condition.map(|c| c.message.clone()).unwrap_or_default(),
        }
    }
}

/// One finished pass.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PassRecord {
    /// RFC 3339 time the pass started (milliseconds).
    pub started_at: String,
    pub duration_ms: u64,
    pub outcome: String,
    pub requeue_seconds: Option<f64>,
    /// The steps that ran, lane first, then the group.
    pub steps: Vec<StepRecord>,
}

/// One Cinder's entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PipelineRecord {
    pub namespace: String,
    pub name: String,
    /// The step running now (`None` between passes).
    pub current_step: Option<String>,
    /// True while a pass runs.
    pub in_pass: bool,
    /// How the last pass ended (e.g. `completed`, `stopped at Secrets, requeue after 15s`).
    pub last_outcome: Option<String>,
    /// RFC 3339 time the last pass ended (seconds).
    pub last_pass_at: Option<String>,
    /// The nominal requeue the last pass asked for, in seconds.
    pub last_requeue_seconds: Option<f64>,
    /// Wall time of the last finished pass.
    pub last_pass_duration_ms: Option<u64>,
    /// Passes finished since the operator started.
    pub passes: u64,
    /// The last finished passes, newest first.
    pub history: VecDeque<PassRecord>,
}

/// How a pass ended, as the record keeps it.
#[derive(Clone, Debug, PartialEq)]
pub struct PassSummary {
    pub outcome: String,
    pub requeue: Option<Duration>,
    pub steps: Vec<StepRecord>,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn rfc3339(t: chrono::DateTime<chrono::Utc>, precision: chrono::SecondsFormat) -> String {
    t.to_rfc3339_opts(precision, true)
}

impl PipelineRecord {
    /// An empty record of `namespace/name`.
    pub fn new(namespace: &str, name: &str) -> Self {
        PipelineRecord {
            namespace: namespace.to_string(),
            name: name.to_string(),
            ..Default::default()
        }
    }

    /// A pass starts.
    pub fn pass_started(&mut self) {
        self.in_pass = true;
        self.current_step = None;
    }

    /// A step of the running pass starts.
    pub fn step_started(&mut self, step: &str) {
        if self.in_pass {
            self.current_step = Some(step.to_string());
        }
    }

    /// A pass that started at `started_at` and took `duration` ended as `summary`.
    pub fn pass_finished(
        &mut self,
        started_at: chrono::DateTime<chrono::Utc>,
        duration: Duration,
        summary: PassSummary,
    ) {
        let ended_at = started_at + chrono::Duration::from_std(duration).unwrap_or_default();
        let requeue_seconds = summary.requeue.map(|d| d.as_secs_f64());
        self.in_pass = false;
        self.current_step = None;
        self.last_outcome = Some(summary.outcome.clone());
        self.last_pass_at = Some(rfc3339(ended_at, chrono::SecondsFormat::Secs));
        self.last_requeue_seconds = requeue_seconds;
        self.last_pass_duration_ms = Some(millis(duration));
        self.passes += 1;
        self.history.push_front(PassRecord {
            started_at: rfc3339(started_at, chrono::SecondsFormat::Millis),
            duration_ms: millis(duration),
            outcome: summary.outcome,
            requeue_seconds,
            steps: summary.steps,
        });
        self.history.truncate(HISTORY_LEN);
    }

    /// The last finished pass's status was not written after all (its outcome becomes
    /// `outcome`, its requeue `requeue`); not a pass of its own.
    pub fn last_pass_amended(&mut self, outcome: &str, requeue: Option<Duration>) {
        let requeue_seconds = requeue.map(|d| d.as_secs_f64());
        self.last_outcome = Some(outcome.to_string());
        self.last_requeue_seconds = requeue_seconds;
        if let Some(last) = self.history.front_mut() {
            last.outcome = outcome.to_string();
            last.requeue_seconds = requeue_seconds;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conditions::{kind, reason};

    fn t0() -> chrono::DateTime<chrono::Utc> {
        chrono::DateTime::parse_from_rfc3339("2026-01-02T03:04:05Z")
            .unwrap()
            .with_timezone(&chrono::Utc)
    }

    fn summary(outcome: &str) -> PassSummary {
        PassSummary {
            outcome: outcome.to_string(),
            requeue: Some(Duration::from_secs(15)),
            steps: vec![StepRecord::new(
                "Secrets",
                Duration::from_millis(12),
                Some(&Cond::true_(
                    kind::SECRETS_READY,
                    reason::SECRETS_AVAILABLE,
                    "ok",
                )),
            )],
        }
    }

    #[test]
    fn a_pass_is_recorded_with_its_steps_and_duration() {
        let mut r = PipelineRecord::new("ns", "a");
        r.step_started("Secrets");
        assert_eq!(r.current_step, None, "no step outside a pass");
        r.pass_started();
        r.step_started("Secrets");
        assert!(r.in_pass);
        assert_eq!(r.current_step.as_deref(), Some("Secrets"));
        r.pass_finished(t0(), Duration::from_millis(1500), summary("completed"));
        assert!(!r.in_pass);
        assert_eq!(r.current_step, None);
        assert_eq!(r.passes, 1);
        assert_eq!(r.last_outcome.as_deref(), Some("completed"));
        assert_eq!(r.last_pass_at.as_deref(), Some("2026-01-02T03:04:06Z"));
        assert_eq!(r.last_requeue_seconds, Some(15.0));
        assert_eq!(r.last_pass_duration_ms, Some(1500));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["lastPassDurationMs"], 1500);
        let pass = &json["history"][0];
        assert_eq!(pass["startedAt"], "2026-01-02T03:04:05.000Z");
        assert_eq!(pass["durationMs"], 1500);
        assert_eq!(pass["requeueSeconds"], 15.0);
        assert_eq!(
            pass["steps"][0],
            serde_json::json!({"step": "Secrets", "durationMs": 12, "status": "True",
                "reason": "SecretsAvailable", "message": "ok"})
        );
    }

    #[test]
    fn history_keeps_the_newest_twenty_and_amends_the_last() {
        let mut r = PipelineRecord::new("ns", "a");
        for i in 0..25 {
            r.pass_started();
            r.pass_finished(
                t0(),
                Duration::from_millis(i),
                summary(&format!("pass {i}")),
            );
        }
        assert_eq!(r.passes, 25);
        assert_eq!(r.history.len(), HISTORY_LEN);
        assert_eq!(r.history[0].outcome, "pass 24");
        assert_eq!(r.history[HISTORY_LEN - 1].outcome, "pass 5");
        r.last_pass_amended("not written", Some(Duration::from_secs(1)));
        assert_eq!(r.passes, 25);
        assert_eq!(r.history[0].outcome, "not written");
        assert_eq!(r.history[0].requeue_seconds, Some(1.0));
        assert_eq!(r.last_outcome.as_deref(), Some("not written"));
    }

    #[test]
    fn a_step_without_its_condition_is_unknown() {
        let s = StepRecord::new("HPA", Duration::from_micros(1500), None);
        assert_eq!(
            (s.status.as_str(), s.duration_ms, s.reason.as_str()),
            ("Unknown", 1, "")
        );
    }
}
