//! Freshness per origin, a component of its own: what each origin last
//! said (answered, failed, how often it is polled, whether it answered in
//! part), how old the data that decisions rest on is, and which origin to
//! warn about. It takes the sources' news of their origins and says what
//! the operator should hear of it; the App asks it, on its clock.

use super::{App, OriginState, Refresh};
use crate::protocol::source::{Origin, Update};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Freshness {
    origins: BTreeMap<Origin, OriginState>,
    /// When the newest snapshot came.
    snapshot_at: Option<Instant>,
    /// `ui.stale_after_s`.
    stale_after: Duration,
}

/// What an origin's news is for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tell {
    /// A line in the message log (m).
    Log(String),
    /// On the status line, and in the log.
    Flash(String),
}

impl Freshness {
    /// `scheduler`: a scheduler source is expected from the start (until
    /// it answers the data is not fresh, whatever a node endpoint says).
    pub fn new(scheduler: bool, stale_after: Duration) -> Freshness {
        let mut origins = BTreeMap::new();
        if scheduler {
            origins.insert(Origin::Scheduler, OriginState::default());
        }
        Freshness {
            origins,
            snapshot_at: None,
            stale_after,
        }
    }

    /// Each origin, as it last said.
    pub fn origins(&self) -> &BTreeMap<Origin, OriginState> {
        &self.origins
    }

    /// `ui.stale_after_s`.
    pub fn stale_after(&self) -> Duration {
        self.stale_after
    }

    /// A snapshot came at `now`.
    pub(crate) fn snapshot_came(&mut self, now: Instant) {
        self.snapshot_at = Some(now);
    }

    /// A snapshot has come since the console started.
    pub(crate) fn has_snapshot(&self) -> bool {
        self.snapshot_at.is_some()
    }

    /// The source's channel closed: it will send nothing more.
    pub(crate) fn source_stopped(&mut self) {
        let s = self.origins.entry(Origin::Scheduler).or_default();
        s.error = Some("the source stopped".into());
    }

    /// An update's news of an origin (its status, refresh, quality), at
    /// `now`; what to tell the operator of it. `source_name` names the
    /// scheduler. Other updates are not its.
    pub(crate) fn observe(&mut self, u: &Update, now: Instant, source_name: &str) -> Option<Tell> {
        match u {
            Update::Refresh {
                origin,
                every,
                stretched,
                note,
            } => {
                let s = self.origins.entry(origin.clone()).or_default();
                let newly = *stretched && !s.refresh.as_ref().is_some_and(|r| r.stretched);
                s.refresh = Some(Refresh {
                    every: *every,
                    stretched: *stretched,
                    note: note.clone(),
                });
                // Slowed down for the budget: said once.
                newly.then(|| Tell::Flash(format!("refresh: {note}")))
            }
            Update::Quality { origin, note } => {
                let s = self.origins.entry(origin.clone()).or_default();
                if note.is_some() && s.quality.is_none() {
                    tracing::info!("an endpoint answers in part or slowly: {note:?}");
                }
                s.quality = note.clone();
                None
            }
            Update::Status { origin, error } => {
                let name = match origin {
                    Origin::Scheduler => source_name.to_string(),
                    o => o.name(),
                };
                let s = self.origins.entry(origin.clone()).or_default();
                // A change of an origin's health goes to the message log
                // (m), whole: lost, a new error, answering again.
                match error {
                    None => {
                        s.last_ok = Some(now);
                        s.error
                            .take()
                            .map(|_| Tell::Log(format!("{name} answers again")))
                    }
                    Some(e) => {
                        tracing::warn!("source error: {e}");
                        let e = e.to_string();
                        let new = s.error.as_deref() != Some(e.as_str());
                        s.error = Some(e.clone());
                        new.then(|| Tell::Log(format!("{name}: {e}")))
                    }
                }
            }
            _ => None,
        }
    }

    fn age_of(o: &OriginState, now: Instant) -> Option<Duration> {
        o.last_ok.map(|t| now.saturating_duration_since(t))
    }

    /// How old the data that decisions rest on is at `now`: the
    /// scheduler's when there is one (an endpoint's answer never makes it
    /// look fresh), else the oldest node endpoint's. `None` before the
    /// first answer.
    pub fn data_age(&self, now: Instant) -> Option<Duration> {
        if let Some(s) = self.origins.get(&Origin::Scheduler) {
            return Self::age_of(s, now);
        }
        let ages: Vec<Option<Duration>> = self
            .origins
            .values()
            .map(|o| Self::age_of(o, now))
            .collect();
        if ages.is_empty() || ages.iter().any(Option::is_none) {
            return None;
        }
        ages.into_iter().flatten().max()
    }

