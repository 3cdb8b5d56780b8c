//! One snapshot reduced to what the health numbers need, kept up to date
//! node by node and job by job: a node or job that is the same shared
//! record as in the last snapshot is not read again. At 10,000 nodes a
//! snapshot changes about a thousand nodes and a few dozen jobs; reading
//! all of them (80,000 GPUs, 100,000 jobs, a partition looked up by name
//! for each) was the largest part of a report's pass over a recording.

use super::Sample;
use crate::engine::changed::PerRecord;
use crate::model::{Cluster, Job, Node};
use rustc_hash::FxHashMap;

/// Waiting for capacity, not for a hold, a dependency or a quota.
fn waits_for_capacity(reason: Option<&str>) -> bool {
    matches!(reason, None | Some("Resources" | "Priority" | "None"))
}

/// What one node adds to a sample.
#[derive(Debug, Clone, Default)]
struct NodePart {
    gpus: u32,
    allocated: u32,
    out: bool,
    /// The SM occupancy of each of its GPUs that reports it (summed in
    /// the GPUs' order, as a pass over the whole snapshot sums them).
    busy: Vec<f64>,
    free: u32,
    /// Its partitions, as places in `Sampler::partitions`.
    partitions: Vec<usize>,
}

/// What a waiting job asks of its partition, when it waits for capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Ask {
    partition: usize,
    per: u32,
    total: u32,
    nodes: u32,
}

/// The last snapshot's nodes and jobs with what each added.
#[derive(Debug, Clone, Default)]
pub(super) struct Sampler {
    nodes: PerRecord<Node, NodePart>,
    asks: PerRecord<Job, Option<Ask>>,
    /// The asks of the waiting jobs, each with how many ask it: what the
    /// fragmentation check reads, not 100,000 jobs' parts a snapshot.
    asking: FxHashMap<Ask, u32>,
    /// Partition names seen, each once.
    partitions: Vec<String>,
}

/// A partition's place in `partitions`, added when new.
fn partition(partitions: &mut Vec<String>, name: &str) -> usize {
    match partitions.iter().position(|p| p == name) {
        Some(i) => i,
        None => {
            partitions.push(name.to_string());
            partitions.len() - 1
        }
    }
}

fn part(partitions: &mut Vec<String>, n: &Node) -> NodePart {
    NodePart {
        gpus: n.gpu_count,
        allocated: n.gpus_allocated(),
        out: !n.state.schedulable(),
        busy: n.gpus.iter().filter_map(|g| g.sm_occupancy).collect(),
        free: n.gpus_free(),
        partitions: n
            .partitions
            .iter()
            .map(|p| partition(partitions, p))
            .collect(),
    }
}

fn ask(partitions: &mut Vec<String>, j: &Job) -> Option<Ask> {
    if !j.state.is_pending() || !waits_for_capacity(j.reason.as_deref()) {
        return None;
    }
    let (per, total) = (j.gpus_per_node?, j.gpus_requested()?);
    Some(Ask {
        partition: partition(partitions, &j.partition),
        per,
        total,
        nodes: j.node_count.unwrap_or(1).max(1),
    })
}

impl Sampler {
    /// `c` as a sample; what did not change since the last call is not
    /// read again.
    pub(super) fn sample(&mut self, c: &Cluster) -> Sample {
        let partitions = &mut self.partitions;
        self.nodes.update(&c.nodes, |n| part(partitions, n));
        let asking = &mut self.asking;
        self.asks.update_each(
            &c.jobs,
            |j| ask(partitions, j),
            |old, new| {
                if let Some(a) = old.copied().flatten()
                    && let Some(n) = asking.get_mut(&a)
                {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        asking.remove(&a);
                    }
                }
                if let Some(a) = new.copied().flatten() {
                    *asking.entry(a).or_default() += 1;
                }
            },
        );
        self.total(c)
    }

    fn total(&self, c: &Cluster) -> Sample {
        let mut s = Sample {
            time: c.time,
            gpus: 0,
            allocated: 0,
            busy: 0.0,
            busy_known: 0,
            nodes: c.nodes.len() as u32,
            nodes_out: 0,
            fragmented: false,
        };
        // Per partition (where a node is): total free, and how many nodes
        // have at least k free.
        let mut free: Vec<Option<(u32, [u32; 9])>> = vec![None; self.partitions.len()];
        for p in self.nodes.parts() {
            s.gpus += p.gpus;
            s.allocated += p.allocated;
            s.nodes_out += u32::from(p.out);
            for o in &p.busy {
                s.busy += o;
                s.busy_known += 1;
            }
            for &i in &p.partitions {
                let e = free[i].get_or_insert((0, [0; 9]));
                e.0 += p.free;
                for k in 1..=p.free.min(8) as usize {
                    e.1[k] += 1;
                }
            }
        }
        s.fragmented = self.asking.keys().any(|a| {
            let Some((sum, at_least)) = free.get(a.partition).copied().flatten() else {
                return false;
            };
            let fits = a.per == 0 || (a.per <= 8 && at_least[a.per as usize] >= a.nodes);
            sum >= a.total && !fits
        });
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{Sim, SimConfig};

    /// Kept up to date record by record through the sim's incidents, a
    /// sample is the sample of the whole snapshot read afresh, to the bit.
    #[test]
    fn a_sample_kept_by_changed_records_is_the_whole_snapshots() {
        let mut sim = Sim::new(SimConfig::default()).expect("sim");
        let mut kept = Sampler::default();
        let mut fragmented = 0;
        for _ in 0..120 {
            sim.advance(15);
            let c = sim.snapshot();
            let s = kept.sample(&c);
            let whole = Sampler::default().sample(&c);
            assert_eq!(s, whole, "at {}", c.time);
            assert_eq!(s.busy.to_bits(), whole.busy.to_bits());
            fragmented += usize::from(s.fragmented);
        }
        assert!(
            fragmented > 0,
            "the sim was never fragmented: nothing compared"
        );
        // The jobs that asked held by their users: nobody asks any more.
        let mut c = sim.snapshot();
        assert!(kept.sample(&c).fragmented, "fragmented at the end");
        for j in &mut c.jobs {
            if j.state.is_pending() {
                std::sync::Arc::make_mut(j).reason = Some("JobHeldUser".into());
            }
        }
        let s = kept.sample(&c);
        assert_eq!(s, Sampler::default().sample(&c));
        assert!(!s.fragmented);
    }
}
