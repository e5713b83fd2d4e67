//! `pods/exec` of a pod on a process node: the WebSocket upgrade (channel.k8s.io protocols) is
//! forwarded to the node agent's exec endpoint, as a real API server forwards it to the
//! kubelet, and the upgraded connection is then piped both ways. A pod on a simulated node,
//! where no process runs, is refused with 400.

use std::collections::HashMap;

use actix_web::{HttpRequest, HttpResponse};

use super::context::AppState;
use super::pod_subresources::{
    container_name, node_answer_body, node_answer_head, process_node_endpoint,
};
use crate::error::ApiError;

/// Whether `req` is a WebSocket upgrade of `pods/{name}/exec` (its body is the upgraded
/// connection, never read as a request body).
pub(super) fn is_upgrade(req: &HttpRequest) -> bool {
    req.path().ends_with("/exec")
        && req
            .headers()
            .get("upgrade")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// `pods/exec` of a pod on a process node: the WebSocket upgrade is forwarded to the node
/// agent's exec endpoint (`/exec/{namespace}/{pod}/{container}`), as a real API server
/// forwards it to the kubelet, and the upgraded connection is then piped both ways.
pub(super) async fn answer(
    req: &HttpRequest,
    payload: actix_web::web::Payload,
    app: &AppState,
    namespace: &str,
    name: &str,
    q: &HashMap<String, String>,
) -> Result<HttpResponse, ApiError> {
    use futures::StreamExt;
    use tokio::io::AsyncWriteExt;
    let pod = app
        .engine
        .store
        .get("", "pods", namespace, name)
        .ok_or_else(|| ApiError::not_found("", "pods", name))?;
    let endpoint = process_node_endpoint(app, &pod).ok_or_else(|| {
        ApiError::bad_request(format!(
            "pod {name} runs on a simulated node, where no process runs: exec needs a process node"
        ))
    })?;
    let container = container_name(&pod, q.get("container").map(String::as_str))?;
    let unavailable =
        |e: std::io::Error| ApiError::internal(format!("the node's exec endpoint {endpoint}: {e}"));
    let mut stream = tokio::net::TcpStream::connect(&endpoint)
        .await
        .map_err(unavailable)?;
    let mut head = format!(
        "GET /exec/{namespace}/{name}/{container}?{} HTTP/1.1\r\nHost: {endpoint}\r\n",
        req.query_string()
    );
    for key in [
        "upgrade",
        "connection",
        "sec-websocket-key",
        "sec-websocket-version",
        "sec-websocket-protocol",
    ] {
        if let Some(value) = req.headers().get(key).and_then(|v| v.to_str().ok()) {
            head.push_str(&format!("{key}: {value}\r\n"));
        }
    }
    head.push_str("\r\n");
    stream
        .write_all(head.as_bytes())
        .await
        .map_err(unavailable)?;
    let answer = node_answer_head(&mut stream, 101, unavailable).await?;
    let mut response = HttpResponse::build(actix_web::http::StatusCode::SWITCHING_PROTOCOLS);
    response.upgrade("websocket");
    for line in answer.lines().skip(1) {
        if let Some((key, value)) = line.split_once(':') {
            let key = key.trim().to_ascii_lowercase();
            if key.starts_with("sec-websocket-") {
                response.insert_header((key, value.trim().to_owned()));
            }
        }
    }
    let (reader, mut writer) = stream.into_split();
    actix_web::rt::spawn(async move {
        let mut payload = payload;
        while let Some(Ok(chunk)) = payload.next().await {
            if writer.write_all(&chunk).await.is_err() {
                break;
            }
        }
        let _ = writer.shutdown().await;
    });
    let body = node_answer_body(reader);
    Ok(response.streaming(body))
}
