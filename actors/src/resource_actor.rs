//! One actix actor per (kind, id): owns the resource's value and its lock queue (holders, waiters,
//! priorities with ageing). Nothing else reads or writes them except through its messages:
//!
//! | message | sent | effect |
//! |---|---|---|
//! | [`Acquire`] | fire-and-forget, carrying a [`Chain`] | grants at once or queues the request; once granted, forwards the chain to the next actor of the phase or answers the caller at its end; a grant whose requester went away is released at once |
//! | [`Release`] | fire-and-forget | releases the transaction's lock, grants the next waiters, retires the actor when it is idle |
//! | [`Withdraw`] | fire-and-forget | removes the transaction's queued request (its caller was cancelled) and grants the next waiters |
//! | [`Commit`] | awaited | sets or removes the value (exclusive holder only), reports it to the coordinator's catalog |
//! | [`Mutate`] | awaited | an interior mutation of the resource's kind (any holder), reported like a commit |
//! | [`InspectResource`] | awaited | a snapshot of the lock state |
//!
//! One sender's messages to one actor are handled in the order they were sent, so a release sent
//! before a later acquire of the same transaction is applied first. Key locks (renames) are
//! resource actors of a `key:<kind>` kind without a value. An actor whose value is absent and that
//! nobody holds or waits for retires: it tells the coordinator ([`Retired`]) and stops; requests
//! that reach a stopped actor see their reply channel closed and resolve the actor again.

use crate::error::LockError;
use crate::inspect::{ResourceSnapshot, WaiterSnapshot};
use crate::lock_queue::{LockQueue, Priority};
use crate::mutation::Mutation;
use crate::plan::LockMode;
use crate::schema::KindInfo;
use actix::prelude::*;
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// The mailbox capacity of the lock core's actors: large enough that an awaited request (a commit,
/// an inspection) is never parked behind a full mailbox (fire-and-forget messages ignore it).
pub(crate) const MAILBOX_CAPACITY: usize = 1 << 20;

/// What a grant delivers: the value at grant time.
pub type Grant = Option<Arc<Value>>;

/// The resource actor retired (value absent, nobody holds or waits): the coordinator forgets it
/// unless a newer generation is registered.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Retired {
    /// The kind.
    pub kind: Arc<str>,
    /// The id.
    pub id: String,
    /// The generation of the retiring actor.
    pub generation: u64,
}

/// A resource actor committed a value (or removed it): the coordinator's catalog follows.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Committed {
    /// The kind.
    pub kind: Arc<str>,
    /// The id.
    pub id: String,
    /// The new value (`None`: deleted).
    pub value: Option<Arc<Value>>,
}

/// A commit is about to give `id` the key `key`: claim it (refused when another id owns it).
#[derive(Message)]
#[rtype(result = "Result<(), LockError>")]
pub(crate) struct ClaimKey {
    pub(crate) kind: String,
    pub(crate) key: String,
    pub(crate) id: String,
}

/// The commit after a [`ClaimKey`] was refused: give the key back.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct UnclaimKey {
    pub(crate) kind: String,
    pub(crate) key: String,
    pub(crate) id: String,
}

/// The coordinator as its resource actors reach it: its catalog learns their commits and key
/// claims, its registry their retirements. The coordinator's address implements it
/// (`coordinator/actor.rs`); a trait, so that this file knows nothing of the actor that starts it.
pub(crate) trait CoordinatorLink: Send + 'static {
    /// Sends [`Retired`].
    fn retired(&self, msg: Retired);
    /// Sends [`Committed`].
    fn committed(&self, msg: Committed);
    /// Asks [`ClaimKey`].
    fn claim_key(&self, msg: ClaimKey) -> RecipientRequest<ClaimKey>;
    /// Sends [`UnclaimKey`].
    fn unclaim_key(&self, msg: UnclaimKey);
}

/// The locks of one phase, asked for by forwarding: the message travels along the phase's actors
/// in plan order; each grants its lock (at once, or when its queue grants it), records its value
/// and forwards the rest of the chain to the next actor, and the last one answers the caller. One
/// hop per lock instead of a round trip through the caller.
///
/// A chain that cannot go on (the next actor stopped, or retired before granting) is dropped, and
/// its drop answers the caller with [`ChainEnd::Broken`]: the locks before the broken step are
/// held, and the caller asks the broken step's successor actor to go on. A chain whose caller went
/// away (its reply closed) is not granted further, and an actor that granted it releases its lock
/// at once; the caller releases the locks it may hold along the chain (see `pending_chain.rs`).
pub(crate) struct Chain {
    pub(crate) txn: u64,
    pub(crate) priority: Priority,
    /// The phase's actors with the mode of each lock, in acquisition order.
    pub(crate) links: Arc<[(ResourceRef, LockMode)]>,
    /// The step this message asks for.
    pub(crate) at: usize,
    /// One past the last step of this chain.
    pub(crate) end: usize,
    /// The values granted so far along this chain, in order.
    pub(crate) grants: Vec<Grant>,
    reply: Option<oneshot::Sender<ChainEnd>>,
}

