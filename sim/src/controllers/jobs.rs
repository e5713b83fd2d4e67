//! The simulated Job controller: each Job runs up to spec.parallelism pods at once, no more
//! than the completions still missing (a Job without completions is a work queue: done once one
//! pod succeeded and none runs), with the ownerReference and controller-uid / job-name labels
//! real Jobs put on their pods; the simulated scheduler and kubelet bind and start them, and
//! once a pod runs, after the delay it terminates with the exit code and termination message
//! the config chooses by Job name and attempt. Failed pods are replaced until more than
//! spec.backoffLimit (default 6) have failed; then the Job is Failed (FailureTarget + Failed,
//! reason BackoffLimitExceeded). spec.completions succeeded pods complete it
//! (SuccessCriteriaMet + Complete). spec.activeDeadlineSeconds fails a Job that runs too long
//! (DeadlineExceeded, its pods end with exit code 137); pods still running when the Job ends
//! are deleted; Terminating pods are not active and show in status.terminating, and are
//! replaced at once (podReplacementPolicy TerminatingOrFailed). spec.ttlSecondsAfterFinished
//! deletes a finished Job. Every run is recorded in [`JobRuns`], including Jobs deleted before
//! they finished. Beside a real control plane
//! ([`super::ControllersConfig::real_control_plane`]) only the pods' ends are simulated here
//! ([`end_pods_as_kubelet`]); kube-controller-manager does the rest.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams, PropagationPolicy};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

use super::config::PodOutcome;
use super::job_runs::{JobResult, JobRuns};
use super::pod_template::{Owner, pod_from_template, random_suffix};
use super::runtime::{FirstSeen, ReconcileError, Shared, drain, patch_status, retry};
use super::status::{
    Wanted, already_applied, condition_status, field, now, timestamp, workload_conditions,
};

/// Label real Jobs put on their pods: the Job's uid.
pub const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
/// Legacy form of [`CONTROLLER_UID_LABEL`].
pub const LEGACY_CONTROLLER_UID_LABEL: &str = "controller-uid";
/// Label real Jobs put on their pods: the Job's name.
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
/// Legacy form of [`JOB_NAME_LABEL`].
pub const LEGACY_JOB_NAME_LABEL: &str = "job-name";
/// Annotation the simulator puts on each pod: its attempt number (0-based).
pub const ATTEMPT_ANNOTATION: &str = "sim.cinder.c5c3.io/attempt";

const DEFAULT_BACKOFF_LIMIT: i64 = 6;

struct Context {
    shared: Arc<Shared>,
    runs: JobRuns,
    seen: FirstSeen,
}

/// Runs the Job controller until the task is aborted, recording runs into `runs`.
pub async fn run(shared: Arc<Shared>, runs: JobRuns) {
    let api: Api<Job> = Api::all(shared.client.clone());
    let context = Arc::new(Context {
        shared: Arc::clone(&shared),
        runs,
        seen: FirstSeen::default(),
    });
    let deletions = record_deletions(Api::all(shared.client.clone()), context.runs.clone());
    let pods = shared.informers.pods.subscribe();
    let stream = Controller::new(api, watcher::Config::default())
        .owns_shared_stream(pods)
        .reconcile_all_on(shared.triggers())
        .run(reconcile, retry, context);
    futures::join!(drain(&shared, "jobs", stream), deletions);
}

/// Closes the run record of every Job deleted before it finished.
async fn record_deletions(api: Api<Job>, runs: JobRuns) {
    let events = watcher::watcher(api, watcher::Config::default()).default_backoff();
    events
        .for_each(|event| {
            if let Ok(watcher::Event::Delete(job)) = &event
                && let Some(uid) = job.uid()
            {
                runs.job_deleted(&uid);
            }
            futures::future::ready(())
        })
        .await;
}

/// The terminal state a Job's status reports, if any.
pub fn terminal_result(status: Option<&Value>) -> Option<JobResult> {
    let conditions = status.and_then(|s| s.get("conditions"));
    if condition_status(conditions, "Complete") == Some("True") {
        Some(JobResult::Succeeded)
    } else if condition_status(conditions, "Failed") == Some("True") {
        Some(JobResult::Failed)
    } else {
        None
    }
}

