//! What a key means on each screen, where the screen gives it a meaning
//! of its own (`None`: the keys every screen shares apply — moving,
//! paging, filtering, `esc`, `:`). Each answers an [`Intent`] for the app
//! to carry out; nothing here changes state.

use super::{App, Intent, Pane, View};
use crossterm::event::{KeyCode, KeyEvent};

/// The key `key` on the screen on top.
pub(crate) fn on_key(app: &App, key: KeyEvent) -> Option<Intent> {
    match app.screen().view {
        View::Overview => overview(app, key),
        View::Nodes | View::Gpus | View::Jobs | View::Queue | View::Incidents => list(app, key),
        View::NodeDetail => node(app, key),
        View::GpuDetail | View::JobDetail => open_or_scroll(app, key),
    }
}

/// The first screen: totals, the queue, open incidents, the node grid.
fn overview(app: &App, key: KeyEvent) -> Option<Intent> {
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

/// A list of nodes, GPUs, jobs (running or queued) or incidents.
fn list(app: &App, key: KeyEvent) -> Option<Intent> {
    match key.code {
        KeyCode::Enter => Some(open_selected(app)),
        // 1…9 sort by the first nine columns, 0 by the tenth; again
        // reverses.
        KeyCode::Char(d @ '0'..='9') => {
            let k = usize::from(d as u8 - b'0');
            Some(Intent::SortBy(if k == 0 { 9 } else { k - 1 }))
        }
        _ => None,
    }
}

/// One node: its answers, GPUs and jobs.
fn node(app: &App, key: KeyEvent) -> Option<Intent> {
    match key.code {
        // Between its GPUs and its jobs.
        KeyCode::Tab | KeyCode::BackTab => Some(Intent::SwitchPane),
        KeyCode::Enter => Some(open_selected(app)),
        _ => None,
    }
}

/// A detail screen's text scrolls to its last line (`pgdn` `pgup`
/// `ctrl-d` `ctrl-u`; `j` `k` too when it has no list to move in);
/// `enter` opens what it points at.
fn open_or_scroll(app: &App, key: KeyEvent) -> Option<Intent> {
    let page = i32::from(app.size.1.saturating_sub(6).max(1));
    let ctrl = key
        .modifiers
        .contains(crossterm::event::KeyModifiers::CONTROL);
    let has_rows = !app.rows.is_empty();
    Some(match key.code {
        KeyCode::Enter => open_selected(app),
        KeyCode::PageDown => Intent::Scroll(page),
        KeyCode::PageUp => Intent::Scroll(-page),
        KeyCode::Char('d') if ctrl => Intent::Scroll(page),
        KeyCode::Char('u') if ctrl => Intent::Scroll(-page),
        KeyCode::Down | KeyCode::Char('j') if !has_rows => Intent::Scroll(1),
        KeyCode::Up | KeyCode::Char('k') if !has_rows => Intent::Scroll(-1),
        _ => return None,
    })
}

/// `enter`: open what the selected row points at.
fn open_selected(app: &App) -> Intent {
    match app.drill_target() {
        Some(s) => Intent::Open(s),
        None => Intent::Flash("nothing to open here".into()),
    }
}
