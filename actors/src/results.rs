//! Results of a Lock / NestedLock, typed as the reference cache's are: one [`QueryResult`] per
//! query with a field per kind (`results[0].volume.read`, `results[0].volume.upsert(v)`,
//! `results[0].backend.reserve_capacity(n)`) and a list per kind (`results[0].volumes`). A result
//! holds a working copy (mutating it changes nothing) and the handle whose upsert / delete /
//! interior mutation is a message to the owning resource actor. Results live inside the guard
//! that holds their locks ([`crate::Locked`]) and are only lent out: they cannot be copied,
//! moved out or used once the guard is unlocked or dropped.

use crate::coordinator::messages::Resolve;
use crate::error::LockError;
use crate::kind::Kind;
use crate::mutation::Mutation;
use crate::query::Op;
use crate::resource_actor::{Change, Commit, Mutate, ResourceRef};
use actix::Recipient;
use serde_json::Value;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// A working copy of a value read under a lock: it shares the value the resource held at lock
/// time until it is first mutated, and is copied then (copy on write, `Arc::make_mut`). Mutating
/// it changes nothing in the cache; commit it with [`ResourceResult::upsert`]. It dereferences to
/// [`Value`], so `copy["field"] = json!(1)`, `copy.as_object_mut()` and `&*copy` work as on a
/// `Value`.
#[derive(Clone, PartialEq)]
pub struct WorkingCopy(Arc<Value>);

impl WorkingCopy {
    /// A working copy of `value`.
    pub fn new(value: Value) -> Self {
        WorkingCopy(Arc::new(value))
    }
    /// The copy as a plain value (a deep copy only if it is still shared).
    pub fn into_value(self) -> Value {
        Arc::unwrap_or_clone(self.0)
    }
    /// The copy as a shared value (no copy).
    pub fn into_shared(self) -> Arc<Value> {
        self.0
    }
    pub(crate) fn shared(value: Arc<Value>) -> Self {
        WorkingCopy(value)
    }
}

impl std::fmt::Debug for WorkingCopy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl Deref for WorkingCopy {
    type Target = Value;
    fn deref(&self) -> &Value {
        &self.0
    }
}

impl DerefMut for WorkingCopy {
    fn deref_mut(&mut self) -> &mut Value {
        Arc::make_mut(&mut self.0)
    }
}

impl AsRef<Value> for WorkingCopy {
    fn as_ref(&self) -> &Value {
        &self.0
    }
}

impl PartialEq<Value> for WorkingCopy {
    fn eq(&self, other: &Value) -> bool {
        *self.0 == *other
    }
}

impl From<Value> for WorkingCopy {
    fn from(value: Value) -> Self {
        WorkingCopy::new(value)
    }
}

impl From<WorkingCopy> for Value {
    fn from(copy: WorkingCopy) -> Self {
        copy.into_value()
    }
}

impl From<WorkingCopy> for Arc<Value> {
    fn from(copy: WorkingCopy) -> Self {
        copy.0
    }
}

/// One listed value with its id.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    /// The id.
    pub id: String,
    /// The value (shared, immutable).
    pub value: Arc<Value>,
}

/// The result of the query's read, upsert, delete or inconsistent read of one kind. A kind the
/// query did not ask for has an empty result (`op()` is `None`, `read` is `None`) whose commits
/// are refused (`not_asked`). Neither `Clone` nor constructible outside the crate: it lives in the
/// guard's results.
#[derive(Debug)]
pub struct ResourceResult {
    kind: Kind,
    id: String,
    op: Option<Op>,
    /// A working copy of the value when the lock was taken (shared until mutated); `None` when it
    /// did not exist or the query did not ask for this kind.
    pub read: Option<WorkingCopy>,
    target: Option<CommitTarget>,
}

#[derive(Clone)]
pub(crate) struct CommitTarget {
    pub(crate) coordinator: Arc<Recipient<Resolve>>,
    pub(crate) txn: u64,
    pub(crate) resource: Option<ResourceRef>,
}

