//! One component per screen, in the gitui manner: `draw` reads the app and
//! draws. What a key means on a screen, its rows and its footer are its
//! kind's (`app/screens.rs`): nothing here changes state.

use super::theme::Theme;
use crate::app::{App, View};
use ratatui::Frame;
use ratatui::layout::Rect;

pub trait Component {
    fn draw(&self, f: &mut Frame, area: Rect, app: &App, theme: Theme);
    /// How far its own text scrolls in `body`: to its last line.
    fn max_scroll(&self, _app: &App, _body: Rect) -> u16 {
        0
    }
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

impl Component for OverviewScreen {
    fn draw(&self, f: &mut Frame, area: Rect, app: &App, theme: Theme) {
        super::overview::draw(f, area, app, theme)
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
}

impl Component for NodeScreen {
    fn draw(&self, f: &mut Frame, area: Rect, app: &App, theme: Theme) {
        super::detail::node(f, area, app, theme)
    }
}

impl Component for GpuScreen {
    fn draw(&self, f: &mut Frame, area: Rect, app: &App, theme: Theme) {
        super::detail::gpu(f, area, app, theme)
    }

    fn max_scroll(&self, app: &App, body: Rect) -> u16 {
        super::detail::gpu_max_scroll(app, body)
    }
}

impl Component for JobScreen {
    fn draw(&self, f: &mut Frame, area: Rect, app: &App, theme: Theme) {
        super::detail::job(f, area, app, theme)
    }

    fn max_scroll(&self, app: &App, body: Rect) -> u16 {
        super::detail::job_max_scroll(app, body)
    }
}
