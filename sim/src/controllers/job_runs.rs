//! The record of Job runs the simulated Job controller keeps: one entry per Job (by uid) with
//! its start, end, result and every pod attempt, readable through the controllers handle so
//! tests can check what ran, in which order, and that runs did not overlap.

use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};

/// How a Job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobResult {
    /// Condition Complete=True.
    Succeeded,
    /// Condition Failed=True.
    Failed,
    /// The Job was deleted before it reached a terminal condition.
    Deleted,
}

/// One pod of a Job run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodAttempt {
    /// Pod name.
    pub pod: String,
    /// 0 for the first pod, 1 for the first retry, ...
    pub attempt: usize,
    /// When the simulator created the pod.
    pub started: DateTime<Utc>,
    /// When the pod terminated, if it did.
    pub finished: Option<DateTime<Utc>>,
    /// The container's exit code, once terminated.
    pub exit_code: Option<i32>,
    /// The container's termination message, once terminated.
    pub message: Option<String>,
}

/// One Job, from its first pod to its terminal condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRun {
    /// Job namespace.
    pub namespace: String,
    /// Job name.
    pub name: String,
    /// Job uid (a re-created Job of the same name is a new run).
    pub uid: String,
    /// When the first pod was created.
    pub started: DateTime<Utc>,
    /// When the Job reached a terminal condition, if it did.
    pub finished: Option<DateTime<Utc>>,
    /// The terminal result, if any.
    pub result: Option<JobResult>,
    /// Every pod, in creation order.
    pub attempts: Vec<PodAttempt>,
}

impl JobRun {
    /// Whether this run and `other` were running at the same time (an unfinished run is
    /// still running).
    pub fn overlaps(&self, other: &JobRun) -> bool {
        let before =
            |end: Option<DateTime<Utc>>, start: DateTime<Utc>| end.is_some_and(|end| end <= start);
        !(before(self.finished, other.started) || before(other.finished, self.started))
    }
}

/// Every pair of runs among `runs` that ran at the same time (each pair once, in start order).
pub fn overlapping_pairs(runs: &[JobRun]) -> Vec<(JobRun, JobRun)> {
    let mut pairs = Vec::new();
    for (i, first) in runs.iter().enumerate() {
        for second in &runs[i + 1..] {
            if first.overlaps(second) {
                pairs.push((first.clone(), second.clone()));
            }
        }
    }
    pairs
}

/// The shared, append-only record of Job runs.
#[derive(Clone, Debug, Default)]
pub struct JobRuns {
    runs: Arc<Mutex<Vec<JobRun>>>,
}

