//! The rows of each screen: lists filtered and sorted by their column
//! specification, the overview's open incidents and problem-first grid.

use super::{App, Row, grid_columns};

impl App {
    /// An incident of the current analysis.
    pub fn incident(&self, i: usize) -> Option<&crate::engine::incidents::Incident> {
        self.analysis.as_ref().and_then(|a| a.base.incidents.get(i))
    }

    /// Open incidents the operator has not opened yet.
    pub fn unread(&self) -> usize {
        self.analysis.as_ref().map_or(0, |a| {
            a.base
                .incidents
                .iter()
                .filter(|i| i.is_open() && !self.seen.contains(&i.id))
                .count()
        })
    }

    pub fn is_unread(&self, i: &crate::engine::incidents::Incident) -> bool {
        i.is_open() && !self.seen.contains(&i.id)
    }

    /// What the column specifications look at.
    pub fn columns_ctx(&self) -> crate::columns::Ctx<'_> {
        crate::columns::Ctx {
            cluster: &self.cluster,
            base: self.analysis.as_ref().map(|a| a.base.as_ref()),
            stale_after_s: self.freshness.stale_after().as_secs(),
        }
    }

    /// Nodes for the overview's grid: those with problems first — critical,
    /// stalled, warning, out of service with an open incident, out of
    /// service — then the rest; within each group, the nodes of one failure
    /// domain (their leaf switch, rack) together, in the cluster's order.
    /// At 10,000 nodes a broken one is on the first screen, not at row 280.
    pub(super) fn grid_order(&self) -> Vec<usize> {
        use crate::model::GpuHealth;
        let base = self.analysis.as_ref().map(|a| a.base.as_ref());
        let rank = |n: &crate::model::Node| -> u8 {
            let sev = base.map_or(GpuHealth::Ok, |b| b.node_severity(&n.name));
            let stalled =
                base.is_some_and(|b| b.stalls.iter().any(|s| s.node == n.name && !s.via_gang));
            let open = base.is_some_and(|b| b.node_incident(&n.name).is_some());
            match (sev, stalled, n.state.schedulable(), open) {
                (GpuHealth::Critical, ..) => 0,
                (_, true, ..) => 1,
                (GpuHealth::Warn, ..) => 2,
                (_, _, false, true) => 3,
                (_, _, false, false) => 4,
                _ => 5,
            }
        };
        // Each domain's place: where its first node is in the cluster.
        let mut first_of: rustc_hash::FxHashMap<&str, usize> = rustc_hash::FxHashMap::default();
        for (i, n) in self.cluster.nodes.iter().enumerate() {
            if let Some(d) = n.topology() {
                first_of.entry(d).or_insert(i);
            }
        }
        let domain = |i: usize| {
            self.cluster.nodes[i]
                .topology()
                .and_then(|d| first_of.get(d).copied())
                .unwrap_or(i)
        };
        let mut order: Vec<usize> = (0..self.cluster.nodes.len()).collect();
        order.sort_by_cached_key(|&i| (rank(&self.cluster.nodes[i]), domain(i), i));
        order
    }

    /// The open incidents, newest first: the overview's first panel.
    pub(super) fn open_incident_rows(&self) -> Vec<Row> {
        self.analysis.as_ref().map_or_else(Vec::new, |a| {
            a.base
                .incidents
                .iter()
                .enumerate()
                .filter(|(_, i)| i.is_open())
                .map(|(k, _)| Row::Incident(k))
                .collect()
        })
    }

    /// Grid cells a row of the overview's grid holds at the current width.
    pub fn grid_columns(&self) -> usize {
        grid_columns(&self.index, self.size.0.saturating_sub(2))
    }

    /// The filter fields of the list on screen (`state`, `node`, …).
    pub fn filter_fields(&self) -> Vec<String> {
        let names = self.screen().view.kind().filter_fields();
        names.into_iter().map(crate::columns::field_name).collect()
    }

    /// `1`…`9`, `0`: sort the list by that column; again: reverse it.
    pub fn sort_by_column(&mut self, k: usize) {
        let s = self.screen_mut();
        s.sort = match s.sort {
            Some((c, rev)) if c == k => Some((c, !rev)),
            _ => Some((k, false)),
        };
        self.refresh_rows();
    }
}

/// First row to show so that `selected` is on screen. A pure function of
/// its inputs: drawing keeps no scroll state; the views draw from it and
/// the mouse hit-tests with it.
pub fn first_shown(selected: usize, height: usize) -> usize {
    if height == 0 {
        0
    } else {
        selected.saturating_sub(height - 1)
    }
}
