//! The one error type of the lock coordinator: every refusal and failure of planning, locking,
//! committing and explaining, each with a stable snake_case code (see [`LockError::code`]).

use crate::op::Op;

/// Everything Lock / NestedLock / a commit can refuse. A refused lock takes no lock.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LockError {
    /// Two non-list operations on one kind in one query.
    #[error(
        "query {query}: two operations on kind {kind} ({first} and {second}); use one query per resource"
    )]
    DuplicateOperation {
        query: usize,
        kind: String,
        first: Op,
        second: Op,
    },
    /// Two lists of one kind in one query.
    #[error(
        "query {query}: two lists of kind {kind} in one query (two operations on one kind); use one query per list"
    )]
    DuplicateList { query: usize, kind: String },
    /// A nested lock would take a lock that sorts before (or at) the last lock held.
    #[error(
        "nested lock would deadlock: {op} {kind} {id:?} sorts before the last lock held ({last_op} {last_kind} {last_id:?})"
    )]
    WouldDeadlock {
        op: Op,
        kind: String,
        id: String,
        last_op: Op,
        last_kind: String,
        last_id: String,
    },
    /// A nested lock asks to write a resource that is only read-held.
    #[error("nested lock cannot upgrade the read lock on {kind} {id:?} to a write ({op})")]
    LockUpgrade { op: Op, kind: String, id: String },
    /// A nested lock carries a key update.
    #[error("nested lock cannot update the key of {kind} {id:?} to {new_key:?}")]
    KeyUpdateInNested {
        kind: String,
        id: String,
        new_key: String,
    },
    /// A resource (or the owner a subquery needs) does not exist.
    #[error("{kind} {id:?} not found: {reason}")]
    NotFound {
        kind: String,
        id: String,
        reason: String,
    },
    /// A key (backend name, volume internal name) already belongs to another resource.
    #[error("{kind} key {key:?} already belongs to {kind} {owner:?} (wanted by {id:?})")]
    KeyExists {
        kind: String,
        key: String,
        owner: String,
        id: String,
    },
    /// A kind the schema does not declare.
    #[error("unknown kind {kind:?}")]
    UnknownKind { kind: String },
    /// A NestedLock with the context of a phase that was unlocked (or never finished locking).
    #[error(
        "transaction {txn}: the lock context is no longer valid (its locks were released); NestedLock needs the context of a phase that still holds its locks"
    )]
    ReleasedContext { txn: u64 },
    /// A NestedLock through a context of its transaction that a newer phase (a NestedLock still
    /// holding its locks) extends: only the newest context knows the last lock held.
    #[error(
        "transaction {txn}: the lock context is not the newest of its transaction (a NestedLock on it still holds its locks); NestedLock through the newest context, or unlock the newer phase first"
    )]
    StaleContext { txn: u64 },
    /// A top-level Lock from code that holds a transaction's locks (it passed that transaction's
    /// context): it could wait for a lock that sorts before one the transaction holds.
    #[error(
        "transaction {txn} still holds locks: a second top-level Lock from it could wait for a lock that sorts before one it holds; take further locks with NestedLock on its newest context, or unlock it first"
    )]
    LockWhileHeld { txn: u64 },
    /// A NestedLock with a context this coordinator did not issue, or one that was altered.
    #[error(
        "transaction {txn}: the lock context was not issued by this coordinator or was altered; pass the context Lock or NestedLock returned, unchanged"
    )]
    ForeignContext { txn: u64 },
    /// The coordinator is stopped.
    #[error("the lock coordinator is shutting down")]
    ShuttingDown,
    /// A subquery without an id whose id cannot be filled in.
    #[error("{op} {kind}: no id given and none can be filled in ({reason})")]
    MissingId {
        op: Op,
        kind: String,
        reason: String,
    },
    /// A commit that the subquery's operation does not allow (e.g. upsert through a read).
    #[error("{kind} {id:?}: {attempted} is not allowed through a {op} result")]
    WrongOperation {
        kind: String,
        id: String,
        op: Op,
        attempted: String,
    },
    /// A commit by a transaction that does not hold the needed lock.
    #[error("{kind} {id:?}: transaction {txn} does not hold the lock a {attempted} needs")]
    NotHeld {
        kind: String,
        id: String,
        txn: u64,
        attempted: String,
    },
    /// A commit or interior mutation through the result of a kind the query did not ask for.
    #[error(
        "the query asked nothing of kind {kind}: {attempted} needs a read, upsert or delete of it in the same query"
    )]
    NotAsked { kind: String, attempted: String },
    /// An interior mutation sent to a resource of another kind than the one that accepts it.
    #[error("{kind} accepts no interior mutation {name:?}")]
    UnknownMutation { kind: String, name: String },
    /// An interior mutation refused its arguments or the current value.
    #[error("{kind} {id:?}: interior mutation {name:?} refused: {reason}")]
    MutationRefused {
        kind: String,
        id: String,
        name: String,
        reason: String,
    },
}

impl LockError {
    /// The stable snake_case code of this error (used in `lock-plan` output and the admin endpoint).
    pub fn code(&self) -> &'static str {
        match self {
            LockError::DuplicateOperation { .. } => "duplicate_operation",
            LockError::DuplicateList { .. } => "duplicate_operation",
            LockError::WouldDeadlock { .. } => "would_deadlock",
            LockError::LockUpgrade { .. } => "lock_upgrade",
            LockError::KeyUpdateInNested { .. } => "key_update_in_nested",
            LockError::NotFound { .. } => "not_found",
            LockError::KeyExists { .. } => "key_exists",
            LockError::UnknownKind { .. } => "unknown_kind",
            LockError::ReleasedContext { .. } => "released_context",
            LockError::StaleContext { .. } => "stale_context",
            LockError::LockWhileHeld { .. } => "lock_while_held",
            LockError::ForeignContext { .. } => "foreign_context",
            LockError::ShuttingDown => "shutting_down",
            LockError::MissingId { .. } => "missing_id",
            LockError::WrongOperation { .. } => "wrong_operation",
            LockError::NotHeld { .. } => "not_held",
            LockError::NotAsked { .. } => "not_asked",
            LockError::UnknownMutation { .. } => "unknown_mutation",
            LockError::MutationRefused { .. } => "mutation_refused",
        }
    }
}

/// A schema declaration that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// The dependencies form a cycle; `cycle` lists the kinds along it, first kind repeated at the end.
    #[error("schema dependency cycle: {}", cycle.join(" -> "))]
    Cycle { cycle: Vec<String> },
    /// A kind declared twice.
    #[error("kind {kind:?} declared twice")]
    DuplicateKind { kind: String },
    /// A dependency on a kind that is not declared.
    #[error("kind {kind:?} depends on undeclared kind {parent:?}")]
    UnknownParent { kind: String, parent: String },
}
