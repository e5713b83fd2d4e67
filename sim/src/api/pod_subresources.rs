//! The Pod subresources besides status: `log` (a short simulated log: the start line, the
//! image, and the termination message when there is one), `eviction` (deletes the pod unless a
//! PodDisruptionBudget covering it allows no disruption: 429, as on a real server) and
//! `binding` (sets `spec.nodeName`, what a scheduler does).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use actix_web::http::Method;
use actix_web::{HttpRequest, HttpResponse};
use serde_json::{Value, json};

use super::body::parse_body;
use super::context::AppState;
use super::responses::json_response;
use crate::error::ApiError;
use crate::objects::disruption::eviction_refusal;
use crate::objects::{DeleteOptions, Target, WriteOptions};
use crate::patch::PatchType;

/// Serialises evictions, so two concurrent ones cannot both spend a budget's last disruption.
static EVICTIONS: Mutex<()> = Mutex::new(());

/// Answers `sub` (log, eviction or binding) of the pod `target` names.
pub fn answer(
    req: &HttpRequest,
    body: &[u8],
    app: &AppState,
    target: &Target,
    q: &HashMap<String, String>,
    user_agent: &str,
) -> Result<HttpResponse, ApiError> {
    let pod_target = Target {
        subresource: String::new(),
        ..target.clone()
    };
    match (target.subresource.as_str(), req.method()) {
        ("log", &Method::GET) => {
            let pod = app.engine.get(&pod_target)?;
            let text = log_of(&pod, q.get("container").map(String::as_str))?;
            Ok(HttpResponse::Ok().content_type("text/plain").body(text))
        }
        ("eviction", &Method::POST) => {
            let eviction = parse_body(req, body)?;
            let _serial = EVICTIONS.lock().unwrap_or_else(PoisonError::into_inner);
            let pod = app.engine.get(&pod_target)?;
            let namespace = Some(target.namespace.as_str());
            let pdbs = app
                .engine
                .store
                .list("policy", "poddisruptionbudgets", namespace);
            let pods = app.engine.store.list("", "pods", namespace);
            if let Some(why) = eviction_refusal(&pod, &pdbs, &pods) {
                return Err(ApiError::disruption_budget(&target.name, why));
            }
            let options = DeleteOptions {
                dry_run: eviction
                    .pointer("/deleteOptions/dryRun")
                    .and_then(Value::as_array)
                    .is_some_and(|d| d.iter().any(|x| x == "All")),
                grace_period: eviction
                    .pointer("/deleteOptions/gracePeriodSeconds")
                    .and_then(Value::as_i64),
                ..DeleteOptions::default()
            };
            app.engine.delete(&pod_target, &options)?;
            Ok(json_response(201, &success(201)))
        }
        ("binding", &Method::POST) => {
            let binding = parse_body(req, body)?;
            let node = binding
                .pointer("/target/name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .ok_or_else(|| ApiError::bad_request("binding has no target.name"))?;
            let pod = app.engine.get(&pod_target)?;
            if let Some(bound) = pod.pointer("/spec/nodeName").and_then(Value::as_str) {
                return Err(ApiError::conflict(
                    "",
                    "pods",
                    &target.name,
                    &format!(
                        "pod {} is already assigned to node \"{bound}\"",
                        target.name
                    ),
                ));
            }
            let patch = json!({"spec": {"nodeName": node}});
            let options = WriteOptions {
                user_agent: user_agent.to_owned(),
                ..WriteOptions::default()
            };
            app.engine.patch(
                &pod_target,
                PatchType::Merge,
                patch.to_string().as_bytes(),
                &options,
            )?;
            Ok(json_response(201, &success(201)))
        }
        _ => Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({} {})",
            req.method(),
            req.path()
        ))),
    }
}

fn success(code: u16) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code})
}

/// The simulated log of `container` (the first one when None) of `pod`.
pub fn log_of(pod: &Value, container: Option<&str>) -> Result<String, ApiError> {
    let pod_name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let spec = match container {
        Some(name) => containers
            .iter()
            .find(|c| c["name"] == name)
            .ok_or_else(|| {
                ApiError::bad_request(format!("container {name} is not valid for pod {pod_name}"))
            })?,
        None if containers.len() == 1 => &containers[0],
        None => {
            let names: Vec<&str> = containers
                .iter()
                .filter_map(|c| c["name"].as_str())
                .collect();
            return Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {pod_name}, choose one of: [{}]",
                names.join(" ")
            )));
        }
    };
    let name = spec["name"].as_str().unwrap_or_default();
    let image = spec["image"].as_str().unwrap_or_default();
    let status = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .and_then(|all| all.iter().find(|s| s["name"] == name));
    let state = status.and_then(|s| s.get("state"));
    if let Some(waiting) = state.and_then(|s| s.get("waiting")) {
        let reason = waiting["reason"].as_str().unwrap_or("ContainerCreating");
        return Err(ApiError::bad_request(format!(
            "container \"{name}\" in pod \"{pod_name}\" is waiting to start: {reason}"
        )));
    }
    let Some(state) = state.filter(|s| s.get("running").is_some() || s.get("terminated").is_some())
    else {
        return Err(ApiError::bad_request(format!(
            "container \"{name}\" in pod \"{pod_name}\" is waiting to start: ContainerCreating"
        )));
    };
    let started = state
        .pointer("/running/startedAt")
        .or(state.pointer("/terminated/startedAt"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut log = format!("{started} simulated container {name} started (image {image})\n");
    if let Some(terminated) = state.get("terminated") {
        if let Some(message) = terminated["message"].as_str() {
            log.push_str(message);
            if !message.ends_with('\n') {
                log.push('\n');
            }
        }
        log.push_str(&format!(
            "{} simulated container {name} exited with code {}\n",
            terminated["finishedAt"].as_str().unwrap_or_default(),
            terminated["exitCode"]
        ));
    }
    Ok(log)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_names_the_image_and_the_termination_message() {
        let pod = json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "sync", "image": "img:1"}]},
            "status": {"containerStatuses": [{"name": "sync", "state": {"terminated": {
                "exitCode": 2, "message": "schema check failed", "startedAt": "t0", "finishedAt": "t1"}}}]}
        });
        let log = log_of(&pod, None).unwrap();
        assert!(log.contains("started (image img:1)"), "{log}");
        assert!(log.contains("schema check failed\n"), "{log}");
        assert!(log.contains("exited with code 2"), "{log}");
        assert!(log_of(&pod, Some("other")).is_err());
        let waiting = json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"containerStatuses": [{"name": "c", "state": {"waiting": {"reason": "CreateContainerConfigError"}}}]}
        });
        let error = log_of(&waiting, None).unwrap_err();
        assert!(error.message.contains("CreateContainerConfigError"));
    }
}
