//! What the planners need to know about a Job: its state, derived from the Job status the
//! caller read (active / succeeded / failed counts and the exit code of the failed pod).

/// The state of one Job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobState {
    /// Not created yet.
    Absent,
    /// Created, not terminal.
    Running,
    Succeeded,
    /// Terminal failure; the exit code of the last failed pod when known.
    Failed {
        exit_code: Option<i32>,
    },
}

impl JobState {
    /// From the `status.succeeded` / `status.failed` counts and a `Failed` / `Complete` condition.
    pub(crate) fn from_status(complete: bool, failed: bool, exit_code: Option<i32>) -> JobState {
        if complete {
            JobState::Succeeded
        } else if failed {
            JobState::Failed { exit_code }
        } else {
            JobState::Running
        }
    }

    pub(crate) fn is_terminal(self) -> bool {
        matches!(self, JobState::Succeeded | JobState::Failed { .. })
    }
}

/// A Job as the DBPurge and upgrade-check planners see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct JobSummary {
    pub name: String,
    pub uid: String,
    pub state: JobState,
    /// Seconds since the epoch the Job was created (orders runs).
    pub created: i64,
    /// Seconds since the epoch the Job reached its terminal state, when it did.
    pub finished: Option<i64>,
}
