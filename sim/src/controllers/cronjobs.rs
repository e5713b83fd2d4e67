//! The simulated CronJob controller: CronJobs fire on their own `spec.schedule` (a cron
//! expression, evaluated in UTC), or on an accelerated schedule instead (every N seconds from
//! the config), or when triggered through the handle, and spawn Jobs named `<cronjob>-<n>`
//! with an ownerReference to the CronJob and the jobTemplate's labels. It honours spec.suspend
//! and concurrencyPolicy (Allow, Forbid, Replace), trims finished Jobs to the history limits,
//! and maintains status.active, lastScheduleTime and lastSuccessfulTime. Each firing decision
//! is recorded so tests can see skipped runs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use chrono::{DateTime, Utc};
use futures::channel::mpsc;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams, PropagationPolicy};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::job_runs::JobResult;
use super::jobs::terminal_result;
use super::runtime::{ReconcileError, Shared, drain, patch_status, retry};
use super::status::{already_applied, field, now};

const DEFAULT_SUCCESSFUL_HISTORY: usize = 3;
const DEFAULT_FAILED_HISTORY: usize = 1;

/// What one firing of a CronJob did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FiringOutcome {
    /// A Job of this name was created.
    Spawned(String),
    /// concurrencyPolicy Forbid and a Job still active.
    SkippedForbid,
    /// spec.suspend is true.
    SkippedSuspended,
}

/// One firing of a CronJob (scheduled or triggered).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Firing {
    /// CronJob namespace.
    pub namespace: String,
    /// CronJob name.
    pub name: String,
    /// When it fired.
    pub at: DateTime<Utc>,
    /// What happened.
    pub outcome: FiringOutcome,
}

/// Triggers queued through the handle, and the record of firings.
#[derive(Clone, Debug)]
pub struct CronJobTriggers {
    pending: Arc<Mutex<HashMap<(String, String), usize>>>,
    firings: Arc<Mutex<Vec<Firing>>>,
    wake: mpsc::UnboundedSender<()>,
}

impl CronJobTriggers {
    /// New trigger state and the stream that wakes the controller when a trigger is queued.
    pub fn new() -> (Self, mpsc::UnboundedReceiver<()>) {
        let (wake, woken) = mpsc::unbounded();
        let triggers = Self {
            pending: Arc::default(),
            firings: Arc::default(),
            wake,
        };
        (triggers, woken)
    }

    /// Asks the CronJob `namespace/name` to fire once, as if its schedule came due.
    pub fn trigger(&self, namespace: &str, name: &str) {
        *self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((namespace.to_owned(), name.to_owned()))
            .or_default() += 1;
        // The receiver only goes away with the controller; then nothing is left to wake.
        let _ = self.wake.unbounded_send(());
    }

    fn take(&self, namespace: &str, name: &str) -> bool {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(namespace.to_owned(), name.to_owned()))
            .is_some_and(|n| n > 0)
    }

    fn record(&self, namespace: &str, name: &str, outcome: FiringOutcome) {
        self.firings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Firing {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                at: Utc::now(),
                outcome,
            });
    }

    /// Every firing so far, oldest first.
    pub fn firings(&self) -> Vec<Firing> {
        self.firings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

struct Context {
    shared: Arc<Shared>,
    triggers: CronJobTriggers,
    /// Per CronJob uid: when it last fired on schedule (or was first seen), and the highest
    /// Job number used.
    schedule: Mutex<HashMap<String, (Instant, u64)>>,
    /// Per CronJob uid: the last time it fired on its own `spec.schedule`.
    fired: Mutex<HashMap<String, DateTime<Utc>>>,
}

/// The first time after `after` that the cron expression `schedule` (five fields, or a macro
/// such as `@hourly`, evaluated in UTC) comes due; None when it does not parse.
pub fn next_due(schedule: &str, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let schedule = schedule.trim();
    let schedule = schedule
        .strip_prefix("CRON_TZ=")
        .or_else(|| schedule.strip_prefix("TZ="))
        .and_then(|rest| rest.split_once(' ').map(|(_, s)| s))
        .unwrap_or(schedule);
    let cron = croner::Cron::new(schedule).parse().ok()?;
    cron.find_next_occurrence(&after, false).ok()
}

fn chrono_time(
    time: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(time.0.as_second(), 0)
}

#[cfg(test)]
fn parse_time(text: Option<&str>) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text?)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// Runs the CronJob controller until the task is aborted.
pub async fn run(
    shared: Arc<Shared>,
    triggers: CronJobTriggers,
    woken: mpsc::UnboundedReceiver<()>,
) {
    let client = shared.client.clone();
    let context = Arc::new(Context {
        shared: Arc::clone(&shared),
        triggers,
        schedule: Mutex::default(),
        fired: Mutex::default(),
    });
    let stream = Controller::new(
        Api::<CronJob>::all(client.clone()),
        watcher::Config::default(),
    )
    .owns_shared_stream(shared.informers.jobs.subscribe())
    .reconcile_all_on(woken)
    .reconcile_all_on(shared.triggers())
    .run(reconcile, retry, context);
    drain(&shared, "cronjobs", stream).await;
}

