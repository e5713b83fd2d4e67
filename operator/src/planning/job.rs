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

/// How much of a failed pod's error a condition message carries.
const ERROR_LINE_MAX: usize = 300;

/// `line` without an oslo.log prefix (`2026-12-07 12:23:37.800 32499 ERROR cinder `: date, time,
/// pid, level, logger), as the services' ContextFormatter writes it.
fn without_log_prefix(line: &str) -> &str {
    let mut rest = line.trim();
    let mut words = rest.splitn(6, ' ');
    let (Some(date), Some(time), Some(pid), Some(level), Some(_logger)) = (
        words.next(),
        words.next(),
        words.next(),
        words.next(),
        words.next(),
    ) else {
        return rest;
    };
    let is_date = date.len() == 10 && date.chars().all(|c| c.is_ascii_digit() || c == '-');
    let is_time = time.starts_with(|c: char| c.is_ascii_digit()) && time.contains(':');
    let is_pid = pid.chars().all(|c| c.is_ascii_digit());
    let is_level = level.chars().all(|c| c.is_ascii_uppercase());
    if is_date && is_time && is_pid && is_level {
        rest = words.next().unwrap_or_default();
    }
    rest.trim()
}

/// Whether `line` starts with a Python exception's qualified name and a colon
/// (`oslo_db.exception.DBConnectionError: ...`).
fn is_exception_line(line: &str) -> bool {
    let Some((name, _)) = line.split_once(": ") else {
        return false;
    };
    let last = name.rsplit('.').next().unwrap_or_default();
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        && (last.ends_with("Error") || last.ends_with("Exception") || last.ends_with("Failure"))
}

/// The error a failed container's termination message (its own, or the tail of its log under
/// `FallbackToLogsOnError`) ends with: the last line naming a Python exception, else the last
/// line, without its log prefix, at most [`ERROR_LINE_MAX`] characters; `None` when empty.
pub(crate) fn error_line(termination_message: &str) -> Option<String> {
    let lines: Vec<&str> = termination_message
        .lines()
        .map(without_log_prefix)
        .filter(|l| !l.is_empty())
        .collect();
    let line = lines
        .iter()
        .rev()
        .find(|l| is_exception_line(l))
        .or(lines.last())?;
    let mut out: String = line.chars().take(ERROR_LINE_MAX).collect();
    if line.chars().count() > ERROR_LINE_MAX {
        out.push('…');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_of_a_real_db_sync_against_an_unreachable_server() {
        // The tail of cinder 29's `cinder-manage db sync` with nothing on the port.
        let tail = "2026-12-07 12:23:37.800 32499 ERROR cinder     raise exc\n\
2026-12-07 12:23:37.800 32499 ERROR cinder oslo_db.exception.DBConnectionError: (pymysql.err.OperationalError) (2003, \"Can't connect to MySQL server on '127.0.0.1' ([Errno 111] Connection refused)\")\n\
2026-12-07 12:23:37.800 32499 ERROR cinder (Background on this error at: https://sqlalche.me/e/20/e3q8)\n\
2026-12-07 12:23:37.800 32499 ERROR cinder \n";
        assert_eq!(
            error_line(tail).as_deref(),
            Some(
                "oslo_db.exception.DBConnectionError: (pymysql.err.OperationalError) (2003, \
                 \"Can't connect to MySQL server on '127.0.0.1' ([Errno 111] Connection refused)\")"
            )
        );
    }

    #[test]
    fn without_an_exception_the_last_line_and_nothing_when_empty() {
        assert_eq!(
            error_line("starting\nsomething went wrong here\n\n").as_deref(),
            Some("something went wrong here")
        );
        assert_eq!(error_line(" \n"), None);
        let long = format!("ValueError: {}", "x".repeat(400));
        let line = error_line(&long).unwrap();
        assert_eq!(line.chars().count(), ERROR_LINE_MAX + 1);
        assert!(line.ends_with('…'));
        assert!(!is_exception_line("Traceback (most recent call last):"));
    }
}
