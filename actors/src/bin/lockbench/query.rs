//! The benchmark's own query vocabulary: the handful of reference-cache calls the workloads use
//! (a subset of the coordinator's vocabulary), kept engine-neutral so that every engine runs
//! exactly the same transactions. Engines translate these into their own calls.

use std::fmt;

/// Resource kinds used by the workloads, in the declared order of the standard schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Root,
    Backend,
    Node,
    Volume,
    VolumePublication,
    Snapshot,
}

impl Kind {
    /// Every kind, indexable by [`Kind::index`].
    pub const ALL: [Kind; 6] = [
        Kind::Root,
        Kind::Backend,
        Kind::Node,
        Kind::Volume,
        Kind::VolumePublication,
        Kind::Snapshot,
    ];

    /// Dense index of the kind (for per-kind tables).
    pub fn index(self) -> usize {
        self as usize
    }

    /// Schema rank: 1 + highest parent rank, 0 without parents.
    pub fn rank(self) -> u8 {
        match self {
            Kind::Root | Kind::Backend | Kind::Node => 0,
            Kind::Volume => 1,
            Kind::VolumePublication | Kind::Snapshot => 2,
        }
    }

    /// Position in the declared kind order of the standard schema (design section 3).
    pub fn position(self) -> u8 {
        match self {
            Kind::Root => 0,
            Kind::Backend => 4,
            Kind::Node => 5,
            Kind::Volume => 7,
            Kind::VolumePublication => 9,
            Kind::Snapshot => 10,
        }
    }

    /// Schema parents (the reference cache's schema).
    pub fn parents(self) -> &'static [Kind] {
        match self {
            Kind::Root | Kind::Backend | Kind::Node => &[],
            Kind::Volume => &[Kind::Backend],
            Kind::VolumePublication => &[Kind::Volume, Kind::Node],
            Kind::Snapshot => &[Kind::Volume],
        }
    }

    /// The field of a child's JSON value naming its parent of `parent` kind.
    pub fn parent_field(self, parent: Kind) -> Option<&'static str> {
        match (self, parent) {
            (Kind::Volume, Kind::Backend) => Some("backend"),
            (Kind::VolumePublication, Kind::Volume) | (Kind::Snapshot, Kind::Volume) => {
                Some("volume")
            }
            (Kind::VolumePublication, Kind::Node) => Some("node"),
            _ => None,
        }
    }
}

impl Kind {
    /// The kind's name in the schema (as the coordinator spells it).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Root => "root",
            Kind::Backend => "backend",
            Kind::Node => "node",
            Kind::Volume => "volume",
            Kind::VolumePublication => "volumePublication",
            Kind::Snapshot => "snapshot",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Operation of a subquery, in the tie-break order of the total order (writes before reads).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    Upsert,
    Read,
    List,
}

/// One call of the vocabulary, e.g. `UpsertVolume("volume1", "backend1")`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sub {
    pub op: Op,
    pub kind: Kind,
    /// Resource id; empty when the planner must fill it in (e.g. `ReadBackend("")`).
    pub id: String,
    /// Parent ids given by the caller, as (parent kind, id).
    pub parents: Vec<(Kind, String)>,
    /// For owner-filtered lists: only values whose parent of this kind has this id.
    pub owner: Option<(Kind, String)>,
}

/// One query: the subqueries whose results land in the same result row.
pub type Query = Vec<Sub>;

fn sub(op: Op, kind: Kind, id: &str, parents: Vec<(Kind, String)>) -> Sub {
    Sub {
        op,
        kind,
        id: id.to_owned(),
        parents,
        owner: None,
    }
}

fn parent(kind: Kind, id: &str) -> Vec<(Kind, String)> {
    if id.is_empty() {
        Vec::new()
    } else {
        vec![(kind, id.to_owned())]
    }
}

/// `UpsertVolume(volumeId, backendId)`.
pub fn upsert_volume(volume: &str, backend: &str) -> Sub {
    sub(
        Op::Upsert,
        Kind::Volume,
        volume,
        parent(Kind::Backend, backend),
    )
}

/// `UpsertVolumePublication(volumeId, nodeId)`; the id is `"<volume>.<node>"`.
pub fn upsert_volume_publication(volume: &str, node: &str) -> Sub {
    let mut parents = parent(Kind::Volume, volume);
    parents.extend(parent(Kind::Node, node));
    sub(
        Op::Upsert,
        Kind::VolumePublication,
        &format!("{volume}.{node}"),
        parents,
    )
}

/// `UpsertSnapshot(volumeId, snapshotId)`.
pub fn upsert_snapshot(volume: &str, snapshot: &str) -> Sub {
    sub(
        Op::Upsert,
        Kind::Snapshot,
        snapshot,
        parent(Kind::Volume, volume),
    )
}

/// `UpsertBackend(id, "", "")`.
pub fn upsert_backend(backend: &str) -> Sub {
    sub(Op::Upsert, Kind::Backend, backend, Vec::new())
}

/// `ReadBackend(id)`; an empty id is filled in from a child in the same query.
pub fn read_backend(backend: &str) -> Sub {
    sub(Op::Read, Kind::Backend, backend, Vec::new())
}

/// `ListVolumes()`.
pub fn list_volumes() -> Sub {
    sub(Op::List, Kind::Volume, "", Vec::new())
}

/// `ListVolumePublications()`.
pub fn list_volume_publications() -> Sub {
    sub(Op::List, Kind::VolumePublication, "", Vec::new())
}

/// `ListVolumesForBackend(backendId)`.
pub fn list_volumes_for_backend(backend: &str) -> Sub {
    Sub {
        owner: Some((Kind::Backend, backend.to_owned())),
        ..sub(Op::List, Kind::Volume, "", Vec::new())
    }
}
