//! The panels over the screen (help, the message log, the health
//! numbers): opening one, and its keys while it is open.

use super::{App, Effect, Overlay};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

impl App {
    /// Opens `o` at its top; the numbers' figures are computed now, never
    /// while drawing.
    pub(crate) fn open_overlay(&mut self, o: Overlay) {
        self.overlay = Some(o);
        self.overlay_scroll = 0;
        if matches!(o, Overlay::Kpis { .. }) {
            self.refresh_kpi_figures();
        }
    }

    /// A key while a panel is open: scroll keys scroll it; any other key
    /// closes it; q still quits.
    pub(crate) fn on_overlay_key(&mut self, key: KeyEvent) {
        let page = self.size.1.saturating_sub(6).max(1);
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let by: Option<i32> = match key.code {
            KeyCode::Down | KeyCode::Char('j') if !ctrl => Some(1),
            KeyCode::Up | KeyCode::Char('k') if !ctrl => Some(-1),
            KeyCode::PageDown => Some(i32::from(page)),
            KeyCode::Char('d') if ctrl => Some(i32::from(page)),
            KeyCode::PageUp => Some(-i32::from(page)),
            KeyCode::Char('u') if ctrl => Some(-i32::from(page)),
            KeyCode::Home | KeyCode::Char('g') => Some(-10_000),
            KeyCode::End | KeyCode::Char('G') => Some(10_000),
            _ => None,
        };
        if let Some(d) = by {
            let max = i32::from(self.extent().overlay);
            self.overlay_scroll = (i32::from(self.overlay_scroll) + d).clamp(0, max) as u16;
            return;
        }
        self.overlay_scroll = 0;
        self.overlay = None;
        if key.code == KeyCode::Char('q') {
            self.emit(Effect::Quit);
        }
    }
}
