//! A per-minute rate limit (token bucket): up to the whole minute's allowance at once, then
//! refilled evenly.

use std::sync::{Mutex, PoisonError};
use std::time::Instant;

pub(crate) struct PerMinute {
    per_minute: u32,
    bucket: Mutex<(f64, Instant)>,
}

impl PerMinute {
    pub(super) fn new(per_minute: u32) -> Self {
        Self {
            per_minute,
            bucket: Mutex::new((f64::from(per_minute), Instant::now())),
        }
    }

    /// Takes one unit now if the allowance has one.
    pub(super) fn take(&self) -> bool {
        self.take_at(Instant::now())
    }

    fn take_at(&self, now: Instant) -> bool {
        let mut bucket = self.bucket.lock().unwrap_or_else(PoisonError::into_inner);
        let (tokens, last) = &mut *bucket;
        let refill = now.saturating_duration_since(*last).as_secs_f64() / 60.0;
        *tokens = (*tokens + refill * f64::from(self.per_minute)).min(f64::from(self.per_minute));
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_minute_allowance_then_an_even_refill() {
        let limit = PerMinute::new(60);
        let start = Instant::now();
        assert!((0..60).all(|_| limit.take_at(start)));
        assert!(!limit.take_at(start));
        assert!(!limit.take_at(start + Duration::from_millis(500)));
        assert!(limit.take_at(start + Duration::from_millis(1_000)));
        assert!(!limit.take_at(start + Duration::from_millis(1_001)));
        assert!(!PerMinute::new(0).take());
    }
}