fn pod_phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

fn is_terminal_phase(phase: &str) -> bool {
    phase == "Succeeded" || phase == "Failed"
}

fn attempt_of(pod: &Pod, fallback: usize) -> usize {
    pod.annotations()
        .get(ATTEMPT_ANNOTATION)
        .and_then(|a| a.parse().ok())
        .unwrap_or(fallback)
}

fn parse_time(value: Option<&Value>) -> Option<DateTime<Utc>> {
    let text = value?.as_str()?;
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// What the Job controller reads from one Job.
pub struct JobFacts {
    namespace: String,
    name: String,
    uid: String,
    backoff_limit: i64,
    /// None: a work queue (done once one pod succeeded and none is left running).
    completions: Option<i64>,
    parallelism: i64,
    deadline: Option<i64>,
    suspended: bool,
    previous: Option<Value>,
}

fn facts(job: &Job) -> Result<JobFacts, ReconcileError> {
    let spec = job.spec.as_ref().ok_or(ReconcileError::Missing("spec"))?;
    Ok(JobFacts {
        namespace: job
            .namespace()
            .ok_or(ReconcileError::Missing("namespace"))?,
        name: job.name_any(),
        uid: job.uid().ok_or(ReconcileError::Missing("uid"))?,
        backoff_limit: spec.backoff_limit.map_or(DEFAULT_BACKOFF_LIMIT, i64::from),
        completions: match (spec.completions, spec.parallelism) {
            (Some(n), _) => Some(i64::from(n).max(1)),
            (None, Some(_)) => None,
            (None, None) => Some(1),
        },
        parallelism: spec.parallelism.map_or(1, i64::from).max(0),
        deadline: spec.active_deadline_seconds,
        suspended: spec.suspend == Some(true),
        previous: job.status.as_ref().map(serde_json::to_value).transpose()?,
    })
}

async fn reconcile(job: Arc<Job>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let facts = facts(&job)?;
    if ctx.shared.read(|c| c.real_control_plane) {
        return end_pods_as_kubelet(&facts, &ctx).await;
    }
    if terminal_result(facts.previous.as_ref()).is_some() {
        return expire_finished(&job, &facts, &ctx).await;
    }
    if ctx.runs.is_finished(&facts.uid) {
        // Finished; the terminal status is on its way through the watch.
        return Ok(Action::await_change());
    }
    let (switch, rule) = ctx
        .shared
        .read(|c| (c.jobs.switch.clone(), c.jobs.rule_for(&facts.name).cloned()));
    if !switch.enabled || facts.suspended || job.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let run_for = rule.as_ref().and_then(|r| r.delay).unwrap_or(switch.delay);
    let pods_api: Api<Pod> = Api::namespaced(ctx.shared.client.clone(), &facts.namespace);
    let selector = format!("{CONTROLLER_UID_LABEL}={}", facts.uid);
    let mut pods: Vec<Pod> = pods_api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter(|pod| pod.owner_references().iter().any(|o| o.uid == facts.uid))
        .collect();
    pods.sort_by_key(|pod| attempt_of(pod, usize::MAX));

    let started = parse_time(facts.previous.as_ref().and_then(|s| s.get("startTime")))
        .or_else(|| ctx.runs.started(&facts.uid));
    let deadline = facts
        .deadline
        .zip(started)
        .map(|(seconds, start)| start + chrono::Duration::seconds(seconds));
    let until_deadline = deadline.map(|at| (at - Utc::now()).to_std().unwrap_or(Duration::ZERO));
    let deadline_passed = until_deadline.is_some_and(|left| left.is_zero());
    // Wake up for the deadline too, not only for the next pod to finish.
    let mut wake: Option<Duration> = until_deadline.filter(|left| !left.is_zero());
    for (index, pod) in pods.iter_mut().enumerate() {
        if is_terminal_phase(pod_phase(pod)) {
            // A pod that really ran (process node) is recorded when it is seen finished.
            if let Some((code, message)) = real_exit(pod) {
                ctx.runs
                    .pod_finished(&facts.uid, &pod.name_any(), code, &message);
            }
            continue;
        }
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let pod_uid = pod.uid().unwrap_or_else(|| pod.name_any());
        let attempt = attempt_of(pod, index);
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        if let Some(node) = node
            && super::pods::is_process_node(&ctx.shared.informers, &node).await
        {
            // Its containers really run: the node agent writes how the pod ends.
            continue;
        }
        let outcome = if deadline_passed {
            Some(PodOutcome::exit(137, "DeadlineExceeded"))
        } else if pod_phase(pod) != "Running" {
            // The kubelet has not started it yet (or it waits for what it needs): its
            // simulated run begins when it runs; the pod watch wakes this Job then.
            None
        } else {
            match ctx.seen.remaining(&pod_uid, 0, run_for) {
                None => Some(
                    rule.as_ref()
                        .map_or_else(PodOutcome::success, |r| r.outcome_for(attempt)),
                ),
                Some(left) => {
                    wake = Some(wake.map_or(left, |w| w.min(left)));
                    None
                }
            }
        };
        if let Some(outcome) = outcome {
            let status = terminated_pod_status(pod, &outcome);
            patch_status(&pods_api, &pod.name_any(), status).await?;
            ctx.runs.pod_finished(
                &facts.uid,
                &pod.name_any(),
                outcome.exit_code,
                &outcome.message,
            );
            ctx.seen.forget(&pod_uid);
            let phase = if outcome.exit_code == 0 {
                "Succeeded"
            } else {
                "Failed"
            };
            pod.status.get_or_insert_with(Default::default).phase = Some(phase.to_owned());
        }
    }

    let succeeded = count_phase(&pods, "Succeeded");
    let failed = count_phase(&pods, "Failed");
    let running: Vec<&Pod> = pods
        .iter()
        .filter(|p| !is_terminal_phase(pod_phase(p)))
        .collect();
    let terminating = running
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_some())
        .count();
    let mut active = running.len() - terminating;
    let complete = match facts.completions {
        Some(completions) => succeeded >= completions,
        None => succeeded >= 1 && active == 0,
    };
    let verdict = if complete {
        Some(Verdict::Complete)
    } else if deadline_passed {
        Some(Verdict::Failed(
            "DeadlineExceeded",
            "Job was active longer than specified deadline",
        ))
    } else if failed > facts.backoff_limit {
        Some(Verdict::Failed(
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
        ))
    } else {
        None
    };
    if verdict.is_none() {
        let wanted = pods_wanted(&facts, succeeded, active);
        for offset in 0..wanted {
            create_pod(&job, &facts, &pods_api, pods.len() + offset, &ctx.runs).await?;
        }
        if wanted > 0 {
            active += wanted;
            wake = Some(wake.map_or(run_for, |w| w.min(run_for)));
        }
    } else {
        // A finished Job's pods that still run are stopped (deleted, as the real controller does).
        for pod in running
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
        {
            match pods_api
                .delete(&pod.name_any(), &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Err(error.into()),
            }
        }
        active = 0;
    }
    // The watch cache may not show our own first status write yet: the run record knows the
    // start time.
    let mut basis = facts.previous.clone().unwrap_or_else(|| json!({}));
    if let (None, Some(started), Some(map)) = (
        field(Some(&basis), "startTime"),
        ctx.runs.started(&facts.uid),
        basis.as_object_mut(),
    ) {
        map.insert("startTime".to_owned(), Value::String(timestamp(started)));
    }
    let counts = PodCounts {
        active,
        terminating,
        succeeded,
        failed,
    };
    let status = job_status(Some(&basis), &counts, verdict.as_ref());
    if !already_applied(&status, facts.previous.as_ref()) {
        let api: Api<Job> = Api::namespaced(ctx.shared.client.clone(), &facts.namespace);
        patch_status(&api, &facts.name, status).await?;
    }
    match verdict {
        Some(verdict) => {
            ctx.runs.job_finished(&facts.uid, verdict.result());
            Ok(Action::await_change())
        }
        None => Ok(Action::requeue(
            wake.unwrap_or(run_for).max(Duration::from_millis(10)),
        )),
    }
}

