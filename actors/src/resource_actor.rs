//! One actix actor per (kind, id): owns the value (`Arc<serde_json::Value>`, kept in its slot of
//! the kind index, written only under this resource's lock state), its shared/exclusive lock with
//! the waiter queue, applies commits (upsert, delete) and interior mutations sent by lock holders,
//! keeps the kind's index current, answers inspection, and retires when its value is absent and
//! nobody holds or waits for it. Key locks (renames) are resource actors without a kind index.
//!
//! Messages: [`Acquire`] (reply: a receiver that yields the value when granted), `AcquireNow`
//! (reply: the grant itself when the lock was free), [`Release`], [`Commit`], [`Mutate`],
//! [`InspectResource`]. The lock state sits behind a short mutex shared with the actor's
//! references, so a reference takes or releases a lock, commits and mutates without a message
//! when the actor's mailbox is empty (the same effect, in the same order, as the message handled
//! at once: the handlers count their message off under that mutex).

use crate::coordinator::Core;
use crate::error::LockError;
use crate::index::KindIndex;
use crate::inspect::{ResourceSnapshot, WaiterSnapshot};
use crate::lock_queue::{LockQueue, Priority};
use crate::plan::LockMode;
use actix::prelude::*;
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// What a grant delivers: the value at grant time.
pub type Grant = Option<Arc<Value>>;

/// An actor retired: the coordinator forgets it unless a newer generation is registered. (A
/// retiring actor now leaves the shared registry directly; the coordinator still handles this
/// message the same way.)
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
    Upsert(Arc<Value>),
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

/// What a resource actor shares with its references: its id, its kind index, and its lock state
/// behind a short mutex, so that a reference can take or release a lock directly when the actor's
/// mailbox is empty (exactly what the actor would do if it handled the message right then).
struct Shared {
    kind: Arc<str>,
    id: String,
    index: Option<Arc<KindIndex>>,
    state: Mutex<LockState>,
    /// Messages sent and not yet handled (the mailbox length).
    pending: AtomicUsize,
}

struct LockState {
    queue: LockQueue<oneshot::Sender<Grant>>,
    /// Set (under the lock) when the actor decides to retire; no direct access after it.
    retired: bool,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, LockState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current value (absent for key locks and resources that do not exist).
    fn value(&self) -> Option<Arc<Value>> {
        self.index.as_ref().and_then(|i| i.get(&self.id))
    }

    /// Grants what the queue allows; grants whose requester went away are released at once.
    fn pump(&self, st: &mut LockState) {
        loop {
            let granted = st.queue.pump(Instant::now());
            if granted.is_empty() {
                return;
            }
            let mut abandoned = false;
            // Every grant of the batch delivers the value as it is now (nothing can commit
            // while the lock state is held).
            let value = self.value();
            for w in granted {
                if w.payload.send(value.clone()).is_err() {
                    st.queue.release(w.txn);
                    abandoned = true;
                }
            }
            if !abandoned {
                return;
            }
        }
    }

    /// Queues the request and grants what the queue allows; a request granted at once comes
    /// back as `Granted`.
    fn acquire(
        &self,
        st: &mut LockState,
        txn: u64,
        mode: LockMode,
        priority: Priority,
    ) -> AcquireReply {
        // Nobody waits and the holders are compatible: granted at once (what enqueue + pump
        // would do), without a reply channel.
        if st.queue.try_grant(txn, mode) {
            return AcquireReply::Granted(self.value());
        }
        let (tx, mut rx) = oneshot::channel();
        st.queue.enqueue(txn, mode, priority, Instant::now(), tx);
        self.pump(st);
        match rx.try_recv() {
            Ok(grant) => AcquireReply::Granted(grant),
            Err(_) => AcquireReply::Queued(rx),
        }
    }

    /// Releases `txn`, drops abandoned waiters and grants what the queue allows; returns whether
    /// `txn` held the lock.
    fn release(&self, st: &mut LockState, txn: u64) -> bool {
        let held = st.queue.release(txn);
        st.queue.drop_waiters(|w| w.payload.is_closed());
        self.pump(st);
        held
    }

