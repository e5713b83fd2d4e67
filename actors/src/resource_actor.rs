//! One actix actor per (kind, id): owns the value (`Arc<serde_json::Value>`, kept in its slot of
//! the kind index, which only this actor writes once it runs), its shared/exclusive lock with the
//! waiter queue, applies commits (upsert, delete) and interior mutations sent by
//! lock holders, keeps the kind's index current, answers inspection, and retires when its value
//! is absent and nobody holds or waits for it. Key locks (renames) are resource actors without a
//! kind index.
//!
//! Messages: [`Acquire`] (reply: a receiver that yields the value when granted), [`Release`],
//! [`Commit`], [`Mutate`], [`InspectResource`].

use crate::coordinator::Coordinator;
use crate::error::LockError;
use crate::index::KindIndex;
use crate::inspect::{ResourceSnapshot, WaiterSnapshot};
use crate::lock_queue::{LockQueue, Priority};
use crate::plan::LockMode;
use actix::prelude::*;
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// What a grant delivers: the value at grant time.
pub type Grant = Option<Arc<Value>>;

/// Sent to the coordinator when an actor retires.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Retired {
    /// The kind.
    pub kind: String,
    /// The id.
    pub id: String,
    /// The generation of the retiring actor (a newer one may already be registered).
    pub generation: u64,
}

/// Ask for the lock in `mode`; the reply resolves when it is granted.
#[derive(Message, Debug)]
#[rtype(result = "oneshot::Receiver<Grant>")]
pub struct Acquire {
    /// The transaction.
    pub txn: u64,
    /// Shared or exclusive.
    pub mode: LockMode,
    /// Priority in the waiter queue.
    pub priority: Priority,
}

/// The reply to [`AcquireNow`]: the grant itself when the lock was free, else a receiver that
/// resolves when it is granted.
pub(crate) enum AcquireReply {
    Granted(Grant),
    Queued(oneshot::Receiver<Grant>),
}

/// Like [`Acquire`], but a lock granted at once comes back in the reply (one hop, not two).
#[derive(Message, Debug)]
#[rtype(result = "AcquireReply")]
pub(crate) struct AcquireNow {
    pub(crate) txn: u64,
    pub(crate) mode: LockMode,
    pub(crate) priority: Priority,
}

/// Release the lock held by `txn`.
#[derive(Message, Debug)]
#[rtype(result = "bool")]
pub struct Release {
    /// The transaction.
    pub txn: u64,
}

/// A commit of a write-lock holder.
#[derive(Debug, Clone)]
pub enum Change {
    /// Set the value.
    Upsert(Value),
    /// Remove the value.
    Delete,
}

/// Commit a change; the sender must hold the exclusive lock.
#[derive(Message, Debug)]
#[rtype(result = "Result<(), LockError>")]
pub struct Commit {
    /// The transaction.
    pub txn: u64,
    /// The change.
    pub change: Change,
}

/// Run a declared interior mutation; the sender must hold the lock in any mode.
#[derive(Message, Debug)]
#[rtype(result = "Result<Value, LockError>")]
pub struct Mutate {
    /// The transaction.
    pub txn: u64,
    /// The mutation's declared name.
    pub name: String,
    /// Its arguments.
    pub args: Value,
}

/// Report lock state.
#[derive(Message, Debug)]
#[rtype(result = "ResourceSnapshot")]
pub struct InspectResource;

/// The actor of one resource.
pub struct ResourceActor {
    kind: Arc<str>,
    id: String,
    index: Option<Arc<KindIndex>>,
    queue: LockQueue<oneshot::Sender<Grant>>,
    pending: Arc<AtomicUsize>,
    generation: u64,
    retire_to: Addr<Coordinator>,
}

impl Actor for ResourceActor {
    type Context = Context<Self>;
}

