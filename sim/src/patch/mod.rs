//! The four patch types: JSON merge patch (RFC 7386), JSON patch (RFC 6902, json-patch crate),
//! strategic merge patch (see `strategic`), and server-side apply (handled by the object engine
//! with managedFields); content-type parsing and 415 for anything else.

pub mod strategic;

use crate::error::ApiError;
use serde_json::Value;

/// A PATCH request's type, from its Content-Type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Json,
    Strategic,
    Apply,
}

impl PatchType {
    /// The patch type of a Content-Type header value; 415 for unknown ones.
    pub fn from_content_type(ct: &str) -> Result<PatchType, ApiError> {
        let base = ct
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        match base.as_str() {
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchType::Apply),
            _ => Err(ApiError::unsupported_media_type(ct)),
        }
    }
}

/// Parses a JSON body (400 on malformed JSON).
pub fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding the request body as JSON: {e}")))
}

/// Parses a YAML (or JSON, a subset) body.
pub fn parse_yaml_or_json(body: &[u8]) -> Result<Value, ApiError> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Ok(v);
    }
    serde_norway::from_slice::<Value>(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
}

/// Applies a merge, JSON or strategic patch to `current` (apply is not handled here).
pub fn apply_patch(
    ptype: PatchType,
    current: &Value,
    body: &[u8],
    is_custom: bool,
) -> Result<Value, ApiError> {
    let mut doc = current.clone();
    match ptype {
        PatchType::Merge => {
            let p = parse_json(body)?;
            if !p.is_object() {
                return Err(ApiError::bad_request("a merge patch must be a JSON object"));
            }
            json_patch::merge(&mut doc, &p);
        }
        PatchType::Strategic => {
            let p = parse_json(body)?;
            if !p.is_object() {
                return Err(ApiError::bad_request(
                    "a strategic merge patch must be a JSON object",
                ));
            }
            if is_custom {
                // custom resources have no patch strategies: a strategic merge patch is a merge patch
                json_patch::merge(&mut doc, &p);
            } else {
                doc = strategic::merge(&doc, &p)?;
            }
        }
        PatchType::Json => {
            let p: json_patch::Patch = serde_json::from_slice(body).map_err(|e| {
                ApiError::bad_request(format!("error decoding the JSON patch: {e}"))
            })?;
            json_patch::patch(&mut doc, &p).map_err(|e| {
                ApiError::unprocessable(format!("the JSON patch could not be applied: {e}"))
            })?;
        }
        PatchType::Apply => {
            return Err(ApiError::internal("server-side apply is not a plain patch"));
        }
    }
    Ok(doc)
}
