//! Helpers shared by the integration tests.

use cinder_actors::{CoordinatorConfig, CoordinatorHandle, LockMode, LockStep, PlanEntry, Schema};
use std::future::Future;
use std::time::Duration;

pub fn step(mode: &str, kind: &str, id: &str) -> LockStep {
    let mode = if mode == "write" {
        LockMode::Write
    } else {
        LockMode::Read
    };
    LockStep {
        mode,
        kind: kind.to_string(),
        id: id.to_string(),
    }
}

pub fn entries(plan: &[PlanEntry]) -> Vec<(String, String, String, Option<usize>, bool)> {
    plan.iter()
        .map(|e| {
            (
                e.op.as_str().to_string(),
                e.kind.clone(),
                e.id.clone(),
                e.query,
                e.synthetic,
            )
        })
        .collect()
}

pub fn entry(
    op: &str,
    kind: &str,
    id: &str,
    query: Option<usize>,
    synthetic: bool,
) -> (String, String, String, Option<usize>, bool) {
    (
        op.to_string(),
        kind.to_string(),
        id.to_string(),
        query,
        synthetic,
    )
}

/// Asserts through inspection that no resource is held or waited for.
pub async fn assert_nothing_held(c: &CoordinatorHandle) {
    let snap = c.inspect().await.unwrap();
    assert!(snap.busy().is_empty(), "busy resources: {:?}", snap.busy());
}

/// Polls `cond` until it holds (up to 60 s).
pub async fn eventually<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    for _ in 0..6000 {
        if cond().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

/// Polls inspection until `kind`/`id` has `n` waiters.
pub async fn wait_for_waiters(c: &CoordinatorHandle, kind: &str, id: &str, n: usize) {
    let (c, kind, id) = (c.clone(), kind.to_string(), id.to_string());
    eventually(&format!("{n} waiters on {kind} {id}"), || {
        let (c, kind, id) = (c.clone(), kind.clone(), id.clone());
        async move {
            let snap = c.inspect().await.unwrap();
            snap.resources
                .iter()
                .any(|r| r.kind == kind && r.id == id && r.waiters.len() == n)
        }
    })
    .await;
}

/// A coordinator of the standard schema whose resource actors run on `arbiters` arbiters (1: the
/// coordinator's own thread; 2 and more: threads of their own).
pub fn coordinator_on(arbiters: usize) -> CoordinatorHandle {
    CoordinatorHandle::start(
        Schema::standard(),
        CoordinatorConfig {
            arbiters,
            ..CoordinatorConfig::default()
        },
    )
}