/// A cheap reference to a resource actor that counts queued messages (the mailbox length).
#[derive(Clone)]
pub struct ResourceRef {
    addr: Addr<ResourceActor>,
    pending: Arc<AtomicUsize>,
    /// The generation of the actor (distinguishes a retired actor from its successor).
    pub generation: u64,
}

impl std::fmt::Debug for ResourceRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceRef")
            .field("generation", &self.generation)
            .finish()
    }
}

impl ResourceRef {
    /// Starts the actor of (kind, id) on the current arbiter, with its value from `index`.
    pub fn start(
        kind: Arc<str>,
        id: &str,
        index: Option<Arc<KindIndex>>,
        age_step: Duration,
        generation: u64,
        retire_to: Addr<Coordinator>,
    ) -> ResourceRef {
        let pending = Arc::new(AtomicUsize::new(0));
        let actor = ResourceActor {
            kind,
            id: id.to_string(),
            index,
            queue: LockQueue::new(age_step),
            pending: pending.clone(),
            generation,
            retire_to,
        };
        ResourceRef {
            addr: actor.start(),
            pending,
            generation,
        }
    }

    /// Whether the actor is still running.
    pub fn connected(&self) -> bool {
        self.addr.connected()
    }

    /// Sends a message and awaits its reply.
    pub async fn send<M>(&self, msg: M) -> Result<M::Result, MailboxError>
    where
        M: Message + Send + 'static,
        M::Result: Send,
        ResourceActor: Handler<M>,
    {
        self.pending.fetch_add(1, Ordering::Relaxed);
        let r = self.addr.send(msg).await;
        if r.is_err() {
            // Not handled: undo the count (the handler decrements when it runs).
            self.pending.fetch_sub(1, Ordering::Relaxed);
        }
        r
    }

    /// Sends a message without waiting (used by drop paths).
    pub fn do_send<M>(&self, msg: M)
    where
        M: Message + Send + 'static,
        M::Result: Send,
        ResourceActor: Handler<M>,
    {
        if self.addr.connected() {
            self.pending.fetch_add(1, Ordering::Relaxed);
            self.addr.do_send(msg);
        }
    }
}

impl ResourceActor {
    /// The current value (absent for key locks and resources that do not exist).
    fn value(&self) -> Option<Arc<Value>> {
        self.index.as_ref().and_then(|i| i.get(&self.id))
    }

