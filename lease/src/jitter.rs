//! `jitter`: the one function every periodic requeue of the project goes through (the device-locking decision:
//! "a jitter of ±10% is applied to all periodic requeues to reduce lock convoy effects").

use rand::Rng;
use std::time::Duration;

/// The relative spread of [`jitter`]: a delay `d` becomes a uniform draw in `[0.9 d, 1.1 d]`.
pub const JITTER_FRACTION: f64 = 0.10;

/// A uniform draw in `[0.9 d, 1.1 d]`.
pub fn jitter(d: Duration) -> Duration {
    jitter_with(&mut rand::rng(), d)
}

/// [`jitter`] with a caller-supplied random source (for reproducible simulations).
pub fn jitter_with<R: Rng + ?Sized>(rng: &mut R, d: Duration) -> Duration {
    let factor = rng.random_range((1.0 - JITTER_FRACTION)..=(1.0 + JITTER_FRACTION));
    d.mul_f64(factor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn stays_within_bounds_and_is_not_constant() {
        let d = Duration::from_secs(15);
        let (lo, hi) = (d.mul_f64(0.9), d.mul_f64(1.1));
        let mut seen = HashSet::new();
        for _ in 0..100_000 {
            let j = jitter(d);
            assert!(j >= lo && j <= hi, "{j:?} outside [{lo:?}, {hi:?}]");
            seen.insert(j.as_nanos());
        }
        assert!(
            seen.len() > 1000,
            "jitter drew only {} distinct values",
            seen.len()
        );
        // Both halves of the interval are reached.
        assert!(seen.iter().any(|&n| n < d.as_nanos()));
        assert!(seen.iter().any(|&n| n > d.as_nanos()));
    }

    #[test]
    fn zero_stays_zero() {
        assert_eq!(jitter(Duration::ZERO), Duration::ZERO);
    }
}
