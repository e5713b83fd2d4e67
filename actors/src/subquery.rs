//! A subquery (one operation on one kind) and a query (the subqueries whose results land in one
//! result).

use crate::op::Op;

/// One operation on one kind. Build them with the constructors of `query` (declared per kind in
/// `kinds/`).
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
    pub(crate) fn new(op: Op, kind: &str, id: &str) -> Self {
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
