//! Short histories for sparklines, recorded from each snapshot.

use crate::model::Cluster;
use std::collections::{HashMap, VecDeque};

/// Samples kept per series.
pub const HISTORY_LEN: usize = 120;

/// Percent 0–100, or `None` while the reading was unknown.
pub type Series = VecDeque<Option<u8>>;

#[derive(Debug, Default, Clone)]
pub struct History {
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

impl History {
    pub fn record(&mut self, c: &Cluster) {
        for n in &c.nodes {
            push(
                self.node_occ.entry(n.name.clone()).or_default(),
                pct(n.mean_sm_occupancy()),
            );
            let gpus = self.gpu_occ.entry(n.name.clone()).or_default();
            gpus.resize_with(n.gpus.len(), VecDeque::new);
            for (s, g) in gpus.iter_mut().zip(&n.gpus) {
                push(s, pct(g.sm_occupancy));
            }
        }
        let pending = c.jobs.iter().filter(|j| j.state.is_pending()).count() as u64;
        push(&mut self.queue_len, pending);
    }
}
