//! Everything a kind of screen does its own way, in one place: its name
//! and `:` commands, what a key means on it (`None`: the keys every
//! screen shares apply — moving, paging, filtering, `esc`, `:`), its rows,
//! what the engine answers for on it, the nodes it opens, what the action
//! keys act on, its footer's keys. A new screen is a [`Kind`] here (and
//! its drawing, `views::component`). Keys answer an [`Intent`] for the app
//! to carry out; nothing here changes state.

use super::{App, Intent, Pane, Row, Screen, View};
use crate::engine::analysis::Focus;
use crossterm::event::KeyEvent;

mod detail;
mod list;
mod overview;

/// A kind of screen.
pub(crate) trait Kind: Sync {
    /// Its name in the header.
    fn title(&self) -> &'static str;
    /// The `:` commands that open it, k9s style (its name first, as `tab`
    /// completes it); none for a screen opened on one object.
    fn commands(&self) -> &'static [&'static str] {
        &[]
    }
    /// `:WORD NAME` opens it on that object (`job`, `node`, `gpu`).
    fn object(&self) -> Option<&'static str> {
        None
    }
    /// The objects `:WORD` completes.
    fn names(&self, _app: &App) -> Vec<String> {
        Vec::new()
    }
    /// Whether `:WORD what` names an object of the current data.
    fn has(&self, _app: &App, _what: &str) -> bool {
        false
    }
    /// A key it gives its own meaning to.
    fn on_key(&self, app: &App, key: KeyEvent) -> Option<Intent>;
    /// It shows the node grid (recomputed with its rows).
    fn shows_grid(&self) -> bool {
        false
    }
    /// Its rows, filtered and in display order.
    fn rows(&self, app: &App, s: &Screen) -> Vec<Row>;
    /// What the engine answers for: by default the selected row's (a
    /// list's row is what `O` and the action keys act on).
    fn focus(&self, app: &App, _s: &Screen) -> Focus {
        default_focus(app)
    }
    /// The nodes it opens, whose GPUs a fleet's source reads in full (not
    /// the rows a cursor passes over).
    fn opens(&self, _app: &App, _s: &Screen) -> Vec<String> {
        Vec::new()
    }
    /// The node a node action acts on: the selected row's.
    fn node_acted_on(&self, app: &App, _s: &Screen) -> Option<String> {
        match app.selected_row()? {
            Row::Incident(i) => app.incident(i).map(|inc| inc.node.clone()),
            Row::Node(n) => app.cluster.nodes.get(n).map(|n| n.name.clone()),
            _ => None,
        }
    }
    /// The job a job action acts on: the selected row's.
    fn job_acted_on(&self, app: &App, _s: &Screen) -> Option<String> {
        match app.selected_row()? {
            Row::Job(j) => app.cluster.jobs.get(j).map(|j| j.id.clone()),
            _ => None,
        }
    }
    /// The footer's keys besides the action keys.
    fn hints(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("enter", "open"),
            ("esc", "back"),
            (":", "view"),
            ("/", "filter"),
            ("?", "help"),
            ("q", "quit"),
        ]
    }
    /// The action keys that apply on it (not in read-only mode).
    fn actions(&self) -> &'static [(&'static str, &'static str)];
    /// A list that fills the body: the screen row its first row is on,
    /// for a click; `None`: not clicked into.
    fn list_top(&self) -> Option<u16> {
        None
    }
    /// The columns a filter's `field:` names.
    fn filter_fields(&self) -> Vec<&'static str> {
        Vec::new()
    }
}

/// What the engine answers for on a list: the selected row's (a list's
/// row is what `O` and the action keys act on).
fn default_focus(app: &App) -> Focus {
    match app.selected_row() {
        Some(Row::Incident(i)) => app
            .incident(i)
            .map_or(Focus::None, |inc| Focus::Node(inc.node.clone())),
        Some(Row::Node(n)) => app
            .cluster
            .nodes
            .get(n)
            .map_or(Focus::None, |x| Focus::Node(x.name.clone())),
        Some(Row::Job(j)) => app
            .cluster
            .jobs
            .get(j)
            .map_or(Focus::None, |x| Focus::Job(x.id.clone())),
        _ => Focus::None,
    }
}

/// The node actions' keys.
pub(crate) const NODE_ACTIONS: &[(&str, &str)] =
    &[("D", "drain"), ("C", "cordon"), ("U", "resume")];
/// The job actions' keys.
pub(crate) const JOB_ACTIONS: &[(&str, &str)] = &[
    ("R", "requeue"),
    ("T", "top"),
    ("H", "hold"),
    ("E", "release"),
];

impl View {
    /// Every screen, the ones `:` opens first (in the order `tab` offers
    /// them), then those opened on an object.
    pub(crate) const ALL: [View; 9] = [
        View::Overview,
        View::Nodes,
        View::Gpus,
        View::Jobs,
        View::Queue,
        View::Incidents,
        View::JobDetail,
        View::NodeDetail,
        View::GpuDetail,
    ];

    /// What this screen does its own way.
    pub(crate) fn kind(self) -> &'static dyn Kind {
        match self {
            View::Overview => &overview::Overview,
            View::Nodes => &list::NODES,
            View::Gpus => &list::GPUS,
            View::Jobs => &list::JOBS,
            View::Queue => &list::QUEUE,
            View::Incidents => &list::INCIDENTS,
            View::NodeDetail => &detail::Node,
            View::GpuDetail => &detail::Gpu,
            View::JobDetail => &detail::Job,
        }
    }

    pub fn title(self) -> &'static str {
        self.kind().title()
    }

    /// The view a `:command` names, k9s style, with short aliases.
    pub fn from_command(cmd: &str) -> Option<View> {
        let cmd = cmd.trim().to_ascii_lowercase();
        View::ALL
            .into_iter()
            .find(|v| v.kind().commands().contains(&cmd.as_str()))
    }

    /// The screen `:WORD` opens on an object (`job`, `node`, `gpu`).
    pub(crate) fn of_object(word: &str) -> Option<View> {
        View::ALL
            .into_iter()
            .find(|v| v.kind().object() == Some(word))
    }
}

/// The key `key` on the screen on top.
pub(crate) fn on_key(app: &App, key: KeyEvent) -> Option<Intent> {
    app.screen().view.kind().on_key(app, key)
}

/// `enter`: open what the selected row points at.
fn open_selected(app: &App) -> Intent {
    match app.drill_target() {
        Some(s) => Intent::Open(s),
        None => Intent::Flash("nothing to open here".into()),
    }
}
