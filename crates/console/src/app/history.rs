//! Histories for the charts, sampled from the snapshots every `STEP`
//! seconds of the source's clock (an hour in `HISTORY_LEN` samples), with
//! the time of each sample so that a chart can say what span it shows.

use crate::model::{Backfill, Cluster, GpuBackfill, Timestamp, XidSeen};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

/// Samples kept per series.
pub const HISTORY_LEN: usize = crate::model::HISTORY_SLOTS;
/// Seconds between samples.
pub const STEP: i64 = crate::model::HISTORY_STEP;

/// Percent 0–100 per sample, or unknown: one byte a sample (two, as
/// `Option<u8>`, made the charts' history of 80,000 GPUs 45 MB an hour).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Series(VecDeque<u8>);

/// A sample whose reading was unknown.
const UNKNOWN: u8 = u8::MAX;

fn enc(v: Option<u8>) -> u8 {
    v.map_or(UNKNOWN, |p| p.min(100))
}

fn dec(b: u8) -> Option<u8> {
    (b != UNKNOWN).then_some(b)
}

impl Series {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Sample `i` (oldest first): `None` past the end, `Some(None)` unknown.
    pub fn get(&self, i: usize) -> Option<Option<u8>> {
        self.0.get(i).map(|&b| dec(b))
    }

    pub fn iter(&self) -> impl Iterator<Item = Option<u8>> + '_ {
        self.0.iter().map(|&b| dec(b))
    }

    fn push(&mut self, v: Option<u8>) {
        push(&mut self.0, enc(v));
    }
}

impl FromIterator<Option<u8>> for Series {
    fn from_iter<I: IntoIterator<Item = Option<u8>>>(it: I) -> Series {
        Series(it.into_iter().map(enc).collect())
    }
}

