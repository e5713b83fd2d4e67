//! A process pod's status as the kubelet writes it, from its containers' states: phase (the
//! kubelet's rules for init containers, restarts and restartPolicy), the PodScheduled,
//! PodReadyToStartContainers, Initialized, ContainersReady and Ready conditions, IPs, start
//! time, QoS class and every container's state, lastState, restartCount, ready and started.
//! Pure.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::controllers::pods::pod_status::qos_class;

/// One container state, as in `containerStatuses[].state`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    Waiting {
        reason: String,
        message: Option<String>,
    },
    Running {
        started_at: String,
    },
    Terminated {
        exit_code: i32,
        reason: String,
        message: Option<String>,
        started_at: String,
        finished_at: String,
    },
}

impl State {
    pub fn waiting(reason: &str, message: Option<String>) -> State {
        State::Waiting {
            reason: reason.to_owned(),
            message,
        }
    }

    pub fn to_json(&self) -> Value {
        match self {
            State::Waiting { reason, message } => {
                let mut w = json!({"reason": reason});
                if let Some(m) = message {
                    w["message"] = json!(m);
                }
                json!({"waiting": w})
            }
            State::Running { started_at } => json!({"running": {"startedAt": started_at}}),
            State::Terminated {
                exit_code,
                reason,
                message,
                started_at,
                finished_at,
            } => {
                let mut t = json!({"exitCode": exit_code, "reason": reason,
                    "startedAt": started_at, "finishedAt": finished_at});
                if let Some(m) = message.as_ref().filter(|m| !m.is_empty()) {
                    t["message"] = json!(m);
                }
                json!({"terminated": t})
            }
        }
    }

    pub fn exit_code(&self) -> Option<i32> {
        match self {
            State::Terminated { exit_code, .. } => Some(*exit_code),
            _ => None,
        }
    }
}

/// What the status needs to know of one container.
#[derive(Clone, Debug)]
pub struct ContainerView {
    pub name: String,
    pub image: String,
    pub state: State,
    pub last: Option<State>,
    pub restarts: u32,
    pub ready: bool,
    pub started: bool,
    pub container_id: Option<String>,
}

impl ContainerView {
    fn to_json(&self) -> Value {
        let mut status = json!({
            "name": self.name,
            "image": self.image,
            "imageID": format!("process://{}", self.image),
            "state": self.state.to_json(),
            "lastState": self.last.as_ref().map_or_else(|| json!({}), State::to_json),
            "ready": self.ready,
            "restartCount": self.restarts,
            "started": self.started,
        });
        if let Some(id) = &self.container_id {
            status["containerID"] = json!(id);
        }
        status
    }

    fn succeeded(&self) -> bool {
        self.state.exit_code() == Some(0)
    }
}

/// The pod's phase from its containers (kubelet's rules).
pub fn phase(
    restart_policy: &str,
    init: &[ContainerView],
    containers: &[ContainerView],
) -> &'static str {
    if let Some(failed) = init.iter().find(|c| !c.succeeded()) {
        if restart_policy == "Never" && failed.state.exit_code().is_some_and(|c| c != 0) {
            return "Failed";
        }
        return "Pending";
    }
    let mut waiting_new = 0;
    let mut running = 0;
    let mut stopped_ok = 0;
    let mut stopped_failed = 0;
    for c in containers {
        match &c.state {
            State::Running { .. } => running += 1,
            State::Waiting { .. } if c.restarts > 0 || c.last.is_some() => running += 1,
            State::Waiting { .. } => waiting_new += 1,
            State::Terminated { exit_code, .. } => {
                if *exit_code == 0 {
                    stopped_ok += 1;
                } else {
                    stopped_failed += 1;
                }
            }
        }
    }
    if waiting_new > 0 {
        return "Pending";
    }
    if running > 0 {
        return "Running";
    }
    match (restart_policy, stopped_failed) {
        ("Always", _) => "Running",
        (_, 0) if stopped_ok > 0 => "Succeeded",
        ("Never", _) => "Failed",
        _ => "Running",
    }
}

/// Everything the status is made from.
pub struct PodView<'a> {
    pub pod: &'a Value,
    pub init: &'a [ContainerView],
    pub containers: &'a [ContainerView],
    pub sandbox_ready: bool,
    pub host_ip: &'a str,
    pub pod_ip: Option<&'a str>,
    pub start_time: &'a str,
    pub now: &'a str,
    /// Each condition's last (status, transition time), updated here.
    pub transitions: &'a mut BTreeMap<String, (String, String)>,
}

