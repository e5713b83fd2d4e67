//! What every workload shares: the values and ids of the backends, nodes and volumes it
//! creates, and the check that a run left the end state it should.

use serde_json::{Value, json};

use crate::engine::{Engine, EngineError, EngineResult, Txn};
use crate::query::{self, Kind};

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

/// Bytes a create reserves on its backend (interior mutation).
pub const RESERVED_PER_VOLUME: u64 = 1 << 30;

/// Check after a run that the engine really did the work: `volumes` volumes whose `field` is set
/// (any field when `None`), `publications` publications, and the backends' reservations adding
/// up to `reservations` creates.
pub async fn verify<E: Engine>(
    engine: &E,
    backends: usize,
    volumes: (usize, Option<&str>),
    publications: usize,
    reservations: usize,
) -> EngineResult<()> {
    let mut queries = vec![vec![
        query::list_volumes(),
        query::list_volume_publications(),
    ]];
    queries.extend((0..backends).map(|b| vec![query::read_backend(&backend_id(b))]));
    let txn = engine.lock(&queries).await?;
    let listed = txn.list_values(0, Kind::Volume);
    let matching = match volumes.1 {
        Some(field) => listed.iter().filter(|v| v.get(field).is_some()).count(),
        None => listed.len(),
    };
    let published = txn.list_len(0, Kind::VolumePublication);
    let reserved: u64 = (0..backends)
        .filter_map(|b| txn.read(b + 1, Kind::Backend))
        .filter_map(|v| v.get("reservedBytes").and_then(Value::as_u64))
        .sum();
    txn.unlock().await;
    let wanted_reserved = reservations as u64 * RESERVED_PER_VOLUME;
    if matching != volumes.0 || published != publications || reserved != wanted_reserved {
        return Err(EngineError(format!(
            "wrong end state: {matching} volumes (want {}), {published} publications (want \
             {publications}), {reserved} bytes reserved (want {wanted_reserved})",
            volumes.0
        )));
    }
    Ok(())
}

/// Backend id number `i`.
pub fn backend_id(i: usize) -> String {
    format!("backend{i}")
}

/// Node id number `i`.
pub fn node_id(i: usize) -> String {
    format!("node{i}")
}