/// A Job spawned by a CronJob, as the controller sees it.
#[derive(Clone, Debug)]
struct Spawned {
    name: String,
    uid: String,
    created: String,
    result: Option<JobResult>,
    completion: Option<Value>,
}

/// The number `n` of a Job named `<cronjob>-<n>`.
pub fn job_number(cronjob: &str, job: &str) -> Option<u64> {
    job.strip_prefix(cronjob)?.strip_prefix('-')?.parse().ok()
}

async fn reconcile(cronjob: Arc<CronJob>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let namespace = cronjob
        .namespace()
        .ok_or(ReconcileError::Missing("namespace"))?;
    let name = cronjob.name_any();
    let uid = cronjob.uid().ok_or(ReconcileError::Missing("uid"))?;
    let (enabled, every) = ctx
        .shared
        .read(|c| (c.cronjobs.switch.enabled, c.cronjobs.every));
    if !enabled || cronjob.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let spec = &cronjob.spec;
    let jobs_api: Api<Job> = Api::namespaced(ctx.shared.client.clone(), &namespace);
    let stored = ctx
        .shared
        .informers
        .jobs
        .owned_by(Some(&namespace), &uid, |_| true)
        .await;
    let mut spawned = spawned_jobs(stored.iter().map(AsRef::as_ref))?;

    let highest_seen = spawned
        .iter()
        .filter_map(|j| job_number(&name, &j.name))
        .max()
        .unwrap_or(0);
    let (due_on_schedule, wait) = {
        let mut schedule = ctx.schedule.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = schedule.entry(uid.clone()).or_insert((Instant::now(), 0));
        entry.1 = entry.1.max(highest_seen);
        match every {
            Some(period) => {
                let elapsed = entry.0.elapsed();
                if elapsed >= period {
                    entry.0 = Instant::now();
                    (true, Some(period))
                } else {
                    (false, Some(period - elapsed))
                }
            }
            None => {
                let status = cronjob.status.as_ref();
                let last = [
                    ctx.fired
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .get(&uid)
                        .copied(),
                    status
                        .and_then(|s| s.last_schedule_time.as_ref())
                        .and_then(chrono_time),
                    cronjob
                        .metadata
                        .creation_timestamp
                        .as_ref()
                        .and_then(chrono_time),
                ]
                .into_iter()
                .flatten()
                .max();
                on_schedule(&spec.schedule, last, Utc::now())
            }
        }
    };
    if due_on_schedule {
        ctx.fired
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(uid.clone(), Utc::now());
    }
    let triggered = ctx.triggers.take(&namespace, &name);
    let mut scheduled_now = false;
    if due_on_schedule || triggered {
        // Decide on the CronJob as it is now, not as the watch cache last saw it.
        let api: Api<CronJob> = Api::namespaced(ctx.shared.client.clone(), &namespace);
        let Some(cronjob) = api.get_opt(&name).await? else {
            return Ok(Action::await_change());
        };
        let spec = &cronjob.spec;
        // And on its Jobs as they are now: the store may still count a finished run as active.
        spawned = owned_jobs(&jobs_api, &uid).await?;
        let active: Vec<&Spawned> = spawned.iter().filter(|j| j.result.is_none()).collect();
        let policy = spec.concurrency_policy.as_deref().unwrap_or("Allow");
        if spec.suspend == Some(true) {
            ctx.triggers
                .record(&namespace, &name, FiringOutcome::SkippedSuspended);
        } else if policy == "Forbid" && !active.is_empty() {
            ctx.triggers
                .record(&namespace, &name, FiringOutcome::SkippedForbid);
        } else {
            if policy == "Replace" {
                let doomed: Vec<String> = active.iter().map(|j| j.name.clone()).collect();
                for job in doomed {
                    delete_job(&jobs_api, &job).await?;
                }
                spawned.retain(|j| j.result.is_some());
            }
            let job = spawn_job(&cronjob, &namespace, &name, &uid, &jobs_api, &ctx).await?;
            ctx.triggers
                .record(&namespace, &name, FiringOutcome::Spawned(job.name.clone()));
            spawned.push(job);
            scheduled_now = true;
        }
    }

    let limits = (
        spec.successful_jobs_history_limit
            .map_or(DEFAULT_SUCCESSFUL_HISTORY, |n| {
                usize::try_from(n).unwrap_or(0)
            }),
        spec.failed_jobs_history_limit
            .map_or(DEFAULT_FAILED_HISTORY, |n| usize::try_from(n).unwrap_or(0)),
    );
    for doomed in over_history_limits(&spawned, limits) {
        delete_job(&jobs_api, &doomed).await?;
        spawned.retain(|j| j.name != doomed);
    }

    let previous = cronjob
        .status
        .as_ref()
        .map(serde_json::to_value)
        .transpose()?;
    let status = cronjob_status(&namespace, &spawned, previous.as_ref(), scheduled_now);
    if !already_applied(&status, previous.as_ref()) {
        let api: Api<CronJob> = Api::namespaced(ctx.shared.client.clone(), &namespace);
        patch_status(&api, &name, status).await?;
    }
    Ok(wait.map_or_else(Action::await_change, Action::requeue))
}

