//! The volume kind: its query constructors (parent: backend; addressable by `internalName`).

use crate::subquery::Subquery;

/// List every volume.
pub fn list_volumes() -> Subquery {
    Subquery::list("volume")
}
/// List the volumes of one backend.
pub fn list_volumes_for_backend(backend_id: &str) -> Subquery {
    Subquery::list_for("volume", "backend", backend_id)
}
/// Read-lock a volume.
pub fn read_volume(id: &str) -> Subquery {
    Subquery::read("volume", id)
}
/// Read-lock a volume by internal name.
pub fn read_volume_by_internal_name(internal_name: &str) -> Subquery {
    Subquery::read("volume", "").with_key(internal_name)
}
/// Copy a volume without locking.
pub fn inconsistent_read_volume(id: &str) -> Subquery {
    Subquery::inconsistent_read("volume", id)
}
/// Write-lock a volume; `backend_id` (may be empty) names its backend, else the cached volume does.
pub fn upsert_volume(volume_id: &str, backend_id: &str) -> Subquery {
    Subquery::upsert("volume", volume_id).with_owner("backend", backend_id)
}
/// Write-lock a volume to delete it.
pub fn delete_volume(id: &str) -> Subquery {
    Subquery::delete("volume", id)
}
