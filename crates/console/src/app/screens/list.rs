//! The lists: nodes, GPUs, jobs (running or queued), incidents — each
//! filtered on every column of its spec (`alice`, `!alice`,
//! `state:pending`), in its own order or sorted by a column.

use super::{App, Intent, JOB_ACTIONS, Kind, NODE_ACTIONS, Row, Screen, open_selected};
use crossterm::event::{KeyCode, KeyEvent};

/// What a list lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Of {
    Nodes,
    Gpus,
    /// Every job, running work first.
    Jobs,
    /// The pending jobs, in the scheduler's order.
    Queue,
    Incidents,
}

pub(crate) struct List(Of);

pub(crate) static NODES: List = List(Of::Nodes);
pub(crate) static GPUS: List = List(Of::Gpus);
pub(crate) static JOBS: List = List(Of::Jobs);
pub(crate) static QUEUE: List = List(Of::Queue);
pub(crate) static INCIDENTS: List = List(Of::Incidents);

impl Kind for List {
    fn title(&self) -> &'static str {
        match self.0 {
            Of::Nodes => "nodes",
            Of::Gpus => "gpus",
            Of::Jobs => "jobs",
            Of::Queue => "queue",
            Of::Incidents => "incidents",
        }
    }

    fn commands(&self) -> &'static [&'static str] {
        match self.0 {
            Of::Nodes => &["nodes", "node", "no"],
            Of::Gpus => &["gpus", "gpu", "gp"],
            Of::Jobs => &["jobs", "job", "jo"],
            Of::Queue => &["queue", "qu", "pending"],
            Of::Incidents => &["incidents", "incident", "inc", "events", "ev", "xid"],
        }
    }

    /// `enter` opens the row; 1…9 sort by the first nine columns, 0 by
    /// the tenth; again reverses.
    fn on_key(&self, app: &App, key: KeyEvent) -> Option<Intent> {
        match key.code {
            KeyCode::Enter => Some(open_selected(app)),
            KeyCode::Char(d @ '0'..='9') => {
                let k = usize::from(d as u8 - b'0');
                Some(Intent::SortBy(if k == 0 { 9 } else { k - 1 }))
            }
            _ => None,
        }
    }

    fn rows(&self, app: &App, s: &Screen) -> Vec<Row> {
        use crate::columns::{self as cols, matches, sort_rows};
        let ctx = app.columns_ctx();
        let c = &app.cluster;
        let f = s.filter.as_str();
        match self.0 {
            Of::Nodes => {
                let mut r: Vec<(usize, &crate::model::Node)> = c
                    .nodes
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (i, &**n))
                    .filter(|(_, n)| matches(&ctx, cols::NODES, n, f))
                    .collect();
                if let Some((k, rev)) = s.sort.filter(|(k, _)| *k < cols::NODES.len()) {
                    sort_rows(&ctx, &cols::NODES[k], &mut r, rev);
                }
                r.into_iter().map(|(i, _)| Row::Node(i)).collect()
            }
            Of::Gpus => {
                let all: Vec<(usize, usize)> = c
                    .nodes
                    .iter()
                    .enumerate()
                    .flat_map(|(n, node)| (0..node.gpus.len()).map(move |g| (n, g)))
                    .collect();
                let mut r: Vec<(usize, &crate::model::Gpu)> = all
                    .iter()
                    .enumerate()
                    .map(|(k, &(n, g))| (k, &c.nodes[n].gpus[g]))
                    .filter(|(_, g)| matches(&ctx, cols::GPUS, g, f))
                    .collect();
                if let Some((k, rev)) = s.sort.filter(|(k, _)| *k < cols::GPUS.len()) {
                    sort_rows(&ctx, &cols::GPUS[k], &mut r, rev);
                }
                r.into_iter()
                    .map(|(k, _)| Row::Gpu(all[k].0, all[k].1))
                    .collect()
            }
            Of::Jobs | Of::Queue => {
                let mut r: Vec<(usize, &crate::model::Job)> = c
                    .jobs
                    .iter()
                    .enumerate()
                    .map(|(i, j)| (i, &**j))
                    .filter(|(_, j)| self.0 == Of::Jobs || j.state.is_pending())
                    .filter(|(_, j)| matches(&ctx, cols::JOBS, j, f))
                    .collect();
                match s.sort.filter(|(k, _)| *k < cols::JOBS.len()) {
                    Some((k, rev)) => sort_rows(&ctx, &cols::JOBS[k], &mut r, rev),
                    // Scheduler order: partition, priority, submit time.
                    None if self.0 == Of::Queue => r.sort_by(|(_, x), (_, y)| {
                        x.partition
                            .cmp(&y.partition)
                            .then(y.priority.cmp(&x.priority))
                            .then(x.submit_time.cmp(&y.submit_time))
                    }),
                    None => r.sort_by_key(|(i, j)| (crate::app::index::state_rank(j.state), *i)),
                }
                r.into_iter().map(|(i, _)| Row::Job(i)).collect()
            }
            Of::Incidents => {
                let Some(a) = &app.analysis else {
                    return Vec::new();
                };
                let mut r: Vec<(usize, &crate::engine::incidents::Incident)> = a
                    .base
                    .incidents
                    .iter()
                    .enumerate()
                    .filter(|(_, i)| {
                        matches(&ctx, cols::INCIDENTS, i, f)
                            || (!f.is_empty()
                                && i.jobs
                                    .iter()
                                    .any(|j| j.id.contains(f.trim_start_matches('!'))))
                    })
                    .collect();
                if let Some((k, rev)) = s.sort.filter(|(k, _)| *k < cols::INCIDENTS.len()) {
                    sort_rows(&ctx, &cols::INCIDENTS[k], &mut r, rev);
                }
                r.into_iter().map(|(i, _)| Row::Incident(i)).collect()
            }
        }
    }

    fn focus(&self, app: &App, _s: &Screen) -> crate::engine::analysis::Focus {
        match self.0 {
            // A GPU row's answers are its screen's.
            Of::Gpus => crate::engine::analysis::Focus::None,
            _ => super::default_focus(app),
        }
    }

    fn actions(&self) -> &'static [(&'static str, &'static str)] {
        match self.0 {
            Of::Nodes | Of::Incidents => NODE_ACTIONS,
            Of::Jobs | Of::Queue => JOB_ACTIONS,
            Of::Gpus => &[],
        }
    }

    fn list_top(&self) -> Option<u16> {
        match self.0 {
            // Border and header above row 0; the queue's summary too.
            Of::Nodes | Of::Gpus | Of::Jobs => Some(3),
            Of::Queue => Some(7),
            Of::Incidents => None,
        }
    }

    fn filter_fields(&self) -> Vec<&'static str> {
        use crate::columns as cols;
        match self.0 {
            Of::Nodes => cols::NODES.iter().map(|c| c.name).collect(),
            Of::Gpus => cols::GPUS.iter().map(|c| c.name).collect(),
            Of::Jobs | Of::Queue => cols::JOBS.iter().map(|c| c.name).collect(),
            Of::Incidents => cols::INCIDENTS.iter().map(|c| c.name).collect(),
        }
    }
}
