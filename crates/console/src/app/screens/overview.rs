//! The first screen: totals, the queue, open incidents, the node grid.

use super::{App, Intent, Kind, NODE_ACTIONS, Pane, Row, Screen, open_selected};
use crossterm::event::{KeyCode, KeyEvent};

pub(crate) struct Overview;

impl Kind for Overview {
    fn title(&self) -> &'static str {
        "overview"
    }

    fn commands(&self) -> &'static [&'static str] {
        &["overview", "ov", "home", "cluster"]
    }

    fn on_key(&self, app: &App, key: KeyEvent) -> Option<Intent> {
        let sel = app.screen().selected;
        let grid = app.screen().pane == Pane::Second;
        let cols = app.grid_columns();
        Some(match key.code {
            KeyCode::Tab | KeyCode::BackTab => Intent::SwitchPane,
            KeyCode::Enter => open_selected(app),
            // On the node grid, down and up move by a row, as everywhere.
            KeyCode::Down | KeyCode::Char('j') if grid => Intent::Select(sel.saturating_add(cols)),
            KeyCode::Up | KeyCode::Char('k') if grid => Intent::Select(sel.saturating_sub(cols)),
            KeyCode::Right | KeyCode::Char('l') if grid => Intent::Select(sel.saturating_add(1)),
            KeyCode::Left | KeyCode::Char('h') if grid => Intent::Select(sel.saturating_sub(1)),
            _ => return None,
        })
    }

    fn shows_grid(&self) -> bool {
        true
    }

    /// The open incidents (first pane) or the grid's nodes (second).
    fn rows(&self, app: &App, s: &Screen) -> Vec<Row> {
        if s.pane == Pane::First {
            app.open_incident_rows()
        } else {
            app.nav.grid.iter().map(|&n| Row::Node(n)).collect()
        }
    }

    fn actions(&self) -> &'static [(&'static str, &'static str)] {
        NODE_ACTIONS
    }
}
