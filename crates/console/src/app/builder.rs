//! Making the App: its first state and the builders the program uses to
//! give it what it reads from (the Xid catalog, the health numbers' book,
//! the clusters beside it, the views' measure).

use super::{App, History, Index, Input, Measure};
use crate::engine::xid::XidCatalog;
use crate::model::Cluster;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How far back the console's health numbers reach.
pub const KPI_KEEP_S: i64 = 24 * 3600;

impl App {
    pub fn new(source_name: &str, read_only: bool, no_color: bool, stale_after: Duration) -> App {
        App {
            cluster: Arc::new(Cluster::default()),
            analysis: None,
            catalog: XidCatalog::default(),
            index: Index::default(),
            source_name: source_name.to_string(),
            contexts: Vec::new(),
            context: None,
            nav: super::Navigation::default(),
            input: Input::Normal,
            overlay_scroll: 0,
            kpi_figures: None,
            kpis: std::sync::Arc::new(std::sync::Mutex::new(crate::engine::kpis::KpiBook::new(
                KPI_KEEP_S,
            ))),
            overlay: None,
            messages: std::collections::VecDeque::new(),
            read_only,
            no_color,
            history: History::default(),
            // A scheduler source is expected from the start.
            freshness: super::Freshness::new(source_name != "endpoints", stale_after),
            now: Instant::now(),
            flash: None,
            dialog: super::Dialog::default(),
            size: (80, 24),
            seen: std::collections::HashSet::new(),
            known: std::collections::HashSet::new(),
            bell_on_critical: false,
            arming: super::Arming::default(),
            autopilot: Default::default(),
            replay: super::Replay::new(source_name == "replay"),
            effects: Vec::new(),
            measure: None,
        }
    }

    /// The Xid catalog the console names Xids by (`--xid-catalog`).
    pub fn with_catalog(mut self, catalog: XidCatalog) -> App {
        self.catalog = catalog;
        self
    }

    /// The health numbers' book, shared with the analyst that feeds it.
    pub fn with_kpis(mut self, kpis: crate::engine::kpis::SharedKpis) -> App {
        self.kpis = kpis;
        self
    }

    /// Ring the terminal bell on a new critical incident.
    pub fn with_bell_on_critical(mut self, ring: bool) -> App {
        self.bell_on_critical = ring;
        self
    }

    /// A warning on the status line from the start (an interrupted action
    /// found in the audit log).
    pub fn with_warning(mut self, warning: String) -> App {
        self.flash = Some(warning);
        self
    }

    /// The app measured by the views (see [`Extent`]): without it nothing
    /// scrolls past the terminal.
    pub fn measured_by(mut self, measure: Measure) -> App {
        self.measure = Some(measure);
        self
    }

    /// The console watches several clusters: these are their names (this
    /// one among them), for `:ctx` and its completion.
    pub fn with_contexts(mut self, own: &str, names: Vec<String>) -> App {
        self.context = Some(own.to_string());
        self.contexts = names;
        self
    }
}
