//! The schema as data: declared kinds, their parents (with the field of a child's value that holds
//! each parent's id), their optional key field, and the derived rank.
//! New kinds are added by declaration only; cycles are rejected at construction.

use crate::error::SchemaError;
use crate::fast_hash::FxHashMap;
use serde_json::Value;
use std::sync::{Arc, OnceLock};

/// The synthetic kind every consistent lock reads (and shutdown writes).
pub const ROOT: &str = "root";
/// The id of the single root resource.
pub const ROOT_ID: &str = ".";

/// Up to this many kinds, [`Schema::kind`] scans instead of hashing.
const SCAN_KINDS_UP_TO: usize = 16;

/// One kind as declared: name, parents and key field. (A kind's interior mutations are the
/// variants of [`crate::mutation::Mutation`] that name it.)
#[derive(Clone)]
pub struct KindDecl {
    name: String,
    parents: Vec<(String, String)>,
    key_field: Option<String>,
}

impl KindDecl {
    /// A kind with no parents and no key.
    pub fn new(name: &str) -> Self {
        KindDecl {
            name: name.to_string(),
            parents: Vec::new(),
            key_field: None,
        }
    }
    /// Declares a parent kind; `field` is the field of this kind's value that holds the parent's id.
    pub fn depends_on(mut self, parent: &str, field: &str) -> Self {
        self.parents.push((parent.to_string(), field.to_string()));
        self
    }
    /// Declares the field of the value that is a second, unique address of the resource.
    pub fn keyed_by(mut self, field: &str) -> Self {
        self.key_field = Some(field.to_string());
        self
    }
}

/// A declared kind with its derived place in the total order.
#[derive(Debug)]
pub struct KindInfo {
    /// The kind's name (e.g. `volume`).
    pub name: String,
    /// Position in the declaration (the third sort key).
    pub position: usize,
    /// 1 + highest parent rank, 0 without parents (the second sort key).
    pub rank: u32,
    /// Parent kinds and the child field holding each parent's id.
    pub parents: Vec<(String, String)>,
    /// Field of the value that is a unique second address (backend `name`, volume `internalName`).
    pub key_field: Option<String>,
}

impl KindInfo {
    /// The id of `parent` recorded in a value of this kind, if the value carries it.
    pub fn owner_id(&self, value: &Value, parent: &str) -> Option<String> {
        self.owner_str(value, parent).map(str::to_string)
    }
    /// [`KindInfo::owner_id`], borrowed from the value.
    pub fn owner_str<'v>(&self, value: &'v Value, parent: &str) -> Option<&'v str> {
        let field = self
            .parents
            .iter()
            .find(|(p, _)| p == parent)
            .map(|(_, f)| f)?;
        value.get(field).and_then(Value::as_str)
    }
    /// The key recorded in a value of this kind, if the kind is keyed and the value carries one.
    pub fn key_of(&self, value: &Value) -> Option<String> {
        self.key_str(value).map(str::to_string)
    }
    /// [`KindInfo::key_of`], borrowed from the value.
    pub fn key_str<'v>(&self, value: &'v Value) -> Option<&'v str> {
        let field = self.key_field.as_ref()?;
        value
            .get(field)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    }
}

/// The declared kinds, in declaration order, with ranks.
#[derive(Debug)]
pub struct Schema {
    kinds: Vec<Arc<KindInfo>>,
    by_name: FxHashMap<String, usize>,
    /// Per kind, in declaration order: the name's length and its first eight bytes (the scan of
    /// [`Schema::kind`] compares these before the names).
    scan: Vec<(usize, u64)>,
}

/// The length of `name` and its first eight bytes, zero-padded.
fn scan_key(name: &str) -> (usize, u64) {
    let mut prefix = [0u8; 8];
    let n = name.len().min(8);
    prefix[..n].copy_from_slice(&name.as_bytes()[..n]);
    (name.len(), u64::from_le_bytes(prefix))
}

impl Schema {
    /// Builds a schema from declarations (order matters: it is the third sort key). A `root` kind
    /// is added first when not declared. Fails on duplicates, undeclared parents and cycles.
    pub fn new(decls: Vec<KindDecl>) -> Result<Schema, SchemaError> {
        let mut decls = decls;
        if !decls.iter().any(|d| d.name == ROOT) {
            decls.insert(0, KindDecl::new(ROOT));
        }
        let mut by_name = FxHashMap::default();
        for (i, d) in decls.iter().enumerate() {
            if by_name.insert(d.name.clone(), i).is_some() {
                return Err(SchemaError::DuplicateKind {
                    kind: d.name.clone(),
                });
            }
        }
        for d in &decls {
            for (p, _) in &d.parents {
                if !by_name.contains_key(p) {
                    return Err(SchemaError::UnknownParent {
                        kind: d.name.clone(),
                        parent: p.clone(),
                    });
                }
            }
        }
        let ranks = compute_ranks(&decls, &by_name)?;
        let kinds: Vec<Arc<KindInfo>> = decls
            .into_iter()
            .enumerate()
            .map(|(i, d)| {
                Arc::new(KindInfo {
                    name: d.name,
                    position: i,
                    rank: ranks[i],
                    parents: d.parents,
                    key_field: d.key_field,
                })
            })
            .collect();
        let scan = kinds.iter().map(|k| scan_key(&k.name)).collect();
        Ok(Schema {
            kinds,
            by_name,
            scan,
        })
    }