#[derive(Debug, Default, Clone)]
pub struct History {
    /// When each sample was taken (the snapshot's clock).
    pub times: VecDeque<Timestamp>,
    /// Mean SM occupancy per node.
    pub node_occ: HashMap<String, Series>,
    /// SM occupancy per GPU, by node name then GPU position.
    pub gpu_occ: HashMap<String, Vec<Series>>,
    /// Utilization per GPU, by node name then GPU position.
    pub gpu_util: HashMap<String, Vec<Series>>,
    /// Pending jobs.
    pub queue_len: VecDeque<u64>,
    /// Xids in Prometheus's history, by node name and GPU index.
    pub xids: HashMap<(String, u32), Vec<XidSeen>>,
    /// Samples before this time came from Prometheus's history.
    pub backfilled_until: Option<Timestamp>,
    /// A back-fill that came before the first snapshot.
    pending: Option<Arc<Backfill>>,
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

/// Extends `s` (the newest samples) back to the first of `times` with
/// `at` of each earlier time.
fn prefix(s: &mut Series, times: &[Timestamp], at: impl Fn(Timestamp) -> Option<u8>) {
    let missing = times.len().saturating_sub(s.len());
    if missing == 0 {
        return;
    }
    let mut filled: VecDeque<u8> = times[..missing].iter().map(|&t| enc(at(t))).collect();
    filled.extend(s.0.drain(..));
    s.0 = filled;
}

/// Jobs pending at `t`, from their submit and start times: submitted by
/// then, not started by then. Jobs that have left the scheduler's data
/// since are not counted: a lower bound.
fn pending_at(c: &Cluster, t: Timestamp) -> u64 {
    c.jobs
        .iter()
        .filter(|j| j.submit_time.get().is_some_and(|s| s <= t))
        .filter(|j| j.start_time.get().is_none_or(|s| s > t))
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
            node.push(pct(n.mean_sm_occupancy()));
            let gpus = self.gpu_occ.entry(n.name.clone()).or_default();
            gpus.resize_with(n.gpus.len(), Series::default);
            for (s, g) in gpus.iter_mut().zip(&n.gpus) {
                s.push(pct(g.sm_occupancy));
            }
            let gpus = self.gpu_util.entry(n.name.clone()).or_default();
            gpus.resize_with(n.gpus.len(), Series::default);
            for (s, g) in gpus.iter_mut().zip(&n.gpus) {
                s.push(pct(g.utilization));
            }
        }
        let pending = c.jobs.iter().filter(|j| j.state.is_pending()).count() as u64;
        push(&mut self.queue_len, pending);
        if let Some(b) = self.pending.take() {
            self.apply(&b);
        }
    }

    /// Fills the samples from before nightshift opened with Prometheus's
    /// history: each series gets the back-fill's value at each earlier
    /// sample time; samples taken here are kept as they are.
    pub fn backfill(&mut self, b: Arc<Backfill>) {
        if self.times.is_empty() {
            self.pending = Some(b);
        } else {
            self.apply(&b);
        }
    }

    fn apply(&mut self, b: &Backfill) {
        let times: Vec<Timestamp> = self.times.iter().copied().collect();
        let value =
            |v: &[Option<u8>], t: Timestamp| b.slot(t).and_then(|i| v.get(i).copied().flatten());
        let mut by_node: BTreeMap<&str, Vec<(usize, &GpuBackfill)>> = BTreeMap::new();
        for ((node, g), gb) in &b.gpus {
            if let Ok(g) = usize::try_from(*g) {
                by_node.entry(node).or_default().push((g, gb));
            }
            if !gb.xids.is_empty() {
                self.xids.insert((node.clone(), *g), gb.xids.clone());
            }
        }
        for (node, gpus) in by_node {
            let top = gpus.iter().map(|(g, _)| g + 1).max().unwrap_or(0);
            let occ = self.gpu_occ.entry(node.to_string()).or_default();
            if occ.len() < top {
                occ.resize_with(top, Series::default);
            }
            for (g, gb) in &gpus {
                prefix(&mut occ[*g], &times, |t| value(&gb.occupancy, t));
            }
            let util = self.gpu_util.entry(node.to_string()).or_default();
            if util.len() < top {
                util.resize_with(top, Series::default);
            }
            for (g, gb) in &gpus {
                prefix(&mut util[*g], &times, |t| value(&gb.utilization, t));
            }
            let mean = |t: Timestamp| {
                let v: Vec<u32> = gpus
                    .iter()
                    .filter_map(|(_, gb)| value(&gb.occupancy, t))
                    .map(u32::from)
                    .collect();
                (!v.is_empty()).then(|| (v.iter().sum::<u32>() / v.len() as u32) as u8)
            };
            prefix(
                self.node_occ.entry(node.to_string()).or_default(),
                &times,
                mean,
            );
        }
        if !b.gpus.is_empty() {
            self.backfilled_until = self.times.back().copied();
        }
    }

    /// What a chart's title adds when its earlier samples came from
    /// Prometheus: ` · before 02:47:30 from Prometheus`, else nothing.
    pub fn backfill_note(&self) -> String {
        self.backfilled_until
            .map(|t| format!(" · before {} from Prometheus", crate::text::clock(t)))
            .unwrap_or_default()
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
    use crate::sim::{Sim, SimConfig};

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

    /// Prometheus's hour fills the samples from before the first snapshot,
    /// at their own times; the samples taken here stay; Xids are kept; a
    /// back-fill that comes before any snapshot waits for the first.
    #[test]
    fn prometheus_history_fills_the_hour_before_the_first_sample() {
        use crate::model::{Backfill, GpuBackfill, XidSeen};
        let sim = Sim::new(SimConfig::default()).expect("sim");
        let c = sim.snapshot();
        let node = c.nodes[0].name.clone();
        let now_occ = pct(c.nodes[0].gpus[1].sm_occupancy);
        // Slots every 30 s ending at the snapshot's time, GPU 1 at 10%
        // then 90%, GPU 0 unknown but for one slot at 50%.
        let start = c.time - STEP * (HISTORY_LEN as i64 - 1);
        let mut occ1 = vec![Some(10); HISTORY_LEN];
        for v in &mut occ1[60..] {
            *v = Some(90);
        }
        let mut occ0 = vec![None; HISTORY_LEN];
        occ0[60] = Some(50);
        let mut gpus = BTreeMap::new();
        let xid = XidSeen {
            code: 79,
            first_seen: start + 60 * STEP,
            at_window_start: false,
        };
        gpus.insert(
            (node.clone(), 1),
            GpuBackfill {
                occupancy: occ1,
                utilization: vec![Some(100); HISTORY_LEN],
                xids: vec![xid],
            },
        );
        gpus.insert(
            (node.clone(), 0),
            GpuBackfill {
                occupancy: occ0,
                ..GpuBackfill::default()
            },
        );
        let b = Arc::new(Backfill {
            start,
            step: STEP,
            slots: HISTORY_LEN,
            gpus,
            notes: Vec::new(),
        });
        for early in [false, true] {
            let mut h = History::default();
            if early {
                h.backfill(b.clone());
                h.record(&c);
            } else {
                h.record(&c);
                h.backfill(b.clone());
            }
            let g1 = &h.gpu_occ[&node][1];
            assert_eq!(g1.len(), HISTORY_LEN, "early={early}");
            assert_eq!(g1.get(0), Some(Some(10)));
            assert_eq!(g1.get(59), Some(Some(10)));
            assert_eq!(g1.get(60), Some(Some(90)));
            assert_eq!(
                g1.get(HISTORY_LEN - 1),
                Some(now_occ),
                "the sample taken here is not replaced"
            );
            assert_eq!(h.gpu_util[&node][1].get(0), Some(Some(100)));
            let n = &h.node_occ[&node];
            assert_eq!(
                n.get(0),
                Some(Some(10)),
                "the node's mean is of the GPUs known"
            );
            assert_eq!(n.get(60), Some(Some(70)), "(50 + 90) / 2");
            assert_eq!(h.xids[&(node.clone(), 1)], [xid]);
            assert_eq!(h.backfilled_until, Some(c.time));
            // Other nodes keep their one sample.
            assert_eq!(h.node_occ[&c.nodes[1].name].len(), 1);
        }
    }
}
