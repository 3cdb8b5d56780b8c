//! Detail views: one node, one GPU, one job — a module each; the helpers
//! they share live here.

pub mod gpu;
pub mod job;
pub mod node;

pub use gpu::{gpu, max_scroll as gpu_max_scroll};
pub use job::{job, max_scroll as job_max_scroll};
pub use node::node;

use super::theme::Theme;
use crate::text::sanitize;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, SparklineBar};

pub(super) fn missing(f: &mut Frame, area: Rect, theme: Theme, what: &str, target: Option<&str>) {
    let msg = format!(
        "{what} {} is not in the current data",
        sanitize(target.unwrap_or("?"))
    );
    f.render_widget(Paragraph::new(Line::styled(msg, theme.warn())), area);
}

pub(super) fn kv(k: &str, v: String, theme: Theme) -> Vec<Span<'static>> {
    vec![
        Span::styled(format!("{k} "), theme.dim()),
        Span::raw(format!("{v}  ")),
    ]
}

/// Sparkline bars from a percent history; unknown readings leave a gap.
pub(super) fn bars(series: Option<&crate::app::history::Series>, width: u16) -> Vec<SparklineBar> {
    let Some(s) = series else { return Vec::new() };
    let skip = s.len().saturating_sub(width as usize);
    s.iter()
        .skip(skip)
        .map(|v| SparklineBar::from(v.map(u64::from)))
        .collect()
}
