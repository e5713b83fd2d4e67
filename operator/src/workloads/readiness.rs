//! Why a workload's running pods are not ready, in the words of their readiness check: the
//! newest `Unhealthy` Event ("Readiness probe failed: ...") of each running, unready pod. For the
//! scheduler, volume and backup services that text is what Cinder itself records of the service
//! (the health check reads its rows of the `services` table: "cinder-volume on cinder@ceph is
//! down: last heartbeat ..."), so the condition of a workload whose Deployment lost a ready
//! replica names the service and what Cinder says of it. A pod whose container does not run says
//! why (`CrashLoopBackOff` after an `OOMKilled` run, an image that cannot be pulled). Reading the
//! pods and Events is best-effort: when they cannot be read, the condition says less, never
//! something else.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::ListParams;
use kube::{Api, Client};

/// What the kubelet writes before a failed readiness check's output.
const READINESS_FAILED: &str = "Readiness probe failed: ";
/// How long before a pod's Ready condition turned False its readiness Events still count (the
/// failures that made it turn: two checks of a period of at most 30 s).
const EPISODE: i64 = 60;

/// When `event` last happened.
fn last_seen(event: &Event) -> Option<Timestamp> {
    let series = event
        .series
        .as_ref()
        .and_then(|s| s.last_observed_time.as_ref())
        .map(|t| t.0);
    [
        series,
        event.event_time.as_ref().map(|t| t.0),
        event.last_timestamp.as_ref().map(|t| t.0),
        event.metadata.creation_timestamp.as_ref().map(|t| t.0),
    ]
    .into_iter()
    .flatten()
    .max()
}

/// When `pod`'s Ready condition turned False, if it is False.
fn unready_since(pod: &Pod) -> Option<Option<Timestamp>> {
    let status = pod.status.as_ref()?;
    if status.phase.as_deref() != Some("Running") || pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let ready = status
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?;
    (ready.status == "False").then(|| ready.last_transition_time.as_ref().map(|t| t.0))
}

/// What keeps `pod`'s containers from running: a container waiting for a reason other than
/// starting (`CrashLoopBackOff`, an image that cannot be pulled, ...), with how its last run
/// ended (`OOMKilled`, exit 137, when the memory cgroup's OOM killer ended it).
fn container_trouble(pod: &Pod) -> Option<String> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    let troubles: Vec<String> = statuses
        .iter()
        .filter_map(|c| {
            let waiting = c.state.as_ref()?.waiting.as_ref()?;
            let reason = waiting.reason.as_deref()?;
            if reason == "ContainerCreating" || reason == "PodInitializing" {
                return None;
            }
            let last = c
                .last_state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .map(|t| {
                    format!(
                        ", its last run ended {} (exit code {})",
                        t.reason.as_deref().unwrap_or("without a reason"),
                        t.exit_code
                    )
                })
                .unwrap_or_default();
            Some(format!(
                "container {} is {reason} after {} restart(s){last}",
                c.name, c.restart_count
            ))
        })
        .collect();
    (!troubles.is_empty()).then(|| troubles.join(", "))
}

/// Why a workload's pods are not ready.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NotReady {
    /// `pod P: ...` for each pod that says why.
    pub text: String,
    /// Every pod that says why runs and only its readiness check fails (for an RPC service:
    /// Cinder records it as down or disabled); no container is kept from running.
    pub checks_only: bool,
}

/// For each pod of `pods`: `pod P: <its newest readiness failure>` when it runs, is not ready and
/// its readiness check failed in `events` (the Events of those pods) around the time it turned
/// unready, or `pod P: <what keeps its containers from running>` ([`container_trouble`]); `None`
/// when no pod says anything.
pub(crate) fn unready_detail(pods: &[Pod], events: &[Event]) -> Option<NotReady> {
    let mut out = Vec::new();
    let mut checks_only = true;
    for pod in pods {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if let Some(trouble) = container_trouble(pod) {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            out.push(format!("pod {name}: {trouble}"));
            checks_only = false;
            continue;
        }
        let Some(since) = unready_since(pod) else {
            continue;
        };
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let newest = events
            .iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(name))
            .filter(|e| e.reason.as_deref() == Some("Unhealthy"))
            .filter(|e| {
                e.message
                    .as_deref()
                    .is_some_and(|m| m.starts_with(READINESS_FAILED))
            })
            .filter(|e| match (since, last_seen(e)) {
                (Some(since), Some(seen)) => seen >= since - SignedDuration::from_secs(EPISODE),
                _ => true,
            })
            .max_by_key(|e| last_seen(e));
        if let Some(message) = newest.and_then(|e| e.message.as_deref()) {
            let text = message.trim_start_matches(READINESS_FAILED).trim();
            out.push(format!("pod {name}: {text}"));
        }
    }
    (!out.is_empty()).then(|| NotReady {
        text: out.join("; "),
        checks_only,
    })
}

