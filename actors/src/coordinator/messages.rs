//! What the coordinator's callers ask it, besides a phase's `Begin` (which hands over the caller's
//! part of the phase, `actor.rs`): the acquisition (`acquire.rs`) resolves resource actors, checks
//! new keys and collects lists and reads from the catalog; a phase's ticket ends it; the handle
//! peeks, explains, inspects and stops; a commit handle resolves the actor of its resource.

use crate::error::LockError;
use crate::inspect::CoordinatorSnapshot;
use crate::plan::{EntryAction, LockContext, Plan, PlanEntry};
use crate::query::Query;
use crate::resource_actor::ResourceRef;
use actix::prelude::*;
use serde_json::Value;
use std::sync::Arc;

/// A phase released its locks (or failed, or was abandoned): remove it from the table. Sent after
/// the phase's releases, so an inspection that no longer shows the phase asks the resource actors
/// after those releases.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct PhaseDone {
    pub(crate) phase: u64,
}

/// The actor of (kind, id), started again when the one the caller had (`stale`) stopped.
#[derive(Message)]
#[rtype(result = "ResourceRef")]
pub(crate) struct Resolve {
    pub(crate) kind: String,
    pub(crate) id: String,
    pub(crate) stale: Option<u64>,
}

/// The key locks of a phase are held: are its new keys still free?
#[derive(Message)]
#[rtype(result = "Result<(), LockError>")]
pub(crate) struct CheckNewKeys {
    pub(crate) phase: u64,
}

/// What the results of a granted phase need from the catalog: per plan entry (by position) a
/// list, an inconsistent read or the value of a lock an earlier phase holds.
#[derive(Message)]
#[rtype(result = "Vec<Collected>")]
pub(crate) struct Collect {
    pub(crate) entries: Vec<(usize, PlanEntry, EntryAction)>,
}

/// One answer of a [`Collect`].
pub(crate) enum Collected {
    List(usize, Vec<(String, Arc<Value>)>),
    Value(usize, Option<Arc<Value>>),
}

/// An inconsistent copy of one value (no lock).
#[derive(Message)]
#[rtype(result = "Option<Arc<Value>>")]
pub(crate) struct Peek {
    pub(crate) kind: String,
    pub(crate) id: String,
}

/// Plan `queries` against the catalog without taking anything (explain).
#[derive(Message)]
#[rtype(result = "Result<Plan, LockError>")]
pub(crate) struct Explain {
    pub(crate) queries: Vec<Query>,
    pub(crate) context: Option<LockContext>,
}

/// Stop the coordinator actor.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Stop;

/// Report the transaction table and every live resource actor.
#[derive(Message)]
#[rtype(result = "CoordinatorSnapshot")]
pub(crate) struct Inspect;
