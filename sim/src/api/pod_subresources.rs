//! The Pod subresources besides status: `log` (for a pod on a process node, forwarded to its
//! node agent's log endpoint, as a real API server forwards to the kubelet; on a simulated node
//! a short simulated log: the start line, the image, and the termination message when there is
//! one), `eviction` (deletes the pod unless a
//! PodDisruptionBudget covering it allows no disruption: 429, as on a real server),
//! `binding` (sets `spec.nodeName`, what a scheduler does); `exec` is [`super::pod_exec`]'s.

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
pub async fn answer(
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
            if let Some(endpoint) = process_node_endpoint(app, &pod) {
                return forward_log(&endpoint, &pod, q).await;
            }
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

/// Reads the head of a node agent's answer from `stream` (up to its blank line, at most 16 KiB)
/// and returns it when its status is `expected`; any other status is refused with 400 carrying
/// the body the agent sent (`unavailable` says a broken connection).
pub(super) async fn node_answer_head(
    stream: &mut tokio::net::TcpStream,
    expected: u16,
    unavailable: impl Fn(std::io::Error) -> ApiError,
) -> Result<String, ApiError> {
    use tokio::io::AsyncReadExt;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
        if stream.read(&mut byte).await.map_err(&unavailable)? == 0 {
            break;
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let code: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(502);
    if code != expected {
        let mut body = String::new();
        let _ = stream.read_to_string(&mut body).await;
        return Err(ApiError::bad_request(body));
    }
    Ok(head)
}

/// The rest of a node agent's answer read from `reader`, chunk by chunk, until it closes.
pub(super) fn node_answer_body<R>(
    reader: R,
) -> impl futures::Stream<Item = Result<bytes::Bytes, std::io::Error>>
where
    R: tokio::io::AsyncRead + Unpin,
{
    use tokio::io::AsyncReadExt;
    futures::stream::unfold(reader, |mut reader| async move {
        let mut buf = vec![0u8; 16 * 1024];
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(bytes::Bytes::from(buf)), reader))
            }
        }
    })
}

/// `address:port` of the log endpoint of the process node `pod` is bound to, if it is on one.
pub(super) fn process_node_endpoint(app: &AppState, pod: &Value) -> Option<String> {
    let node_name = pod.pointer("/spec/nodeName").and_then(Value::as_str)?;
    let node = app.engine.store.get("", "nodes", "", node_name)?;
    let runtime = node
        .pointer("/metadata/labels")
        .and_then(|l| l.get(crate::agent::RUNTIME_LABEL))
        .and_then(Value::as_str);
    if runtime != Some("process") {
        return None;
    }
    let address = node
        .pointer("/status/addresses")
        .and_then(Value::as_array)?
        .iter()
        .find(|a| a["type"] == "InternalIP")?["address"]
        .as_str()?
        .to_owned();
    let port = node
        .pointer("/status/daemonEndpoints/kubeletEndpoint/Port")
        .and_then(Value::as_u64)?;
    Some(format!("{address}:{port}"))
}

/// The container `pod` has when the request names none: its only container, else the
/// kubelet's message listing them.
pub(super) fn container_name(pod: &Value, asked: Option<&str>) -> Result<String, ApiError> {
    let pod_name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut names: Vec<&str> = Vec::new();
    for key in ["/spec/containers", "/spec/initContainers"] {
        if let Some(list) = pod.pointer(key).and_then(Value::as_array) {
            names.extend(list.iter().filter_map(|c| c["name"].as_str()));
        }
    }
    match asked {
        Some(name) if names.contains(&name) => Ok(name.to_owned()),
        Some(name) => Err(ApiError::bad_request(format!(
            "container {name} is not valid for pod {pod_name}"
        ))),
        None => {
            let app: Vec<&str> = pod
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .map(|l| l.iter().filter_map(|c| c["name"].as_str()).collect())
                .unwrap_or_default();
            match app.as_slice() {
                [only] => Ok((*only).to_owned()),
                _ => Err(ApiError::bad_request(format!(
                    "a container name must be specified for pod {pod_name}, choose one of: [{}]",
                    app.join(" ")
                ))),
            }
        }
    }
}

/// Forwards a log request to the node agent at `endpoint` and streams its answer back.
async fn forward_log(
    endpoint: &str,
    pod: &Value,
    q: &HashMap<String, String>,
) -> Result<HttpResponse, ApiError> {
    use tokio::io::AsyncWriteExt;
    let text = |p: &str| {
        pod.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let container = container_name(pod, q.get("container").map(String::as_str))?;
    let mut query = Vec::new();
    for key in ["previous", "follow", "tailLines"] {
        if let Some(value) = q.get(key) {
            let clean: String = value.chars().filter(char::is_ascii_alphanumeric).collect();
            query.push(format!("{key}={clean}"));
        }
    }
    let path = format!(
        "/containerLogs/{}/{}/{container}?{}",
        text("/metadata/namespace"),
        text("/metadata/name"),
        query.join("&")
    );
    let unavailable =
        |e: std::io::Error| ApiError::internal(format!("the node's log endpoint {endpoint}: {e}"));
    let mut stream = tokio::net::TcpStream::connect(endpoint)
        .await
        .map_err(unavailable)?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {endpoint}\r\n\r\n").as_bytes())
        .await
        .map_err(unavailable)?;
    node_answer_head(&mut stream, 200, unavailable).await?;
    let body = node_answer_body(stream);
    Ok(HttpResponse::Ok()
        .content_type("text/plain")
        .streaming(body))
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
