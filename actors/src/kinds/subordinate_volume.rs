//! The subordinate volume kind: its query constructors (parent: volume).

use crate::subquery::Subquery;

/// List every subordinate volume.
pub fn list_subordinate_volumes() -> Subquery {
    Subquery::list("subordinateVolume")
}
/// List the subordinate volumes of one volume.
pub fn list_subordinate_volumes_for_volume(volume_id: &str) -> Subquery {
    Subquery::list_for("subordinateVolume", "volume", volume_id)
}
/// Read-lock a subordinate volume.
pub fn read_subordinate_volume(id: &str) -> Subquery {
    Subquery::read("subordinateVolume", id)
}
/// Copy a subordinate volume without locking.
pub fn inconsistent_read_subordinate_volume(id: &str) -> Subquery {
    Subquery::inconsistent_read("subordinateVolume", id)
}
/// Write-lock a subordinate volume of a volume.
pub fn upsert_subordinate_volume(id: &str, volume_id: &str) -> Subquery {
    Subquery::upsert("subordinateVolume", id).with_owner("volume", volume_id)
}
/// Write-lock a subordinate volume to delete it.
pub fn delete_subordinate_volume(id: &str) -> Subquery {
    Subquery::delete("subordinateVolume", id)
}
