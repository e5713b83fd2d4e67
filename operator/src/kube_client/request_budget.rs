//! The request budget of one client: governor's GCRA limiter (`qps` sustained, `burst` at once
//! after a quiet period) and the pause a 429's Retry-After puts on every request of the client.
//! Reads the time from a governor clock, so the tests drive it with a fake one.

use super::limits::ClientLimits;
use governor::clock::{Clock, DefaultClock, Reference};
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use std::num::NonZeroU32;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// The slowest rate a budget runs at (`--kube-qps` refuses anything not positive; this keeps a
/// library caller's zero from meaning "never").
const MIN_QPS: f64 = 0.001;

/// One client's budget: the limiter and the end of the current pause.
#[derive(Debug)]
pub(crate) struct RequestBudget<C: Clock = DefaultClock> {
    limiter: RateLimiter<NotKeyed, InMemoryState, C, NoOpMiddleware<C::Instant>>,
    clock: C,
    paused_until: Mutex<Option<C::Instant>>,
}

/// The governor quota of `limits`: one request every `1 / qps`, `burst` (at least 1) at once.
fn quota(limits: &ClientLimits) -> Quota {
    let per_request = Duration::try_from_secs_f64(1.0 / f64::from(limits.qps).max(MIN_QPS))
        .unwrap_or(Duration::from_secs(1000));
    let burst = NonZeroU32::new(limits.burst).unwrap_or(NonZeroU32::MIN);
    Quota::with_period(per_request)
        .unwrap_or_else(|| Quota::per_second(NonZeroU32::MAX))
        .allow_burst(burst)
}

impl RequestBudget {
    /// A full budget of `limits` on the monotonic clock.
    pub(crate) fn new(limits: &ClientLimits) -> Self {
        Self::with_clock(limits, DefaultClock::default())
    }
}

impl<C: Clock + Clone> RequestBudget<C> {
    /// A full budget of `limits` on `clock`.
    pub(crate) fn with_clock(limits: &ClientLimits, clock: C) -> Self {
        RequestBudget {
            limiter: RateLimiter::direct_with_clock(quota(limits), clock.clone()),
            clock,
            paused_until: Mutex::new(None),
        }
    }

    /// Takes one request's share now: zero when the request may go (the share is taken), else
    /// how long to wait before asking again (nothing is taken: the pause, or the next share).
    pub(crate) fn take(&self) -> Duration {
        let now = self.clock.now();
        let paused = *self
            .paused_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(until) = paused.filter(|until| *until > now) {
            return Duration::from(until.duration_since(now));
        }
        match self.limiter.check() {
            Ok(()) => Duration::ZERO,
            Err(not_until) => not_until.wait_time_from(now),
        }
    }

    /// Waits until a share is taken.
    pub(crate) async fn ready(&self) {
        loop {
            let wait = self.take();
            if wait.is_zero() {
                return;
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// Holds every request for `after` from now (a later end extends the pause, an earlier one
    /// does not shorten it).
    pub(crate) fn pause_for(&self, after: Duration) {
        let until = self.clock.now() + Nanos::from(after);
        let mut paused = self
            .paused_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *paused = Some(paused.map_or(until, |t| t.max(until)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use governor::clock::FakeRelativeClock;

    fn budget(qps: f32, burst: u32) -> (FakeRelativeClock, RequestBudget<FakeRelativeClock>) {
        let clock = FakeRelativeClock::default();
        let limits = ClientLimits {
            qps,
            burst,
            max_retries: 0,
        };
        (clock.clone(), RequestBudget::with_clock(&limits, clock))
    }

    #[test]
    fn a_burst_is_free_then_requests_go_one_interval_apart() {
        let (clock, b) = budget(10.0, 3);
        for _ in 0..3 {
            assert_eq!(b.take(), Duration::ZERO);
        }
        assert_eq!(b.take(), Duration::from_millis(100));
        assert_eq!(
            b.take(),
            Duration::from_millis(100),
            "a refused request takes nothing"
        );
        clock.advance(Duration::from_millis(100));
        assert_eq!(b.take(), Duration::ZERO);
        assert_eq!(b.take(), Duration::from_millis(100));
        // Two seconds later 20 shares were earned, capped at the burst of 3.
        clock.advance(Duration::from_secs(2));
        for _ in 0..3 {
            assert_eq!(b.take(), Duration::ZERO);
        }
        assert_eq!(b.take(), Duration::from_millis(100));
    }

    #[test]
    fn a_pause_holds_every_request_until_it_ends() {
        let (clock, b) = budget(100.0, 10);
        b.pause_for(Duration::from_secs(2));
        b.pause_for(Duration::from_secs(1));
        assert_eq!(b.take(), Duration::from_secs(2));
        clock.advance(Duration::from_millis(500));
        assert_eq!(b.take(), Duration::from_millis(1500));
        clock.advance(Duration::from_millis(1500));
        assert_eq!(b.take(), Duration::ZERO, "the pause is over");
    }

    #[test]
    fn a_zero_burst_still_lets_one_request_through() {
        let (_clock, b) = budget(1.0, 0);
        assert_eq!(b.take(), Duration::ZERO);
        assert_eq!(b.take(), Duration::from_secs(1));
    }
}