/// Whether a CronJob last run at `last` is due at `now` on `schedule`, and how long until it
/// is next due.
fn on_schedule(
    schedule: &str,
    last: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> (bool, Option<std::time::Duration>) {
    let Some(next) = last.and_then(|last| next_due(schedule, last)) else {
        return (false, None);
    };
    if next <= now {
        let wait = next_due(schedule, now).and_then(|n| (n - now).to_std().ok());
        (true, wait)
    } else {
        (false, (next - now).to_std().ok())
    }
}

/// The Jobs of the CronJob `uid` as the API server has them now.
async fn owned_jobs(api: &Api<Job>, uid: &str) -> Result<Vec<Spawned>, ReconcileError> {
    let listed = api.list(&ListParams::default()).await?.items;
    spawned_jobs(
        listed
            .iter()
            .filter(|job| job.owner_references().iter().any(|o| o.uid == uid)),
    )
}

/// `jobs` as the controller sees them, oldest first.
fn spawned_jobs<'a>(
    owned: impl IntoIterator<Item = &'a Job>,
) -> Result<Vec<Spawned>, ReconcileError> {
    let mut jobs = Vec::new();
    for job in owned {
        let status = job.status.as_ref().map(serde_json::to_value).transpose()?;
        let created = job
            .metadata
            .creation_timestamp
            .as_ref()
            .and_then(|t| serde_json::to_value(t).ok())
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        jobs.push(Spawned {
            name: job.name_any(),
            uid: job.uid().unwrap_or_default(),
            created,
            result: terminal_result(status.as_ref()),
            completion: status
                .as_ref()
                .and_then(|s| s.get("completionTime"))
                .cloned(),
        });
    }
    jobs.sort_by(|a, b| (&a.created, &a.name).cmp(&(&b.created, &b.name)));
    Ok(jobs)
}

async fn delete_job(api: &Api<Job>, name: &str) -> Result<(), ReconcileError> {
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error.into()),
    }
}

