//! The four workloads of the issue, each generic over [`crate::engine::Engine`] so that every
//! engine runs exactly the same transactions.

pub mod backend_update;
pub mod create_publish;
pub mod overhead;
pub mod scale;

use serde_json::{Value, json};

/// A backend's value.
pub fn backend_value(id: &str) -> Value {
    json!({"id": id, "name": id, "reservedBytes": 0, "state": "online"})
}

/// A node's value.
pub fn node_value(id: &str) -> Value {
    json!({"id": id})
}

/// A volume's value (owner field `backend`, key field `internalName`).
pub fn volume_value(id: &str, backend: &str) -> Value {
    json!({"id": id, "backend": backend, "internalName": format!("vol_{id}"), "sizeGiB": 1, "state": "online"})
}

/// Backend id number `i`.
pub fn backend_id(i: usize) -> String {
    format!("backend{i}")
}

/// Node id number `i`.
pub fn node_id(i: usize) -> String {
    format!("node{i}")
}
