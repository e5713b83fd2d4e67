//! The statuses the simulated kubelet and scheduler write on a pod: Pending and unschedulable,
//! waiting containers (ContainerCreating, CreateContainerConfigError), and Running with each
//! container's readiness from its simulated readiness probe. Pure functions over the pod.

use serde_json::{Value, json};

use super::scheduling::requests;

/// Pod annotation that makes every readiness probe of the pod fail (set it in a Deployment's
/// pod template to keep a roll-out from completing).
pub const READINESS_PROBE_ANNOTATION: &str = "sim.cinder.c5c3.io/readiness-probe";

/// Whether the pod's simulated readiness probes pass: they do unless
/// [`READINESS_PROBE_ANNOTATION`] is `fail`.
pub fn probes_pass(pod: &Value) -> bool {
    pod.pointer("/metadata/annotations")
        .and_then(|a| a.get(READINESS_PROBE_ANNOTATION))
        .and_then(Value::as_str)
        != Some("fail")
}

fn containers(pod: &Value) -> Vec<(String, String)> {
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .map(|c| {
                    (
                        c["name"].as_str().unwrap_or_default().to_owned(),
                        c["image"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The QoS class: BestEffort without any request or limit, Guaranteed when every container's
/// requests equal its cpu and memory limits, else Burstable.
pub fn qos_class(pod: &Value) -> &'static str {
    let list = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let empty = |c: &Value, what: &str| {
        c.pointer(&format!("/resources/{what}"))
            .and_then(Value::as_object)
            .is_none_or(|m| m.is_empty())
    };
    if list
        .iter()
        .all(|c| empty(c, "requests") && empty(c, "limits"))
    {
        return "BestEffort";
    }
    let guaranteed = list.iter().all(|c| {
        ["cpu", "memory"].iter().all(|r| {
            let limit = c.pointer(&format!("/resources/limits/{r}"));
            let request = c.pointer(&format!("/resources/requests/{r}")).or(limit);
            limit.is_some() && request == limit
        })
    });
    if guaranteed && requests(pod).0 > 0 {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

fn condition(kind: &str, status: bool, at: &str) -> Value {
    json!({"type": kind, "status": if status { "True" } else { "False" }, "lastProbeTime": null, "lastTransitionTime": at})
}

/// A Pending pod no node can take (PodScheduled False, Unschedulable).
pub fn unschedulable(pod: &Value, message: &str, at: &str) -> Value {
    json!({
        "phase": "Pending",
        "qosClass": qos_class(pod),
        "conditions": [{
            "type": "PodScheduled", "status": "False", "lastProbeTime": null, "lastTransitionTime": at,
            "reason": "Unschedulable", "message": message,
        }],
    })
}

/// A bound pod whose containers wait with `reason` (and `message`, when there is one).
pub fn waiting(pod: &Value, reason: &str, message: Option<&str>, at: &str, host_ip: &str) -> Value {
    let names: Vec<String> = containers(pod).into_iter().map(|(n, _)| n).collect();
    let not_ready = format!("containers with unready status: [{}]", names.join(" "));
    let statuses: Vec<Value> = containers(pod)
        .into_iter()
        .map(|(name, image)| {
            let mut state = json!({"reason": reason});
            if let Some(message) = message {
                state["message"] = json!(message);
            }
            json!({"name": name, "image": image, "imageID": "", "ready": false, "started": false,
                   "restartCount": 0, "state": {"waiting": state}})
        })
        .collect();
    let mut ready = condition("Ready", false, at);
    ready["reason"] = json!("ContainersNotReady");
    ready["message"] = json!(not_ready);
    let mut containers_ready = ready.clone();
    containers_ready["type"] = json!("ContainersReady");
    json!({
        "phase": "Pending",
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": at,
        "qosClass": qos_class(pod),
        "conditions": [
            condition("PodReadyToStartContainers", false, at),
            condition("Initialized", true, at),
            ready,
            containers_ready,
            condition("PodScheduled", true, at),
        ],
        "containerStatuses": statuses,
    })
}

/// A running pod; its containers are ready when `ready`.
pub fn running(pod: &Value, ready: bool, at: &str, host_ip: &str, pod_ip: &str) -> Value {
    let started = pod
        .pointer("/status/startTime")
        .and_then(Value::as_str)
        .unwrap_or(at);
    let statuses: Vec<Value> = containers(pod)
        .into_iter()
        .map(|(name, image)| {
            json!({"name": name, "image": image, "imageID": format!("sim://{image}"),
                   "containerID": format!("sim://{name}"), "ready": ready, "started": true,
                   "restartCount": 0, "state": {"running": {"startedAt": at}}})
        })
        .collect();
    let mut ready_condition = condition("Ready", ready, at);
    if !ready {
        let names: Vec<String> = containers(pod).into_iter().map(|(n, _)| n).collect();
        ready_condition["reason"] = json!("ContainersNotReady");
        ready_condition["message"] = json!(format!(
            "containers with unready status: [{}]",
            names.join(" ")
        ));
    }
    let mut containers_ready = ready_condition.clone();
    containers_ready["type"] = json!("ContainersReady");
    json!({
        "phase": "Running",
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": started,
        "qosClass": qos_class(pod),
        "conditions": [
            condition("PodReadyToStartContainers", true, at),
            condition("Initialized", true, at),
            ready_condition,
            containers_ready,
            condition("PodScheduled", true, at),
        ],
        "containerStatuses": statuses,
    })
}

/// Whether the pod's status says it is Ready.
pub fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// The waiting reason of the pod's first waiting container, if any.
pub fn waiting_reason(pod: &Value) -> Option<&str> {
    pod.pointer("/status/containerStatuses")
        .and_then(Value::as_array)?
        .iter()
        .find_map(|c| c.pointer("/state/waiting/reason").and_then(Value::as_str))
}

/// A stable pod IP for `uid` in 10.244.0.0/16.
pub fn pod_ip(uid: &str) -> String {
    let hash = uid.bytes().fold(2_166_136_261_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(16_777_619)
    });
    format!("10.244.{}.{}", (hash >> 8) % 256, hash % 254 + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(resources: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i:1", "resources": resources}]}})
    }

    #[test]
    fn qos_classes() {
        assert_eq!(qos_class(&pod(json!({}))), "BestEffort");
        assert_eq!(
            qos_class(&pod(json!({"requests": {"cpu": "100m"}}))),
            "Burstable"
        );
        let both = json!({"cpu": "1", "memory": "1Gi"});
        assert_eq!(qos_class(&pod(json!({"limits": both}))), "Guaranteed");
    }

    #[test]
    fn statuses_through_the_life_cycle() {
        let p = pod(json!({}));
        let pending = unschedulable(&p, "0/3 nodes are available", "t");
        assert_eq!(pending["conditions"][0]["reason"], "Unschedulable");
        let creating = waiting(&p, "ContainerCreating", None, "t", "172.18.0.2");
        assert_eq!(
            creating["containerStatuses"][0]["state"]["waiting"]["reason"],
            "ContainerCreating"
        );
        assert!(!is_ready(&json!({"status": creating})));
        let run = running(&p, true, "2026-01-01T00:00:00Z", "172.18.0.2", "10.244.0.3");
        assert!(is_ready(&json!({"status": run.clone()})));
        assert_eq!(run["containerStatuses"][0]["started"], true);
        let typed: k8s_openapi::api::core::v1::PodStatus = serde_json::from_value(run).unwrap();
        assert_eq!(typed.phase.as_deref(), Some("Running"));
        let unready = running(&p, false, "t", "h", "ip");
        assert_eq!(unready["conditions"][2]["reason"], "ContainersNotReady");
    }

    #[test]
    fn probes_fail_by_annotation() {
        let mut p = pod(json!({}));
        assert!(probes_pass(&p));
        p["metadata"]["annotations"] = json!({READINESS_PROBE_ANNOTATION: "fail"});
        assert!(!probes_pass(&p));
        assert_eq!(pod_ip("abc"), pod_ip("abc"));
    }
}
