//! The console's state and how keys and source updates change it.
//! Rendering (src/views) only reads this.

mod access;
mod act;
mod armed;
mod autopilot;
pub use armed::Arming;
mod builder;
mod dialog;
pub use builder::KPI_KEEP_S;
pub use dialog::Dialog;
mod freshness;
pub use freshness::Freshness;
pub mod history;
pub mod index;
mod keys;
mod navigation;
pub use navigation::Navigation;
mod overlays;
mod playback;
pub use playback::Replay;
mod rows;
mod screens;
mod update;

pub use history::History;
pub use index::Index;
pub use rows::first_shown;

use crate::engine::analysis::{Analysis, Focus};
use crate::engine::xid::XidCatalog;
use crate::model::Action;
use crate::model::Cluster;
use crate::protocol::action::Preview;
use crate::protocol::action::{Reply, Request};
use crate::protocol::source::Update;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What happened, for the console: a key, the terminal, a source, the
/// engine, the action runner. Everything that can change the app's state
/// arrives as one of these through [`App::update`].
#[derive(Debug, Clone)]
pub enum Msg {
    Key(crossterm::event::KeyEvent),
    /// The terminal's size, at start and whenever it changes.
    Resize(u16, u16),
    /// A click or the wheel.
    Mouse(crossterm::event::MouseEvent),
    /// A second passed: ages move.
    Tick,
    /// Text pasted into the terminal (bracketed paste): typed into the
    /// input at hand as text, newlines included; it never confirms.
    Paste(String),
    /// From a source (through the analyst): a snapshot, or an origin's status.
    Source(Update),
    /// The engine's answers for a snapshot.
    Analysis(Arc<Analysis>),
    /// From the action runner.
    Action(Reply),
    /// A source's channel closed: it will send nothing more.
    SourceStopped,
    /// The action runner's channel closed: actions are unavailable.
    RunnerStopped,
    /// The terminal's stop signal (SIGTSTP) came.
    StopSignal,
}

/// What a screen makes of a key it gives its own meaning to
/// (`screens::on_key`); the app carries it out.
#[derive(Debug, Clone)]
pub enum Intent {
    /// Open a screen on top of this one.
    Open(Screen),
    /// Select the row at this position.
    Select(usize),
    /// Scroll the screen's text by this many lines (to its last line at most).
    Scroll(i32),
    /// Move between a screen's two panes.
    SwitchPane,
    /// Sort by this column (again: reversed).
    SortBy(usize),
    /// Say something on the status line (and in the message log).
    Flash(String),
}

/// What the console asks of the loop around it: [`App::update`] returns
/// these and the loop (the program's `tui.rs`) carries them out. The app
/// itself does no I/O.
#[derive(Debug)]
pub enum Effect {
    /// A request for the action runner: a preview, a confirmed action.
    Run(Request),
    /// A command for the recording being played (seek, faster, pause…).
    Replay(crate::protocol::replay::ReplayCmd),
    /// Ring the terminal bell: a new critical incident.
    Bell,
    /// ctrl-z or SIGTSTP: give the terminal back and stop until `fg`.
    Suspend,
    /// Leave the console.
    Quit,
    /// `:ctx NAME`: show that cluster (`None`: the fleet overview; esc on
    /// a cluster's first screen too). Only where the console watches
    /// several clusters (`--all`).
    Context(Option<String>),
}

/// How far the screen's text and the open overlay reach past what the
/// terminal shows, in rows: the keys that scroll stop there, so that a key
/// back after the end moves at once. The views lay the text out, so they
/// measure it ([`Measure`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Extent {
    pub screen: u16,
    pub overlay: u16,
}

/// The views' measure of the app as drawn now; given to the app by whoever
/// builds the console (`App::measured_by`), as the app sits below the views.
pub type Measure = fn(&App) -> Extent;

/// A panel over the screen, a component like the screens (its keys in
/// `app/overlays.rs`, its drawing in the views): while open it takes the
/// keys — arrows and pages scroll it, any other closes it, `q` quits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlay {
    /// The keys and commands (`?`, `:help`).
    Help,
    /// Every status message kept (`m`, `:messages`).
    Messages,
    /// The scheduler's health numbers over this window (`:kpis [WINDOW]`).
    Kpis { window_s: i64 },
}

/// What the TUI shows while an action is in hand.
#[derive(Debug, Clone)]
pub enum Modal {
    /// Waiting for the preview, then for the confirmation.
    Confirm {
        action: Action,
        preview: Option<Box<Preview>>,
        typed: String,
    },
    Running {
        action: Action,
    },
    Done {
        message: String,
        ok: bool,
    },
    /// The remediation options of a node or a job, side by side: a digit
    /// opens that option's guarded preview.
    Options {
        target: String,
    },
    /// Steps armed before this console started: keep them armed (`y`) or
    /// cancel them (`n`).
    Rearm {
        armed: Vec<crate::model::Armed>,
    },
}