    pub fn is_stale(&self, now: Instant) -> bool {
        self.data_age(now).is_none_or(|a| a > self.stale_limit())
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

    /// Some origin is failing.
    pub fn any_failing(&self) -> bool {
        self.origins.values().any(|o| o.error.is_some())
    }

    /// The origin to warn about at `now`: one in error (the scheduler
    /// first, then the one that answered longest ago), with its age.
    pub fn failing_origin(&self, now: Instant) -> Option<(&Origin, &str, Option<Duration>)> {
        let mut failing: Vec<(&Origin, &OriginState)> = self
            .origins
            .iter()
            .filter(|(_, s)| s.error.is_some())
            .collect();
        failing.sort_by_key(|(o, s)| {
            (
                **o != Origin::Scheduler,
                s.last_ok
                    .map_or(Duration::MAX, |t| now.saturating_duration_since(t)),
            )
        });
        failing.first().map(|(o, s)| {
            (
                *o,
                s.error.as_deref().unwrap_or_default(),
                Self::age_of(s, now),
            )
        })
    }

    /// How long since the newest snapshot came, at `now`.
    fn since_snapshot(&self, now: Instant) -> Duration {
        self.snapshot_at
            .map_or(Duration::ZERO, |at| now.saturating_duration_since(at))
    }
}

/// The App's questions of its freshness, on its clock.
impl App {
    pub fn freshness(&self) -> &Freshness {
        &self.freshness
    }

    /// How old the data that decisions rest on is (`Freshness::data_age`).
    pub fn data_age(&self) -> Option<Duration> {
        self.freshness.data_age(self.now)
    }

    /// How far the engine's answers trail the snapshot shown, on the
    /// snapshots' clock, when by more than two seconds: on a big cluster
    /// the analyst keeps to a CPU budget and plans every few seconds.
    pub fn analysis_lag_s(&self) -> Option<i64> {
        let lag = self.cluster.time - self.analysis.as_ref()?.base.time;
        (lag > 2).then_some(lag)
    }

    pub fn is_stale(&self) -> bool {
        self.freshness.is_stale(self.now)
    }

    /// Data older than this is stale (`Freshness::stale_limit`).
    pub fn stale_limit(&self) -> Duration {
        self.freshness.stale_limit()
    }

    /// The scheduler's refresh for the header, when stretched.
    pub fn refresh_badge(&self) -> Option<String> {
        self.freshness.refresh_badge()
    }

    /// An endpoint that answered slowly or in part, for the header.
    pub fn quality_badge(&self) -> Option<String> {
        self.freshness.quality_badge()
    }

    /// The origin to warn about, with its age.
    pub fn failing_origin(&self) -> Option<(&Origin, &str, Option<Duration>)> {
        self.freshness.failing_origin(self.now)
    }

    /// The source's clock now: the snapshot's time, run on by the time
    /// since it arrived while the data is fresh (a Kubernetes watch sends
    /// a snapshot only when something changes; the clock must not stop).
    /// A recording's clock is its snapshot's.
    pub fn source_clock(&self) -> crate::model::Timestamp {
        let t = self.cluster.time;
        if self.replay.on || self.is_stale() {
            return t;
        }
        t + self.freshness.since_snapshot(self.now).as_secs() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::source::SourceError;

    #[test]
    fn an_origin_s_health_is_told_when_it_changes_and_ages_from_its_last_answer() {
        let t0 = Instant::now();
        let mut f = Freshness::new(true, Duration::from_secs(30));
        assert!(f.is_stale(t0), "no answer yet");
        let ok = Update::ok(Origin::Scheduler);
        assert_eq!(f.observe(&ok, t0, "slurm"), None);
        assert_eq!(
            f.data_age(t0 + Duration::from_secs(5)),
            Some(Duration::from_secs(5))
        );
        assert!(!f.is_stale(t0 + Duration::from_secs(30)));
        assert!(f.is_stale(t0 + Duration::from_secs(31)));
        let down = Update::failed(
            Origin::Scheduler,
            SourceError::Unreachable {
                what: "slurmrestd".into(),
                detail: "refused".into(),
            },
        );
        let told = f.observe(&down, t0 + Duration::from_secs(40), "slurm");
        assert!(
            matches!(&told, Some(Tell::Log(m)) if m.starts_with("slurm: ")),
            "{told:?}"
        );
        assert_eq!(f.observe(&down, t0, "slurm"), None, "the same error once");
        assert!(f.any_failing());
        let (o, _, age) = f
            .failing_origin(t0 + Duration::from_secs(50))
            .expect("failing");
        assert_eq!(
            (o, age),
            (&Origin::Scheduler, Some(Duration::from_secs(50)))
        );
        assert_eq!(
            f.observe(&ok, t0 + Duration::from_secs(60), "slurm"),
            Some(Tell::Log("slurm answers again".into()))
        );
        // Polled every 20 s to keep the budget: stale after three polls.
        let slow = Update::Refresh {
            origin: Origin::Scheduler,
            every: Duration::from_secs(20),
            stretched: true,
            note: "budget".into(),
        };
        assert_eq!(
            f.observe(&slow, t0, "slurm"),
            Some(Tell::Flash("refresh: budget".into()))
        );
        assert_eq!(f.observe(&slow, t0, "slurm"), None, "said once");
        assert_eq!(f.stale_limit(), Duration::from_secs(60));
    }
}