/// Beside a real control plane: kube-controller-manager's Job controller creates the pods and
/// writes the Job's status, so this only ends the Job's pods that run on simulated nodes, as
/// their kubelet would: each running pod terminates after the run time with the outcome the
/// Job's rule gives for its attempt (its place among the Job's pods by creation). Every pod
/// and the Job's terminal condition go into the run record.
async fn end_pods_as_kubelet(facts: &JobFacts, ctx: &Context) -> Result<Action, ReconcileError> {
    if let Some(result) = terminal_result(facts.previous.as_ref()) {
        ctx.runs.job_finished(&facts.uid, result);
        return Ok(Action::await_change());
    }
    let (switch, rule) = ctx
        .shared
        .read(|c| (c.jobs.switch.clone(), c.jobs.rule_for(&facts.name).cloned()));
    if !switch.enabled {
        return Ok(Action::await_change());
    }
    let run_for = rule.as_ref().and_then(|r| r.delay).unwrap_or(switch.delay);
    let pods_api: Api<Pod> = Api::namespaced(ctx.shared.client.clone(), &facts.namespace);
    let selector = format!("{CONTROLLER_UID_LABEL}={}", facts.uid);
    let mut pods: Vec<Pod> = pods_api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter(|pod| pod.owner_references().iter().any(|o| o.uid == facts.uid))
        .collect();
    pods.sort_by(|a, b| {
        let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
        created(a)
            .cmp(&created(b))
            .then_with(|| a.name_any().cmp(&b.name_any()))
    });
    let mut wake: Option<Duration> = None;
    for (attempt, pod) in pods.iter().enumerate() {
        let name = pod.name_any();
        let pod_uid = pod.uid().unwrap_or_else(|| name.clone());
        if !ctx.runs.knows_pod(&facts.uid, &name) {
            ctx.runs
                .pod_started(&facts.namespace, &facts.name, &facts.uid, &name, attempt);
        }
        if is_terminal_phase(pod_phase(pod)) {
            if let Some((code, message)) = real_exit(pod) {
                ctx.runs.pod_finished(&facts.uid, &name, code, &message);
            }
            continue;
        }
        if pod.metadata.deletion_timestamp.is_some() || pod_phase(pod) != "Running" {
            continue;
        }
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        if let Some(node) = node
            && super::pods::is_process_node(&ctx.shared.informers, &node).await
        {
            continue;
        }
        match ctx.seen.remaining(&pod_uid, 0, run_for) {
            Some(left) => wake = Some(wake.map_or(left, |w| w.min(left))),
            None => {
                let outcome = rule
                    .as_ref()
                    .map_or_else(PodOutcome::success, |r| r.outcome_for(attempt));
                patch_status(&pods_api, &name, terminated_pod_status(pod, &outcome)).await?;
                ctx.runs
                    .pod_finished(&facts.uid, &name, outcome.exit_code, &outcome.message);
                ctx.seen.forget(&pod_uid);
            }
        }
    }
    Ok(wake.map_or_else(Action::await_change, |left| {
        Action::requeue(left.max(Duration::from_millis(10)))
    }))
}

