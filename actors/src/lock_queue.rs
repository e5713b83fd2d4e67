//! The shared/exclusive lock of one resource with its waiter queue: priority order, FIFO within a
//! priority, and ageing (a waiter's effective priority rises one level per `age_step` of waiting).
//! Pure data structure: time is passed in, so the grant order is unit-testable.
//!
//! Grant rule (`pump`): repeatedly take the waiter with the highest effective priority (earliest
//! arrival among equals); grant it if compatible with the holders (shared with shared, exclusive
//! alone), otherwise stop. So consecutive shared waiters are granted as a batch, an exclusive waiter
//! is granted alone, and a waiter is never overtaken by a later arrival of equal effective priority.
//!
//! Bound: a waiter of base priority `p` reaches `High` after `(High - p) * age_step`; from then on
//! only waiters that arrived before it can be granted ahead of it. Its wait is therefore at most
//! `2 * age_step` (for `Baseline`) plus the time the earlier arrivals and the current holders keep
//! the lock — nothing starves.

use crate::plan::LockMode;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// The priority of a lock request. Higher is served first; `Default` unless said.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    /// Served after everything else (background work).
    Baseline,
    /// The normal priority.
    #[default]
    Default,
    /// Served first (e.g. user-facing deletes).
    High,
}

impl Priority {
    fn level(self) -> u32 {
        match self {
            Priority::Baseline => 0,
            Priority::Default => 1,
            Priority::High => 2,
        }
    }
    fn from_level(level: u32) -> Priority {
        match level {
            0 => Priority::Baseline,
            1 => Priority::Default,
            _ => Priority::High,
        }
    }
    /// The priority after waiting `waited` with ageing every `age_step`.
    pub fn aged(self, waited: Duration, age_step: Duration) -> Priority {
        if age_step.is_zero() {
            return Priority::High;
        }
        let steps = (waited.as_nanos() / age_step.as_nanos()).min(2) as u32;
        Priority::from_level(self.level() + steps)
    }
}

/// The default ageing step.
pub const DEFAULT_AGE_STEP: Duration = Duration::from_secs(2);

/// One queued request; `T` is what the grant delivers to (e.g. a reply channel).
#[derive(Debug)]
pub struct Waiter<T> {
    /// The requesting transaction.
    pub txn: u64,
    /// The requested mode.
    pub mode: LockMode,
    /// The base priority.
    pub priority: Priority,
    /// When it was queued.
    pub since: Instant,
    seq: u64,
    /// The payload handed back on grant.
    pub payload: T,
}

/// A lock with its holders and waiters.
#[derive(Debug)]
pub struct LockQueue<T> {
    holders: Vec<(u64, LockMode)>,
    waiters: Vec<Waiter<T>>,
    next_seq: u64,
    age_step: Duration,
}

impl<T> LockQueue<T> {
    /// An unheld lock with this ageing step.
    pub fn new(age_step: Duration) -> Self {
        LockQueue {
            holders: Vec::new(),
            waiters: Vec::new(),
            next_seq: 0,
            age_step,
        }
    }

