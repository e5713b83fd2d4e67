//! The acquisition of one Lock / NestedLock / shutdown phase, run in the caller's task (detached
//! on the coordinator's arbiter from the first lock that must be asked for by message): asks for
//! each lock in plan order, awaiting each grant before the next (re-resolving actors that retired
//! meanwhile), then builds the results (working copies, lists from the kind index, commit
//! handles).

use super::guard::{LockGuard, Locked};
use super::{Core, GrantedLock, SharedStatus, with_status};
use crate::error::LockError;
use crate::lock_queue::Priority;
use crate::plan::{EntryAction, LockStep, Plan};
use crate::resource_actor::{AcquireNow, AcquireReply, Grant, ResourceRef};
use crate::results::{CommitTarget, Listed, QueryResult, ResourceResult};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// One Lock / NestedLock / shutdown being carried out.
pub(crate) struct Phase {
    pub(crate) core: Arc<Core>,
    pub(crate) plan: Plan,
    pub(crate) steps: Arc<[LockStep]>,
    pub(crate) refs: Vec<ResourceRef>,
    pub(crate) txn: u64,
    pub(crate) phase: u64,
    pub(crate) priority: Priority,
    pub(crate) status: SharedStatus,
}

/// Asks `r` for the lock of `step` (a message, or directly when its mailbox is empty) and awaits
/// the grant; re-resolves the actor when it retired before granting.
async fn acquire_one(
    core: &Core,
    mut r: ResourceRef,
    step: &LockStep,
    txn: u64,
    priority: Priority,
) -> Result<GrantedLock, LockError> {
    for attempt in 0u32..10_000 {
        let reply = match r.acquire_direct(txn, step.mode, priority) {
            Some(reply) => Ok(reply),
            None => {
                r.send(AcquireNow {
                    txn,
                    mode: step.mode,
                    priority,
                })
                .await
            }
        };
        match reply {
            Ok(AcquireReply::Granted(grant)) => return Ok((grant, r)),
            Ok(AcquireReply::Queued(rx)) => {
                if let Ok(grant) = rx.await {
                    return Ok((grant, r));
                }
            }
            Err(_) => {}
        }
        // The actor retired (or is retiring) before granting: resolve it again.
        tracing::trace!(kind = %step.kind, id = %step.id, attempt, "re-resolving a retired resource actor");
        if attempt > 8 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        } else {
            tokio::task::yield_now().await;
        }
        if core.stopped() {
            return Err(LockError::ShuttingDown);
        }
        r = core.resolve(&step.kind, &step.id);
    }
    Err(LockError::ShuttingDown)
}

impl Phase {
    /// Carries out the phase in the caller's task. Locks that are free on actors with an empty
    /// mailbox are taken right here, without a message and without yielding, so when every lock
    /// is free the whole phase completes in the caller's first poll. A lock queued behind its
    /// holders is awaited here too, through a [`PendingGrant`] that gives the lock back should the
    /// caller be cancelled before it took the grant. Only when a lock has to be asked for by
    /// message (the actor's mailbox is busy, or the actor retired) does the rest of the
    /// acquisition run detached on the coordinator's arbiter, as every acquisition did before: a
    /// reply to a message cannot be taken back, so a caller dropped meanwhile drops the finished
    /// `Locked` instead, which releases everything. Whatever happens, a grant is never lost.
    pub(crate) async fn run(self) -> Result<Locked, LockError> {
        let Phase {
            core,
            plan,
            steps,
            refs,
            txn,
            phase,
            priority,
            status,
        } = self;
        let mut a = Acquisition {
            guard: LockGuard {
                txn,
                phase,
                steps: steps.clone(),
                refs: Vec::with_capacity(steps.len()),
                core: core.clone(),
                released: false,
            },
            grants: Vec::with_capacity(steps.len()),
            refs: refs.into_iter(),
            core,
            plan,
            steps,
            txn,
            priority,
            status,
        };
        let mut blocked = None;
        while let Some(r) = a.refs.next() {
            let i = a.grants.len();
            let step = &a.steps[i];
            match r.acquire_direct(txn, step.mode, priority) {
                Some(AcquireReply::Granted(grant)) => a.granted(grant, r),
                Some(AcquireReply::Queued(rx)) => {
                    // Queued behind a holder: wait for the grant right here (the grant wakes
                    // this task directly). Cancelled meanwhile, the pending grant gives the lock
                    // back and the guard releases what is held.
                    with_status(&a.status, |s| {
                        s.held = i;
                        s.waiting = Some((i, Instant::now()));
                    });
                    let mut pending = PendingGrant {
                        rx: Some(rx),
                        resource: r.clone(),
                        txn,
                    };
                    match pending.wait().await {
                        Some(grant) => a.granted(grant, r),
                        // The actor stopped before granting: go on detached, re-resolving it.
                        None => {
                            blocked = Some(r);
                            break;
                        }
                    }
                }
                None => {
                    blocked = Some(r);
                    break;
                }
            }
        }
        let Some(blocked) = blocked else {
            return Ok(a.finish());
        };
        let (tx, rx) = oneshot::channel();
        let core = a.core.clone();
        let rest = async move {
            let _ = tx.send(a.wait(blocked, None).await.map(Acquisition::finish));
        };
        if std::thread::current().id() == core.thread {
            actix::spawn(rest);
        } else if !core.arbiter.spawn(rest) {
            return Err(LockError::ShuttingDown);
        }
        rx.await.unwrap_or(Err(LockError::ShuttingDown))
    }
}

