//! The snapshot kind: its query constructors (parent: volume).

use crate::subquery::Subquery;

/// List every snapshot.
pub fn list_snapshots() -> Subquery {
    Subquery::list("snapshot")
}
/// List the snapshots of one volume.
pub fn list_snapshots_for_volume(volume_id: &str) -> Subquery {
    Subquery::list_for("snapshot", "volume", volume_id)
}
/// Read-lock a snapshot.
pub fn read_snapshot(snapshot_id: &str) -> Subquery {
    Subquery::read("snapshot", snapshot_id)
}
/// Copy a snapshot without locking.
pub fn inconsistent_read_snapshot(snapshot_id: &str) -> Subquery {
    Subquery::inconsistent_read("snapshot", snapshot_id)
}
/// Write-lock a snapshot of a volume.
pub fn upsert_snapshot(volume_id: &str, snapshot_id: &str) -> Subquery {
    Subquery::upsert("snapshot", snapshot_id).with_owner("volume", volume_id)
}
/// Write-lock a snapshot to delete it.
pub fn delete_snapshot(snapshot_id: &str) -> Subquery {
    Subquery::delete("snapshot", snapshot_id)
}