/// [`unready_detail`] of the pods `deployment` selects (one uncached list of pods and one of
/// their Events; `None` when either cannot be read).
pub(crate) async fn not_ready_detail(client: &Client, deployment: &Deployment) -> Option<NotReady> {
    let ns = deployment.metadata.namespace.as_deref()?;
    let labels = deployment.spec.selector.match_labels.as_ref()?;
    let selector = labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pods = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .ok()?
        .items;
    if !pods
        .iter()
        .any(|p| unready_since(p).is_some() || container_trouble(p).is_some())
    {
        return None;
    }
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let mut found = Vec::new();
    for pod in pods.iter().filter(|p| unready_since(p).is_some()) {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let params = ListParams::default().fields(&format!(
            "involvedObject.kind=Pod,involvedObject.name={name},reason=Unhealthy"
        ));
        found.extend(events.list(&params).await.ok()?.items);
    }
    unready_detail(&pods, &found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn pod(name: &str, phase: &str, ready: &str, since: i64) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "status": {"phase": phase, "conditions": [{
                "type": "Ready", "status": ready,
                "lastTransitionTime": Time(Timestamp::from_second(since).unwrap()),
            }]},
        }))
        .unwrap()
    }

    fn event(pod: &str, message: &str, at: i64) -> Event {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("{pod}.{at}")},
            "involvedObject": {"kind": "Pod", "name": pod},
            "reason": "Unhealthy",
            "message": message,
            "lastTimestamp": Time(Timestamp::from_second(at).unwrap()),
        }))
        .unwrap()
    }

    #[test]
    fn the_newest_readiness_failure_of_each_unready_pod() {
        let pods = [
            pod("v-1", "Running", "False", 1_000),
            pod("v-2", "Running", "True", 900),
            pod("v-3", "Pending", "False", 900),
        ];
        let events = [
            event(
                "v-1",
                "Readiness probe failed: cinder-volume on c@b is down: old",
                990,
            ),
            event(
                "v-1",
                "Readiness probe failed: cinder-volume on c@b is down: new",
                1_010,
            ),
            event("v-1", "Liveness probe failed: not this one", 1_020),
            event("v-2", "Readiness probe failed: v-2 is ready again", 850),
            event("v-3", "Readiness probe failed: v-3 is not running", 950),
        ];
        assert_eq!(
            unready_detail(&pods, &events),
            Some(NotReady {
                text: "pod v-1: cinder-volume on c@b is down: new".into(),
                checks_only: true
            })
        );
    }

    #[test]
    fn a_container_in_crash_loop_back_off_after_an_oom_kill() {
        let p: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "s-1"},
            "status": {"phase": "Running", "containerStatuses": [{
                "name": "scheduler", "image": "i", "imageID": "", "ready": false,
                "restartCount": 2,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
            }]},
        }))
        .unwrap();
        assert_eq!(
            unready_detail(&[p], &[]),
            Some(NotReady {
                text: "pod s-1: container scheduler is CrashLoopBackOff after 2 restart(s), its \
                       last run ended OOMKilled (exit code 137)"
                    .into(),
                checks_only: false
            })
        );
    }

    #[test]
    fn a_failure_long_before_the_pod_turned_unready_is_not_the_reason() {
        let pods = [pod("s-1", "Running", "False", 10_000)];
        let old = [event(
            "s-1",
            "Readiness probe failed: cinder-scheduler on c is disabled (x)",
            5_000,
        )];
        assert_eq!(unready_detail(&pods, &old), None);
        assert_eq!(unready_detail(&pods, &[]), None);
    }
}
