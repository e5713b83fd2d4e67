//! The operation of a subquery ([`Op`]) and its order.

use serde::Serialize;
use std::fmt;

/// An operation of a subquery. The declaration order is the operation order of the total order
/// among non-list operations on one (kind, id): upsert < delete < read < inconsistent read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// Exclusive lock; the result can upsert.
    Upsert,
    /// Exclusive lock; the result can delete.
    Delete,
    /// Shared lock; the result holds a copy and can run interior mutations.
    Read,
    /// No lock: a copy of the current value.
    InconsistentRead,
    /// No per-resource lock: copies of all (matching) values of a kind.
    List,
}

impl Op {
    /// The name used in `lock-plan` output.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Upsert => "upsert",
            Op::Delete => "delete",
            Op::Read => "read",
            Op::InconsistentRead => "inconsistent_read",
            Op::List => "list",
        }
    }
    /// Whether the operation takes a per-resource lock (read, upsert, delete).
    pub fn is_consistent(self) -> bool {
        matches!(self, Op::Upsert | Op::Delete | Op::Read)
    }
    /// Whether the operation takes an exclusive lock.
    pub fn is_write(self) -> bool {
        matches!(self, Op::Upsert | Op::Delete)
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
