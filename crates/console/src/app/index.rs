//! Lookups built once per snapshot, so that drawing touches only what is
//! visible, and the row lists of each view.

use super::{Row, Screen};
use crate::model::{Cluster, JobState, Summary};
use rustc_hash::{FxBuildHasher, FxHashMap};
use std::hash::BuildHasher;

#[derive(Debug, Default, Clone)]
pub struct Index {
    /// Positions in `Cluster::nodes`, found by name without a copy of the
    /// names (10,000 string copies a snapshot at 10,000 nodes).
    node_by_name: hashbrown::HashTable<u32>,
    /// Positions in `Cluster::jobs`, found by id without a copy of the ids
    /// (100,000 string copies a snapshot were a third of this index's cost).
    /// Built on first use: only the job screens ask.
    job_by_id: std::cell::OnceCell<hashbrown::HashTable<u32>>,
    /// Jobs holding GPUs on each node; built on first use (the node
    /// screens), not for every snapshot: 10 ms a snapshot at 10,000 nodes.
    jobs_by_node: std::cell::OnceCell<FxHashMap<String, Vec<usize>>>,
    pub summary: Summary,
    /// For the node grid's layout.
    pub longest_node_name: usize,
    pub most_gpus_on_a_node: usize,
    /// Per partition, in the cluster's order: GPUs in all, allocated, and
    /// unavailable (not allocated, on nodes out of service: the header's
    /// `unavail`) — summed once per snapshot, not per frame.
    pub partition_gpus: Vec<PartitionGpus>,
    /// The narrowest failure domains (each node's first: its leaf switch,
    /// NVLink domain or rack), for the node grid's domain line.
    pub domains: Vec<crate::engine::fabric::DomainView>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct PartitionGpus {
    pub name: String,
    pub total: u32,
    pub allocated: u32,
    pub out: u32,
}

impl Index {
    pub fn build(c: &Cluster) -> Index {
        Index {
            node_by_name: node_table(c),
            job_by_id: std::cell::OnceCell::new(),
            jobs_by_node: std::cell::OnceCell::new(),
            summary: c.summary(),
            longest_node_name: c
                .nodes
                .iter()
                .map(|n| n.name.chars().count())
                .max()
                .unwrap_or(0),
            most_gpus_on_a_node: c.nodes.iter().map(|n| n.gpus.len()).max().unwrap_or(0),
            partition_gpus: partition_gpus(c),
            domains: narrowest_domains(c),
        }
    }

    /// Where node `name` is in `c.nodes` (`c` the snapshot this was built on).
    pub fn node(&self, c: &Cluster, name: &str) -> Option<usize> {
        let at = |i: &u32| c.nodes.get(*i as usize).is_some_and(|n| n.name == name);
        self.node_by_name
            .find(FxBuildHasher.hash_one(name), at)
            .map(|&i| i as usize)
    }

    /// Where job `id` is in `c.jobs` (`c` the snapshot this was built on).
    pub fn job(&self, c: &Cluster, id: &str) -> Option<usize> {
        let at = |i: &u32| c.jobs.get(*i as usize).is_some_and(|j| j.id == id);
        self.job_by_id
            .get_or_init(|| job_table(c))
            .find(FxBuildHasher.hash_one(id), at)
            .map(|&i| i as usize)
    }

