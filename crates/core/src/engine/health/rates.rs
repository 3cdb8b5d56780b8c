//! Error rates per GPU (correctable ECC, NVLink), each counter's change
//! over its own readings' times, kept across snapshots by the analyst.

use crate::model::Cluster;
use rustc_hash::FxHashMap as HashMap;

/// A GPU's error rates between two snapshots, per hour; `None`: unknown
/// (no earlier snapshot, or the counter is not reported). Rates, not
/// totals, decide: a counter that stands still is history.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Rates {
    /// Correctable ECC errors.
    #[serde(with = "crate::engine::exact::option")]
    pub sbe_per_hour: Option<f64>,
    /// NVLink errors of every kind, over all the GPU's links.
    #[serde(with = "crate::engine::exact::option")]
    pub nvlink_per_hour: Option<f64>,
}

pub(super) fn rate(now: Option<u64>, then: Option<u64>, dt_s: i64) -> Option<f64> {
    if dt_s <= 0 {
        return None;
    }
    let (a, b) = (now?, then?);
    // A counter that went down was reset (a driver reload, a reboot): no
    // rate over the reset, never a negative one.
    if a < b {
        return None;
    }
    Some((a - b) as f64 * 3600.0 / dt_s as f64)
}

/// What the rates need across snapshots, per GPU: its newest reading of
/// the aggregate correctable-error count and the NVLink error total, the
/// time of that reading (the endpoint's own, else the snapshot's), and the
/// rates as of that reading. A counter's rate is taken over its own
/// readings' times: a snapshot that brings no new reading of it (the
/// scheduler polled every 2 s, dcgm-exporter every 5 s) keeps the rate the
/// last reading gave — it does not read as "no change, healthy". The
/// analyst keeps this, not the whole earlier snapshot (a second copy of a
/// 10,000-node cluster).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct EccBaseline {
    pub time: crate::model::Timestamp,
    /// Per node: each GPU's newest reading and its rates.
    counters: HashMap<String, Vec<Reading>>,
    /// The nodes last observed, each with whether all its GPUs' readings
    /// are stamped with their own time: such a node, the same shared
    /// record again, brings no new reading and is not read again (at
    /// 10,000 nodes a snapshot changes about a tenth of them). One with a
    /// reading stamped with no time reads as new at each snapshot.
    #[serde(skip)]
    timed: crate::engine::changed::PerRecord<crate::model::Node, bool>,
}

/// Whether every GPU of `n` has a reading stamped with its own time.
fn all_timed(n: &crate::model::Node) -> bool {
    n.gpus.iter().all(|g| g.reading_time.is_some())
}

/// `n`'s GPUs' readings taken into `counters`.
fn read_node(counters: &mut HashMap<String, Vec<Reading>>, n: &crate::model::Node, c: &Cluster) {
    let held = match counters.get_mut(n.name.as_str()) {
        Some(held) => held,
        None => counters.entry(n.name.clone()).or_default(),
    };
    // The same GPUs in the same order as last time, each once (nearly
    // always): each reading moved on where it is, no new list.
    let same = held.len() == n.gpus.len()
        && held.iter().zip(&n.gpus).all(|(r, g)| r.index == g.index)
        && n.gpus.windows(2).all(|w| w[0].index < w[1].index);
    if same {
        for (r, g) in held.iter_mut().zip(&n.gpus) {
            *r = next_reading(Some(*r), g, c);
        }
        return;
    }
    let mut next: Vec<Reading> = Vec::with_capacity(n.gpus.len());
    for g in &n.gpus {
        let prev = held.iter().find(|r| r.index == g.index).copied();
        next.push(next_reading(prev, g, c));
    }
    *held = next;
}

/// One GPU's newest counter reading and the rates as of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Reading {
    index: u32,
    sbe: Option<u64>,
    nvlink: Option<u64>,
    time: crate::model::Timestamp,
    rates: Rates,
}

impl EccBaseline {
    /// The counters of `c` alone, with no rates yet.
    pub fn of(c: &Cluster) -> EccBaseline {
        EccBaseline::advance(None, c)
    }

    /// `prev` moved on to `c`: each GPU with a new reading gets its rates
    /// over the time since its last reading; one without keeps its last.
    pub fn advance(prev: Option<&EccBaseline>, c: &Cluster) -> EccBaseline {
        let mut timed = crate::engine::changed::PerRecord::default();
        timed.update(&c.nodes, all_timed);
        EccBaseline {
            time: c.time,
            timed,
            counters: c
                .nodes
                .iter()
                .map(|n| {
                    let gpus = n
                        .gpus
                        .iter()
                        .map(|g| next_reading(prev.and_then(|p| p.reading(&n.name, g.index)), g, c))
                        .collect();
                    (n.name.clone(), gpus)
                })
                .collect(),
        }
    }

