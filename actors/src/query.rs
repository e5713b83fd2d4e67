//! The query vocabulary: operations, subqueries, queries, the snake_case constructors of the
//! reference cache's calls (`upsert_volume_publication`, `list_volumes_for_backend`, ...) and the parser of
//! the reference cache's call names (`UpsertVolumePublication`, ...) used by `lock-plan`.

pub use crate::op::Op;
use crate::schema::{KindInfo, Schema};

/// One operation on one kind. Build them with the constructors of this module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subquery {
    /// The operation.
    pub op: Op,
    /// The kind.
    pub kind: String,
    /// The resource id; empty when it is to be filled in (from a child or from `key`).
    pub id: String,
    /// Owner ids given by the caller: (parent kind, parent id).
    pub owners: Vec<(String, String)>,
    /// For lists: only values whose parent `.0` is `.1`.
    pub filter: Option<(String, String)>,
    /// Address by key (backend name, volume internal name) when `id` is empty.
    pub key: Option<String>,
    /// A new key to assign (a rename), serialized by a key lock.
    pub new_key: Option<String>,
}

impl Subquery {
    fn new(op: Op, kind: &str, id: &str) -> Self {
        Subquery {
            op,
            kind: kind.to_string(),
            id: id.to_string(),
            owners: Vec::new(),
            filter: None,
            key: None,
            new_key: None,
        }
    }
    /// List every value of `kind`.
    pub fn list(kind: &str) -> Self {
        Subquery::new(Op::List, kind, "")
    }
    /// List the values of `kind` whose parent `parent` has id `parent_id`.
    pub fn list_for(kind: &str, parent: &str, parent_id: &str) -> Self {
        let mut s = Subquery::new(Op::List, kind, "");
        s.filter = Some((parent.to_string(), parent_id.to_string()));
        s
    }
    /// Shared lock on (kind, id) and a copy of its value.
    pub fn read(kind: &str, id: &str) -> Self {
        Subquery::new(Op::Read, kind, id)
    }
    /// A copy of (kind, id) without any lock.
    pub fn inconsistent_read(kind: &str, id: &str) -> Self {
        Subquery::new(Op::InconsistentRead, kind, id)
    }
    /// Exclusive lock on (kind, id), a copy, and an upsert commit handle.
    pub fn upsert(kind: &str, id: &str) -> Self {
        Subquery::new(Op::Upsert, kind, id)
    }
    /// Exclusive lock on (kind, id), a copy, and a delete commit handle.
    pub fn delete(kind: &str, id: &str) -> Self {
        Subquery::new(Op::Delete, kind, id)
    }
    /// Records the owner `parent` id given by the caller (empty ids are ignored).
    pub fn with_owner(mut self, parent: &str, parent_id: &str) -> Self {
        if !parent_id.is_empty() {
            self.owners
                .push((parent.to_string(), parent_id.to_string()));
        }
        self
    }
    /// Addresses the resource by key when the id is empty (empty keys are ignored).
    pub fn with_key(mut self, key: &str) -> Self {
        if !key.is_empty() {
            self.key = Some(key.to_string());
        }
        self
    }
    /// Assigns a new key (empty keys are ignored).
    pub fn with_new_key(mut self, new_key: &str) -> Self {
        if !new_key.is_empty() {
            self.new_key = Some(new_key.to_string());
        }
        self
    }
    /// The owner id the caller gave for `parent`.
    pub fn owner(&self, parent: &str) -> Option<&str> {
        self.owners
            .iter()
            .find(|(p, _)| p == parent)
            .map(|(_, id)| id.as_str())
    }
}

/// One query: subqueries whose results land in one result (one per query argument of Lock).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Query(pub Vec<Subquery>);

impl Query {
    /// A query of these subqueries.
    pub fn new(subqueries: Vec<Subquery>) -> Self {
        Query(subqueries)
    }
}

/// `Query::new(vec![...])`, the reference cache's `db.Query(...)`.
pub fn query(subqueries: impl IntoIterator<Item = Subquery>) -> Query {
    Query(subqueries.into_iter().collect())
}