/// How a [`Chain`] ended.
pub(crate) enum ChainEnd {
    /// Every step of the chain was granted: the values, in order.
    Granted(Vec<Grant>),
    /// The actor of step `at` stopped: the steps before it are held (`grants`, in order).
    Broken { at: usize, grants: Vec<Grant> },
}

impl Chain {
    /// A chain over `links[start..end]` whose end is sent on `reply`.
    pub(crate) fn new(
        txn: u64,
        priority: Priority,
        links: Arc<[(ResourceRef, LockMode)]>,
        start: usize,
        end: usize,
        reply: oneshot::Sender<ChainEnd>,
    ) -> Self {
        Chain {
            txn,
            priority,
            links,
            at: start,
            end,
            grants: Vec::with_capacity(end.saturating_sub(start)),
            reply: Some(reply),
        }
    }

    /// The mode of the lock this message asks for.
    fn mode(&self) -> LockMode {
        self.links
            .get(self.at)
            .map_or(LockMode::Write, |(_, mode)| *mode)
    }

    /// The caller went away (its end of the reply is closed).
    fn abandoned(&self) -> bool {
        self.reply.as_ref().is_none_or(|r| r.is_closed())
    }

    /// Sends the chain to the actor of its current step.
    pub(crate) fn send(self) {
        match self.links.get(self.at) {
            Some((next, _)) => {
                let next = next.addr.clone();
                // A stopped actor drops the message, and the chain's drop reports it broken.
                next.do_send(Acquire { chain: self });
            }
            None => drop(self),
        }
    }
}

impl Drop for Chain {
    fn drop(&mut self) {
        if let Some(reply) = self.reply.take() {
            // The caller may have gone away; then it releases what the chain holds itself.
            let _ = reply.send(ChainEnd::Broken {
                at: self.at,
                grants: std::mem::take(&mut self.grants),
            });
        }
    }
}

/// Ask for the lock of a [`Chain`]'s current step, and forward the chain once it is granted.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Acquire {
    pub(crate) chain: Chain,
}

/// Release the lock held by `txn` (a no-op when it holds none).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Release {
    /// The transaction.
    pub txn: u64,
}

/// The transaction no longer waits for the lock (its caller was cancelled): its queued request is
/// removed and the next waiters are granted (a grant already sent is released by the sender).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Withdraw {
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

/// Run an interior mutation of the resource's kind; the sender must hold the lock in any mode.
#[derive(Message, Debug)]
#[rtype(result = "Result<Value, LockError>")]
pub struct Mutate {
    /// The transaction.
    pub txn: u64,
    /// The mutation with its arguments.
    pub mutation: Mutation,
}

/// Report the lock state.
#[derive(Message, Debug)]
#[rtype(result = "ResourceSnapshot")]
pub struct InspectResource;

/// The actor of one resource.
pub struct ResourceActor {
    kind: Arc<str>,
    id: String,
    /// The kind's declaration (absent for key locks).
    info: Option<Arc<KindInfo>>,
    value: Option<Arc<Value>>,
    queue: LockQueue<Chain>,
    generation: u64,
    coordinator: Box<dyn CoordinatorLink>,
    /// Set when the actor decided to retire: nothing is granted after it.
    retired: bool,
}

/// What the coordinator needs to start a resource actor.
pub(crate) struct ResourceSpec {
    pub(crate) kind: Arc<str>,
    pub(crate) id: String,
    pub(crate) info: Option<Arc<KindInfo>>,
    pub(crate) value: Option<Arc<Value>>,
    pub(crate) age_step: Duration,
    pub(crate) generation: u64,
    pub(crate) coordinator: Box<dyn CoordinatorLink>,
}

impl Actor for ResourceActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(MAILBOX_CAPACITY);
    }

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        // Waiters of a stopped actor are never granted: their closed channel makes them resolve
        // the actor again.
        self.queue.drop_waiters(|_| true);
    }
}

