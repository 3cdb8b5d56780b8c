//! Histories for the charts, sampled from the snapshots every `STEP`
//! seconds of the source's clock (an hour in `HISTORY_LEN` samples), with
//! the time of each sample so that a chart can say what span it shows.

use crate::model::{Cluster, Timestamp};
use std::collections::{HashMap, VecDeque};

/// Samples kept per series.
pub const HISTORY_LEN: usize = 120;
/// Seconds between samples.
pub const STEP: i64 = 30;

/// Percent 0–100, or `None` while the reading was unknown.
pub type Series = VecDeque<Option<u8>>;

#[derive(Debug, Default, Clone)]
pub struct History {
    /// When each sample was taken (the snapshot's clock).
    pub times: VecDeque<Timestamp>,
    /// Mean SM occupancy per node.
    pub node_occ: HashMap<String, Series>,
    /// SM occupancy per GPU, by node name then GPU position.
    pub gpu_occ: HashMap<String, Vec<Series>>,
    /// Pending jobs.
    pub queue_len: VecDeque<u64>,
}

fn push<T>(s: &mut VecDeque<T>, v: T) {
    if s.len() == HISTORY_LEN {
        s.pop_front();
    }
    s.push_back(v);
}

fn pct(x: Option<f64>) -> Option<u8> {
    x.map(|v| (v.clamp(0.0, 1.0) * 100.0).round() as u8)
}

/// Jobs pending at `t`, from their submit and start times: submitted by
/// then, not started by then. Jobs that have left the scheduler's data
/// since are not counted: a lower bound.
fn pending_at(c: &Cluster, t: Timestamp) -> u64 {
    c.jobs
        .iter()
        .filter(|j| j.submit_time.is_some_and(|s| s <= t))
        .filter(|j| j.start_time.is_none_or(|s| s > t))
        .filter(|j| j.state.is_pending() || j.start_time.is_some())
        .count() as u64
}

impl History {
    /// Takes a sample when `STEP` seconds have passed since the last one;
    /// the first snapshot also back-fills the queue's last hour from the
    /// jobs' submit and start times.
    pub fn record(&mut self, c: &Cluster) {
        match self.times.back() {
            Some(&last) if c.time < last => {
                // The clock went back (a new source): start over.
                *self = History::default();
            }
            Some(&last) if c.time - last < STEP => return,
            _ => {}
        }
        if self.times.is_empty() {
            for k in (1..HISTORY_LEN as i64).rev() {
                let t = c.time - k * STEP;
                push(&mut self.times, t);
                push(&mut self.queue_len, pending_at(c, t));
            }
        }
        push(&mut self.times, c.time);
        for n in &c.nodes {
            let node = self.node_occ.entry(n.name.clone()).or_default();
            push(node, pct(n.mean_sm_occupancy()));
            let gpus = self.gpu_occ.entry(n.name.clone()).or_default();
            gpus.resize_with(n.gpus.len(), VecDeque::new);
            for (s, g) in gpus.iter_mut().zip(&n.gpus) {
                push(s, pct(g.sm_occupancy));
            }
        }
        let pending = c.jobs.iter().filter(|j| j.state.is_pending()).count() as u64;
        push(&mut self.queue_len, pending);
    }

    /// The span of the last `n` samples, in words: `12m`, `1h00m`.
    pub fn span(&self, n: usize) -> String {
        let n = n.min(self.times.len());
        match (
            self.times.iter().rev().nth(n.saturating_sub(1)),
            self.times.back(),
        ) {
            (Some(a), Some(b)) if n > 1 => crate::text::duration(b - a),
            _ => "0s".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::sim::{Sim, SimConfig};

    #[test]
    fn samples_every_step_and_backfills_the_queue_from_the_jobs() {
        let mut sim = Sim::new(SimConfig::default()).expect("sim");
        let mut h = History::default();
        h.record(&sim.snapshot());
        assert_eq!(h.times.len(), HISTORY_LEN, "an hour back-filled");
        assert_eq!(h.queue_len.len(), HISTORY_LEN);
        assert_eq!(h.span(HISTORY_LEN), "59m30s");
        let now = *h.queue_len.back().expect("now");
        assert!(now > 0);
        // Jobs that were pending an hour ago and started since count then.
        assert!(h.queue_len.iter().any(|&q| q != now), "{:?}", h.queue_len);
        sim.advance(10);
        h.record(&sim.snapshot());
        assert_eq!(
            h.node_occ.values().next().map(|s| s.len()),
            Some(1),
            "within a step: no sample"
        );
        sim.advance(25);
        h.record(&sim.snapshot());
        assert_eq!(h.node_occ.values().next().map(|s| s.len()), Some(2));
    }
}
