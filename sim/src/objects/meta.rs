//! Object metadata rules: fresh metadata on create (uid, creationTimestamp,
//! generation, generateName), immutable fields on update, generation bumps on spec changes only.

use crate::error::ApiError;
use rand::Rng;
use serde_json::{Map, Value, json};

/// RFC 3339 "now" with second precision, as Kubernetes writes timestamps.
pub fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A random 5-character suffix for generateName.
pub fn random_suffix() -> String {
    const CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| CHARS[rng.random_range(0..CHARS.len())] as char)
        .collect()
}

/// The metadata map of an object, created if missing.
pub fn meta_mut(obj: &mut Value) -> Result<&mut Map<String, Value>, ApiError> {
    let map = obj
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the object is not a JSON object"))?;
    let meta = map.entry("metadata").or_insert_with(|| json!({}));
    if meta.is_null() {
        *meta = json!({});
    }
    meta.as_object_mut()
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))
}

pub fn meta_str<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.get("metadata")
        .and_then(|m| m.get(key))
        .and_then(Value::as_str)
}

/// The object without metadata and status: what `generation` tracks.
fn spec_part(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
        m.remove("apiVersion");
        m.remove("kind");
    }
    v
}

/// Whether anything outside metadata and status changed.
pub fn spec_changed(old: &Value, new: &Value) -> bool {
    spec_part(old) != spec_part(new)
}

/// The object without the fields the server maintains (to detect no-op writes).
pub fn comparable(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
        m.remove("managedFields");
    }
    if let Some(m) = v.as_object_mut() {
        m.remove("apiVersion");
    }
    v
}

/// Finalizers of an object.
pub fn finalizers(obj: &Value) -> Vec<String> {
    crate::json::strings(obj.pointer("/metadata/finalizers"))
}

/// Sets (or, when empty, removes) the finalizers of an object.
pub fn set_finalizers(obj: &mut Value, list: &[String]) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            meta.remove("finalizers");
        } else {
            meta.insert("finalizers".into(), json!(list));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_tracks_spec_only() {
        let a = json!({"metadata": {"labels": {"x": "1"}}, "spec": {"r": 1}, "status": {"s": 1}});
        let b = json!({"metadata": {"labels": {"x": "2"}}, "spec": {"r": 1}, "status": {"s": 2}});
        let c = json!({"metadata": {}, "spec": {"r": 2}});
        assert!(!spec_changed(&a, &b));
        assert!(spec_changed(&a, &c));
    }
}
