//! The backend kind: its query constructors (addressable by `name`, renamed under a key lock).
//! Its result's interior mutations are `BackendResult`'s methods (`results.rs`).

use crate::subquery::Subquery;

/// List every backend.
pub fn list_backends() -> Subquery {
    Subquery::list("backend")
}
/// Read-lock a backend by id (empty: filled in from a child of the same query).
pub fn read_backend(id: &str) -> Subquery {
    Subquery::read("backend", id)
}
/// Read-lock a backend by name.
pub fn read_backend_by_name(name: &str) -> Subquery {
    Subquery::read("backend", "").with_key(name)
}
/// Copy a backend without locking.
pub fn inconsistent_read_backend(id: &str) -> Subquery {
    Subquery::inconsistent_read("backend", id)
}
/// Write-lock a backend by id or (when `id` is empty) by `name`; a non-empty `new_name` renames it
/// under a key lock.
pub fn upsert_backend(id: &str, name: &str, new_name: &str) -> Subquery {
    Subquery::upsert("backend", id)
        .with_key(name)
        .with_new_key(new_name)
}
/// Write-lock a backend to delete it.
pub fn delete_backend(id: &str) -> Subquery {
    Subquery::delete("backend", id)
}
