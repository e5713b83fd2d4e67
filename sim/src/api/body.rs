//! Reading a request body within the real API server's limit (3 MiB): a larger body is
//! refused with 413 RequestEntityTooLarge as soon as its Content-Length (or the bytes read so
//! far) exceed the limit, and the rest is read and dropped, never kept, so the client gets the
//! answer rather than a broken connection. A JSON or YAML body is parsed by its Content-Type.

use crate::error::ApiError;
use crate::patch;
use actix_web::HttpRequest;
use actix_web::web::{Bytes, BytesMut, Payload};
use futures::StreamExt;
use serde_json::Value;

/// Largest request body, in bytes.
pub const MAX_REQUEST_BYTES: usize = 3 * 1024 * 1024;
/// Past this many bytes of an oversized body, stop draining it (the connection is closed).
const DRAIN_LIMIT: usize = 256 * 1024 * 1024;

/// The body, or 413 when it is larger than `MAX_REQUEST_BYTES`.
pub async fn read(req: &HttpRequest, mut payload: Payload) -> Result<Bytes, ApiError> {
    let declared = req
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let mut too_large = declared.is_some_and(|n| n > MAX_REQUEST_BYTES);
    let mut body = BytesMut::new();
    let mut seen = 0usize;
    while let Some(chunk) = payload.next().await {
        let chunk = chunk
            .map_err(|e| ApiError::bad_request(format!("cannot read the request body: {e}")))?;
        seen += chunk.len();
        if seen > MAX_REQUEST_BYTES {
            too_large = true;
        }
        if too_large {
            body.clear();
            if seen > DRAIN_LIMIT {
                break;
            }
        } else {
            body.extend_from_slice(&chunk);
        }
    }
    if too_large {
        return Err(ApiError::request_entity_too_large(MAX_REQUEST_BYTES));
    }
    Ok(body.freeze())
}

pub(super) fn parse_body(req: &HttpRequest, body: &[u8]) -> Result<Value, ApiError> {
    let ct = req
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    if body.is_empty() {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    if ct.contains("yaml") {
        patch::parse_yaml_or_json(body)
    } else if ct.is_empty() || ct.contains("json") {
        patch::parse_json(body)
    } else {
        Err(ApiError::unsupported_media_type(&ct))
    }
}
