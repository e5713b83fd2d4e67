//! The query vocabulary in one place: operations, subqueries and queries (`subquery.rs`), the
//! snake_case constructors of the reference cache's calls (`upsert_volume_publication`,
//! `list_volumes_for_backend`, ...; declared in their kind's file under `kinds/`), all re-exported
//! here, and the parser of the reference cache's call names (`UpsertVolumePublication`, ...) used
//! by `lock-plan`.

pub use crate::kinds::autogrow_policy::*;
pub use crate::kinds::backend::*;
pub use crate::kinds::device::*;
pub use crate::kinds::group_snapshot::*;
pub use crate::kinds::node::*;
pub use crate::kinds::snapshot::*;
pub use crate::kinds::storage_class::*;
pub use crate::kinds::subordinate_volume::*;
pub use crate::kinds::volume::*;
use crate::kinds::volume_publication::publication;
pub use crate::kinds::volume_publication::*;
pub use crate::op::Op;
use crate::schema::{KindInfo, Schema};
pub use crate::subquery::{Query, Subquery, query};

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