/// One origin's freshness: when it last answered, and its error since.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OriginState {
    pub last_ok: Option<Instant>,
    /// Kept until the origin answers again.
    pub error: Option<String>,
    /// How often it is polled now, and why, as the source last said.
    pub refresh: Option<Refresh>,
    /// It answered slowly or in part, as it last said.
    pub quality: Option<String>,
}

/// How often an origin is polled, as it last said.
#[derive(Debug, Clone, PartialEq)]
pub struct Refresh {
    pub every: Duration,
    /// Slower than configured, to keep within slurmrestd's budget.
    pub stretched: bool,
    /// What is fetched how often, and why.
    pub note: String,
}

/// The screens of the console; what each does its own way is its
/// [`screens::Kind`] (`View::kind`).
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

/// A row a list shows, pointing into the current snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Row {
    Node(usize),
    Gpu(usize, usize),
    Job(usize),
    /// An incident of the engine's analysis (`Analysis::base.incidents`).
    Incident(usize),
}

/// A screen's two panes: the overview's open incidents (first) and node
/// grid (second); a node's GPUs (first) and jobs (second).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pane {
    #[default]
    First,
    Second,
}

impl Pane {
    pub fn other(self) -> Pane {
        match self {
            Pane::First => Pane::Second,
            Pane::Second => Pane::First,
        }
    }
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
    /// Which of a screen's two panes has the keys (`tab` switches).
    pub pane: Pane,
    /// A list's sort: (column of its spec, reversed). `None`: its own order.
    pub sort: Option<(usize, bool)>,
    /// How far a detail screen's text is scrolled (the job screen's).
    pub scroll: u16,
}