/// A cheap reference to a resource actor: its address (shared: cloning a reference is one
/// reference count, not a new mailbox sender) and generation.
#[derive(Clone)]
pub struct ResourceRef {
    addr: Arc<Addr<ResourceActor>>,
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
    /// Starts the actor of `spec`: on the current arbiter when `arbiter` is `None`, else on that
    /// arbiter.
    pub(crate) fn start(spec: ResourceSpec, arbiter: Option<&ArbiterHandle>) -> ResourceRef {
        let generation = spec.generation;
        let actor = ResourceActor {
            kind: spec.kind,
            id: spec.id,
            info: spec.info,
            value: spec.value,
            queue: LockQueue::new(spec.age_step),
            generation,
            coordinator: spec.coordinator,
            retired: false,
        };
        let addr = match arbiter {
            None => actor.start(),
            Some(arbiter) => ResourceActor::start_in_arbiter(arbiter, move |_| actor),
        };
        ResourceRef {
            addr: Arc::new(addr),
            generation,
        }
    }

    /// Releases `txn`'s lock (fire-and-forget; later messages to the actor are handled after it).
    pub(crate) fn release(&self, txn: u64) {
        self.addr.do_send(Release { txn });
    }

    /// Withdraws `txn`'s queued request (fire-and-forget).
    pub(crate) fn withdraw(&self, txn: u64) {
        self.addr.do_send(Withdraw { txn });
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
        self.addr.send(msg).await
    }
}

impl ResourceActor {
    /// Grants what the queue allows; grants whose requester went away are released at once.
    fn pump(&mut self) {
        loop {
            let granted = self.queue.pump(Instant::now());
            if granted.is_empty() {
                return;
            }
            let mut abandoned = false;
            for w in granted {
                if !self.pass_on(w.payload) {
                    abandoned = true;
                }
            }
            if !abandoned {
                return;
            }
        }
    }

    /// The lock of `chain`'s current step was just granted here: records the value and forwards
    /// the chain to its next actor, or answers the caller at its end. Returns false, with the
    /// lock released again, when the caller went away.
    fn pass_on(&mut self, mut chain: Chain) -> bool {
        let txn = chain.txn;
        if chain.abandoned() {
            self.queue.release(txn);
            return false;
        }
        chain.grants.push(self.value.clone());
        chain.at += 1;
        if chain.at < chain.end {
            chain.send();
            return true;
        }
        let grants = std::mem::take(&mut chain.grants);
        let answered = chain
            .reply
            .take()
            .is_some_and(|reply| reply.send(ChainEnd::Granted(grants)).is_ok());
        if !answered {
            self.queue.release(txn);
        }
        answered
    }

