//! A team's GPU quota over time: when the next of its waiting jobs fits
//! under the limit, as the plan takes them in order.

use super::NEVER;
use crate::model::Timestamp;

/// A team's GPU use over time, for quota waits.
///
/// Asked, for each of a team's pending jobs in order, for the earliest
/// time at which `need` more GPUs fit under the limit: now, or the end of
/// some held work. Work is only ever added, so for a given `need` the
/// answer only moves later: a cursor per distinct `need` remembers the
/// last answer and the usage there, and walks forward from it through the
/// book's changes. A team at its quota with 8,000 held jobs and 25,000
/// waiting took 15 s to plan when each question summed the usage at every
/// end (benches/engine.rs); the cursors make it one pass per distinct size.
pub(super) struct QuotaBook {
    pub(super) limit: u32,
    now: Timestamp,
    /// (start, end, gpus) of running and planned work.
    pub(super) held: Vec<(Timestamp, Timestamp, u32)>,
    /// After `now`: the change in use at each time, and whether work ends then.
    changes: std::collections::BTreeMap<Timestamp, (i64, bool)>,
    /// (need, time of the last answer, use at that time).
    cursors: Vec<(u32, Timestamp, i64)>,
}

impl QuotaBook {
    pub(super) fn new(limit: u32, now: Timestamp) -> QuotaBook {
        QuotaBook {
            limit,
            now,
            held: Vec::new(),
            changes: std::collections::BTreeMap::new(),
            cursors: Vec::new(),
        }
    }

    /// Adds work holding `g` GPUs from `s` to `e`.
    pub(super) fn add(&mut self, s: Timestamp, e: Timestamp, g: u32) {
        self.held.push((s, e, g));
        if e <= self.now {
            return;
        }
        let gi = i64::from(g);
        if s > self.now {
            self.changes.entry(s).or_default().0 += gi;
        }
        let end = self.changes.entry(e).or_default();
        end.0 -= gi;
        end.1 = true;
        for c in &mut self.cursors {
            if s <= c.1 && c.1 < e {
                c.2 += gi;
            }
        }
    }

    /// GPUs held at `t`.
    pub(super) fn usage_at(&self, t: Timestamp) -> u32 {
        self.held
            .iter()
            .filter(|(s, e, _)| *s <= t && t < *e)
            .map(|(_, _, g)| *g)
            .sum()
    }

    /// Earliest time ≥ now at which `need` more GPUs fit under the limit.
    pub(super) fn earliest(&mut self, need: u32) -> Timestamp {
        if need > self.limit {
            return NEVER;
        }
        let fits = |usage: i64| usage + i64::from(need) <= i64::from(self.limit);
        let k = match self.cursors.iter().position(|c| c.0 == need) {
            Some(k) => k,
            None => {
                // A bigger need never fits earlier than a smaller one: start
                // where the largest smaller need stands.
                let (t, u) = self
                    .cursors
                    .iter()
                    .filter(|c| c.0 < need)
                    .max_by_key(|c| c.0)
                    .map_or_else(
                        || (self.now, i64::from(self.usage_at(self.now))),
                        |c| (c.1, c.2),
                    );
                self.cursors.push((need, t, u));
                self.cursors.len() - 1
            }
        };
        let (_, mut t, mut u) = self.cursors[k];
        let mut answer = NEVER;
        if fits(u) {
            answer = t;
        } else {
            use std::ops::Bound::{Excluded, Unbounded};
            for (&at, &(d, an_end)) in self.changes.range((Excluded(t), Unbounded)) {
                u += d;
                t = at;
                if an_end && fits(u) {
                    answer = t;
                    break;
                }
            }
        }
        self.cursors[k] = (need, t, u);
        answer
    }
}
