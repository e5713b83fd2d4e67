//! The coordinator's answer to inspection: every phase of the transaction table with the locks it
//! holds and the one it waits on, read from the resource actors' own snapshots (each actor reports
//! its holders and waiters), and every live resource actor.

use super::actor::Coordinator;
use super::messages::Inspect;
use crate::inspect::{CoordinatorSnapshot, ResourceSnapshot, TransactionSnapshot, WaitSnapshot};
use crate::plan::LockStep;
use crate::resource_actor::{InspectResource, ResourceRef};
use actix::prelude::*;
use std::collections::HashMap;
use std::time::Instant;

/// A phase as the table records it, before the resource actors answered.
struct PhaseView {
    phase: u64,
    txn: u64,
    what: &'static str,
    priority: crate::Priority,
    age_ms: u64,
    steps: std::sync::Arc<[LockStep]>,
}

impl Handler<Inspect> for Coordinator {
    type Result = ResponseFuture<CoordinatorSnapshot>;
    fn handle(&mut self, _msg: Inspect, _ctx: &mut Context<Self>) -> Self::Result {
        let now = Instant::now();
        let phases: Vec<PhaseView> = self
            .phases
            .iter()
            .map(|(phase, p)| PhaseView {
                phase: *phase,
                txn: p.txn,
                what: p.what.name(),
                priority: p.priority,
                age_ms: now.saturating_duration_since(p.started).as_millis() as u64,
                steps: p.steps.clone(),
            })
            .collect();
        let refs: Vec<ResourceRef> = self
            .registry
            .values()
            .flat_map(|ids| ids.values())
            .filter(|r| r.connected())
            .cloned()
            .collect();
        Box::pin(async move {
            let snaps =
                futures::future::join_all(refs.iter().map(|r| r.send(InspectResource))).await;
            let mut resources: Vec<ResourceSnapshot> =
                snaps.into_iter().filter_map(Result::ok).collect();
            resources.sort_by(|a, b| (&a.kind, &a.id).cmp(&(&b.kind, &b.id)));
            let by_lock: HashMap<(&str, &str), &ResourceSnapshot> = resources
                .iter()
                .map(|r| ((r.kind.as_str(), r.id.as_str()), r))
                .collect();
            let transactions = phases.iter().map(|p| transaction(p, &by_lock)).collect();
            CoordinatorSnapshot {
                transactions,
                resources,
            }
        })
    }
}

/// A phase's held locks are the steps whose actor lists its transaction as a holder (a prefix of
/// the plan order); it waits on the first step whose actor lists it as a waiter.
fn transaction(
    p: &PhaseView,
    by_lock: &HashMap<(&str, &str), &ResourceSnapshot>,
) -> TransactionSnapshot {
    let snapshot = |s: &LockStep| by_lock.get(&(s.kind.as_str(), s.id.as_str())).copied();
    let held = p
        .steps
        .iter()
        .take_while(|s| snapshot(s).is_some_and(|r| r.holders.contains(&p.txn)))
        .cloned()
        .collect::<Vec<_>>();
    let waiting_on = p.steps.get(held.len()).and_then(|s| {
        let w = snapshot(s)?.waiters.iter().find(|w| w.txn == p.txn)?;
        Some(WaitSnapshot {
            lock: s.clone(),
            waited_ms: w.waited_ms,
        })
    });
    TransactionSnapshot {
        phase: p.phase,
        txn: p.txn,
        what: p.what,
        priority: p.priority,
        age_ms: p.age_ms,
        held,
        waiting_on,
    }
}