    fn retire_if_idle(&mut self, ctx: &mut Context<Self>) {
        self.queue.drop_waiters(|w| w.payload.abandoned());
        self.pump();
        if self.queue.is_idle() && self.value.is_none() {
            self.retired = true;
            self.coordinator.retired(Retired {
                kind: self.kind.clone(),
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

    /// Sets the value and reports it to the coordinator's catalog.
    fn store(&mut self, value: Option<Arc<Value>>) {
        self.value = value.clone();
        if self.info.is_some() {
            self.coordinator.committed(Committed {
                kind: self.kind.clone(),
                id: self.id.clone(),
                value,
            });
        }
    }
}

impl Handler<Acquire> for ResourceActor {
    type Result = ();
    fn handle(&mut self, msg: Acquire, ctx: &mut Context<Self>) {
        let chain = msg.chain;
        if self.retired {
            // Dropping the chain sends the caller to this actor's successor.
            return;
        }
        if chain.abandoned() {
            // The caller went away before this step was asked: nothing to grant; an actor started
            // for it alone retires.
            drop(chain);
            self.retire_if_idle(ctx);
            return;
        }
        let (txn, mode) = (chain.txn, chain.mode());
        // Nobody waits and the holders are compatible: granted and passed on at once.
        if self.queue.try_grant(txn, mode) {
            if !self.pass_on(chain) {
                self.pump();
            }
            return;
        }
        let priority = chain.priority;
        self.queue
            .enqueue(txn, mode, priority, Instant::now(), chain);
        self.pump();
    }
}

impl Handler<Release> for ResourceActor {
    type Result = ();
    fn handle(&mut self, msg: Release, ctx: &mut Context<Self>) {
        self.queue.release(msg.txn);
        self.retire_if_idle(ctx);
    }
}

impl Handler<Withdraw> for ResourceActor {
    type Result = ();
    fn handle(&mut self, msg: Withdraw, ctx: &mut Context<Self>) {
        self.queue.drop_waiters(|w| w.txn == msg.txn);
        self.retire_if_idle(ctx);
    }
}

impl Handler<Commit> for ResourceActor {
    type Result = ActorResponse<Self, Result<(), LockError>>;
    fn handle(&mut self, msg: Commit, _ctx: &mut Context<Self>) -> Self::Result {
        let Commit { txn, change } = msg;
        let what = match change {
            Change::Upsert(_) => "upsert",
            Change::Delete => "delete",
        };
        if !self.queue.holds(txn, Some(LockMode::Write)) {
            return ActorResponse::reply(Err(self.not_held(txn, what)));
        }
        let value = match change {
            Change::Upsert(v) => v,
            Change::Delete => {
                self.store(None);
                return ActorResponse::reply(Ok(()));
            }
        };
        // A value that carries a new key claims it in the coordinator's catalog first (refused
        // when another resource owns it); the commit applies if the lock is still held then.
        let new_key = self.info.as_ref().and_then(|i| {
            let key = i.key_str(&value)?;
            let old = self.value.as_deref().and_then(|v| i.key_str(v));
            (old != Some(key)).then(|| key.to_string())
        });
        let Some(key) = new_key else {
            self.store(Some(value));
            return ActorResponse::reply(Ok(()));
        };
        let claim = ClaimKey {
            kind: self.kind.to_string(),
            key: key.clone(),
            id: self.id.clone(),
        };
        let claimed = self.coordinator.claim_key(claim).into_actor(self).map(
            move |answer, act: &mut ResourceActor, _ctx| match answer {
                Ok(Ok(())) if act.queue.holds(txn, Some(LockMode::Write)) => {
                    act.store(Some(value));
                    Ok(())
                }
                Ok(Ok(())) => {
                    act.coordinator.unclaim_key(UnclaimKey {
                        kind: act.kind.to_string(),
                        key,
                        id: act.id.clone(),
                    });
                    Err(act.not_held(txn, "upsert"))
                }
                Ok(Err(e)) => Err(e),
                Err(_) => Err(LockError::ShuttingDown),
            },
        );
        ActorResponse::r#async(claimed)
    }
}

impl Handler<Mutate> for ResourceActor {
    type Result = Result<Value, LockError>;
    fn handle(&mut self, msg: Mutate, _ctx: &mut Context<Self>) -> Self::Result {
        let Mutate { txn, mutation } = msg;
        let name = mutation.name();
        if !self.queue.holds(txn, None) {
            return Err(self.not_held(txn, &format!("mutation {name:?}")));
        }
        if self.info.is_none() || mutation.kind().name() != &*self.kind {
            return Err(LockError::UnknownMutation {
                kind: self.kind.to_string(),
                name: name.to_string(),
            });
        }
        let Some(current) = &self.value else {
            return Err(LockError::NotFound {
                kind: self.kind.to_string(),
                id: self.id.clone(),
                reason: "interior mutation of a resource that does not exist".to_string(),
            });
        };
        let mut next = Value::clone(current);
        mutation
            .apply(&mut next)
            .map_err(|reason| LockError::MutationRefused {
                kind: self.kind.to_string(),
                id: self.id.clone(),
                name: name.to_string(),
                reason,
            })?;
        self.store(Some(Arc::new(next.clone())));
        Ok(next)
    }
}

impl Handler<InspectResource> for ResourceActor {
    type Result = MessageResult<InspectResource>;
    fn handle(&mut self, _msg: InspectResource, _ctx: &mut Context<Self>) -> Self::Result {
        let now = Instant::now();
        let mut holders: Vec<u64> = self.queue.holders().iter().map(|(t, _)| *t).collect();
        holders.sort_unstable();
        let waiters: Vec<WaiterSnapshot> = self
            .queue
            .waiters()
            .iter()
            .map(|w| WaiterSnapshot {
                txn: w.txn,
                mode: w.mode,
                priority: w.priority,
                waited_ms: now.saturating_duration_since(w.since).as_millis() as u64,
            })
            .collect();
        MessageResult(ResourceSnapshot {
            kind: self.kind.to_string(),
            id: self.id.clone(),
            mode: self.queue.mode(),
            holders,
            mailbox_len: waiters.len(),
            waiters,
            exists: self.value.is_some(),
            value: self.value.clone(),
        })
    }
}
