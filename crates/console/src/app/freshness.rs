//! Freshness per origin: how old the data that decisions rest on is, and
//! which origin to warn about.

use super::{App, OriginState};
use crate::protocol::source::Origin;
use std::time::Duration;

impl App {
    pub(super) fn age_of(&self, o: &OriginState) -> Option<Duration> {
        o.last_ok.map(|t| self.now.saturating_duration_since(t))
    }

    /// How old the data that decisions rest on is: the scheduler's when
    /// there is one (an endpoint's answer never makes it look fresh), else
    /// the oldest node endpoint's. `None` before the first answer.
    pub fn data_age(&self) -> Option<Duration> {
        if let Some(s) = self.origins.get(&Origin::Scheduler) {
            return self.age_of(s);
        }
        let ages: Vec<Option<Duration>> = self.origins.values().map(|o| self.age_of(o)).collect();
        if ages.is_empty() || ages.iter().any(Option::is_none) {
            return None;
        }
        ages.into_iter().flatten().max()
    }

    /// How far the engine's answers trail the snapshot shown, on the
    /// snapshots' clock, when by more than two seconds: on a big cluster
    /// the analyst keeps to a CPU budget and plans every few seconds.
    pub fn analysis_lag_s(&self) -> Option<i64> {
        let lag = self.cluster.time - self.analysis.as_ref()?.base.time;
        (lag > 2).then_some(lag)
    }

    pub fn is_stale(&self) -> bool {
        self.data_age().is_none_or(|a| a > self.stale_limit())
    }

    /// Data older than this is stale: `ui.stale_after_s`, or three polls
    /// when the scheduler is polled more slowly than that allows (to keep
    /// slurmrestd within its budget), so a slow refresh is not an outage.
    pub fn stale_limit(&self) -> Duration {
        let every = self
            .origins
            .get(&Origin::Scheduler)
            .and_then(|s| s.refresh.as_ref())
            .map_or(Duration::ZERO, |r| r.every);
        self.stale_after.max(every * 3)
    }

    /// The scheduler's refresh for the header, when it is slower than the
    /// configured interval: `every 11s (slurmrestd budget)`.
    pub fn refresh_badge(&self) -> Option<String> {
        let r = self.origins.get(&Origin::Scheduler)?.refresh.as_ref()?;
        r.stretched.then(|| {
            format!(
                "every {} (slurmrestd budget)",
                crate::text::duration(r.every.as_secs_f64().round() as i64)
            )
        })
    }

    /// An endpoint that answered slowly or in part, for the header:
    /// `prometheus http://…: slow: answered in 4.2 s`.
    pub fn quality_badge(&self) -> Option<String> {
        self.origins
            .iter()
            .find_map(|(o, s)| s.quality.as_ref().map(|q| format!("{}: {q}", o.name())))
    }

    /// The origin to warn about: one in error (the scheduler first, then
    /// the one that answered longest ago), with its age.
    pub fn failing_origin(&self) -> Option<(&Origin, &str, Option<Duration>)> {
        let mut failing: Vec<(&Origin, &OriginState)> = self
            .origins
            .iter()
            .filter(|(_, s)| s.error.is_some())
            .collect();
        failing.sort_by_key(|(o, s)| {
            (
                **o != Origin::Scheduler,
                s.last_ok
                    .map_or(Duration::MAX, |t| self.now.saturating_duration_since(t)),
            )
        });
        failing
            .first()
            .map(|(o, s)| (*o, s.error.as_deref().unwrap_or_default(), self.age_of(s)))
    }

    /// The source's clock now: the snapshot's time, run on by the time
    /// since it arrived while the data is fresh (a Kubernetes watch sends
    /// a snapshot only when something changes; the clock must not stop).
    /// A recording's clock is its snapshot's.
    pub fn source_clock(&self) -> crate::model::Timestamp {
        let t = self.cluster.time;
        if self.replay || self.is_stale() {
            return t;
        }
        let since = self
            .snapshot_at
            .map_or(0, |at| self.now.saturating_duration_since(at).as_secs());
        t + since as i64
    }
}
