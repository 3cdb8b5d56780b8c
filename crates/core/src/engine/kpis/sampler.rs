//! One snapshot reduced to what the health numbers need, kept up to date
//! node by node and job by job: a node or job that is the same shared
//! record as in the last snapshot is not read again. At 10,000 nodes a
//! snapshot changes about a thousand nodes and a few dozen jobs; reading
//! all of them (80,000 GPUs, 100,000 jobs, a partition looked up by name
//! for each) was the largest part of a report's pass over a recording.

use super::Sample;
use crate::model::{Cluster, Job, Node};
use std::sync::Arc;

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
#[derive(Debug, Clone, Copy)]
struct Ask {
    partition: usize,
    per: u32,
    total: u32,
    nodes: u32,
}

/// The last snapshot's nodes and jobs with what each added.
#[derive(Debug, Clone, Default)]
pub(super) struct Sampler {
    nodes: Vec<Arc<Node>>,
    parts: Vec<NodePart>,
    jobs: Vec<Arc<Job>>,
    asks: Vec<Option<Ask>>,
    /// Partition names seen, each once.
    partitions: Vec<String>,
}

impl Sampler {
    fn partition(&mut self, name: &str) -> usize {
        match self.partitions.iter().position(|p| p == name) {
            Some(i) => i,
            None => {
                self.partitions.push(name.to_string());
                self.partitions.len() - 1
            }
        }
    }

    fn part(&mut self, n: &Node) -> NodePart {
        NodePart {
            gpus: n.gpu_count,
            allocated: n.gpus_allocated(),
            out: !n.state.schedulable(),
            busy: n.gpus.iter().filter_map(|g| g.sm_occupancy).collect(),
            free: n.gpus_free(),
            partitions: n.partitions.iter().map(|p| self.partition(p)).collect(),
        }
    }

    fn ask(&mut self, j: &Job) -> Option<Ask> {
        if !j.state.is_pending() || !waits_for_capacity(j.reason.as_deref()) {
            return None;
        }
        let (per, total) = (j.gpus_per_node?, j.gpus_requested()?);
        Some(Ask {
            partition: self.partition(&j.partition),
            per,
            total,
            nodes: j.node_count.unwrap_or(1).max(1),
        })
    }

    /// `c` as a sample; what did not change since the last call is not
    /// read again.
    pub(super) fn sample(&mut self, c: &Cluster) -> Sample {
        for (i, n) in c.nodes.iter().enumerate() {
            if self.nodes.get(i).is_some_and(|l| Arc::ptr_eq(l, n)) {
                continue;
            }
            let part = self.part(n);
            match self.parts.get_mut(i) {
                Some(p) => *p = part,
                None => self.parts.push(part),
            }
        }
        self.parts.truncate(c.nodes.len());
        self.nodes.clone_from(&c.nodes);
        for (i, j) in c.jobs.iter().enumerate() {
            if self.jobs.get(i).is_some_and(|l| Arc::ptr_eq(l, j)) {
                continue;
            }
            let ask = self.ask(j);
            match self.asks.get_mut(i) {
                Some(a) => *a = ask,
                None => self.asks.push(ask),
            }
        }
        self.asks.truncate(c.jobs.len());
        self.jobs.clone_from(&c.jobs);
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
        for p in &self.parts {
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
        s.fragmented = self.asks.iter().flatten().any(|a| {
            let Some((sum, at_least)) = free.get(a.partition).copied().flatten() else {
                return false;
            };
            let fits = a.per == 0 || (a.per <= 8 && at_least[a.per as usize] >= a.nodes);
            sum >= a.total && !fits
        });
        s
    }
}