    /// [`EccBaseline::advance`] in place: the analysis's memory takes in
    /// every snapshot, so no node's name or readings are copied when they
    /// are already held.
    pub fn observe(&mut self, c: &Cluster) {
        self.time = c.time;
        // A node that changed is read here when its readings all have
        // their time; the others with a reading without one below, at
        // every snapshot. Each node is read once.
        let counters = &mut self.counters;
        self.timed.update(&c.nodes, |n| {
            let timed = all_timed(n);
            if timed {
                read_node(counters, n, c);
            }
            timed
        });
        for (n, timed) in c.nodes.iter().zip(self.timed.parts()) {
            if !timed {
                read_node(&mut self.counters, n, c);
            }
        }
        if self.counters.len() > c.nodes.len() {
            let names: std::collections::HashSet<&str> =
                c.nodes.iter().map(|n| n.name.as_str()).collect();
            self.counters
                .retain(|name, _| names.contains(name.as_str()));
        }
    }

    fn reading(&self, node: &str, gpu: u32) -> Option<Reading> {
        self.counters
            .get(node)
            .and_then(|gs| gs.iter().find(|r| r.index == gpu))
            .copied()
    }

    /// The GPUs whose NVLink error rate is above `limit` per hour: node,
    /// GPU, rate, and the time of the reading that gave it.
    pub fn nvlink_above(&self, limit: f64) -> Vec<(&str, u32, f64, crate::model::Timestamp)> {
        let mut out = Vec::new();
        for (node, gpus) in &self.counters {
            for r in gpus {
                if let Some(rate) = r.rates.nvlink_per_hour.filter(|&x| x > limit) {
                    out.push((node.as_str(), r.index, rate, r.time));
                }
            }
        }
        out
    }

    /// The GPU's error rates as of its newest reading.
    pub fn rates(&self, node: &str, gpu: u32) -> Rates {
        self.reading(node, gpu)
            .map_or(Rates::default(), |r| r.rates)
    }
}

/// One GPU's reading in `c` after `prev`: with a new reading, its rates
/// over the time since the last; without, the last reading kept.
fn next_reading(prev: Option<Reading>, g: &crate::model::Gpu, c: &Cluster) -> Reading {
    let time = g.reading_time.unwrap_or(c.time);
    let (sbe, nvlink) = (g.ecc.sbe_aggregate.get(), g.nvlink.total());
    match prev {
        Some(r) if r.time >= time => r,
        Some(r) => {
            let dt = time - r.time;
            Reading {
                index: g.index,
                sbe,
                nvlink,
                time,
                rates: Rates {
                    sbe_per_hour: rate(sbe, r.sbe, dt),
                    nvlink_per_hour: rate(nvlink, r.nvlink, dt),
                },
            }
        }
        None => Reading {
            index: g.index,
            sbe,
            nvlink,
            time,
            rates: Rates::default(),
        },
    }
}

/// `a` and `b` give every GPU of `c` the same rates (a test's check that
/// a baseline kept in place is the one worked out afresh).
#[cfg(test)]
pub(crate) fn assert_same_rates(a: &EccBaseline, b: &EccBaseline, c: &Cluster) {
    for n in &c.nodes {
        for g in &n.gpus {
            assert_eq!(
                a.rates(&n.name, g.index),
                b.rates(&n.name, g.index),
                "{} GPU {} at {}",
                n.name,
                g.index,
                c.time
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{Sim, SimConfig};
    use std::sync::Arc;

    /// Taken in snapshot by snapshot, the rates are those worked out from
    /// the snapshots afresh: for nodes changed and not, and for a node whose
    /// readings carry no time of their own (read as new at each snapshot,
    /// its counter climbing while its record stays the same).
    #[test]
    fn rates_taken_in_step_by_step_are_the_rates_worked_out_afresh() {
        let mut sim = Sim::new(SimConfig::default()).expect("sim");
        let untimed = |c: &mut Cluster, sbe: u64| {
            let mut n = (*c.nodes[0]).clone();
            for g in &mut n.gpus {
                g.reading_time = None;
                g.ecc.sbe_aggregate = Some(sbe).into();
            }
            c.nodes[0] = Arc::new(n);
        };
        let mut c = sim.snapshot();
        untimed(&mut c, 0);
        let mut step = EccBaseline::of(&c);
        let mut fresh = EccBaseline::of(&c);
        let first = c.nodes[0].clone();
        for k in 1..=60u64 {
            sim.advance(10);
            let mut next = sim.snapshot();
            if k % 3 == 0 {
                untimed(&mut next, 10 * k);
            } else {
                // The same record, its counter unchanged: still a new
                // reading at the snapshot's time.
                next.nodes[0] = first.clone();
            }
            step.observe(&next);
            fresh = EccBaseline::advance(Some(&fresh), &next);
            assert_same_rates(&step, &fresh, &next);
        }
        let g0 = first_gpu_rates(&step, &first);
        assert!(
            g0.sbe_per_hour.is_some(),
            "the untimed node's rate was read"
        );
    }

    fn first_gpu_rates(b: &EccBaseline, n: &crate::model::Node) -> Rates {
        b.rates(&n.name, n.gpus[0].index)
    }
}