impl std::fmt::Debug for CommitTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommitTarget")
            .field("txn", &self.txn)
            .field("resource", &self.resource)
            .finish()
    }
}

impl ResourceResult {
    fn empty(kind: Kind) -> Self {
        ResourceResult {
            kind,
            id: String::new(),
            op: None,
            read: None,
            target: None,
        }
    }

    /// The kind.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The resource id (empty when the query did not ask for this kind).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The subquery's operation (it decides which commits are allowed); `None` when the query did
    /// not ask for this kind.
    pub fn op(&self) -> Option<Op> {
        self.op
    }

    fn refused(&self, attempted: &str) -> LockError {
        match self.op {
            None => LockError::NotAsked {
                kind: self.kind.name().to_string(),
                attempted: attempted.to_string(),
            },
            Some(op) => LockError::WrongOperation {
                kind: self.kind.name().to_string(),
                id: self.id.clone(),
                op,
                attempted: attempted.to_string(),
            },
        }
    }

    /// The transaction and the actor that owns the resource (resolved through the coordinator
    /// when the lock was taken by an earlier phase).
    async fn resource(&self, attempted: &str) -> Result<(u64, ResourceRef), LockError> {
        let t = self
            .target
            .as_ref()
            .ok_or_else(|| self.refused(attempted))?;
        if let Some(r) = &t.resource
            && r.connected()
        {
            return Ok((t.txn, r.clone()));
        }
        let r = t
            .coordinator
            .send(Resolve {
                kind: self.kind.name().to_string(),
                id: self.id.clone(),
                stale: t.resource.as_ref().map(|r| r.generation),
            })
            .await
            .map_err(|_| LockError::ShuttingDown)?;
        Ok((t.txn, r))
    }

    /// Commits `value` (a [`Value`], or a [`WorkingCopy`] without copying it) as the new value
    /// (only through an upsert result): a message to the resource's actor, answered once the
    /// value is set (or refused: lock not held, key taken).
    pub async fn upsert(&self, value: impl Into<Arc<Value>>) -> Result<(), LockError> {
        if self.op != Some(Op::Upsert) {
            return Err(self.refused("upsert"));
        }
        let (txn, r) = self.resource("upsert").await?;
        r.send(Commit {
            txn,
            change: Change::Upsert(value.into()),
        })
        .await
        .map_err(|_| LockError::ShuttingDown)?
    }

    /// Deletes the resource (only through a delete result).
    pub async fn delete(&self) -> Result<(), LockError> {
        if self.op != Some(Op::Delete) {
            return Err(self.refused("delete"));
        }
        let (txn, r) = self.resource("delete").await?;
        r.send(Commit {
            txn,
            change: Change::Delete,
        })
        .await
        .map_err(|_| LockError::ShuttingDown)?
    }

    /// Runs an interior mutation (allowed while read- or write-held); returns the new value. The
    /// kinds' results call it with their own mutations ([`BackendResult::reserve_capacity`]).
    async fn mutate(&self, mutation: Mutation) -> Result<Value, LockError> {
        let attempted = mutation.name();
        if !self.op.is_some_and(Op::is_consistent) {
            return Err(self.refused(attempted));
        }
        let (txn, r) = self.resource(attempted).await?;
        r.send(Mutate { txn, mutation })
            .await
            .map_err(|_| LockError::ShuttingDown)?
    }
}

/// The result of a backend: a [`ResourceResult`] (it dereferences to one) with the backend's
/// interior mutations, allowed while the backend is only read-held. Other kinds have none:
///
/// ```compile_fail,E0599
/// # use cinder_actors::{CoordinatorHandle, query::*};
/// # async fn f(cache: CoordinatorHandle) -> Result<(), cinder_actors::LockError> {
/// let locked = cache.lock(vec![query([read_node("n1")])]).await?;
/// locked.results()[0].node.reserve_capacity(1).await?; // error: no such method on a node
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct BackendResult(ResourceResult);