    fn handled(&self) {
        // Saturating: a message counted by a sender whose send then failed is already undone.
        let _ = self
            .pending
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// Grants what the queue allows; grants whose requester went away are released at once.
    fn pump(&mut self) {
        loop {
            let granted = self.queue.pump(Instant::now());
            if granted.is_empty() {
                return;
            }
            let mut abandoned = false;
            for w in granted {
                if w.payload.send(self.value()).is_err() {
                    self.queue.release(w.txn);
                    abandoned = true;
                }
            }
            if !abandoned {
                return;
            }
        }
    }

    fn retire_if_idle(&mut self, ctx: &mut Context<Self>) {
        self.queue.drop_waiters(|w| w.payload.is_closed());
        self.pump();
        if self.value().is_none() && self.queue.is_idle() {
            self.retire_to.do_send(Retired {
                kind: self.kind.to_string(),
                id: self.id.clone(),
                generation: self.generation,
            });
            ctx.stop();
        }
    }

    fn not_held(&self, txn: u64, attempted: &str) -> LockError {
        LockError::NotHeld {
            kind: self.kind.to_string(),
            id: self.id.clone(),
            txn,
            attempted: attempted.to_string(),
        }
    }

    fn store(&mut self, value: Option<Arc<Value>>) -> Result<(), LockError> {
        if let Some(index) = &self.index {
            index
                .set(&self.id, value)
                .map_err(|c| LockError::KeyExists {
                    kind: self.kind.to_string(),
                    key: c.key,
                    owner: c.owner,
                    id: self.id.clone(),
                })?;
        }
        Ok(())
    }
}

impl Handler<Acquire> for ResourceActor {
    type Result = MessageResult<Acquire>;
    fn handle(&mut self, msg: Acquire, _ctx: &mut Context<Self>) -> Self::Result {
        self.handled();
        let (tx, rx) = oneshot::channel();
        self.queue
            .enqueue(msg.txn, msg.mode, msg.priority, Instant::now(), tx);
        self.pump();
        MessageResult(rx)
    }
}

impl Handler<AcquireNow> for ResourceActor {
    type Result = MessageResult<AcquireNow>;
    fn handle(&mut self, msg: AcquireNow, _ctx: &mut Context<Self>) -> Self::Result {
        self.handled();
        let (tx, mut rx) = oneshot::channel();
        self.queue
            .enqueue(msg.txn, msg.mode, msg.priority, Instant::now(), tx);
        self.pump();
        MessageResult(match rx.try_recv() {
            Ok(grant) => AcquireReply::Granted(grant),
            Err(_) => AcquireReply::Queued(rx),
        })
    }
}

impl Handler<Release> for ResourceActor {
    type Result = bool;
    fn handle(&mut self, msg: Release, ctx: &mut Context<Self>) -> bool {
        self.handled();
        let held = self.queue.release(msg.txn);
        self.retire_if_idle(ctx);
        held
    }
}

impl Handler<Commit> for ResourceActor {
    type Result = Result<(), LockError>;
    fn handle(&mut self, msg: Commit, _ctx: &mut Context<Self>) -> Self::Result {
        self.handled();
        let what = match msg.change {
            Change::Upsert(_) => "upsert",
            Change::Delete => "delete",
        };
        if !self.queue.holds(msg.txn, Some(LockMode::Write)) {
            return Err(self.not_held(msg.txn, what));
        }
        match msg.change {
            Change::Upsert(v) => self.store(Some(Arc::new(v))),
            Change::Delete => self.store(None),
        }
    }
}

impl Handler<Mutate> for ResourceActor {
    type Result = Result<Value, LockError>;
    fn handle(&mut self, msg: Mutate, _ctx: &mut Context<Self>) -> Self::Result {
        self.handled();
        if !self.queue.holds(msg.txn, None) {
            return Err(self.not_held(msg.txn, &format!("mutation {:?}", msg.name)));
        }
        let Some(f) = self
            .index
            .as_ref()
            .and_then(|i| i.info().mutations.get(&msg.name).cloned())
        else {
            return Err(LockError::UnknownMutation {
                kind: self.kind.to_string(),
                name: msg.name,
            });
        };
        let Some(current) = self.value() else {
            return Err(LockError::NotFound {
                kind: self.kind.to_string(),
                id: self.id.clone(),
                reason: "interior mutation of a resource that does not exist".to_string(),
            });
        };
        let mut next = Value::clone(&current);
        f(&mut next, &msg.args).map_err(|reason| LockError::MutationRefused {
            kind: self.kind.to_string(),
            id: self.id.clone(),
            name: msg.name.clone(),
            reason,
        })?;
        self.store(Some(Arc::new(next.clone())))?;
        Ok(next)
    }
}

impl Handler<InspectResource> for ResourceActor {
    type Result = MessageResult<InspectResource>;
    fn handle(&mut self, _msg: InspectResource, _ctx: &mut Context<Self>) -> Self::Result {
        self.handled();
        let now = Instant::now();
        MessageResult(ResourceSnapshot {
            kind: self.kind.to_string(),
            id: self.id.clone(),
            mode: self.queue.mode(),
            holders: self.queue.holders().iter().map(|(t, _)| *t).collect(),
            waiters: self
                .queue
                .waiters()
                .iter()
                .map(|w| WaiterSnapshot {
                    txn: w.txn,
                    mode: w.mode,
                    priority: w.priority,
                    waited_ms: now.saturating_duration_since(w.since).as_millis() as u64,
                })
                .collect(),
            mailbox_len: self.pending.load(Ordering::Relaxed),
            exists: self.value().is_some(),
        })
    }
}