/// The status to write.
pub fn pod_status(view: PodView<'_>) -> Value {
    let policy = view
        .pod
        .pointer("/spec/restartPolicy")
        .and_then(Value::as_str)
        .unwrap_or("Always");
    let phase = phase(policy, view.init, view.containers);
    let initialized: Vec<&str> = view
        .init
        .iter()
        .filter(|c| !c.succeeded())
        .map(|c| c.name.as_str())
        .collect();
    let unready: Vec<&str> = view
        .containers
        .iter()
        .filter(|c| !c.ready)
        .map(|c| c.name.as_str())
        .collect();
    let mut conditions = Vec::new();
    let mut condition = |kind: &str, ok: bool, reason: Option<&str>, message: Option<String>| {
        let status = if ok { "True" } else { "False" };
        let entry = view
            .transitions
            .entry(kind.to_owned())
            .or_insert_with(|| (status.to_owned(), view.now.to_owned()));
        if entry.0 != status {
            *entry = (status.to_owned(), view.now.to_owned());
        }
        let mut c = json!({"type": kind, "status": status, "lastProbeTime": null,
                           "lastTransitionTime": entry.1});
        if let Some(r) = reason {
            c["reason"] = json!(r);
        }
        if let Some(m) = message {
            c["message"] = json!(m);
        }
        conditions.push(c);
    };
    let done = matches!(phase, "Succeeded" | "Failed");
    condition("PodReadyToStartContainers", view.sandbox_ready, None, None);
    if initialized.is_empty() {
        condition("Initialized", true, None, None);
    } else {
        condition(
            "Initialized",
            false,
            Some("ContainersNotInitialized"),
            Some(format!(
                "containers with incomplete status: [{}]",
                initialized.join(" ")
            )),
        );
    }
    let ready = unready.is_empty() && !done;
    let (reason, message) = if done {
        (Some("PodCompleted"), None)
    } else if ready {
        (None, None)
    } else {
        (
            Some("ContainersNotReady"),
            Some(format!(
                "containers with unready status: [{}]",
                unready.join(" ")
            )),
        )
    };
    condition("Ready", ready, reason, message.clone());
    condition("ContainersReady", ready, reason, message);
    condition("PodScheduled", true, None, None);
    let mut status = json!({
        "phase": phase,
        "conditions": conditions,
        "hostIP": view.host_ip,
        "hostIPs": [{"ip": view.host_ip}],
        "startTime": view.start_time,
        "qosClass": qos_class(view.pod),
        "containerStatuses": view.containers.iter().map(ContainerView::to_json).collect::<Vec<_>>(),
    });
    if !view.init.is_empty() {
        status["initContainerStatuses"] = view
            .init
            .iter()
            .map(ContainerView::to_json)
            .collect::<Vec<_>>()
            .into();
    }
    if let Some(ip) = view.pod_ip {
        status["podIP"] = json!(ip);
        status["podIPs"] = json!([{"ip": ip}]);
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(state: State, restarts: u32) -> ContainerView {
        ContainerView {
            name: "c".into(),
            image: "busybox".into(),
            state,
            last: None,
            restarts,
            ready: false,
            started: false,
            container_id: None,
        }
    }

    fn done(code: i32) -> State {
        State::Terminated {
            exit_code: code,
            reason: if code == 0 { "Completed" } else { "Error" }.into(),
            message: None,
            started_at: "t".into(),
            finished_at: "t".into(),
        }
    }

    #[test]
    fn phases_follow_the_kubelet() {
        let running = State::Running {
            started_at: "t".into(),
        };
        let creating = State::waiting("ContainerCreating", None);
        assert_eq!(phase("Always", &[], &[c(creating.clone(), 0)]), "Pending");
        assert_eq!(phase("Always", &[], &[c(running.clone(), 0)]), "Running");
        assert_eq!(phase("Never", &[], &[c(done(0), 0)]), "Succeeded");
        assert_eq!(phase("Never", &[], &[c(done(1), 0)]), "Failed");
        assert_eq!(phase("OnFailure", &[], &[c(done(0), 2)]), "Succeeded");
        assert_eq!(
            phase(
                "Always",
                &[],
                &[c(State::waiting("CrashLoopBackOff", None), 1)]
            ),
            "Running"
        );
        assert_eq!(
            phase("Never", &[c(done(1), 0)], &[c(creating.clone(), 0)]),
            "Failed"
        );
        assert_eq!(
            phase("Always", &[c(running, 0)], &[c(creating, 0)]),
            "Pending"
        );
    }

    #[test]
    fn conditions_keep_their_transition_times() {
        let pod = json!({"spec": {"restartPolicy": "Never", "containers": [{"name": "c"}]}});
        let mut transitions = BTreeMap::new();
        let containers = [c(
            State::Running {
                started_at: "t".into(),
            },
            0,
        )];
        let first = pod_status(PodView {
            pod: &pod,
            init: &[],
            containers: &containers,
            sandbox_ready: true,
            host_ip: "10.200.1.1",
            pod_ip: Some("10.200.1.2"),
            start_time: "t0",
            now: "t0",
            transitions: &mut transitions,
        });
        assert_eq!(first["phase"], "Running");
        assert_eq!(first["conditions"][2]["status"], "False");
        assert_eq!(
            first["conditions"][2]["message"],
            "containers with unready status: [c]"
        );
        let mut ready = containers.clone();
        ready[0].ready = true;
        let second = pod_status(PodView {
            pod: &pod,
            init: &[],
            containers: &ready,
            sandbox_ready: true,
            host_ip: "10.200.1.1",
            pod_ip: Some("10.200.1.2"),
            start_time: "t0",
            now: "t1",
            transitions: &mut transitions,
        });
        assert_eq!(second["conditions"][2]["status"], "True");
        assert_eq!(second["conditions"][2]["lastTransitionTime"], "t1");
        assert_eq!(second["conditions"][0]["lastTransitionTime"], "t0");
        assert_eq!(second["podIPs"][0]["ip"], "10.200.1.2");
    }
}
