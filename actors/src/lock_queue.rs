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

use crate::fast_hash::FxHashMap;
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
        // (waited / age_step).min(2), by comparisons instead of a 128-bit division.
        let steps = if age_step.checked_mul(2).is_some_and(|two| waited >= two) {
            2
        } else if waited >= age_step {
            1
        } else {
            0
        };
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

/// Above this many holders, the holders are also indexed by transaction (a shared lock such as
/// the root read can have one holder per transaction in flight; without the index every release
/// and every holder check would scan them all).
const INDEX_HOLDERS_ABOVE: usize = 8;

/// A lock with its holders and waiters.
#[derive(Debug)]
pub struct LockQueue<T> {
    holders: Vec<(u64, LockMode)>,
    /// txn -> its position in `holders`, kept while there are many holders.
    holder_index: Option<Box<FxHashMap<u64, usize>>>,
    /// A transaction appeared twice among the holders (never, from the planner): no index
    /// until the lock is free again, so every lookup scans and stays exact.
    unindexable: bool,
    waiters: Vec<Waiter<T>>,
    next_seq: u64,
    age_step: Duration,
}

impl<T> LockQueue<T> {
    /// An unheld lock with this ageing step.
    pub fn new(age_step: Duration) -> Self {
        LockQueue {
            holders: Vec::new(),
            holder_index: None,
            unindexable: false,
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
        let compatible = self.compatible(mode);
        if compatible {
            self.add_holder(txn, mode);
        }
        compatible
    }

    fn add_holder(&mut self, txn: u64, mode: LockMode) {
        self.holders.push((txn, mode));
        let at = self.holders.len() - 1;
        if let Some(index) = &mut self.holder_index {
            if index.insert(txn, at).is_some() {
                self.holder_index = None;
                self.unindexable = true;
            }
        } else if self.holders.len() > INDEX_HOLDERS_ABOVE && !self.unindexable {
            let mut index = FxHashMap::default();
            index.reserve(self.holders.len() * 2);
            for (i, (t, _)) in self.holders.iter().enumerate() {
                if index.insert(*t, i).is_some() {
                    self.unindexable = true;
                    return;
                }
            }
            self.holder_index = Some(Box::new(index));
        }
    }

    fn holder_position(&self, txn: u64) -> Option<usize> {
        match &self.holder_index {
            Some(index) => index.get(&txn).copied(),
            None => self.holders.iter().position(|(t, _)| *t == txn),
        }
    }

    /// Removes `txn` from the holders; returns whether it held the lock.
    /// The order of the remaining holders may change (the last one takes the freed place).
    pub fn release(&mut self, txn: u64) -> bool {
        let Some(at) = self.holder_position(txn) else {
            return false;
        };
        self.holders.swap_remove(at);
        match &mut self.holder_index {
            Some(index) => {
                index.remove(&txn);
                if let Some((moved, _)) = self.holders.get(at) {
                    index.insert(*moved, at);
                }
                if self.holders.len() <= INDEX_HOLDERS_ABOVE / 2 {
                    self.holder_index = None;
                }
            }
            None => {
                // (Only when a transaction appeared twice: remove every entry, as before.)
                if self.unindexable && self.holders.iter().any(|(t, _)| *t == txn) {
                    self.holders.retain(|(t, _)| *t != txn);
                }
            }
        }
        if self.holders.is_empty() {
            self.unindexable = false;
        }
        true
    }

    /// Removes the waiters for which `gone` is true (e.g. whose requester went away).
    pub fn drop_waiters(&mut self, mut gone: impl FnMut(&Waiter<T>) -> bool) {
        self.waiters.retain(|w| !gone(w));
    }

    /// Grants as many waiters as the rule allows at `now`; returns them in grant order.
    pub fn pump(&mut self, now: Instant) -> Vec<Waiter<T>> {
        match self.waiters.len() {
            0 => return Vec::new(),
            1 => {
                if !self.compatible(self.waiters[0].mode) {
                    return Vec::new();
                }
                let w = self.waiters.remove(0);
                self.add_holder(w.txn, w.mode);
                return vec![w];
            }
            _ => {}
        }
        // The rule takes the best waiter (highest effective priority, earliest arrival among
        // equals) while it is compatible. `now` is fixed and a grant changes no other waiter's
        // effective priority, so the successive best waiters are the waiters in this order:
        // the ageing is computed once per waiter, not once per waiter per grant.
        let step = self.age_step;
        let aged = |w: &Waiter<T>| {
            w.priority
                .aged(now.saturating_duration_since(w.since), step)
        };
        // A blocked queue (its best waiter incompatible) is left as it is, after one pass.
        let mut best: Option<(Priority, u64, usize)> = None;
        for (i, w) in self.waiters.iter().enumerate() {
            let p = aged(w);
            if best.is_none_or(|(bp, bs, _)| p > bp || (p == bp && w.seq < bs)) {
                best = Some((p, w.seq, i));
            }
        }
        if best.is_none_or(|(_, _, i)| !self.compatible(self.waiters[i].mode)) {
            return Vec::new();
        }
        let mut order: Vec<(Priority, u64, usize)> = self
            .waiters
            .iter()
            .enumerate()
            .map(|(i, w)| (aged(w), w.seq, i))
            .collect();
        order.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut grant: Vec<usize> = Vec::new();
        for &(_, _, i) in &order {
            let (txn, mode) = (self.waiters[i].txn, self.waiters[i].mode);
            if !self.compatible(mode) {
                break;
            }
            self.add_holder(txn, mode);
            grant.push(i);
        }
        if grant.is_empty() {
            return Vec::new();
        }
        // Take the granted waiters out (in grant order), keep the others in arrival order.
        let mut slots: Vec<Option<Waiter<T>>> = self.waiters.drain(..).map(Some).collect();
        let granted: Vec<Waiter<T>> = grant.iter().filter_map(|&i| slots[i].take()).collect();
        self.waiters.extend(slots.into_iter().flatten());
        granted
    }

    /// Whether a request in `mode` is compatible with the holders (shared with shared, exclusive
    /// alone). Holders all share one mode (shared grants batch, an exclusive one is alone), so
    /// the first tells.
    fn compatible(&self, mode: LockMode) -> bool {
        match mode {
            LockMode::Read => self
                .holders
                .first()
                .is_none_or(|(_, m)| *m == LockMode::Read),
            LockMode::Write => self.holders.is_empty(),
        }
    }

    /// The current holders (in no particular order).
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
        match &self.holder_index {
            Some(index) => index
                .get(&txn)
                .is_some_and(|&at| mode.is_none_or(|x| x == self.holders[at].1)),
            None => self
                .holders
                .iter()
                .any(|(t, m)| *t == txn && mode.is_none_or(|x| x == *m)),
        }
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

    /// The grant rule as first written: repeatedly take the best waiter while compatible.
    fn pump_reference(
        holders: &mut Vec<(u64, LockMode)>,
        waiters: &mut Vec<(u64, LockMode, Priority, Instant, u64)>,
        now: Instant,
        step: Duration,
    ) -> Vec<u64> {
        let mut granted = Vec::new();
        while let Some(best) = waiters
            .iter()
            .enumerate()
            .max_by(|(_, a), (_, b)| {
                let pa = a.2.aged(now.saturating_duration_since(a.3), step);
                let pb = b.2.aged(now.saturating_duration_since(b.3), step);
                pa.cmp(&pb).then(b.4.cmp(&a.4))
            })
            .map(|(i, _)| i)
        {
            let mode = waiters[best].1;
            let ok = match mode {
                LockMode::Read => holders.iter().all(|(_, m)| *m == LockMode::Read),
                LockMode::Write => holders.is_empty(),
            };
            if !ok {
                break;
            }
            let w = waiters.remove(best);
            holders.push((w.0, w.1));
            granted.push(w.0);
        }
        granted
    }

    #[test]
    fn pump_grants_what_the_rule_as_first_written_grants() {
        let step = Duration::from_secs(2);
        let t0 = Instant::now();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..500 {
            let mut q: LockQueue<()> = LockQueue::new(step);
            let mut ref_holders = Vec::new();
            let mut ref_waiters = Vec::new();
            let mut txn = 0u64;
            for round in 0..20u64 {
                let now = t0 + Duration::from_millis(round * 700);
                for _ in 0..next(6) {
                    txn += 1;
                    let mode = if next(3) == 0 {
                        LockMode::Write
                    } else {
                        LockMode::Read
                    };
                    let priority =
                        [Priority::Baseline, Priority::Default, Priority::High][next(3) as usize];
                    q.enqueue(txn, mode, priority, now, ());
                    ref_waiters.push((txn, mode, priority, now, q.next_seq - 1));
                }
                let got = txns(&q.pump(now));
                let want = pump_reference(&mut ref_holders, &mut ref_waiters, now, step);
                assert_eq!(got, want);
                // Release some holders.
                let holders: Vec<u64> = q.holders().iter().map(|(t, _)| *t).collect();
                for t in holders {
                    if next(2) == 0 {
                        assert!(q.release(t));
                        ref_holders.retain(|(h, _)| *h != t);
                    }
                }
                let mut a: Vec<u64> = q.holders().iter().map(|(t, _)| *t).collect();
                let mut b: Vec<u64> = ref_holders.iter().map(|(t, _)| *t).collect();
                a.sort_unstable();
                b.sort_unstable();
                assert_eq!(a, b);
                let w: Vec<u64> = q.waiters().iter().map(|w| w.txn).collect();
                let rw: Vec<u64> = ref_waiters.iter().map(|w| w.0).collect();
                assert_eq!(w, rw, "waiters stay in arrival order");
            }
        }
    }

    #[test]
    fn many_shared_holders_release_in_any_order() {
        let t0 = Instant::now();
        let mut q: LockQueue<()> = LockQueue::new(DEFAULT_AGE_STEP);
        for t in 0..100u64 {
            assert!(q.try_grant(t, LockMode::Read));
        }
        q.enqueue(1000, LockMode::Write, Priority::Default, t0, ());
        assert!(q.pump(t0).is_empty());
        assert!(!q.try_grant(2000, LockMode::Read), "a waiter is queued");
        for t in (0..100u64)
            .filter(|t| t % 3 == 0)
            .chain((0..100).filter(|t| t % 3 != 0))
        {
            assert!(q.holds(t, Some(LockMode::Read)));
            assert!(!q.holds(t, Some(LockMode::Write)));
            assert!(q.release(t));
            assert!(!q.release(t));
            assert!(!q.holds(t, None));
        }
        assert_eq!(txns(&q.pump(t0)), vec![1000]);
        assert_eq!(q.holders(), &[(1000, LockMode::Write)]);
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
    fn ageing_by_comparison_matches_the_division() {
        let steps = [1u64, 7, 1_000, 2_000_000_000, u64::MAX / 3];
        let waits = [
            0u64,
            1,
            6,
            7,
            13,
            14,
            15,
            999,
            2_000,
            4_000_000_000,
            u64::MAX,
        ];
        for &s in &steps {
            for &w in &waits {
                let (step, waited) = (Duration::from_nanos(s), Duration::from_nanos(w));
                for p in [Priority::Baseline, Priority::Default, Priority::High] {
                    let n = (waited.as_nanos() / step.as_nanos()).min(2) as u32;
                    assert_eq!(p.aged(waited, step), Priority::from_level(p.level() + n));
                }
            }
        }
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