/// The exit code and termination message of a finished pod's first container as its kubelet
/// wrote them, unless this controller wrote them itself (its terminated state has no
/// `containerID`, which a real runtime always sets).
fn real_exit(pod: &Pod) -> Option<(i32, String)> {
    let status = pod.status.as_ref()?.container_statuses.as_ref()?.first()?;
    status.container_id.as_ref()?;
    let terminated = status.state.as_ref()?.terminated.as_ref()?;
    Some((
        terminated.exit_code,
        terminated.message.clone().unwrap_or_default(),
    ))
}

/// When the finished Job's terminal condition was reached.
fn finished_at(status: Option<&Value>) -> Option<DateTime<Utc>> {
    let conditions = status?.get("conditions")?.as_array()?;
    conditions
        .iter()
        .filter(|c| (c["type"] == "Complete" || c["type"] == "Failed") && c["status"] == "True")
        .filter_map(|c| parse_time(c.get("lastTransitionTime")))
        .max()
}

/// Deletes a finished Job once spec.ttlSecondsAfterFinished has passed (pods go with it).
async fn expire_finished(
    job: &Job,
    facts: &JobFacts,
    ctx: &Context,
) -> Result<Action, ReconcileError> {
    let ttl = job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished);
    let (Some(ttl), Some(finished)) = (ttl, finished_at(facts.previous.as_ref())) else {
        return Ok(Action::await_change());
    };
    if !ctx.shared.read(|c| c.jobs.switch.enabled) || job.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let expiry = finished + chrono::Duration::seconds(i64::from(ttl.max(0)));
    if let Ok(left) = (expiry - Utc::now()).to_std()
        && !left.is_zero()
    {
        return Ok(Action::requeue(left));
    }
    let api: Api<Job> = Api::namespaced(ctx.shared.client.clone(), &facts.namespace);
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    match api.delete(&facts.name, &params).await {
        Ok(_) => Ok(Action::await_change()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Action::await_change()),
        Err(error) => Err(error.into()),
    }
}

