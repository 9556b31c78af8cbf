//! Retry delays: exponential backoff with jitter (the OpenFlow connection's and the OVSDB
//! client's reconnects, the OVSDB port reconciler's and the VXLAN device keeper's retries).
//!
//! Each failed attempt doubles the ceiling, up to `max`; the delay actually slept is drawn
//! uniformly from the upper half of the ceiling ("equal jitter"), so many nodes that lost the same
//! switch do not retry in lock step, yet none retries sooner than half the ceiling.

use std::time::Duration;

use rand::Rng;

#[derive(Debug, Clone)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    ceiling: Duration,
}

impl Backoff {
    pub fn new(min: Duration, max: Duration) -> Backoff {
        let min = min.max(Duration::from_millis(1));
        let max = max.max(min);
        Backoff {
            min,
            max,
            ceiling: min,
        }
    }

    /// The delay before the next attempt; grows the ceiling for the one after.
    pub fn next_delay(&mut self) -> Duration {
        let ceiling = self.ceiling;
        self.ceiling = (ceiling * 2).min(self.max);
        let half = ceiling / 2;
        let jitter = rand::rng().random_range(Duration::ZERO..=half);
        (half + jitter).max(self.min / 2)
    }

    /// After a connection that worked: start again from the minimum.
    pub fn reset(&mut self) {
        self.ceiling = self.min;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_millis(100);
    const MAX: Duration = Duration::from_secs(8);

    #[test]
    fn grows_exponentially_within_bounds() {
        let mut backoff = Backoff::new(MIN, MAX);
        let mut ceiling = MIN;
        for _ in 0..20 {
            let delay = backoff.next_delay();
            assert!(
                delay >= ceiling / 2 && delay <= ceiling,
                "{delay:?} vs {ceiling:?}"
            );
            ceiling = (ceiling * 2).min(MAX);
        }
        assert_eq!(backoff.ceiling, MAX);
    }

    #[test]
    fn jitter_spreads_the_delays() {
        let mut delays: Vec<Duration> = (0..32)
            .map(|_| Backoff::new(MAX, MAX).next_delay())
            .collect();
        delays.dedup();
        assert!(delays.len() > 1, "no jitter: {delays:?}");
    }

    #[test]
    fn reset_starts_from_the_minimum() {
        let mut backoff = Backoff::new(MIN, MAX);
        for _ in 0..10 {
            backoff.next_delay();
        }
        backoff.reset();
        assert!(backoff.next_delay() <= MIN);
    }

    #[test]
    fn absurd_bounds_are_repaired() {
        let mut backoff = Backoff::new(Duration::ZERO, Duration::ZERO);
        assert!(backoff.next_delay() <= Duration::from_millis(1));
    }
}
