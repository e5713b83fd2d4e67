//! The beginning of a phase (a `Begin` message to the coordinator) and the acquisition of the
//! planned phase, awaited by the caller's task: the locks are asked for in plan order by a chain
//! that travels from resource actor to resource actor (each grants its lock before it forwards
//! the chain to the next; the coordinator sends it to the first while it answers the Begin), and
//! the last actor answers the caller. A rename's phase runs two chains, with a check of the new
//! keys in between. Then the results are built (grants' values as working copies, lists and
//! inconsistent reads from the coordinator's catalog, commit handles).
//!
//! Cancellation at any await releases at once what is held: the guard is built before the first
//! chain is awaited and releases its locks when dropped, and a chain that was sent but not yet
//! answered is closed and released along its actors (`pending_chain.rs`).

use super::actor::{Begin, PhaseKind, Planned};
use super::guard::{CoordinatorLinks, LockGuard, Locked};
use super::messages::{CheckNewKeys, Collect, Collected, Resolve};
use super::pending_chain::PendingChain;
use crate::error::LockError;
use crate::fast_hash::FxHashMap;
use crate::lock_queue::Priority;
use crate::plan::{EntryAction, LockContext};
use crate::query::Query;
use crate::resource_actor::{ChainEnd, Grant};
use crate::results::{CommitTarget, Listed, QueryResult};
use tokio::sync::oneshot;

impl CoordinatorLinks {
    /// A Begin message to the coordinator, then the acquisition in the calling task, in a
    /// `wait` span (the time the caller waits for its locks).
    #[tracing::instrument(name = "wait", level = "info", skip_all,
        fields(kind = "lock", queries = queries.len(), priority = ?priority, otel.name = "wait lock"))]
    pub(crate) async fn begin<'p>(
        &self,
        queries: Vec<Query>,
        context: Option<&LockContext>,
        priority: Priority,
        what: PhaseKind,
        held: Option<&LockContext>,
    ) -> Result<Locked<'p>, LockError> {
        let (reply, answer) = oneshot::channel();
        // A stopped coordinator drops the message, and with it the reply channel.
        self.addr.do_send(Begin {
            queries,
            context: context.cloned(),
            held: held.cloned(),
            priority,
            what,
            reply,
        });
        let planned = answer.await.map_err(|_| LockError::ShuttingDown)??;
        acquire(self, planned, priority).await
    }
}