/// How many new pods a running Job needs: up to `parallelism` at once, and no more than the
/// completions still missing (a work queue stops starting pods once one has succeeded).
pub fn pods_wanted(facts: &JobFacts, succeeded: i64, active: usize) -> usize {
    let remaining = match facts.completions {
        Some(completions) => (completions - succeeded).max(0),
        None if succeeded > 0 => 0,
        None => facts.parallelism,
    };
    let at_once = usize::try_from(facts.parallelism.min(remaining)).unwrap_or(0);
    at_once.saturating_sub(active)
}

fn count_phase(pods: &[Pod], phase: &str) -> i64 {
    i64::try_from(pods.iter().filter(|p| pod_phase(p) == phase).count()).unwrap_or(i64::MAX)
}

/// How a Job ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Enough pods succeeded.
    Complete,
    /// Failed with (reason, message).
    Failed(&'static str, &'static str),
}

impl Verdict {
    fn result(&self) -> JobResult {
        match self {
            Verdict::Complete => JobResult::Succeeded,
            Verdict::Failed(..) => JobResult::Failed,
        }
    }
}

fn nonzero(count: i64) -> Value {
    if count == 0 {
        Value::Null
    } else {
        json!(count)
    }
}

/// A Job's pods by state, as its status counts them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PodCounts {
    /// Running or about to (neither finished nor Terminating).
    pub active: usize,
    /// Being deleted and not finished.
    pub terminating: usize,
    /// Phase Succeeded.
    pub succeeded: i64,
    /// Phase Failed.
    pub failed: i64,
}

/// The Job status for the given pod counts and verdict.
pub fn job_status(
    previous: Option<&Value>,
    counts: &PodCounts,
    verdict: Option<&Verdict>,
) -> Value {
    let started = field(previous, "startTime").unwrap_or_else(|| Value::String(now()));
    let previous_conditions = previous.and_then(|s| s.get("conditions"));
    let active = i64::try_from(counts.active).unwrap_or(i64::MAX);
    let (succeeded, failed) = (counts.succeeded, counts.failed);
    let (conditions, completion) = match verdict {
        None => (Value::Null, Value::Null),
        Some(Verdict::Complete) => {
            let message = "Reached expected number of succeeded pods";
            let conditions = workload_conditions(
                previous_conditions,
                &[
                    Wanted::new("SuccessCriteriaMet", true, "CompletionsReached", message),
                    Wanted::new("Complete", true, "CompletionsReached", message),
                ],
                "lastProbeTime",
            );
            let completion =
                field(previous, "completionTime").unwrap_or_else(|| Value::String(now()));
            (conditions, completion)
        }
        Some(Verdict::Failed(reason, message)) => (
            workload_conditions(
                previous_conditions,
                &[
                    Wanted::new("FailureTarget", true, reason, message),
                    Wanted::new("Failed", true, reason, message),
                ],
                "lastProbeTime",
            ),
            Value::Null,
        ),
    };
    json!({
        "startTime": started,
        "active": nonzero(active),
        "ready": nonzero(active),
        "succeeded": nonzero(succeeded),
        "failed": nonzero(failed),
        "terminating": counts.terminating,
        "uncountedTerminatedPods": {},
        "completionTime": completion,
        "conditions": conditions,
    })
}