/// A grant queued for: awaited in the caller's task. Dropped before the grant was taken (the
/// caller was cancelled), it closes the channel and gives back a grant delivered meanwhile; a
/// grant sent after the close fails and is released by the actor's pump.
struct PendingGrant {
    rx: Option<oneshot::Receiver<Grant>>,
    resource: ResourceRef,
    txn: u64,
}

impl PendingGrant {
    /// The grant, or `None` when the actor dropped the request (it stopped).
    async fn wait(&mut self) -> Option<Grant> {
        let rx = self.rx.as_mut()?;
        let grant = rx.await.ok();
        self.rx = None;
        grant
    }
}

impl Drop for PendingGrant {
    fn drop(&mut self) {
        if let Some(mut rx) = self.rx.take() {
            rx.close();
            if rx.try_recv().is_ok() {
                self.resource.release(self.txn);
            }
        }
    }
}

/// The state of one phase's acquisition.
struct Acquisition {
    core: Arc<Core>,
    plan: Plan,
    steps: Arc<[LockStep]>,
    /// The actors of the steps not asked for yet.
    refs: std::vec::IntoIter<ResourceRef>,
    txn: u64,
    priority: Priority,
    status: SharedStatus,
    guard: LockGuard,
    /// Grants by step position: the key locks, then `plan.acquire` in order.
    grants: Vec<GrantedLock>,
}

impl Acquisition {
    fn granted(&mut self, grant: Grant, r: ResourceRef) {
        self.guard.refs.push(r.clone());
        self.grants.push((grant, r));
    }

    /// Waits for the lock of `blocked` (already queued when `queued` is its receiver), then asks
    /// for each remaining lock in order, awaiting each grant before the next.
    async fn wait(
        mut self,
        blocked: ResourceRef,
        mut queued: Option<oneshot::Receiver<Grant>>,
    ) -> Result<Self, LockError> {
        let mut next = Some(blocked);
        while let Some(r) = next.take().or_else(|| self.refs.next()) {
            let i = self.grants.len();
            let step = &self.steps[i];
            with_status(&self.status, |s| {
                s.held = i;
                s.waiting = Some((i, Instant::now()));
            });
            let granted = match queued.take() {
                Some(rx) => match rx.await {
                    Ok(grant) => (grant, r),
                    Err(_) => acquire_one(&self.core, r, step, self.txn, self.priority).await?,
                },
                None => acquire_one(&self.core, r, step, self.txn, self.priority).await?,
            };
            self.granted(granted.0, granted.1);
        }
        Ok(self)
    }

    /// Every lock is held: builds the results.
    fn finish(self) -> Locked {
        let Acquisition {
            core,
            plan,
            steps,
            txn,
            status,
            guard,
            grants,
            ..
        } = self;
        with_status(&status, |s| {
            s.waiting = None;
            s.held = steps.len();
        });
        let key_locks = plan.key_locks.len();
        // (kind, id) -> position in `plan.acquire`, built only when an entry is covered.
        let mut covered: Option<HashMap<(&str, &str), usize>> = None;

        let store = &core.store;
        let mut results: Vec<QueryResult> =
            (0..plan.queries).map(|_| QueryResult::default()).collect();
        for (e, action) in plan.entries.iter().zip(&plan.actions) {
            let Some(q) = e.query else { continue };
            if e.synthetic {
                continue;
            }
            let Some(result) = results.get_mut(q) else {
                continue;
            };
            let (value, resource) = match action {
                EntryAction::List => {
                    let listed = store
                        .kind(&e.kind)
                        .map(|k| k.list(e.filter.as_ref()))
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(id, value)| Listed { id, value })
                        .collect();
                    result.set_list(&e.kind, listed);
                    continue;
                }
                EntryAction::InconsistentRead => {
                    let v = store.kind(&e.kind).and_then(|k| k.get(&e.id));
                    result.set_resource(ResourceResult::new(&e.kind, &e.id, e.op, v, None));
                    continue;
                }
                EntryAction::Acquire(i) => match grants.get(key_locks + i) {
                    Some((g, r)) => (g.clone(), Some(r.clone())),
                    None => (None, None),
                },
                EntryAction::Covered => {
                    let at = covered
                        .get_or_insert_with(|| {
                            let mut m = HashMap::with_capacity(plan.acquire.len());
                            for (i, s) in plan.acquire.iter().enumerate() {
                                m.entry((s.kind.as_str(), s.id.as_str())).or_insert(i);
                            }
                            m
                        })
                        .get(&(e.kind.as_str(), e.id.as_str()))
                        .copied();
                    match at.and_then(|i| grants.get(key_locks + i)) {
                        Some((g, r)) => (g.clone(), Some(r.clone())),
                        None => (None, None),
                    }
                }
                EntryAction::Held => (store.kind(&e.kind).and_then(|k| k.get(&e.id)), None),
            };
            let target = CommitTarget {
                core: core.clone(),
                txn,
                resource,
            };
            result.set_resource(ResourceResult::new(
                &e.kind,
                &e.id,
                e.op,
                value,
                Some(target),
            ));
        }
        let mut context = plan.context_after.clone();
        context.txn = txn;
        Locked {
            context,
            results,
            guard,
            plan,
        }
    }
}
