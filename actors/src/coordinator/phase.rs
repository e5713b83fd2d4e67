//! The acquisition future of one Lock / NestedLock / shutdown phase: asks for each lock in plan
//! order, awaiting each grant before the next (re-resolving actors that retired meanwhile), then
//! builds the results (copies, lists from the kind index, commit handles).

use super::guard::{LockGuard, Locked};
use super::{Coordinator, GrantedLock, Resolve, SharedStatus, with_status};
use crate::error::LockError;
use crate::index::Store;
use crate::lock_queue::Priority;
use crate::plan::{EntryAction, LockStep, Plan};
use crate::resource_actor::{AcquireNow, AcquireReply, ResourceRef};
use crate::results::{CommitTarget, Listed, QueryResult, ResourceResult};
use actix::Addr;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One Lock / NestedLock / shutdown being carried out.
pub(crate) struct Phase {
    pub(crate) coordinator: Addr<Coordinator>,
    pub(crate) store: Arc<Store>,
    pub(crate) plan: Plan,
    pub(crate) steps: Arc<[LockStep]>,
    pub(crate) refs: Vec<ResourceRef>,
    pub(crate) txn: u64,
    pub(crate) phase: u64,
    pub(crate) priority: Priority,
    pub(crate) status: SharedStatus,
}

async fn acquire_one(
    coordinator: &Addr<Coordinator>,
    mut r: ResourceRef,
    step: &LockStep,
    txn: u64,
    priority: Priority,
) -> Result<(Option<Arc<Value>>, ResourceRef), LockError> {
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
        r = coordinator
            .send(Resolve {
                kind: step.kind.clone(),
                id: step.id.clone(),
            })
            .await
            .map_err(|_| LockError::ShuttingDown)?;
    }
    Err(LockError::ShuttingDown)
}

impl Phase {
    pub(crate) async fn run(self) -> Result<Locked, LockError> {
        let Phase {
            coordinator,
            store,
            plan,
            steps,
            refs,
            txn,
            phase,
            priority,
            status,
        } = self;
        let mut guard = LockGuard {
            txn,
            phase,
            held: Vec::new(),
            coordinator: coordinator.clone(),
            released: false,
        };
        // Grants by step position: the key locks, then `plan.acquire` in order.
        let mut grants: Vec<GrantedLock> = Vec::with_capacity(steps.len());
        guard.held.reserve(steps.len());
        for (i, (step, r)) in steps.iter().zip(refs).enumerate() {
            with_status(&status, |s| s.waiting = Some((i, Instant::now())));
            let (grant, r) = acquire_one(&coordinator, r, step, txn, priority).await?;
            with_status(&status, |s| {
                s.waiting = None;
                s.held = i + 1;
            });
            guard.held.push((step.clone(), r.clone()));
            grants.push((grant, r));
        }
        let key_locks = plan.key_locks.len();
        // (kind, id) -> position in `plan.acquire`, built only when an entry is covered.
        let mut covered: Option<HashMap<(&str, &str), usize>> = None;

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
                    result.lists.insert(e.kind.clone(), listed);
                    continue;
                }
                EntryAction::InconsistentRead => {
                    let v = store.kind(&e.kind).and_then(|k| k.get(&e.id));
                    result.resources.insert(
                        e.kind.clone(),
                        ResourceResult::new(
                            &e.kind,
                            &e.id,
                            e.op,
                            v.map(|v| Value::clone(&v)),
                            None,
                        ),
                    );
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
                coordinator: coordinator.clone(),
                txn,
                resource,
            };
            result.resources.insert(
                e.kind.clone(),
                ResourceResult::new(
                    &e.kind,
                    &e.id,
                    e.op,
                    value.map(|v| Value::clone(&v)),
                    Some(target),
                ),
            );
        }
        let mut context = plan.context_after.clone();
        context.txn = txn;
        Ok(Locked {
            context,
            results,
            guard,
            plan,
        })
    }
}
