//! The console's state and how keys and source updates change it.
//! Rendering (src/views) only reads this.

mod act;
mod history;
mod index;
mod keys;

pub use history::History;
pub use index::Index;

use crate::actions::runner::{Modal, Request};
use crate::engine::analysis::{Analysis, Focus};
use crate::engine::xid::XidCatalog;
use crate::model::Cluster;
use crate::sources::Update;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The screens of the console.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Overview,
    Nodes,
    NodeDetail,
    Gpus,
    GpuDetail,
    Jobs,
    Queue,
    JobDetail,
    Incidents,
}

impl View {
    pub fn title(self) -> &'static str {
        match self {
            View::Overview => "overview",
            View::Nodes => "nodes",
            View::NodeDetail => "node",
            View::Gpus => "gpus",
            View::GpuDetail => "gpu",
            View::Jobs => "jobs",
            View::Queue => "queue",
            View::JobDetail => "job",
            View::Incidents => "incidents",
        }
    }

    /// The view a `:command` names, k9s style, with short aliases.
    pub fn from_command(cmd: &str) -> Option<View> {
        Some(match cmd.trim().to_ascii_lowercase().as_str() {
            "overview" | "ov" | "home" | "cluster" => View::Overview,
            "nodes" | "node" | "no" => View::Nodes,
            "gpus" | "gpu" | "gp" => View::Gpus,
            "jobs" | "job" | "jo" => View::Jobs,
            "queue" | "qu" | "pending" => View::Queue,
            "incidents" | "incident" | "inc" | "events" | "ev" | "xid" => View::Incidents,
            _ => return None,
        })
    }
}

/// A row a list shows, pointing into the current snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Row {
    Node(usize),
    Gpu(usize, usize),
    Job(usize),
    Event(usize),
}

/// One screen on the navigation stack.
#[derive(Debug, Clone, PartialEq)]
pub struct Screen {
    pub view: View,
    /// What a detail view shows: a node name, a job id, or `node/gpu`.
    pub target: Option<String>,
    pub selected: usize,
    /// The key of the selected row, so selection follows it across updates.
    pub selected_key: Option<String>,
    pub filter: String,
    /// Node detail: 0 = GPU table, 1 = jobs table.
    pub focus: u8,
}