macro_rules! simple_kind {
    ($kind:literal, $list:ident, $read:ident, $iread:ident, $upsert:ident, $delete:ident) => {
        #[doc = concat!("List every ", $kind, ".")]
        pub fn $list() -> Subquery {
            Subquery::list($kind)
        }
        #[doc = concat!("Read-lock a ", $kind, ".")]
        pub fn $read(id: &str) -> Subquery {
            Subquery::read($kind, id)
        }
        #[doc = concat!("Copy a ", $kind, " without locking.")]
        pub fn $iread(id: &str) -> Subquery {
            Subquery::inconsistent_read($kind, id)
        }
        #[doc = concat!("Write-lock a ", $kind, " to upsert it.")]
        pub fn $upsert(id: &str) -> Subquery {
            Subquery::upsert($kind, id)
        }
        #[doc = concat!("Write-lock a ", $kind, " to delete it.")]
        pub fn $delete(id: &str) -> Subquery {
            Subquery::delete($kind, id)
        }
    };
}

simple_kind!(
    "device",
    list_devices,
    read_device,
    inconsistent_read_device,
    upsert_device,
    delete_device
);
simple_kind!(
    "storageClass",
    list_storage_classes,
    read_storage_class,
    inconsistent_read_storage_class,
    upsert_storage_class,
    delete_storage_class
);
simple_kind!(
    "groupSnapshot",
    list_group_snapshots,
    read_group_snapshot,
    inconsistent_read_group_snapshot,
    upsert_group_snapshot,
    delete_group_snapshot
);
simple_kind!(
    "node",
    list_nodes,
    read_node,
    inconsistent_read_node,
    upsert_node,
    delete_node
);
simple_kind!(
    "autogrowPolicy",
    list_autogrow_policies,
    read_autogrow_policy,
    inconsistent_read_autogrow_policy,
    upsert_autogrow_policy,
    delete_autogrow_policy
);

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

/// The id of the publication of `volume_id` on `node_id`: `"<volume>.<node>"`.
pub fn publication_id(volume_id: &str, node_id: &str) -> String {
    format!("{volume_id}.{node_id}")
}

fn publication(op: Op, volume_id: &str, node_id: &str) -> Subquery {
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

/// A call name that could not be turned into a subquery.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// No kind of the schema has this call.
    #[error("unknown call {0:?}")]
    UnknownCall(String),
    /// The call exists but takes another number of arguments.
    #[error("{call} takes {expected} argument(s) ({names}), got {got}")]
    WrongArgumentCount {
        call: String,
        expected: usize,
        names: String,
        got: usize,
    },
}

/// The reference cache's name of a kind in calls: `volumePublication` → `VolumePublication`.
pub fn pascal(kind: &str) -> String {
    let mut c = kind.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The plural in list calls: `Volumes`, `StorageClasses`, `AutogrowPolicies`.
pub fn plural(kind: &str) -> String {
    let p = pascal(kind);
    if let Some(stem) = p.strip_suffix('y') {
        format!("{stem}ies")
    } else if p.ends_with('s') {
        format!("{p}es")
    } else {
        format!("{p}s")
    }
}

/// The argument names of a call with the reference cache's conventions.
fn arg_names(op: Op, kind: &KindInfo) -> &'static [&'static str] {
    match (op, kind.name.as_str()) {
        (Op::List, _) => &[],
        (Op::Upsert, "backend") => &["id", "name", "newName"],
        (Op::Upsert, "volume") => &["volumeId", "backendId"],
        (_, "volumePublication") => &["volumeId", "nodeId"],
        (Op::Upsert, "snapshot") => &["volumeId", "snapshotId"],
        (Op::Upsert, "subordinateVolume") => &["id", "volumeId"],
        _ => &["id"],
    }
}