    /// Whether the actor would retire now (value absent, nobody holds or waits).
    fn idle(&self, st: &LockState) -> bool {
        st.queue.is_idle() && self.value().is_none()
    }

    fn not_held(&self, txn: u64, attempted: &str) -> LockError {
        LockError::NotHeld {
            kind: self.kind.to_string(),
            id: self.id.clone(),
            txn,
            attempted: attempted.to_string(),
        }
    }

    fn store(&self, value: Option<Arc<Value>>) -> Result<(), LockError> {
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

    /// Applies a commit of `txn`, which must hold the exclusive lock.
    fn commit(&self, st: &LockState, txn: u64, change: Change) -> Result<(), LockError> {
        let what = match change {
            Change::Upsert(_) => "upsert",
            Change::Delete => "delete",
        };
        if !st.queue.holds(txn, Some(LockMode::Write)) {
            return Err(self.not_held(txn, what));
        }
        match change {
            Change::Upsert(v) => self.store(Some(v)),
            Change::Delete => self.store(None),
        }
    }

    /// Runs the declared interior mutation `name` for `txn`, which must hold the lock.
    fn mutate(
        &self,
        st: &LockState,
        txn: u64,
        name: String,
        args: &Value,
    ) -> Result<Value, LockError> {
        if !st.queue.holds(txn, None) {
            return Err(self.not_held(txn, &format!("mutation {name:?}")));
        }
        let Some(f) = self
            .index
            .as_ref()
            .and_then(|i| i.info().mutations.get(&name).cloned())
        else {
            return Err(LockError::UnknownMutation {
                kind: self.kind.to_string(),
                name,
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
        f(&mut next, args).map_err(|reason| LockError::MutationRefused {
            kind: self.kind.to_string(),
            id: self.id.clone(),
            name,
            reason,
        })?;
        self.store(Some(Arc::new(next.clone())))?;
        Ok(next)
    }
}

/// Ask the actor to check whether it should retire (after a direct release left it idle).
#[derive(Message, Debug)]
#[rtype(result = "()")]
struct CheckIdle;

/// The actor of one resource.
pub struct ResourceActor {
    kind: Arc<str>,
    shared: Arc<Shared>,
    generation: u64,
    retire_to: Weak<Core>,
}

impl Actor for ResourceActor {
    type Context = Context<Self>;

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        // Waiters of a stopped actor are never granted: let them see it and re-resolve.
        let mut st = self.state();
        st.retired = true;
        st.queue.drop_waiters(|_| true);
    }
}

/// A cheap reference to a resource actor that counts queued messages (the mailbox length).
/// Cloning it is one reference count (the actor's address is shared, not cloned).
#[derive(Clone)]
pub struct ResourceRef {
    inner: Arc<RefInner>,
    /// The generation of the actor (distinguishes a retired actor from its successor).
    pub generation: u64,
}

struct RefInner {
    addr: Addr<ResourceActor>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ResourceRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceRef")
            .field("generation", &self.generation)
            .finish()
    }
}

impl ResourceRef {
    /// Starts the actor of (kind, id) with its value from `index`: on the current arbiter when
    /// `arbiter` is `None`, else on that arbiter (from any thread).
    pub(crate) fn start(
        kind: Arc<str>,
        id: &str,
        index: Option<Arc<KindIndex>>,
        age_step: Duration,
        generation: u64,
        retire_to: Weak<Core>,
        arbiter: Option<&ArbiterHandle>,
    ) -> ResourceRef {
        let shared = Arc::new(Shared {
            kind: kind.clone(),
            id: id.to_string(),
            index,
            state: Mutex::new(LockState {
                queue: LockQueue::new(age_step),
                retired: false,
            }),
            pending: AtomicUsize::new(0),
        });
        let actor = ResourceActor {
            kind,
            shared: shared.clone(),
            generation,
            retire_to,
        };
        let addr = match arbiter {
            None => actor.start(),
            Some(arbiter) => ResourceActor::start_in_arbiter(arbiter, move |_| actor),
        };
        ResourceRef {
            inner: Arc::new(RefInner { addr, shared }),
            generation,
        }
    }

    /// Takes (or queues for) the lock directly when the actor's mailbox is empty, as the actor
    /// would on an `AcquireNow` handled right now; `None` when a message must be sent instead.
    pub(crate) fn acquire_direct(
        &self,
        txn: u64,
        mode: LockMode,
        priority: Priority,
    ) -> Option<AcquireReply> {
        let RefInner { addr, shared } = &*self.inner;
        if !addr.connected() {
            return None;
        }
        // Checked under the state lock: the lock handlers count their message off under it too,
        // so an empty mailbox here means every earlier Acquire / Release has taken effect.
        let mut st = shared.state();
        if st.retired || shared.pending.load(Ordering::Acquire) != 0 {
            return None;
        }
        Some(shared.acquire(&mut st, txn, mode, priority))
    }

    /// Runs `f` on the lock state directly when the actor runs, has not retired and its mailbox is
    /// empty (checked under the state lock, under which the handlers count their message off).
    fn direct<R>(&self, f: impl FnOnce(&Shared, &mut LockState) -> R) -> Option<R> {
        let RefInner { addr, shared } = &*self.inner;
        if !addr.connected() {
            return None;
        }
        let mut st = shared.state();
        if st.retired || shared.pending.load(Ordering::Acquire) != 0 {
            return None;
        }
        Some(f(shared, &mut st))
    }

    /// Applies a commit directly when the mailbox is empty; gives the change back otherwise.
    pub(crate) fn commit_direct(
        &self,
        txn: u64,
        change: Change,
    ) -> Result<Result<(), LockError>, Change> {
        let mut change = Some(change);
        let done = self.direct(|sh, st| change.take().map(|c| sh.commit(st, txn, c)));
        match (done.flatten(), change) {
            (Some(r), _) => Ok(r),
            (None, Some(c)) => Err(c),
            (None, None) => Ok(Err(LockError::ShuttingDown)),
        }
    }

    /// Runs an interior mutation directly when the mailbox is empty; `None` otherwise.
    pub(crate) fn mutate_direct(
        &self,
        txn: u64,
        name: &str,
        args: &Value,
    ) -> Option<Result<Value, LockError>> {
        self.direct(|sh, st| sh.mutate(st, txn, name.to_string(), args))
    }

    /// Releases `txn`'s lock directly when the actor's mailbox is empty (asking the actor to
    /// retire when that left it idle); otherwise sends a `Release`.
    pub(crate) fn release(&self, txn: u64) {
        let RefInner { addr, shared } = &*self.inner;
        if addr.connected() {
            let mut st = shared.state();
            if !st.retired && shared.pending.load(Ordering::Acquire) == 0 {
                shared.release(&mut st, txn);
                let idle = shared.idle(&st);
                drop(st);
                if idle {
                    self.do_send(CheckIdle);
                }
                return;
            }
        }
        self.do_send(Release { txn });
    }

    /// Whether the actor is still running.
    pub fn connected(&self) -> bool {
        self.inner.addr.connected()
    }

    /// Sends a message and awaits its reply.
    pub async fn send<M>(&self, msg: M) -> Result<M::Result, MailboxError>
    where
        M: Message + Send + 'static,
        M::Result: Send,
        ResourceActor: Handler<M>,
    {
        let RefInner { addr, shared } = &*self.inner;
        shared.pending.fetch_add(1, Ordering::Relaxed);
        let r = addr.send(msg).await;
        if r.is_err() {
            // Not handled: undo the count (the handler decrements when it runs).
            shared.pending.fetch_sub(1, Ordering::Relaxed);
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
        let RefInner { addr, shared } = &*self.inner;
        if addr.connected() {
            shared.pending.fetch_add(1, Ordering::Relaxed);
            addr.do_send(msg);
        }
    }
}

impl ResourceActor {
    fn state(&self) -> MutexGuard<'_, LockState> {
        self.shared.state()
    }

    /// The current value (absent for key locks and resources that do not exist).
    fn value(&self) -> Option<Arc<Value>> {
        self.shared.value()
    }

    fn handled(&self) {
        // Saturating: a message counted by a sender whose send then failed is already undone.
        let _ = self
            .shared
            .pending
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    fn retire_if_idle(&mut self, ctx: &mut Context<Self>) {
        {
            let mut st = self.state();
            st.queue.drop_waiters(|w| w.payload.is_closed());
            self.shared.pump(&mut st);
            if !self.shared.idle(&st) {
                return;
            }
            st.retired = true;
        }
        if let Some(core) = self.retire_to.upgrade() {
            core.retired(&self.kind, &self.shared.id, self.generation);
        }
        ctx.stop();
    }
}

impl Handler<Acquire> for ResourceActor {
    type Result = MessageResult<Acquire>;
    fn handle(&mut self, msg: Acquire, _ctx: &mut Context<Self>) -> Self::Result {
        // Counted off under the state lock, with its effect: see `ResourceRef::acquire_direct`.
        let mut st = self.state();
        self.handled();
        MessageResult(
            match self
                .shared
                .acquire(&mut st, msg.txn, msg.mode, msg.priority)
            {
                AcquireReply::Granted(grant) => {
                    let (tx, rx) = oneshot::channel();
                    let _ = tx.send(grant);
                    rx
                }
                AcquireReply::Queued(rx) => rx,
            },
        )
    }
}

impl Handler<AcquireNow> for ResourceActor {
    type Result = MessageResult<AcquireNow>;
    fn handle(&mut self, msg: AcquireNow, _ctx: &mut Context<Self>) -> Self::Result {
        // Counted off under the state lock, with its effect: see `ResourceRef::acquire_direct`.
        let mut st = self.state();
        self.handled();
        MessageResult(
            self.shared
                .acquire(&mut st, msg.txn, msg.mode, msg.priority),
        )
    }
}

impl Handler<Release> for ResourceActor {
    type Result = bool;
    fn handle(&mut self, msg: Release, ctx: &mut Context<Self>) -> bool {
        let held = {
            let mut st = self.state();
            self.handled();
            st.queue.release(msg.txn)
        };
        self.retire_if_idle(ctx);
        held
    }
}

impl Handler<CheckIdle> for ResourceActor {
    type Result = ();
    fn handle(&mut self, _msg: CheckIdle, ctx: &mut Context<Self>) {
        self.handled();
        self.retire_if_idle(ctx);
    }
}

impl Handler<Commit> for ResourceActor {
    type Result = Result<(), LockError>;
    fn handle(&mut self, msg: Commit, _ctx: &mut Context<Self>) -> Self::Result {
        let st = self.state();
        self.handled();
        self.shared.commit(&st, msg.txn, msg.change)
    }
}

impl Handler<Mutate> for ResourceActor {
    type Result = Result<Value, LockError>;
    fn handle(&mut self, msg: Mutate, _ctx: &mut Context<Self>) -> Self::Result {
        let st = self.state();
        self.handled();
        self.shared.mutate(&st, msg.txn, msg.name, &msg.args)
    }
}

impl Handler<InspectResource> for ResourceActor {
    type Result = MessageResult<InspectResource>;
    fn handle(&mut self, _msg: InspectResource, _ctx: &mut Context<Self>) -> Self::Result {
        self.handled();
        let now = Instant::now();
        let st = self.state();
        MessageResult(ResourceSnapshot {
            kind: self.kind.to_string(),
            id: self.shared.id.clone(),
            mode: st.queue.mode(),
            holders: {
                let mut h: Vec<u64> = st.queue.holders().iter().map(|(t, _)| *t).collect();
                h.sort_unstable();
                h
            },
            waiters: st
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
            mailbox_len: self.shared.pending.load(Ordering::Relaxed),
            exists: self.value().is_some(),
        })
    }
}