async fn create_pod(
    job: &Job,
    facts: &JobFacts,
    pods_api: &Api<Pod>,
    attempt: usize,
    runs: &JobRuns,
) -> Result<(), ReconcileError> {
    let template = job
        .spec
        .as_ref()
        .map(|spec| serde_json::to_value(&spec.template))
        .transpose()?
        .unwrap_or(Value::Null);
    let name = format!("{}-{}", facts.name, random_suffix());
    let pod = pod_manifest(&template, facts, &name, attempt);
    let pod: Pod = serde_json::from_value(pod)?;
    pods_api.create(&PostParams::default(), &pod).await?;
    runs.pod_started(&facts.namespace, &facts.name, &facts.uid, &name, attempt);
    Ok(())
}

fn pod_manifest(template: &Value, facts: &JobFacts, name: &str, attempt: usize) -> Value {
    let owner = Owner {
        api_version: "batch/v1",
        kind: "Job",
        name: &facts.name,
        uid: &facts.uid,
    };
    let attempt = attempt.to_string();
    pod_from_template(
        template,
        &facts.namespace,
        name,
        owner,
        &[
            (CONTROLLER_UID_LABEL, &facts.uid),
            (LEGACY_CONTROLLER_UID_LABEL, &facts.uid),
            (JOB_NAME_LABEL, &facts.name),
            (LEGACY_JOB_NAME_LABEL, &facts.name),
        ],
        &[(ATTEMPT_ANNOTATION, &attempt)],
    )
}

fn first_container(pod: &Pod) -> (String, String) {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.containers.first())
        .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
        .unwrap_or_default()
}

