//! The delays between tries after a failure: doubling from the poll's
//! interval up to a ceiling, each with jitter (backon's exponential
//! backoff), so that the consoles of a site that lost a server together
//! do not all come back in the same second (issue 63: the doubling was
//! hand-written, without jitter).

use backon::BackoffBuilder;
use std::time::Duration;

/// The next delays after a failure; a new one after each success.
#[derive(Debug)]
pub struct Retry {
    delays: backon::ExponentialBackoff,
    max: Duration,
}

impl Retry {
    /// Delays from `first` (to twice it, with jitter) doubling up to
    /// `max` (each between half of it and it, with jitter).
    pub fn new(first: Duration, max: Duration) -> Retry {
        let max = max.max(first);
        let delays = backon::ExponentialBuilder::new()
            .with_min_delay(first)
            .with_max_delay((max / 2).max(first))
            .with_factor(2.0)
            .with_jitter()
            .without_max_times()
            .build();
        Retry { delays, max }
    }

    /// The delay before the next try.
    pub fn next_delay(&mut self) -> Duration {
        self.delays.next().unwrap_or(self.max).min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each delay is between the doubling's value and twice it, never past
    /// the ceiling; two consoles' delays differ (jitter).
    #[test]
    fn delays_double_with_jitter_up_to_the_ceiling() {
        let (first, max) = (Duration::from_secs(2), Duration::from_secs(60));
        let mut r = Retry::new(first, max);
        let d: Vec<Duration> = (0..10).map(|_| r.next_delay()).collect();
        assert!(d[0] >= first && d[0] <= first * 2, "{d:?}");
        assert!(d[1] >= first * 2 && d[1] <= first * 4, "{d:?}");
        assert!(d.iter().all(|x| *x <= max), "{d:?}");
        assert!(d[9] >= max / 2, "{d:?}");
        let many: std::collections::BTreeSet<Duration> = (0..20)
            .map(|_| Retry::new(first, max).next_delay())
            .collect();
        assert!(many.len() > 1, "jitter: {many:?}");
    }
}
