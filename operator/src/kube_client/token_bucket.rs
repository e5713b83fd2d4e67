//! A token bucket (pure: the caller passes the time): `burst` tokens, refilled at `rate` per
//! second. A taker may drive the level below zero, which reserves a future token and tells the
//! taker how long to wait for it, so waiters are served in arrival order without a queue. A
//! pause (a 429's Retry-After) holds every taker until it ends.

use std::time::{Duration, Instant};

/// The bucket's state.
#[derive(Debug)]
pub(crate) struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
    paused_until: Option<Instant>,
}

impl TokenBucket {
    /// A full bucket at `now` (`rate` > 0 per second, `burst` >= 1).
    pub(crate) fn new(rate: f64, burst: u32, now: Instant) -> Self {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            rate: rate.max(f64::MIN_POSITIVE),
            burst,
            tokens: burst,
            at: now,
            paused_until: None,
        }
    }

    fn refill(&mut self, now: Instant) {
        if now > self.at {
            let earned = now.duration_since(self.at).as_secs_f64() * self.rate;
            self.tokens = (self.tokens + earned).min(self.burst);
            self.at = now;
        }
    }

    /// Takes one token at `now`; returns how long the taker waits before using it.
    pub(crate) fn take(&mut self, now: Instant) -> Duration {
        self.refill(now);
        self.tokens -= 1.0;
        let for_token = if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.rate)
        };
        let for_pause = self
            .paused_until
            .map(|t| t.saturating_duration_since(now))
            .unwrap_or_default();
        for_token.max(for_pause)
    }

    /// Holds every taker until `until` (a later pause extends, an earlier one does not shorten).
    pub(crate) fn pause_until(&mut self, until: Instant) {
        self.paused_until = Some(self.paused_until.map_or(until, |t| t.max(until)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_free_then_takers_wait_one_interval_each() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(10.0, 3, t0);
        for _ in 0..3 {
            assert_eq!(b.take(t0), Duration::ZERO);
        }
        let waits: Vec<u128> = (0..3).map(|_| b.take(t0).as_millis()).collect();
        assert_eq!(waits, vec![100, 200, 300]);
        // A second later the reservations are paid off and 6 tokens earned, capped at 3.
        let t1 = t0 + Duration::from_secs(2);
        for _ in 0..3 {
            assert_eq!(b.take(t1), Duration::ZERO);
        }
        assert_eq!(b.take(t1).as_millis(), 100);
    }

    #[test]
    fn a_pause_holds_every_taker_until_it_ends() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(100.0, 10, t0);
        b.pause_until(t0 + Duration::from_secs(2));
        b.pause_until(t0 + Duration::from_secs(1));
        assert_eq!(b.take(t0), Duration::from_secs(2));
        assert_eq!(
            b.take(t0 + Duration::from_secs(3)),
            Duration::ZERO,
            "the pause is over"
        );
    }
}