    /// The standard schema of the operator (design section 3), shared.
    pub fn standard() -> Arc<Schema> {
        static STANDARD: OnceLock<Arc<Schema>> = OnceLock::new();
        STANDARD
            .get_or_init(|| match Schema::new(standard_decls()) {
                Ok(s) => Arc::new(s),
                // The standard declarations are constants checked by tests; an error here is a bug.
                Err(e) => unreachable!("standard schema is invalid: {e}"),
            })
            .clone()
    }

    /// The kind declared under `name`. The planner asks this several times per entry: for a
    /// schema of a few kinds (the standard one has eleven) a scan comparing lengths first costs
    /// less than hashing the name.
    pub fn kind(&self, name: &str) -> Option<&Arc<KindInfo>> {
        if self.kinds.len() <= SCAN_KINDS_UP_TO {
            let key = scan_key(name);
            return self
                .scan
                .iter()
                .zip(&self.kinds)
                .find(|(k, info)| **k == key && info.name == name)
                .map(|(_, info)| info);
        }
        self.by_name.get(name).map(|&i| &self.kinds[i])
    }

    /// All kinds in declaration order.
    pub fn kinds(&self) -> &[Arc<KindInfo>] {
        &self.kinds
    }
}

fn compute_ranks(
    decls: &[KindDecl],
    by_name: &FxHashMap<String, usize>,
) -> Result<Vec<u32>, SchemaError> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Active,
        Done,
    }
    fn visit(
        i: usize,
        decls: &[KindDecl],
        by_name: &FxHashMap<String, usize>,
        marks: &mut [Mark],
        ranks: &mut [u32],
        stack: &mut Vec<usize>,
    ) -> Result<u32, SchemaError> {
        match marks[i] {
            Mark::Done => return Ok(ranks[i]),
            Mark::Active => {
                let start = stack.iter().position(|&k| k == i).unwrap_or(0);
                let mut cycle: Vec<String> = stack[start..]
                    .iter()
                    .map(|&k| decls[k].name.clone())
                    .collect();
                cycle.push(decls[i].name.clone());
                return Err(SchemaError::Cycle { cycle });
            }
            Mark::New => {}
        }
        marks[i] = Mark::Active;
        stack.push(i);
        let mut rank = 0;
        for (p, _) in &decls[i].parents {
            if let Some(&pi) = by_name.get(p) {
                rank = rank.max(1 + visit(pi, decls, by_name, marks, ranks, stack)?);
            }
        }
        stack.pop();
        marks[i] = Mark::Done;
        ranks[i] = rank;
        Ok(rank)
    }
    let mut marks = vec![Mark::New; decls.len()];
    let mut ranks = vec![0; decls.len()];
    let mut stack = Vec::new();
    for i in 0..decls.len() {
        visit(i, decls, by_name, &mut marks, &mut ranks, &mut stack)?;
    }
    Ok(ranks)
}

/// The standard declarations, in the declared kind order of design section 3.
pub fn standard_decls() -> Vec<KindDecl> {
    vec![
        KindDecl::new(ROOT),
        KindDecl::new("device"),
        KindDecl::new("storageClass"),
        KindDecl::new("groupSnapshot"),
        KindDecl::new("backend").keyed_by("name"),
        KindDecl::new("node"),
        KindDecl::new("autogrowPolicy"),
        KindDecl::new("volume")
            .depends_on("backend", "backend")
            .keyed_by("internalName"),
        KindDecl::new("subordinateVolume").depends_on("volume", "volume"),
        KindDecl::new("volumePublication")
            .depends_on("volume", "volume")
            .depends_on("node", "node"),
        KindDecl::new("snapshot").depends_on("volume", "volume"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_ranks_and_positions() {
        let s = Schema::standard();
        let rank = |k: &str| s.kind(k).map(|k| k.rank);
        for k in [
            "root",
            "device",
            "storageClass",
            "groupSnapshot",
            "backend",
            "node",
            "autogrowPolicy",
        ] {
            assert_eq!(rank(k), Some(0), "{k}");
        }
        assert_eq!(rank("volume"), Some(1));
        for k in ["subordinateVolume", "volumePublication", "snapshot"] {
            assert_eq!(rank(k), Some(2), "{k}");
        }
        let names: Vec<_> = s.kinds().iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names[4], "backend");
        assert_eq!(names[10], "snapshot");
    }

    #[test]
    fn cycle_is_rejected_and_named() {
        let err = Schema::new(vec![
            KindDecl::new("a").depends_on("c", "c"),
            KindDecl::new("b").depends_on("a", "a"),
            KindDecl::new("c").depends_on("b", "b"),
        ])
        .unwrap_err();
        assert_eq!(
            err,
            SchemaError::Cycle {
                cycle: vec!["a".into(), "c".into(), "b".into(), "a".into()]
            }
        );
        assert!(err.to_string().contains("a -> c -> b -> a"));
    }

    #[test]
    fn new_kind_by_declaration_gets_rank() {
        let mut decls = standard_decls();
        decls.push(KindDecl::new("snapshotClone").depends_on("snapshot", "snapshot"));
        let s = Schema::new(decls).unwrap();
        assert_eq!(s.kind("snapshotClone").map(|k| k.rank), Some(3));
    }

    #[test]
    fn undeclared_parent_and_duplicate_rejected() {
        assert!(matches!(
            Schema::new(vec![KindDecl::new("x").depends_on("y", "y")]),
            Err(SchemaError::UnknownParent { .. })
        ));
        assert!(matches!(
            Schema::new(vec![KindDecl::new("x"), KindDecl::new("x")]),
            Err(SchemaError::DuplicateKind { .. })
        ));
    }
}