    /// The jobs holding GPUs on `node` (`c` the snapshot this was built on).
    pub fn jobs_on(&self, c: &Cluster, node: &str) -> &[usize] {
        self.jobs_by_node
            .get_or_init(|| c.jobs_by_node())
            .get(node)
            .map_or(&[], Vec::as_slice)
    }
}

fn node_table(c: &Cluster) -> hashbrown::HashTable<u32> {
    place_table(&c.nodes, |n| n.name.as_str())
}

fn job_table(c: &Cluster) -> hashbrown::HashTable<u32> {
    place_table(&c.jobs, |j| j.id.as_str())
}

/// Each item's place in `items`, found by its `key` without a copy of the
/// keys; of two items of one key, the later is the one found.
fn place_table<T>(items: &[T], key: impl Fn(&T) -> &str) -> hashbrown::HashTable<u32> {
    let hash_of = |k: &str| FxBuildHasher.hash_one(k);
    let rehash = |i: &u32| items.get(*i as usize).map_or(0, |x| hash_of(key(x)));
    let mut t = hashbrown::HashTable::with_capacity(items.len());
    for (i, x) in items.iter().enumerate() {
        let k = key(x);
        let h = hash_of(k);
        match t.find_mut(h, |&p: &u32| key(&items[p as usize]) == k) {
            Some(p) => *p = i as u32,
            None => {
                t.insert_unique(h, i as u32, rehash);
            }
        }
    }
    t
}

/// The domains at the level most nodes list first.
fn narrowest_domains(c: &Cluster) -> Vec<crate::engine::fabric::DomainView> {
    let Some(level) = c
        .nodes
        .iter()
        .find_map(|n| n.domains.first())
        .map(|d| d.level.clone())
    else {
        return Vec::new();
    };
    crate::engine::fabric::domains_at(c, &level)
}

fn partition_gpus(c: &Cluster) -> Vec<PartitionGpus> {
    let mut out: Vec<PartitionGpus> = c
        .partitions
        .iter()
        .map(|p| PartitionGpus {
            name: p.name.clone(),
            ..PartitionGpus::default()
        })
        .collect();
    let at: FxHashMap<&str, usize> = c
        .partitions
        .iter()
        .enumerate()
        .map(|(i, p)| (p.name.as_str(), i))
        .collect();
    for n in &c.nodes {
        for p in n.partitions.iter() {
            if let Some(&i) = at.get(p.as_str()) {
                let s = &mut out[i];
                s.total += n.gpu_count;
                s.allocated += n.gpus_allocated();
                if !n.state.schedulable() {
                    s.out += n.gpu_count.saturating_sub(n.gpus_allocated());
                }
            }
        }
    }
    out
}

/// A node screen's rows: its GPUs (first pane) or its jobs (second).
pub(super) fn node_rows(c: &Cluster, ix: &Index, s: &Screen) -> Vec<Row> {
    let Some(n) = s.target.as_deref().and_then(|t| ix.node(c, t)) else {
        return Vec::new();
    };
    if s.pane == super::Pane::First {
        (0..c.nodes[n].gpus.len()).map(|g| Row::Gpu(n, g)).collect()
    } else {
        ix.jobs_on(c, &c.nodes[n].name)
            .iter()
            .map(|&j| Row::Job(j))
            .collect()
    }
}

/// A job screen's rows: the nodes it runs on.
pub(super) fn job_rows(c: &Cluster, ix: &Index, s: &Screen) -> Vec<Row> {
    let Some(j) = s.target.as_deref().and_then(|t| ix.job(c, t)) else {
        return Vec::new();
    };
    c.jobs[j]
        .nodes
        .iter()
        .filter_map(|n| ix.node(c, n))
        .map(Row::Node)
        .collect()
}

/// Running work first, then the queue, then what has ended.
pub(super) fn state_rank(s: JobState) -> u8 {
    match s {
        JobState::Running | JobState::Completing | JobState::Suspended => 0,
        JobState::Pending | JobState::Requeued => 1,
        _ => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fixture::{add_node, cluster};

    /// Nodes found by name in the snapshot the index was built on; a name
    /// it does not hold is none; of two nodes of one name, the later.
    #[test]
    fn nodes_are_found_by_name() {
        let mut c = cluster();
        for name in ["a-1", "a-2", "b-1", "a-2"] {
            add_node(&mut c, name, "gpu", 4);
        }
        let ix = Index::build(&c);
        assert_eq!(ix.node(&c, "a-1"), Some(0));
        assert_eq!(ix.node(&c, "b-1"), Some(2));
        assert_eq!(ix.node(&c, "a-2"), Some(3));
        assert_eq!(ix.node(&c, "a-3"), None);
        assert_eq!(ix.node(&c, ""), None);
    }
}