async fn spawn_job(
    cronjob: &CronJob,
    namespace: &str,
    name: &str,
    uid: &str,
    api: &Api<Job>,
    ctx: &Context,
) -> Result<Spawned, ReconcileError> {
    let template = serde_json::to_value(&cronjob.spec.job_template)?;
    loop {
        let number = {
            let mut schedule = ctx.schedule.lock().unwrap_or_else(PoisonError::into_inner);
            let entry = schedule
                .entry(uid.to_owned())
                .or_insert((Instant::now(), 0));
            entry.1 += 1;
            entry.1
        };
        let job_name = format!("{name}-{number}");
        let manifest: Job =
            serde_json::from_value(job_manifest(&template, namespace, name, uid, &job_name))?;
        match api.create(&PostParams::default(), &manifest).await {
            Ok(created) => {
                return Ok(Spawned {
                    name: job_name,
                    uid: created.uid().unwrap_or_default(),
                    created: now(),
                    result: None,
                    completion: None,
                });
            }
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(error) => return Err(error.into()),
        }
    }
}

/// The Job a CronJob spawns from its jobTemplate.
pub fn job_manifest(
    template: &Value,
    namespace: &str,
    cronjob: &str,
    uid: &str,
    job_name: &str,
) -> Value {
    let metadata = template.get("metadata");
    let labels = metadata
        .and_then(|m| m.get("labels"))
        .cloned()
        .unwrap_or_else(|| json!({}));
    let annotations = metadata
        .and_then(|m| m.get("annotations"))
        .cloned()
        .unwrap_or_else(|| json!({}));
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name,
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [{
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "name": cronjob,
                "uid": uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": template.get("spec").cloned().unwrap_or_else(|| json!({})),
    })
}

/// The names of the finished Jobs beyond the (successful, failed) history limits, oldest first.
fn over_history_limits(jobs: &[Spawned], (successful, failed): (usize, usize)) -> Vec<String> {
    let pick = |result: JobResult, keep: usize| {
        let finished: Vec<&Spawned> = jobs.iter().filter(|j| j.result == Some(result)).collect();
        let extra = finished.len().saturating_sub(keep);
        finished
            .into_iter()
            .take(extra)
            .map(|j| j.name.clone())
            .collect::<Vec<_>>()
    };
    let mut doomed = pick(JobResult::Succeeded, successful);
    doomed.extend(pick(JobResult::Failed, failed));
    doomed
}