impl Deref for BackendResult {
    type Target = ResourceResult;
    fn deref(&self) -> &ResourceResult {
        &self.0
    }
}

impl DerefMut for BackendResult {
    fn deref_mut(&mut self) -> &mut ResourceResult {
        &mut self.0
    }
}

impl BackendResult {
    /// Adds `bytes` to the backend's `reservedBytes`, refused (`mutation_refused`) beyond its
    /// `capacityBytes`; returns the new value.
    pub async fn reserve_capacity(&self, bytes: u64) -> Result<Value, LockError> {
        self.0.mutate(Mutation::ReserveCapacity { bytes }).await
    }

    /// Subtracts `bytes` from the backend's `reservedBytes` (not below zero); returns the new value.
    pub async fn release_capacity(&self, bytes: u64) -> Result<Value, LockError> {
        self.0.mutate(Mutation::ReleaseCapacity { bytes }).await
    }
}

/// The result of one query, as the reference cache's: a field per kind (the query's read,
/// upsert, delete or inconsistent read of it; empty when it asked none) and a list per kind
/// (empty when it did not list the kind). Lent out by the guard only (no `Clone`, no `Default`).
#[derive(Debug)]
pub struct QueryResult {
    /// The device.
    pub device: ResourceResult,
    /// The storage class.
    pub storage_class: ResourceResult,
    /// The group snapshot.
    pub group_snapshot: ResourceResult,
    /// The backend, with its interior mutations.
    pub backend: BackendResult,
    /// The node.
    pub node: ResourceResult,
    /// The autogrow policy.
    pub autogrow_policy: ResourceResult,
    /// The volume.
    pub volume: ResourceResult,
    /// The subordinate volume.
    pub subordinate_volume: ResourceResult,
    /// The volume publication.
    pub volume_publication: ResourceResult,
    /// The snapshot.
    pub snapshot: ResourceResult,
    /// The listed devices.
    pub devices: Vec<Listed>,
    /// The listed storage classes.
    pub storage_classes: Vec<Listed>,
    /// The listed group snapshots.
    pub group_snapshots: Vec<Listed>,
    /// The listed backends.
    pub backends: Vec<Listed>,
    /// The listed nodes.
    pub nodes: Vec<Listed>,
    /// The listed autogrow policies.
    pub autogrow_policies: Vec<Listed>,
    /// The listed volumes.
    pub volumes: Vec<Listed>,
    /// The listed subordinate volumes.
    pub subordinate_volumes: Vec<Listed>,
    /// The listed volume publications.
    pub volume_publications: Vec<Listed>,
    /// The listed snapshots.
    pub snapshots: Vec<Listed>,
}

impl QueryResult {
    pub(crate) fn empty() -> Self {
        QueryResult {
            device: ResourceResult::empty(Kind::Device),
            storage_class: ResourceResult::empty(Kind::StorageClass),
            group_snapshot: ResourceResult::empty(Kind::GroupSnapshot),
            backend: BackendResult(ResourceResult::empty(Kind::Backend)),
            node: ResourceResult::empty(Kind::Node),
            autogrow_policy: ResourceResult::empty(Kind::AutogrowPolicy),
            volume: ResourceResult::empty(Kind::Volume),
            subordinate_volume: ResourceResult::empty(Kind::SubordinateVolume),
            volume_publication: ResourceResult::empty(Kind::VolumePublication),
            snapshot: ResourceResult::empty(Kind::Snapshot),
            devices: Vec::new(),
            storage_classes: Vec::new(),
            group_snapshots: Vec::new(),
            backends: Vec::new(),
            nodes: Vec::new(),
            autogrow_policies: Vec::new(),
            volumes: Vec::new(),
            subordinate_volumes: Vec::new(),
            volume_publications: Vec::new(),
            snapshots: Vec::new(),
        }
    }