impl JobRuns {
    /// Every run recorded so far, in start order.
    pub fn snapshot(&self) -> Vec<JobRun> {
        self.runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn with_run<T>(&self, uid: &str, f: impl FnOnce(&mut JobRun) -> T) -> Option<T> {
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        runs.iter_mut().find(|run| run.uid == uid).map(f)
    }

    /// Records a new pod of the Job `uid`, creating the run on its first pod.
    pub fn pod_started(&self, namespace: &str, name: &str, uid: &str, pod: &str, attempt: usize) {
        let now = Utc::now();
        let entry = PodAttempt {
            pod: pod.to_owned(),
            attempt,
            started: now,
            finished: None,
            exit_code: None,
            message: None,
        };
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        match runs.iter_mut().find(|run| run.uid == uid) {
            Some(run) => run.attempts.push(entry),
            None => runs.push(JobRun {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                uid: uid.to_owned(),
                started: now,
                finished: None,
                result: None,
                attempts: vec![entry],
            }),
        }
    }

    /// Whether the run of the Job `uid` records the pod `pod`.
    pub fn knows_pod(&self, uid: &str, pod: &str) -> bool {
        self.with_run(uid, |run| run.attempts.iter().any(|a| a.pod == pod))
            .unwrap_or(false)
    }

    /// Records the termination of `pod` of the Job `uid` (the first record stays).
    pub fn pod_finished(&self, uid: &str, pod: &str, exit_code: i32, message: &str) {
        self.with_run(uid, |run| {
            if let Some(attempt) = run
                .attempts
                .iter_mut()
                .find(|a| a.pod == pod && a.finished.is_none())
            {
                attempt.finished = Some(Utc::now());
                attempt.exit_code = Some(exit_code);
                attempt.message = Some(message.to_owned());
            }
        });
    }

    /// Records the terminal result of the Job `uid` (the first one recorded stays).
    pub fn job_finished(&self, uid: &str, result: JobResult) {
        self.with_run(uid, |run| {
            if run.result.is_none() {
                run.result = Some(result);
                run.finished = Some(Utc::now());
            }
        });
    }

    /// Records that the Job `uid` was deleted; a run without a result ends here, and so do its
    /// unfinished pods.
    pub fn job_deleted(&self, uid: &str) {
        self.with_run(uid, |run| {
            if run.result.is_none() {
                let now = Utc::now();
                run.result = Some(JobResult::Deleted);
                run.finished = Some(now);
                for attempt in run.attempts.iter_mut().filter(|a| a.finished.is_none()) {
                    attempt.finished = Some(now);
                }
            }
        });
    }

    /// When the run of the Job `uid` started, if it did.
    pub fn started(&self, uid: &str) -> Option<DateTime<Utc>> {
        self.with_run(uid, |run| run.started)
    }

    /// Whether the Job `uid` has a recorded terminal result.
    pub fn is_finished(&self, uid: &str) -> bool {
        self.with_run(uid, |run| run.result.is_some())
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_collect_attempts_and_results() {
        let runs = JobRuns::default();
        runs.pod_started("ns", "job", "u1", "job-a", 0);
        runs.pod_finished("u1", "job-a", 2, "boom");
        runs.pod_started("ns", "job", "u1", "job-b", 1);
        runs.pod_finished("u1", "job-b", 0, "");
        runs.job_finished("u1", JobResult::Succeeded);
        runs.job_finished("u1", JobResult::Failed);
        let all = runs.snapshot();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].result, Some(JobResult::Succeeded));
        assert_eq!(all[0].attempts.len(), 2);
        assert_eq!(all[0].attempts[0].exit_code, Some(2));
        assert_eq!(all[0].attempts[0].message.as_deref(), Some("boom"));
        assert_eq!(all[0].attempts[1].attempt, 1);
        assert!(runs.is_finished("u1"));
        assert!(!runs.is_finished("u2"));
        runs.job_deleted("u1");
        assert_eq!(runs.snapshot()[0].result, Some(JobResult::Succeeded));
    }

    #[test]
    fn deleting_an_unfinished_job_closes_its_run() {
        let runs = JobRuns::default();
        runs.pod_started("ns", "job", "u1", "job-a", 0);
        runs.job_deleted("u1");
        let run = &runs.snapshot()[0];
        assert_eq!(run.result, Some(JobResult::Deleted));
        assert!(run.finished.is_some());
        assert!(run.attempts[0].finished.is_some());
        assert_eq!(run.attempts[0].exit_code, None);
    }

    fn run(start: i64, end: Option<i64>) -> JobRun {
        let at = |s: i64| DateTime::from_timestamp(s, 0).unwrap();
        JobRun {
            namespace: "ns".into(),
            name: "j".into(),
            uid: format!("{start}"),
            started: at(start),
            finished: end.map(at),
            result: None,
            attempts: Vec::new(),
        }
    }

    #[test]
    fn overlapping_pairs_lists_each_pair_once() {
        let runs = [
            run(0, Some(10)),
            run(5, Some(20)),
            run(20, Some(30)),
            run(25, None),
        ];
        let pairs: Vec<(String, String)> = overlapping_pairs(&runs)
            .into_iter()
            .map(|(a, b)| (a.uid, b.uid))
            .collect();
        assert_eq!(
            pairs,
            [("0".into(), "5".into()), ("20".into(), "25".into())]
        );
    }

    #[test]
    fn overlap_uses_open_ended_runs() {
        assert!(!run(0, Some(10)).overlaps(&run(10, Some(20))));
        assert!(run(0, Some(11)).overlaps(&run(10, Some(20))));
        assert!(run(0, None).overlaps(&run(10, Some(20))));
        assert!(!run(30, None).overlaps(&run(10, Some(20))));
        assert!(run(15, None).overlaps(&run(10, None)));
    }
}
