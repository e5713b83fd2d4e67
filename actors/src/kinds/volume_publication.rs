//! The volume publication kind: its query constructors (parents: volume and node; id
//! `"<volume>.<node>"`).

use crate::op::Op;
use crate::subquery::Subquery;

/// The id of the publication of `volume_id` on `node_id`: `"<volume>.<node>"`.
pub fn publication_id(volume_id: &str, node_id: &str) -> String {
    format!("{volume_id}.{node_id}")
}

pub(crate) fn publication(op: Op, volume_id: &str, node_id: &str) -> Subquery {
    Subquery::new(op, "volumePublication", &publication_id(volume_id, node_id))
        .with_owner("volume", volume_id)
        .with_owner("node", node_id)
}
/// List every volume publication.
pub fn list_volume_publications() -> Subquery {
    Subquery::list("volumePublication")
}
/// List the publications of one volume.
pub fn list_volume_publications_for_volume(volume_id: &str) -> Subquery {
    Subquery::list_for("volumePublication", "volume", volume_id)
}
/// List the publications on one node.
pub fn list_volume_publications_for_node(node_id: &str) -> Subquery {
    Subquery::list_for("volumePublication", "node", node_id)
}
/// Read-lock the publication of a volume on a node.
pub fn read_volume_publication(volume_id: &str, node_id: &str) -> Subquery {
    publication(Op::Read, volume_id, node_id)
}
/// Copy a publication without locking.
pub fn inconsistent_read_volume_publication(volume_id: &str, node_id: &str) -> Subquery {
    publication(Op::InconsistentRead, volume_id, node_id)
}
/// Write-lock the publication of a volume on a node (id `"<volume>.<node>"`).
pub fn upsert_volume_publication(volume_id: &str, node_id: &str) -> Subquery {
    publication(Op::Upsert, volume_id, node_id)
}
/// Write-lock a publication to delete it.
pub fn delete_volume_publication(volume_id: &str, node_id: &str) -> Subquery {
    publication(Op::Delete, volume_id, node_id)
}