    /// The field of `kind`, for code generic over kinds (`None` for the root, which no query
    /// asks for).
    pub fn resource(&self, kind: Kind) -> Option<&ResourceResult> {
        Some(match kind {
            Kind::Root => return None,
            Kind::Device => &self.device,
            Kind::StorageClass => &self.storage_class,
            Kind::GroupSnapshot => &self.group_snapshot,
            Kind::Backend => &self.backend,
            Kind::Node => &self.node,
            Kind::AutogrowPolicy => &self.autogrow_policy,
            Kind::Volume => &self.volume,
            Kind::SubordinateVolume => &self.subordinate_volume,
            Kind::VolumePublication => &self.volume_publication,
            Kind::Snapshot => &self.snapshot,
        })
    }

    fn resource_mut(&mut self, kind: Kind) -> Option<&mut ResourceResult> {
        Some(match kind {
            Kind::Root => return None,
            Kind::Device => &mut self.device,
            Kind::StorageClass => &mut self.storage_class,
            Kind::GroupSnapshot => &mut self.group_snapshot,
            Kind::Backend => &mut self.backend,
            Kind::Node => &mut self.node,
            Kind::AutogrowPolicy => &mut self.autogrow_policy,
            Kind::Volume => &mut self.volume,
            Kind::SubordinateVolume => &mut self.subordinate_volume,
            Kind::VolumePublication => &mut self.volume_publication,
            Kind::Snapshot => &mut self.snapshot,
        })
    }

    /// The list of `kind`, for code generic over kinds (empty when the query did not list it).
    pub fn listed(&self, kind: Kind) -> &[Listed] {
        match self.list_slot(kind) {
            Some(l) => l,
            None => &[],
        }
    }

    fn list_slot(&self, kind: Kind) -> Option<&Vec<Listed>> {
        Some(match kind {
            Kind::Root => return None,
            Kind::Device => &self.devices,
            Kind::StorageClass => &self.storage_classes,
            Kind::GroupSnapshot => &self.group_snapshots,
            Kind::Backend => &self.backends,
            Kind::Node => &self.nodes,
            Kind::AutogrowPolicy => &self.autogrow_policies,
            Kind::Volume => &self.volumes,
            Kind::SubordinateVolume => &self.subordinate_volumes,
            Kind::VolumePublication => &self.volume_publications,
            Kind::Snapshot => &self.snapshots,
        })
    }

    fn list_slot_mut(&mut self, kind: Kind) -> Option<&mut Vec<Listed>> {
        Some(match kind {
            Kind::Root => return None,
            Kind::Device => &mut self.devices,
            Kind::StorageClass => &mut self.storage_classes,
            Kind::GroupSnapshot => &mut self.group_snapshots,
            Kind::Backend => &mut self.backends,
            Kind::Node => &mut self.nodes,
            Kind::AutogrowPolicy => &mut self.autogrow_policies,
            Kind::Volume => &mut self.volumes,
            Kind::SubordinateVolume => &mut self.subordinate_volumes,
            Kind::VolumePublication => &mut self.volume_publications,
            Kind::Snapshot => &mut self.snapshots,
        })
    }

    /// Sets the result of the kind named `kind` (a kind outside the standard schema, or the root,
    /// has no field and gives no result).
    pub(crate) fn set_resource(
        &mut self,
        kind: &str,
        id: &str,
        op: Op,
        read: Option<Arc<Value>>,
        target: Option<CommitTarget>,
    ) {
        let Some(slot) = Kind::from_name(kind).and_then(|k| self.resource_mut(k)) else {
            return;
        };
        slot.id = id.to_string();
        slot.op = Some(op);
        slot.read = read.map(WorkingCopy::shared);
        slot.target = target;
    }

    /// Sets the list of the kind named `kind` (as [`QueryResult::set_resource`]).
    pub(crate) fn set_list(&mut self, kind: &str, listed: Vec<Listed>) {
        if let Some(slot) = Kind::from_name(kind).and_then(|k| self.list_slot_mut(k)) {
            *slot = listed;
        }
    }
}