/// Carries out `planned` in the calling task.
pub(crate) async fn acquire<'p>(
    links: &CoordinatorLinks,
    planned: Planned,
    priority: Priority,
) -> Result<Locked<'p>, LockError> {
    let coordinator = &links.addr;
    let Planned {
        mut first,
        ticket,
        plan,
        context,
        steps,
        links: mut actors,
        mut unasked,
        txn,
        check_keys,
        collect,
    } = planned;
    let phase = ticket.phase;
    let key_locks = plan.key_locks.len();
    let mut guard = LockGuard::new(txn, steps.clone(), ticket);
    let mut grants: Vec<Grant> = Vec::with_capacity(steps.len());
    // The chains of the phase: every lock at once, or the key locks, a check of the new keys,
    // then the others. `unasked` tells the actors of a chain never started when this returns
    // early or is cancelled.
    let mut start = 0;
    while start < actors.len() {
        let end = if check_keys && start < key_locks {
            key_locks
        } else {
            actors.len()
        };
        unasked.from = end;
        let mut pending = match first.take() {
            Some(started) => started,
            None => PendingChain::start(&actors, txn, priority, start, end),
        };
        loop {
            let outcome = pending.wait().await.ok_or(LockError::ShuttingDown)?;
            let (at, granted) = match outcome {
                ChainEnd::Granted(granted) => (end, granted),
                ChainEnd::Broken { at, grants } => (at, grants),
            };
            for (r, _) in actors.get(start..at).unwrap_or(&[]) {
                guard.push_held(r.clone());
            }
            grants.extend(granted);
            if at >= end {
                break;
            }
            // The actor of step `at` retired before granting: its successor goes on.
            let step = &steps[at];
            tracing::trace!(kind = %step.kind, id = %step.id, "resolving a retired resource actor again");
            let stale = actors[at].0.generation;
            let fresh = coordinator
                .send(Resolve {
                    kind: step.kind.clone(),
                    id: step.id.clone(),
                    stale: Some(stale),
                })
                .await
                .map_err(|_| LockError::ShuttingDown)?;
            let mut renewed = actors.to_vec();
            renewed[at].0 = fresh;
            actors = renewed.into();
            start = at;
            pending = PendingChain::start(&actors, txn, priority, start, end);
        }
        if check_keys && end == key_locks {
            coordinator
                .send(CheckNewKeys { phase })
                .await
                .map_err(|_| LockError::ShuttingDown)??;
        }
        start = end;
    }
    drop(unasked);

    // Lists, inconsistent reads and values of locks an earlier phase holds come from the catalog,
    // read after every lock of the phase is granted.
    let mut from_catalog: FxHashMap<usize, Collected> = FxHashMap::default();
    if collect {
        let entries = plan
            .entries
            .iter()
            .zip(&plan.actions)
            .enumerate()
            .filter(|(_, (e, a))| {
                e.query.is_some()
                    && !e.synthetic
                    && matches!(
                        a,
                        EntryAction::List | EntryAction::InconsistentRead | EntryAction::Held
                    )
            })
            .map(|(at, (e, a))| (at, e.clone(), *a))
            .collect();
        let collected = coordinator
            .send(Collect { entries })
            .await
            .map_err(|_| LockError::ShuttingDown)?;
        for c in collected {
            let at = match &c {
                Collected::List(at, _) | Collected::Value(at, _) => *at,
            };
            from_catalog.insert(at, c);
        }
    }

    // (kind, id) -> position in `plan.acquire`, built only when an entry is covered.
    let mut covered: Option<FxHashMap<(&str, &str), usize>> = None;
    let mut results: Vec<QueryResult> = (0..plan.queries).map(|_| QueryResult::empty()).collect();
    for (at, (e, action)) in plan.entries.iter().zip(&plan.actions).enumerate() {
        let Some(q) = e.query else { continue };
        if e.synthetic {
            continue;
        }
        let Some(result) = results.get_mut(q) else {
            continue;
        };
        let acquired = |i: usize| {
            let at = key_locks + i;
            match (grants.get(at), guard.resource(at)) {
                (Some(g), Some(r)) => (g.clone(), Some(r.clone())),
                _ => (None, None),
            }
        };
        let (value, resource) = match action {
            EntryAction::List => {
                if let Some(Collected::List(_, listed)) = from_catalog.remove(&at) {
                    let listed = listed
                        .into_iter()
                        .map(|(id, value)| Listed { id, value })
                        .collect();
                    result.set_list(&e.kind, listed);
                }
                continue;
            }
            EntryAction::InconsistentRead => {
                let v = match from_catalog.remove(&at) {
                    Some(Collected::Value(_, v)) => v,
                    _ => None,
                };
                result.set_resource(&e.kind, &e.id, e.op, v, None);
                continue;
            }
            EntryAction::Acquire(i) => acquired(*i),
            EntryAction::Covered => {
                let found = covered
                    .get_or_insert_with(|| {
                        let mut m = FxHashMap::default();
                        m.reserve(plan.acquire.len());
                        for (i, s) in plan.acquire.iter().enumerate() {
                            m.entry((s.kind.as_str(), s.id.as_str())).or_insert(i);
                        }
                        m
                    })
                    .get(&(e.kind.as_str(), e.id.as_str()))
                    .copied();
                match found {
                    Some(i) => acquired(i),
                    None => (None, None),
                }
            }
            EntryAction::Held => match from_catalog.remove(&at) {
                Some(Collected::Value(_, v)) => (v, None),
                _ => (None, None),
            },
        };
        let target = CommitTarget {
            coordinator: links.resolver.clone(),
            txn,
            resource,
        };
        result.set_resource(&e.kind, &e.id, e.op, value, Some(target));
    }
    Ok(Locked::new(context, results, plan, guard, links.clone()))
}
