//! DBPurge resolution: the effective settings of the `{name}-db-purge`
//! CronJob (`cinder-manage db purge <retentionDays>`, ConcurrencyPolicy Forbid,
//! activeDeadlineSeconds 3600) and DBPurgeReady from the newest terminal Job the CronJob spawned;
//! a suspended purge stays True under DBPurgeSuspended.

use super::job::{JobState, JobSummary};
use crate::conditions::{Cond, kind, reason};
use crate::crd::cinder::DbPurgeSpec;

/// A wedged run is terminated after this many seconds.
pub(crate) const ACTIVE_DEADLINE_SECONDS: i64 = 3600;
/// Never overlap runs.
pub(crate) const CONCURRENCY_POLICY: &str = "Forbid";

/// The settings the CronJob is projected with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EffectiveDbPurge {
    pub retention_days: i32,
    pub schedule: String,
    pub suspend: bool,
    /// The container command: the age is its whole argument list.
    pub command: Vec<String>,
    pub concurrency_policy: &'static str,
    pub active_deadline_seconds: i64,
}

/// Resolves `spec.dbPurge` (defaults: 30 days, `1 0 * * *`, not suspended).
pub(crate) fn effective_db_purge(spec: &DbPurgeSpec) -> EffectiveDbPurge {
    let d = DbPurgeSpec::default();
    let retention_days = if spec.retention_days >= 1 {
        spec.retention_days
    } else {
        d.retention_days
    };
    let schedule = if spec.schedule.split_whitespace().count() == 5 {
        spec.schedule.clone()
    } else {
        d.schedule
    };
    EffectiveDbPurge {
        retention_days,
        schedule,
        suspend: spec.suspend,
        command: vec![
            "cinder-manage".into(),
            "db".into(),
            "purge".into(),
            retention_days.to_string(),
        ],
        concurrency_policy: CONCURRENCY_POLICY,
        active_deadline_seconds: ACTIVE_DEADLINE_SECONDS,
    }
}

/// The newest Job that reached a terminal state (by finish time, then creation).
pub(crate) fn newest_terminal(jobs: &[JobSummary]) -> Option<&JobSummary> {
    jobs.iter()
        .filter(|j| j.state.is_terminal())
        .max_by_key(|j| (j.finished.unwrap_or(j.created), j.created))
}

/// DBPurgeReady for the effective settings and the Jobs carrying the Cinder's common labels.
pub(crate) fn db_purge_condition(effective: &EffectiveDbPurge, jobs: &[JobSummary]) -> Cond {
    if effective.suspend {
        return Cond::true_(
            kind::DB_PURGE_READY,
            reason::DB_PURGE_SUSPENDED,
            "purge suspended by spec.dbPurge.suspend",
        );
    }
    match newest_terminal(jobs) {
        Some(JobSummary {
            name,
            state: JobState::Failed { .. },
            ..
        }) => Cond::false_(
            kind::DB_PURGE_READY,
            reason::DB_PURGE_JOB_FAILED,
            format!("purge Job {name} failed; a later successful run clears this"),
        ),
        Some(JobSummary { name, .. }) => Cond::true_(
            kind::DB_PURGE_READY,
            reason::DB_PURGE_SCHEDULED,
            format!(
                "scheduled {}; last run {name} succeeded",
                effective.schedule
            ),
        ),
        None => Cond::true_(
            kind::DB_PURGE_READY,
            reason::DB_PURGE_SCHEDULED,
            format!("scheduled {}", effective.schedule),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(name: &str, state: JobState, created: i64, finished: Option<i64>) -> JobSummary {
        JobSummary {
            name: name.into(),
            uid: format!("u-{name}"),
            state,
            created,
            finished,
        }
    }

    #[test]
    fn defaults_and_command() {
        let e = effective_db_purge(&DbPurgeSpec::default());
        assert_eq!(
            (e.retention_days, e.schedule.as_str(), e.suspend),
            (30, "1 0 * * *", false)
        );
        assert_eq!(e.command, ["cinder-manage", "db", "purge", "30"]);
        assert_eq!(
            (e.concurrency_policy, e.active_deadline_seconds),
            ("Forbid", 3600)
        );
        let e = effective_db_purge(&DbPurgeSpec {
            retention_days: 0,
            schedule: "bad".into(),
            suspend: true,
        });
        assert_eq!(
            (e.retention_days, e.schedule.as_str(), e.suspend),
            (30, "1 0 * * *", true)
        );
    }

    #[test]
    fn newest_terminal_run_decides() {
        let e = effective_db_purge(&DbPurgeSpec::default());
        let failed_then_ok = [
            job(
                "p-1",
                JobState::Failed { exit_code: Some(1) },
                100,
                Some(200),
            ),
            job("p-2", JobState::Succeeded, 300, Some(400)),
            job("p-3", JobState::Running, 500, None),
        ];
        let c = db_purge_condition(&e, &failed_then_ok);
        assert_eq!((c.status, c.reason), (true, "DBPurgeScheduled"));
        let ok_then_failed = [
            job("p-1", JobState::Succeeded, 100, Some(200)),
            job("p-2", JobState::Failed { exit_code: None }, 300, Some(3900)),
        ];
        let c = db_purge_condition(&e, &ok_then_failed);
        assert_eq!((c.status, c.reason), (false, "DBPurgeJobFailed"));
        assert!(c.message.contains("p-2"));
        let c = db_purge_condition(&e, &[]);
        assert_eq!((c.status, c.reason), (true, "DBPurgeScheduled"));
    }

    #[test]
    fn suspended_stays_true() {
        let e = effective_db_purge(&DbPurgeSpec {
            suspend: true,
            ..DbPurgeSpec::default()
        });
        let c = db_purge_condition(
            &e,
            &[job("p", JobState::Failed { exit_code: None }, 1, Some(2))],
        );
        assert_eq!((c.status, c.reason), (true, "DBPurgeSuspended"));
    }
}