/// The status of a pod whose container ended with `outcome`.
pub fn terminated_pod_status(pod: &Pod, outcome: &PodOutcome) -> Value {
    let (container, image) = first_container(pod);
    let at = now();
    let started = pod
        .status
        .as_ref()
        .and_then(|s| serde_json::to_value(&s.start_time).ok())
        .filter(|v| !v.is_null())
        .unwrap_or_else(|| Value::String(at.clone()));
    let (phase, reason) = if outcome.exit_code == 0 {
        ("Succeeded", "Completed")
    } else {
        ("Failed", "Error")
    };
    let mut terminated = json!({
        "exitCode": outcome.exit_code,
        "reason": reason,
        "startedAt": started,
        "finishedAt": at,
    });
    // Inside a list a null would be stored as is: leave an empty message out instead.
    if let (false, Some(map)) = (outcome.message.is_empty(), terminated.as_object_mut()) {
        map.insert("message".to_owned(), json!(outcome.message));
    }
    json!({
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": at}],
        "containerStatuses": [{
            "name": container,
            "image": image,
            "imageID": "",
            "ready": false,
            "started": false,
            "restartCount": 0,
            "state": {"terminated": terminated},
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> JobFacts {
        JobFacts {
            namespace: "ns".into(),
            name: "c-db-sync".into(),
            uid: "u-1".into(),
            backoff_limit: 6,
            completions: Some(1),
            parallelism: 1,
            deadline: None,
            suspended: false,
            previous: None,
        }
    }

    #[test]
    fn pods_carry_job_labels_owner_and_template() {
        let template = json!({
            "metadata": {"labels": {"app": "cinder"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "sync", "image": "img:1"}]}
        });
        let pod = pod_manifest(&template, &facts(), "c-db-sync-abcde", 1);
        let labels = &pod["metadata"]["labels"];
        assert_eq!(labels["app"], "cinder");
        assert_eq!(labels[CONTROLLER_UID_LABEL], "u-1");
        assert_eq!(labels[LEGACY_CONTROLLER_UID_LABEL], "u-1");
        assert_eq!(labels[JOB_NAME_LABEL], "c-db-sync");
        assert_eq!(labels[LEGACY_JOB_NAME_LABEL], "c-db-sync");
        assert_eq!(pod["metadata"]["ownerReferences"][0]["uid"], "u-1");
        assert_eq!(pod["metadata"]["annotations"][ATTEMPT_ANNOTATION], "1");
        assert_eq!(pod["spec"]["containers"][0]["name"], "sync");
        let typed: Pod = serde_json::from_value(pod).unwrap();
        assert_eq!(attempt_of(&typed, 9), 1);
    }

    #[test]
    fn terminated_status_reports_exit_code_and_message() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i"}]}
        }))
        .unwrap();
        let failed = terminated_pod_status(&pod, &PodOutcome::exit(2, "check failed"));
        assert_eq!(failed["phase"], "Failed");
        let terminated = &failed["containerStatuses"][0]["state"]["terminated"];
        assert_eq!(terminated["exitCode"], 2);
        assert_eq!(terminated["message"], "check failed");
        assert_eq!(terminated["reason"], "Error");
        let ok = terminated_pod_status(&pod, &PodOutcome::success());
        assert_eq!(ok["phase"], "Succeeded");
        assert!(
            ok["containerStatuses"][0]["state"]["terminated"]
                .get("message")
                .is_none()
        );
        let typed: k8s_openapi::api::core::v1::PodStatus = serde_json::from_value(failed).unwrap();
        assert_eq!(typed.phase.as_deref(), Some("Failed"));
    }

    #[test]
    fn parallelism_bounds_the_pods_at_once_and_completions_the_total() {
        let mut f = facts();
        f.completions = Some(5);
        f.parallelism = 2;
        assert_eq!(pods_wanted(&f, 0, 0), 2);
        assert_eq!(pods_wanted(&f, 0, 1), 1);
        assert_eq!(pods_wanted(&f, 4, 0), 1);
        assert_eq!(pods_wanted(&f, 5, 0), 0);
        f.completions = None;
        f.parallelism = 3;
        assert_eq!(pods_wanted(&f, 0, 1), 2);
        assert_eq!(pods_wanted(&f, 1, 1), 0);
    }

    #[test]
    fn job_status_for_each_verdict() {
        let counts = |active, succeeded, failed| PodCounts {
            active,
            terminating: 0,
            succeeded,
            failed,
        };
        let running = job_status(None, &counts(1, 0, 1), None);
        assert_eq!(running["active"], 1);
        assert_eq!(running["failed"], 1);
        assert!(running["conditions"].is_null());
        assert_eq!(terminal_result(Some(&running)), None);

        let done = job_status(Some(&running), &counts(0, 1, 1), Some(&Verdict::Complete));
        assert_eq!(done["startTime"], running["startTime"]);
        assert!(done["active"].is_null());
        assert!(done["completionTime"].is_string());
        assert_eq!(done["conditions"][0]["type"], "SuccessCriteriaMet");
        assert_eq!(done["conditions"][1]["type"], "Complete");
        assert_eq!(terminal_result(Some(&done)), Some(JobResult::Succeeded));

        let failed = job_status(
            Some(&running),
            &counts(0, 0, 7),
            Some(&Verdict::Failed("BackoffLimitExceeded", "limit")),
        );
        assert_eq!(failed["conditions"][0]["type"], "FailureTarget");
        assert_eq!(failed["conditions"][1]["reason"], "BackoffLimitExceeded");
        assert!(failed["completionTime"].is_null());
        assert_eq!(terminal_result(Some(&failed)), Some(JobResult::Failed));
        let typed: k8s_openapi::api::batch::v1::JobStatus = serde_json::from_value(failed).unwrap();
        assert_eq!(typed.failed, Some(7));
    }
}