fn cronjob_status(
    namespace: &str,
    jobs: &[Spawned],
    previous: Option<&Value>,
    scheduled_now: bool,
) -> Value {
    let active: Vec<Value> = jobs
        .iter()
        .filter(|j| j.result.is_none())
        .map(|j| {
            json!({
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": j.name,
                "namespace": namespace,
                "uid": j.uid,
            })
        })
        .collect();
    let last_schedule = if scheduled_now {
        Some(Value::String(now()))
    } else {
        field(previous, "lastScheduleTime")
    };
    let newest_success = jobs
        .iter()
        .filter(|j| j.result == Some(JobResult::Succeeded))
        .filter_map(|j| j.completion.clone())
        .filter_map(|v| v.as_str().map(str::to_owned))
        .max();
    let last_success = newest_success
        .map(Value::String)
        .or_else(|| field(previous, "lastSuccessfulTime"));
    let mut status = json!({
        "active": if active.is_empty() { Value::Null } else { Value::Array(active) },
    });
    // Times not known here (the watch cache may lag our own last write) are left as they are.
    for (key, value) in [
        ("lastScheduleTime", last_schedule),
        ("lastSuccessfulTime", last_success),
    ] {
        if let (Some(value), Some(map)) = (value, status.as_object_mut()) {
            map.insert(key.to_owned(), value);
        }
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spawned(name: &str, result: Option<JobResult>, completion: Option<&str>) -> Spawned {
        Spawned {
            name: name.into(),
            uid: format!("uid-{name}"),
            created: name.into(),
            result,
            completion: completion.map(|c| json!(c)),
        }
    }

    #[test]
    fn schedules_come_due_as_cron_says() {
        let at = |text: &str| parse_time(Some(text)).unwrap();
        let t0 = at("2026-12-01T10:00:30Z");
        assert_eq!(
            next_due("*/5 * * * *", t0),
            Some(at("2026-12-01T10:05:00Z"))
        );
        assert_eq!(next_due("@hourly", t0), Some(at("2026-12-01T11:00:00Z")));
        assert_eq!(
            next_due("TZ=UTC 0 0 * * *", t0),
            Some(at("2026-12-02T00:00:00Z"))
        );
        assert_eq!(next_due("not a schedule", t0), None);
        let (due, wait) = on_schedule("* * * * *", Some(t0), at("2026-12-01T10:01:10Z"));
        assert!(due);
        assert_eq!(wait, Some(std::time::Duration::from_secs(50)));
        let (due, wait) = on_schedule("* * * * *", Some(t0), at("2026-12-01T10:00:40Z"));
        assert!(!due);
        assert_eq!(wait, Some(std::time::Duration::from_secs(20)));
        assert_eq!(on_schedule("bad", Some(t0), t0), (false, None));
    }

    #[test]
    fn job_numbers_parse_only_own_names() {
        assert_eq!(job_number("purge", "purge-12"), Some(12));
        assert_eq!(job_number("purge", "purge-x"), None);
        assert_eq!(job_number("purge", "other-1"), None);
        assert_eq!(job_number("purge", "purge-db-1"), None);
    }

    #[test]
    fn spawned_job_copies_template_labels_and_owner() {
        let template = json!({
            "metadata": {"labels": {"app": "cinder"}},
            "spec": {"backoffLimit": 1, "template": {"spec": {"containers": []}}}
        });
        let job = job_manifest(&template, "ns", "c-db-purge", "u", "c-db-purge-3");
        assert_eq!(job["metadata"]["name"], "c-db-purge-3");
        assert_eq!(job["metadata"]["labels"]["app"], "cinder");
        assert_eq!(job["metadata"]["ownerReferences"][0]["kind"], "CronJob");
        assert_eq!(job["metadata"]["ownerReferences"][0]["uid"], "u");
        assert_eq!(job["spec"]["backoffLimit"], 1);
        let _: Job = serde_json::from_value(job).unwrap();
    }

    #[test]
    fn history_limits_drop_oldest_finished() {
        let jobs = [
            spawned("a-1", Some(JobResult::Succeeded), None),
            spawned("a-2", Some(JobResult::Failed), None),
            spawned("a-3", Some(JobResult::Succeeded), None),
            spawned("a-4", Some(JobResult::Failed), None),
            spawned("a-5", None, None),
        ];
        assert_eq!(over_history_limits(&jobs, (1, 1)), ["a-1", "a-2"]);
        assert!(over_history_limits(&jobs, (3, 2)).is_empty());
    }

    #[test]
    fn status_lists_active_and_newest_success() {
        let jobs = [
            spawned(
                "a-1",
                Some(JobResult::Succeeded),
                Some("2026-01-01T00:00:00Z"),
            ),
            spawned(
                "a-2",
                Some(JobResult::Succeeded),
                Some("2026-01-02T00:00:00Z"),
            ),
            spawned("a-3", None, None),
        ];
        let status = cronjob_status("ns", &jobs, None, true);
        assert_eq!(status["active"].as_array().map(Vec::len), Some(1));
        assert_eq!(status["active"][0]["name"], "a-3");
        assert_eq!(status["lastSuccessfulTime"], "2026-01-02T00:00:00Z");
        assert!(status["lastScheduleTime"].is_string());
        let idle = cronjob_status("ns", &jobs[..2], Some(&status), false);
        assert!(idle["active"].is_null());
        assert_eq!(idle["lastScheduleTime"], status["lastScheduleTime"]);
        let unknown = cronjob_status("ns", &[], None, false);
        assert!(unknown.get("lastScheduleTime").is_none());
        assert!(unknown.get("lastSuccessfulTime").is_none());
    }

    #[test]
    fn triggers_are_consumed_once_and_firings_recorded() {
        let (triggers, _woken) = CronJobTriggers::new();
        triggers.trigger("ns", "cj");
        triggers.trigger("ns", "cj");
        assert!(triggers.take("ns", "cj"));
        assert!(!triggers.take("ns", "cj"));
        triggers.record("ns", "cj", FiringOutcome::SkippedForbid);
        assert_eq!(triggers.firings()[0].outcome, FiringOutcome::SkippedForbid);
    }
}