impl Screen {
    pub fn new(view: View, target: Option<String>) -> Screen {
        Screen {
            view,
            target,
            selected: 0,
            selected_key: None,
            filter: String::new(),
            focus: 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    Normal,
    Command(String),
    Filter(String),
}

pub struct App {
    pub cluster: Arc<Cluster>,
    /// The engine's answers, for this or a slightly older snapshot.
    pub analysis: Option<Arc<Analysis>>,
    pub catalog: XidCatalog,
    pub index: Index,
    pub source_name: String,
    pub stack: Vec<Screen>,
    pub input: Input,
    pub show_help: bool,
    pub read_only: bool,
    pub no_color: bool,
    /// The rows of the current list, filtered and ordered.
    pub rows: Vec<Row>,
    pub history: History,
    /// When the newest snapshot arrived (None before the first).
    pub last_update: Option<Instant>,
    /// The clock the UI last looked at.
    pub now: Instant,
    pub stale_after: Duration,
    pub source_error: Option<String>,
    /// A one-line message in the footer (unknown command, nothing to open…).
    pub flash: Option<String>,
    pub quit: bool,
    /// An action being previewed, confirmed, run, or its result.
    pub modal: Option<Modal>,
    /// Requests for the action runner, sent by the event loop.
    pub outbox: Vec<Request>,
    /// How to undo the last action.
    pub last_undo: Option<String>,
}

impl App {
    pub fn new(source_name: &str, read_only: bool, no_color: bool, stale_after: Duration) -> App {
        App {
            cluster: Arc::new(Cluster::default()),
            analysis: None,
            catalog: XidCatalog::default(),
            index: Index::default(),
            source_name: source_name.to_string(),
            stack: vec![Screen::new(View::Overview, None)],
            input: Input::Normal,
            show_help: false,
            read_only,
            no_color,
            rows: Vec::new(),
            history: History::default(),
            last_update: None,
            now: Instant::now(),
            stale_after,
            source_error: None,
            flash: None,
            quit: false,
            modal: None,
            outbox: Vec::new(),
            last_undo: None,
        }
    }

    /// A GPU's severity from the engine's verdicts (`ok` until the first
    /// analysis arrives): the views never judge health themselves.
    pub fn gpu_severity(&self, node: &str, gpu: u32) -> crate::model::GpuHealth {
        self.analysis
            .as_ref()
            .map_or(crate::model::GpuHealth::Ok, |a| {
                a.base.gpu_severity(node, gpu)
            })
    }

    pub fn node_severity(&self, node: &str) -> crate::model::GpuHealth {
        self.analysis
            .as_ref()
            .map_or(crate::model::GpuHealth::Ok, |a| a.base.node_severity(node))
    }

    /// An event's severity from the Xid catalog (the site's, when overridden).
    pub fn event_severity(&self, e: &crate::model::Event) -> crate::model::GpuHealth {
        crate::engine::health::event_severity(e, &self.catalog)
    }

    pub fn screen(&self) -> &Screen {
        // The stack is never empty: `back` keeps the overview.
        &self.stack[self.stack.len() - 1]
    }

    fn screen_mut(&mut self) -> &mut Screen {
        let last = self.stack.len() - 1;
        &mut self.stack[last]
    }

    /// How old the data on screen is.
    pub fn data_age(&self) -> Option<Duration> {
        self.last_update
            .map(|t| self.now.saturating_duration_since(t))
    }

    pub fn is_stale(&self) -> bool {
        self.data_age().is_none_or(|a| a > self.stale_after)
    }

    pub fn tick(&mut self, now: Instant) {
        self.now = now;
    }

    pub fn on_update(&mut self, update: Update, now: Instant) {
        self.now = now;
        match update {
            Update::Snapshot(cluster) => {
                self.history.record(&cluster);
                self.index = Index::build(&cluster);
                self.cluster = cluster;
                self.last_update = Some(now);
                self.source_error = None;
                self.refresh_rows();
            }
            Update::Error(e) => {
                tracing::warn!("source error: {e}");
                self.source_error = Some(e);
            }
            Update::Analysis(a) => self.analysis = Some(a),
            Update::Preview(p) => {
                if let Some(Modal::Confirm {
                    action, preview, ..
                }) = &mut self.modal
                    && *action == p.action
                {
                    *preview = Some(p);
                }
            }
            Update::ActionDone(d) => {
                self.flash = Some(d.message.clone());
                self.last_undo = d.undo.clone();
                self.modal = Some(Modal::Done {
                    message: d.message.clone(),
                    ok: d.outcome.ok && (d.outcome.verified || d.outcome.no_op),
                });
            }
            Update::ActionFailed(e) => {
                self.flash = Some(e.clone());
                self.modal = Some(Modal::Done {
                    message: e,
                    ok: false,
                });
            }
        }
    }

    /// What the engine should answer for, given the screen.
    pub fn focus(&self) -> Focus {
        let s = self.screen();
        match (s.view, &s.target) {
            (View::JobDetail, Some(id)) => Focus::Job(id.clone()),
            (View::NodeDetail, Some(n)) => Focus::Node(n.clone()),
            (View::GpuDetail, Some(t)) => Focus::Node(
                t.rsplit_once('/')
                    .map_or(t.as_str(), |(n, _)| n)
                    .to_string(),
            ),
            _ => Focus::None,
        }
    }

    /// Recomputes the current list's rows and keeps the selection on the
    /// same item when it is still there.
    pub fn refresh_rows(&mut self) {
        let screen = self.screen().clone();
        self.rows = index::rows(&self.cluster, &self.index, &screen);
        let key = screen.selected_key.clone();
        let found = key.and_then(|k| self.rows.iter().position(|r| self.row_key(*r) == k));
        let len = self.rows.len();
        let s = self.screen_mut();
        if let Some(i) = found {
            s.selected = i;
        }
        s.selected = s.selected.min(len.saturating_sub(1));
        self.remember_selection();
    }

    fn remember_selection(&mut self) {
        let key = self
            .rows
            .get(self.screen().selected)
            .map(|r| self.row_key(*r));
        self.screen_mut().selected_key = key;
    }

    /// A stable identity for a row: node name, `node/gpu`, job id, event seq.
    pub fn row_key(&self, row: Row) -> String {
        let c = &self.cluster;
        match row {
            Row::Node(n) => c.nodes.get(n).map(|n| n.name.clone()).unwrap_or_default(),
            Row::Gpu(n, g) => c
                .nodes
                .get(n)
                .and_then(|node| {
                    node.gpus
                        .get(g)
                        .map(|gpu| format!("{}/{}", node.name, gpu.index))
                })
                .unwrap_or_default(),
            Row::Job(j) => c.jobs.get(j).map(|j| j.id.clone()).unwrap_or_default(),
            Row::Event(e) => c
                .events
                .get(e)
                .map(|e| e.seq.to_string())
                .unwrap_or_default(),
        }
    }

    pub fn selected_row(&self) -> Option<Row> {
        self.rows.get(self.screen().selected).copied()
    }

    /// Opens a view: top-level views replace the stack above the overview.
    pub fn open(&mut self, view: View) {
        self.stack.truncate(1);
        if view != View::Overview {
            self.stack.push(Screen::new(view, None));
        }
        self.refresh_rows();
    }

    /// Drills into a detail view on top of the current one.
    pub fn push(&mut self, screen: Screen) {
        self.stack.push(screen);
        self.refresh_rows();
    }

    pub fn back(&mut self) {
        if self.stack.len() > 1 {
            self.stack.pop();
            self.refresh_rows();
        }
    }

    pub fn set_filter(&mut self, filter: String) {
        let s = self.screen_mut();
        s.filter = filter;
        s.selected = 0;
        s.selected_key = None;
        self.refresh_rows();
    }

    pub fn select(&mut self, index: usize) {
        let len = self.rows.len();
        self.screen_mut().selected = index.min(len.saturating_sub(1));
        self.remember_selection();
    }
}

#[cfg(test)]
mod tests;
