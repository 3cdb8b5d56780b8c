//! What the views read of the App: the snapshot, the analysis, the
//! index, the clock, the status line and its messages, the overlay and the
//! health numbers.

use super::{App, Index, Overlay, Said};
use crate::engine::analysis::Analysis;
use crate::model::Cluster;
use std::sync::Arc;
use std::time::Instant;

/// Keys and what they do, as a footer names them.
pub type KeyHints = &'static [(&'static str, &'static str)];

impl App {
    /// The screen's footer keys: its hints, and the action keys that apply
    /// on it (none in read-only mode; a recording's own keys while one
    /// plays).
    pub fn footer_keys(&self) -> (KeyHints, KeyHints) {
        const REPLAY: &[(&str, &str)] = &[
            ("space", "pause"),
            (">", "faster"),
            ("<", "slower"),
            ("n", "next incident"),
            (":at", "time"),
        ];
        let kind = self.screen().view.kind();
        let actions = if self.replay.on {
            REPLAY
        } else if self.read_only {
            &[]
        } else {
            kind.actions()
        };
        (kind.hints(), actions)
    }

    /// The snapshot shown.
    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    /// The engine's answers for it (or a slightly older snapshot).
    pub fn analysis(&self) -> Option<&Arc<Analysis>> {
        self.analysis.as_ref()
    }

    /// The snapshot's lookups (nodes by name, jobs on a node).
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// The clock the console last looked at.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The status line's message.
    pub fn flash(&self) -> Option<&str> {
        self.flash.as_deref()
    }

    /// Every status message kept, oldest first, with when it was said.
    pub fn messages(&self) -> &std::collections::VecDeque<(Said, String)> {
        &self.messages
    }

    /// The panel over the screen, and how far it is scrolled.
    pub fn overlay(&self) -> (Option<Overlay>, u16) {
        (self.overlay, self.overlay_scroll)
    }

    /// The health numbers' book, and the `:kpis` panel's figures.
    pub fn kpis(
        &self,
    ) -> (
        &crate::engine::kpis::SharedKpis,
        Option<&crate::engine::kpis::Kpis>,
    ) {
        (&self.kpis, self.kpi_figures.as_ref())
    }
}