/// Parses a reference-cache call name with its arguments (`UpsertBackend`, `["backend1", "", ""]`) into a
/// subquery of `schema`. List calls: `List<Plural>` and `List<Plural>For<Parent>(parentId)`.
pub fn parse_call(schema: &Schema, call: &str, args: &[String]) -> Result<Subquery, CallError> {
    let unknown = || CallError::UnknownCall(call.to_string());
    let check = |names: &[&str]| {
        if names.len() == args.len() {
            Ok(())
        } else {
            Err(CallError::WrongArgumentCount {
                call: call.to_string(),
                expected: names.len(),
                names: names.join(", "),
                got: args.len(),
            })
        }
    };
    if let Some(rest) = call.strip_prefix("List") {
        for kind in schema.kinds() {
            let pl = plural(&kind.name);
            if rest == pl {
                check(&[])?;
                return Ok(Subquery::list(&kind.name));
            }
            if let Some(parent) = rest.strip_prefix(&pl).and_then(|r| r.strip_prefix("For"))
                && let Some((p, _)) = kind.parents.iter().find(|(p, _)| pascal(p) == parent)
            {
                let idname = format!("{p}Id");
                check(&[idname.as_str()])?;
                return Ok(Subquery::list_for(&kind.name, p, &args[0]));
            }
        }
        return Err(unknown());
    }
    let (op, rest, by_key) = if let Some(r) = call.strip_prefix("InconsistentRead") {
        (Op::InconsistentRead, r, false)
    } else if let Some(r) = call.strip_prefix("Read") {
        match r
            .strip_suffix("ByName")
            .or_else(|| r.strip_suffix("ByInternalName"))
        {
            Some(base) => (Op::Read, base, true),
            None => (Op::Read, r, false),
        }
    } else if let Some(r) = call.strip_prefix("Upsert") {
        (Op::Upsert, r, false)
    } else if let Some(r) = call.strip_prefix("Delete") {
        (Op::Delete, r, false)
    } else {
        return Err(unknown());
    };
    let kind = schema
        .kinds()
        .iter()
        .find(|k| pascal(&k.name) == rest)
        .ok_or_else(unknown)?;
    if by_key {
        if kind.key_field.is_none() {
            return Err(unknown());
        }
        check(&["key"])?;
        return Ok(Subquery::new(op, &kind.name, "").with_key(&args[0]));
    }
    let names = arg_names(op, kind);
    check(names)?;
    Ok(match (op, kind.name.as_str()) {
        (Op::Upsert, "backend") => upsert_backend(&args[0], &args[1], &args[2]),
        (Op::Upsert, "volume") => upsert_volume(&args[0], &args[1]),
        (_, "volumePublication") => publication(op, &args[0], &args[1]),
        (Op::Upsert, "snapshot") => upsert_snapshot(&args[0], &args[1]),
        (Op::Upsert, "subordinateVolume") => upsert_subordinate_volume(&args[0], &args[1]),
        _ => Subquery::new(op, &kind.name, &args[0]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn parses_seed_calls() {
        let schema = Schema::standard();
        assert_eq!(
            parse_call(&schema, "ListVolumes", &[]).unwrap(),
            list_volumes()
        );
        assert_eq!(
            parse_call(&schema, "ListStorageClasses", &[]).unwrap(),
            list_storage_classes()
        );
        assert_eq!(
            parse_call(&schema, "ListAutogrowPolicies", &[]).unwrap(),
            list_autogrow_policies()
        );
        assert_eq!(
            parse_call(&schema, "ListVolumePublicationsForNode", &s(&["n"])).unwrap(),
            list_volume_publications_for_node("n")
        );
        assert_eq!(
            parse_call(&schema, "UpsertVolumePublication", &s(&["v", "n"])).unwrap(),
            upsert_volume_publication("v", "n")
        );
        assert_eq!(upsert_volume_publication("v", "n").id, "v.n");
        assert_eq!(
            parse_call(&schema, "UpsertBackend", &s(&["b", "", "x"])).unwrap(),
            upsert_backend("b", "", "x")
        );
        assert_eq!(
            parse_call(&schema, "InconsistentReadNode", &s(&["n"])).unwrap(),
            inconsistent_read_node("n")
        );
        assert_eq!(
            parse_call(&schema, "ReadBackendByName", &s(&["b1"])).unwrap(),
            read_backend_by_name("b1")
        );
        assert_eq!(
            parse_call(&schema, "DeleteDevice", &s(&["d"])).unwrap(),
            delete_device("d")
        );
    }

    #[test]
    fn rejects_unknown_calls_and_wrong_counts() {
        let schema = Schema::standard();
        assert_eq!(
            parse_call(&schema, "FrobVolume", &[]),
            Err(CallError::UnknownCall("FrobVolume".into()))
        );
        assert_eq!(
            parse_call(&schema, "ReadGadget", &s(&["x"])),
            Err(CallError::UnknownCall("ReadGadget".into()))
        );
        assert!(matches!(
            parse_call(&schema, "UpsertBackend", &s(&["b"])),
            Err(CallError::WrongArgumentCount {
                expected: 3,
                got: 1,
                ..
            })
        ));
        assert!(matches!(
            parse_call(&schema, "ReadNodeByName", &s(&["b"])),
            Err(CallError::UnknownCall(_))
        ));
    }
}