impl Screen {
    pub fn new(view: View, target: Option<String>) -> Screen {
        Screen {
            view,
            target,
            selected: 0,
            selected_key: None,
            filter: String::new(),
            pane: Pane::First,
            sort: None,
            scroll: 0,
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
    pub(crate) cluster: Arc<Cluster>,
    /// The engine's answers, for this or a slightly older snapshot.
    pub(crate) analysis: Option<Arc<Analysis>>,
    pub(crate) catalog: XidCatalog,
    pub(crate) index: Index,
    pub(crate) source_name: String,
    /// The clusters of the fleet, when the console watches several.
    pub(crate) contexts: Vec<String>,
    /// This one's name among them.
    pub context: Option<String>,
    /// Where the operator is: the screens opened, their rows, the grid.
    pub(crate) nav: navigation::Navigation,
    pub(crate) input: Input,
    /// How far help, the message log or the numbers are scrolled.
    pub(crate) overlay_scroll: u16,
    /// The scheduler's health numbers, fed every snapshot by the analyst
    /// (off this thread).
    pub(crate) kpis: crate::engine::kpis::SharedKpis,
    /// The `:kpis` panel's figures: computed when a snapshot, an analysis
    /// or a key comes while it is open, never while drawing.
    pub(crate) kpi_figures: Option<crate::engine::kpis::Kpis>,
    /// The panel over the screen, when one is open.
    pub(crate) overlay: Option<Overlay>,
    /// Every status message, oldest first (the newest 200), with its wall
    /// time: a message that scrolled away can be read again.
    pub(crate) messages: std::collections::VecDeque<(Said, String)>,
    pub(crate) read_only: bool,
    pub(crate) no_color: bool,
    pub(crate) history: History,
    /// Each origin's health and how old the data is.
    pub(crate) freshness: freshness::Freshness,
    /// The clock the UI last looked at.
    pub(crate) now: Instant,
    /// A one-line message in the footer (unknown command, nothing to open…).
    pub(crate) flash: Option<String>,
    /// The action flow: the dialog open, its scroll, the undo, the plan.
    pub(crate) dialog: dialog::Dialog,
    /// The terminal's size, as last told (views draw to it; keys that move
    /// by a grid row need its width).
    pub(crate) size: (u16, u16),
    /// Incidents the operator has opened (enter, or an action on them).
    pub(crate) seen: std::collections::HashSet<String>,
    /// Every incident id ever shown, to tell a new one.
    pub(crate) known: std::collections::HashSet<String>,
    /// Ring the terminal bell on a new critical incident (`ui.bell_on_critical`).
    pub(crate) bell_on_critical: bool,
    /// The armed steps.
    pub(crate) arming: armed::Arming,
    /// The autopilot's state, as the runner last told it.
    pub(crate) autopilot: autopilot::Autopilot,
    /// Playing a recording: its state, its keys (`Effect::Replay`).
    pub(crate) replay: playback::Replay,
    /// What the loop is to do, gathered while a message is taken in and
    /// handed over by `update`.
    effects: Vec<Effect>,
    /// How far text reaches past the terminal (see [`Extent`]).
    measure: Option<Measure>,
}

impl App {
    /// How far the text reaches past the terminal now.
    pub(crate) fn extent(&self) -> Extent {
        self.measure.map(|m| m(self)).unwrap_or_default()
    }

    /// Asks the loop to do something once this message is taken in.
    pub(crate) fn emit(&mut self, effect: Effect) {
        self.effects.push(effect);
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
        self.nav.screen()
    }

    fn screen_mut(&mut self) -> &mut Screen {
        self.nav.screen_mut()
    }

    /// The nodes opened on screen (a node, a GPU's node, a job's nodes),
    /// whose GPUs a fleet's source reads in full: not the rows a cursor
    /// passes over.
    pub fn open_nodes(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .nav
            .stack()
            .iter()
            .flat_map(|s| s.view.kind().opens(self, s))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// What the engine should answer for, given the screen.
    pub fn focus(&self) -> Focus {
        let s = self.screen();
        s.view.kind().focus(self, s)
    }

    /// Recomputes the current list's rows and keeps the selection on the
    /// same item when it is still there.
    pub fn refresh_rows(&mut self) {
        let screen = self.screen().clone();
        let kind = screen.view.kind();
        if kind.shows_grid() {
            self.nav.grid = self.grid_order();
        }
        let rows = kind.rows(self, &screen);
        let key = screen.selected_key.clone();
        let found = key.and_then(|k| rows.iter().position(|r| self.row_key(*r) == k));
        self.nav.set_rows(rows, found);
        self.remember_selection();
    }

    fn remember_selection(&mut self) {
        let key = self.nav.selected_row().map(|r| self.row_key(r));
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
            Row::Incident(i) => self.incident(i).map(|i| i.id.clone()).unwrap_or_default(),
        }
    }

    pub fn selected_row(&self) -> Option<Row> {
        self.nav.selected_row()
    }

    /// Opens a view: top-level views replace the stack above the overview.
    pub fn open(&mut self, view: View) {
        self.nav.open(view);
        self.refresh_rows();
    }

    /// Drills into a detail view on top of the current one.
    pub fn push(&mut self, screen: Screen) {
        self.nav.push(screen);
        self.refresh_rows();
    }

    pub fn back(&mut self) {
        if self.nav.pop() {
            self.refresh_rows();
        } else if !self.contexts.is_empty() {
            // One cluster of several: back out to the fleet.
            self.emit(Effect::Context(None));
        }
    }

    /// Opens the incident `id`'s screen (its node), as `enter` on its row
    /// does; false when there is no such incident.
    pub fn open_incident(&mut self, id: &str) -> bool {
        let Some(inc) = self
            .analysis
            .as_ref()
            .and_then(|a| a.base.incidents.iter().find(|i| i.id == id))
        else {
            return false;
        };
        let s = keys::incident_screen(inc);
        self.push(s);
        true
    }

    pub fn set_filter(&mut self, filter: String) {
        let s = self.screen_mut();
        s.filter = filter;
        s.selected = 0;
        s.selected_key = None;
        self.refresh_rows();
        // `/foo:bar` that finds nothing, foo not a field: say so, and which
        // fields there are (an empty list says nothing).
        let f = self
            .screen()
            .filter
            .trim()
            .trim_start_matches('!')
            .to_lowercase();
        if let Some((field, _)) = f.split_once(':')
            && self.nav.rows.is_empty()
            && !field.is_empty()
            && field.chars().all(char::is_alphabetic)
        {
            let fields = self.filter_fields();
            if !fields.is_empty() && !fields.iter().any(|x| *x == field) {
                self.flash = Some(format!(
                    "no field {field:?} in this list; its fields: {}",
                    fields.join(" ")
                ));
            }
        }
    }

    pub fn select(&mut self, index: usize) {
        self.nav.select(index);
        self.remember_selection();
    }
}

#[cfg(test)]
mod tests;

/// When a message was said: on the source's clock (as everything else on
/// screen), and on the wall clock (shown beside it where they differ: a
/// replay, a slowed sim, a stale source).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Said {
    pub source: crate::model::Timestamp,
    pub wall: crate::model::Timestamp,
}

/// Characters after a node's GPU glyphs in the grid: a space, its mark (up
/// to six: `x79`, `cordon`) and a space before the next node.
pub const GRID_MARK_W: usize = 8;

/// Grid cell widths (name, GPUs), measured once per snapshot.
pub fn grid_cell_widths(ix: &Index) -> (usize, usize) {
    (
        ix.longest_node_name.clamp(4, 24),
        ix.most_gpus_on_a_node.max(1),
    )
}

/// Grid cells in a row `width` wide.
pub fn grid_columns(ix: &Index, width: u16) -> usize {
    let (name_w, gpus_w) = grid_cell_widths(ix);
    (width as usize / (name_w + 1 + gpus_w + GRID_MARK_W)).max(1)
}
