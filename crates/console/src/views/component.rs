//! One component per screen, in the gitui manner: `draw` reads the app and
//! draws; `on_key` says what a key means on this screen, as a message for
//! the app to carry out (`None`: the keys every screen shares apply —
//! moving, paging, filtering, `esc`, `:`). Nothing here changes state.

use super::theme::Theme;
use crate::app::{App, Msg, Pane, View};
use crossterm::event::{KeyCode, KeyEvent};
use ratatui::Frame;
use ratatui::layout::Rect;

pub trait Component {
    fn draw(&self, f: &mut Frame, area: Rect, app: &App, theme: Theme);
    fn on_key(&self, app: &App, key: KeyEvent) -> Option<Msg>;
}

/// The first screen: totals, the queue, open incidents, the node grid.
pub struct OverviewScreen;
/// A list of nodes, GPUs, jobs (running or queued) or incidents.
pub struct ListScreen(pub View);
/// One node: its answers, GPUs and jobs.
pub struct NodeScreen;
/// One GPU: its readings, verdict and history.
pub struct GpuScreen;
/// One job: where it runs, why it waits, what it costs.
pub struct JobScreen;

/// The component that draws `view`.
pub fn for_view(view: View) -> Box<dyn Component> {
    match view {
        View::Overview => Box::new(OverviewScreen),
        View::Nodes | View::Gpus | View::Jobs | View::Queue | View::Incidents => {
            Box::new(ListScreen(view))
        }
        View::NodeDetail => Box::new(NodeScreen),
        View::GpuDetail => Box::new(GpuScreen),
        View::JobDetail => Box::new(JobScreen),
    }
}

/// A detail screen's text scrolls to its last line (`pgdn` `pgup`
/// `ctrl-d` `ctrl-u`; `j` `k` too when it has no list to move in);
/// `enter` opens what it points at.
fn open_or_scroll(app: &App, key: KeyEvent) -> Option<Msg> {
    let page = i32::from(app.size.1.saturating_sub(6).max(1));
    let ctrl = key
        .modifiers
        .contains(crossterm::event::KeyModifiers::CONTROL);
    let has_rows = !app.rows.is_empty();
    Some(match key.code {
        KeyCode::Enter => open_selected(app),
        KeyCode::PageDown => Msg::Scroll(page),
        KeyCode::PageUp => Msg::Scroll(-page),
        KeyCode::Char('d') if ctrl => Msg::Scroll(page),
        KeyCode::Char('u') if ctrl => Msg::Scroll(-page),
        KeyCode::Down | KeyCode::Char('j') if !has_rows => Msg::Scroll(1),
        KeyCode::Up | KeyCode::Char('k') if !has_rows => Msg::Scroll(-1),
        _ => return None,
    })
}

/// `enter`: open what the selected row points at.
fn open_selected(app: &App) -> Msg {
    match app.drill_target() {
        Some(s) => Msg::Open(s),
        None => Msg::Flash("nothing to open here".into()),
    }
}

impl Component for OverviewScreen {
    fn draw(&self, f: &mut Frame, area: Rect, app: &App, theme: Theme) {
        super::overview::draw(f, area, app, theme)
    }

    fn on_key(&self, app: &App, key: KeyEvent) -> Option<Msg> {
        let sel = app.screen().selected;
        let grid = app.screen().pane == Pane::Second;
        let cols = app.grid_columns();
        Some(match key.code {
            KeyCode::Tab | KeyCode::BackTab => Msg::SwitchPane,
            KeyCode::Enter => open_selected(app),
            // On the node grid, down and up move by a row, as everywhere.
            KeyCode::Down | KeyCode::Char('j') if grid => Msg::Select(sel.saturating_add(cols)),
            KeyCode::Up | KeyCode::Char('k') if grid => Msg::Select(sel.saturating_sub(cols)),
            KeyCode::Right | KeyCode::Char('l') if grid => Msg::Select(sel.saturating_add(1)),
            KeyCode::Left | KeyCode::Char('h') if grid => Msg::Select(sel.saturating_sub(1)),
            _ => return None,
        })
    }
}

impl Component for ListScreen {
    fn draw(&self, f: &mut Frame, area: Rect, app: &App, theme: Theme) {
        match self.0 {
            View::Nodes => super::lists::nodes(f, area, app, theme),
            View::Gpus => super::lists::gpus(f, area, app, theme),
            View::Incidents => super::lists::incidents(f, area, app, theme),
            _ => super::lists::jobs(f, area, app, theme),
        }
    }

    fn on_key(&self, app: &App, key: KeyEvent) -> Option<Msg> {
        match key.code {
            KeyCode::Enter => Some(open_selected(app)),
            // 1…9 sort by the first nine columns, 0 by the tenth; again
            // reverses.
            KeyCode::Char(d @ '0'..='9') => {
                let k = usize::from(d as u8 - b'0');
                Some(Msg::SortBy(if k == 0 { 9 } else { k - 1 }))
            }
            _ => None,
        }
    }
}

impl Component for NodeScreen {
    fn draw(&self, f: &mut Frame, area: Rect, app: &App, theme: Theme) {
        super::detail::node(f, area, app, theme)
    }

    fn on_key(&self, app: &App, key: KeyEvent) -> Option<Msg> {
        match key.code {
            // Between its GPUs and its jobs.
            KeyCode::Tab | KeyCode::BackTab => Some(Msg::SwitchPane),
            KeyCode::Enter => Some(open_selected(app)),
            _ => None,
        }
    }
}

impl Component for GpuScreen {
    fn draw(&self, f: &mut Frame, area: Rect, app: &App, theme: Theme) {
        super::detail::gpu(f, area, app, theme)
    }

    fn on_key(&self, app: &App, key: KeyEvent) -> Option<Msg> {
        open_or_scroll(app, key)
    }
}

impl Component for JobScreen {
    fn draw(&self, f: &mut Frame, area: Rect, app: &App, theme: Theme) {
        super::detail::job(f, area, app, theme)
    }

    fn on_key(&self, app: &App, key: KeyEvent) -> Option<Msg> {
        open_or_scroll(app, key)
    }
}