    /// Queues a request (granted by the next `pump` if it is first in line and compatible).
    pub fn enqueue(
        &mut self,
        txn: u64,
        mode: LockMode,
        priority: Priority,
        now: Instant,
        payload: T,
    ) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.waiters.push(Waiter {
            txn,
            mode,
            priority,
            since: now,
            seq,
            payload,
        });
    }

    /// Grants `txn` at once when nobody waits and the holders are compatible: exactly what
    /// `enqueue` followed by `pump` would do then (the request would be the only, hence the best,
    /// waiter). Returns whether it was granted; when not, nothing changed.
    pub fn try_grant(&mut self, txn: u64, mode: LockMode) -> bool {
        if !self.waiters.is_empty() {
            return false;
        }
        let compatible = match mode {
            LockMode::Read => self.holders.iter().all(|(_, m)| *m == LockMode::Read),
            LockMode::Write => self.holders.is_empty(),
        };
        if compatible {
            self.holders.push((txn, mode));
        }
        compatible
    }

    /// Removes `txn` from the holders; returns whether it held the lock.
    pub fn release(&mut self, txn: u64) -> bool {
        let before = self.holders.len();
        self.holders.retain(|(t, _)| *t != txn);
        before != self.holders.len()
    }

    /// Removes the waiters for which `gone` is true (e.g. whose requester went away).
    pub fn drop_waiters(&mut self, mut gone: impl FnMut(&Waiter<T>) -> bool) {
        self.waiters.retain(|w| !gone(w));
    }

    /// Grants as many waiters as the rule allows at `now`; returns them in grant order.
    pub fn pump(&mut self, now: Instant) -> Vec<Waiter<T>> {
        let mut granted = Vec::new();
        while let Some(best) = self.best(now) {
            let mode = self.waiters[best].mode;
            let compatible = match mode {
                LockMode::Read => self.holders.iter().all(|(_, m)| *m == LockMode::Read),
                LockMode::Write => self.holders.is_empty(),
            };
            if !compatible {
                break;
            }
            let w = self.waiters.remove(best);
            self.holders.push((w.txn, w.mode));
            granted.push(w);
        }
        granted
    }

    fn best(&self, now: Instant) -> Option<usize> {
        let step = self.age_step;
        self.waiters
            .iter()
            .enumerate()
            .max_by(|(_, a), (_, b)| {
                let pa = a
                    .priority
                    .aged(now.saturating_duration_since(a.since), step);
                let pb = b
                    .priority
                    .aged(now.saturating_duration_since(b.since), step);
                pa.cmp(&pb).then(b.seq.cmp(&a.seq))
            })
            .map(|(i, _)| i)
    }

    /// The current holders.
    pub fn holders(&self) -> &[(u64, LockMode)] {
        &self.holders
    }
    /// The current waiters, in arrival order.
    pub fn waiters(&self) -> &[Waiter<T>] {
        &self.waiters
    }
    /// The mode the lock is held in, if held.
    pub fn mode(&self) -> Option<LockMode> {
        self.holders.first().map(|(_, m)| *m)
    }
    /// Whether `txn` holds the lock (in any mode when `mode` is None).
    pub fn holds(&self, txn: u64, mode: Option<LockMode>) -> bool {
        self.holders
            .iter()
            .any(|(t, m)| *t == txn && mode.is_none_or(|x| x == *m))
    }
    /// No holders and no waiters.
    pub fn is_idle(&self) -> bool {
        self.holders.is_empty() && self.waiters.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txns(ws: &[Waiter<()>]) -> Vec<u64> {
        ws.iter().map(|w| w.txn).collect()
    }

    #[test]
    fn shared_grants_batch_and_exclusive_alone() {
        let t0 = Instant::now();
        let mut q = LockQueue::new(DEFAULT_AGE_STEP);
        q.enqueue(1, LockMode::Read, Priority::Default, t0, ());
        q.enqueue(2, LockMode::Read, Priority::Default, t0, ());
        q.enqueue(3, LockMode::Write, Priority::Default, t0, ());
        q.enqueue(4, LockMode::Read, Priority::Default, t0, ());
        assert_eq!(txns(&q.pump(t0)), vec![1, 2]);
        q.release(1);
        assert!(q.pump(t0).is_empty());
        q.release(2);
        assert_eq!(txns(&q.pump(t0)), vec![3]);
        assert_eq!(q.mode(), Some(LockMode::Write));
        q.release(3);
        assert_eq!(txns(&q.pump(t0)), vec![4]);
    }

    #[test]
    fn high_waiter_queued_after_default_is_granted_first() {
        let t0 = Instant::now();
        let mut q = LockQueue::new(DEFAULT_AGE_STEP);
        q.enqueue(1, LockMode::Write, Priority::Default, t0, ());
        assert_eq!(txns(&q.pump(t0)), vec![1]);
        q.enqueue(2, LockMode::Write, Priority::Default, t0, ());
        q.enqueue(3, LockMode::Write, Priority::High, t0, ());
        q.enqueue(4, LockMode::Write, Priority::Baseline, t0, ());
        q.release(1);
        assert_eq!(txns(&q.pump(t0)), vec![3]);
        q.release(3);
        assert_eq!(txns(&q.pump(t0)), vec![2]);
        q.release(2);
        assert_eq!(txns(&q.pump(t0)), vec![4]);
    }

    #[test]
    fn ageing_lets_default_through_sustained_high_contention() {
        let step = Duration::from_secs(2);
        let t0 = Instant::now();
        let mut q = LockQueue::new(step);
        q.enqueue(0, LockMode::Write, Priority::High, t0, ());
        q.pump(t0);
        q.enqueue(100, LockMode::Write, Priority::Default, t0, ());
        // High waiters keep arriving every 100 ms; each release grants the best waiter.
        let mut order = Vec::new();
        let mut holder = 0;
        for i in 1..=60u64 {
            let now = t0 + Duration::from_millis(100 * i);
            q.enqueue(i, LockMode::Write, Priority::High, now, ());
            q.release(holder);
            let g = q.pump(now);
            assert_eq!(g.len(), 1);
            holder = g[0].txn;
            order.push((holder, now.duration_since(t0)));
        }
        let pos = order
            .iter()
            .position(|(t, _)| *t == 100)
            .expect("the default waiter is granted");
        // Before it aged, every grant went to a High waiter; once aged it went before later arrivals.
        assert!(order[..pos].iter().all(|(t, _)| *t != 100));
        assert!(order[pos].1 >= step);
        let later_high_before: Vec<_> = order[..pos]
            .iter()
            .filter(|(t, at)| *at >= step && *t > 20)
            .collect();
        assert!(
            later_high_before.is_empty(),
            "no High waiter that arrived after it aged overtook it"
        );
    }

    #[test]
    fn baseline_ages_through_two_levels() {
        let s = Duration::from_secs(2);
        assert_eq!(
            Priority::Baseline.aged(Duration::from_secs(1), s),
            Priority::Baseline
        );
        assert_eq!(
            Priority::Baseline.aged(Duration::from_secs(2), s),
            Priority::Default
        );
        assert_eq!(
            Priority::Baseline.aged(Duration::from_secs(5), s),
            Priority::High
        );
        assert_eq!(
            Priority::High.aged(Duration::from_secs(50), s),
            Priority::High
        );
    }
}
