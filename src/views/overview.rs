//! The first screen: headline numbers, the node grid, the newest incidents.

use super::table::offset;
use super::theme::Theme;
use crate::app::{App, Row};
use crate::model::{GpuHealth, NodeState};
use crate::text::{self, sanitize};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Sparkline};

/// Characters after a node's GPU glyphs: a space and its mark (`x79`, `drain`).
const MARK_W: usize = 7;

pub fn draw(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let cols = grid_columns(app, area.width.saturating_sub(2));
    let grid_rows = app.rows.len().div_ceil(cols).max(1) as u16 + 2;
    let [summary, grid, incidents] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Max(grid_rows),
        Constraint::Min(3),
    ])
    .areas(area);
    draw_summary(f, summary, app, theme);
    draw_grid(f, grid, app, theme);
    draw_incidents(f, incidents, app, theme);
}

fn draw_summary(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let s = &app.index.summary;
    let now = app.cluster.time;
    let l1 = Line::from(vec![
        Span::styled(" GPUs ", theme.title()),
        Span::raw(format!("{}  ", s.gpus_total)),
        Span::styled(format!("alloc {}", s.gpus_allocated), theme.ok()),
        Span::raw(format!("  idle {}  ", s.gpus_idle)),
        Span::styled(
            format!("unavail {}", s.gpus_unavailable),
            if s.gpus_unavailable > 0 {
                theme.warn()
            } else {
                theme.dim()
            },
        ),
        Span::raw(format!("  util {}", text::percent(s.utilization))),
    ]);
    let l2 = Line::from(vec![
        Span::styled(" Jobs ", theme.title()),
        Span::raw(format!(
            "{} running  {} pending  longest wait {}",
            s.jobs_running,
            s.jobs_pending,
            s.longest_wait_s(now).map_or("-".into(), text::duration)
        )),
    ]);
    let recent = s.recent_events;
    let l3 = Line::from(vec![
        Span::styled(" Incidents ", theme.title()),
        Span::styled(
            format!("{recent} in the last hour"),
            if recent > 0 {
                theme.critical()
            } else {
                theme.dim()
            },
        ),
    ]);
    let [text_area, spark_area] =
        Layout::horizontal([Constraint::Min(40), Constraint::Length(26)]).areas(area);
    f.render_widget(Paragraph::new(vec![l1, l2, l3]), text_area);
    let q: Vec<u64> = app.history.queue_len.iter().copied().collect();
    let tail = &q[q
        .len()
        .saturating_sub(spark_area.width.saturating_sub(2) as usize)..];
    let spark = Sparkline::default()
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title(" queue ")
                .border_style(theme.dim()),
        )
        .data(tail)
        .style(theme.warn());
    f.render_widget(spark, spark_area);
}

/// Each node as `name ▆▆▆X▆▆▆▆ x79`: one glyph per GPU (height = SM
/// occupancy, X = critical, ! = warning, · idle, - unavailable), then a mark
/// for the node's last Xid or state.
fn draw_grid(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let c = &app.cluster;
    let inner_w = area.width.saturating_sub(2);
    let visible_rows = area.height.saturating_sub(2) as usize;
    let (name_w, gpus_w) = cell_widths(app);
    let cols = grid_columns(app, inner_w);
    let sel = app.screen().selected;
    let first_row = offset(sel / cols, visible_rows);
    let total = app.rows.len();
    let last = ((first_row + visible_rows) * cols).min(total);
    let position = if total == 0 {
        "no nodes".to_string()
    } else {
        format!("{}-{last} of {total}", first_row * cols + 1)
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.dim())
        .title(Line::styled(format!(" nodes {position} "), theme.title()))
        .title_bottom(Line::styled(
            " ▁▅█ SM occupancy  X critical  ! warning  · idle  - unavailable ",
            theme.dim(),
        ));
    let inner = block.inner(area);
    f.render_widget(block, area);
    let mut lines = Vec::with_capacity(visible_rows);
    for r in first_row..first_row + visible_rows {
        let mut spans = Vec::new();
        for k in 0..cols {
            let i = r * cols + k;
            let Some(Row::Node(n)) = app.rows.get(i).copied() else {
                break;
            };
            let node = &c.nodes[n];
            let critical = app.node_severity(&node.name) == GpuHealth::Critical;
            let mut name_style = if critical {
                theme.critical()
            } else {
                theme.node_state(node.state)
            };
            if node.state == NodeState::Up && !critical {
                name_style = ratatui::style::Style::default();
            }
            if i == sel {
                name_style = name_style.patch(theme.selected());
            }
            let name: String = sanitize(&node.name).chars().take(name_w).collect();
            spans.push(Span::styled(format!("{name:<name_w$}"), name_style));
            spans.push(Span::raw(" "));
            for g in &node.gpus {
                let health = app.gpu_severity(&node.name, g.index);
                let (glyph, style) = theme.gpu_cell(g, health, node.state.schedulable());
                spans.push(Span::styled(glyph.to_string(), style));
            }
            spans.push(Span::raw(" ".repeat(gpus_w - node.gpus.len() + 1)));
            let (mark, style) = match (node.last_xid(), node.state) {
                (Some((_, x)), _) => (format!("x{}", x.code), theme.critical()),
                (None, NodeState::Up) => (String::new(), theme.dim()),
                (None, s) => (s.short().to_string(), theme.node_state(s)),
            };
            spans.push(Span::styled(format!("{mark:<w$}", w = MARK_W - 1), style));
        }
        if spans.is_empty() {
            break;
        }
        lines.push(Line::from(spans));
    }
    f.render_widget(Paragraph::new(lines), inner);
}

/// Widest node name (capped) and most GPUs on a node.
/// Grid cell widths, measured once per snapshot (see `Index`).
fn cell_widths(app: &App) -> (usize, usize) {
    (
        app.index.longest_node_name.clamp(4, 24),
        app.index.most_gpus_on_a_node.max(1),
    )
}

fn grid_columns(app: &App, width: u16) -> usize {
    let (name_w, gpus_w) = cell_widths(app);
    (width as usize / (name_w + 1 + gpus_w + MARK_W)).max(1)
}

fn draw_incidents(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let c = &app.cluster;
    let n = area.height.saturating_sub(2) as usize;
    let lines: Vec<Line> = c
        .events
        .iter()
        .rev()
        .take(n)
        .map(|e| {
            let style = theme.health(app.event_severity(e));
            Line::from(vec![
                Span::styled(format!(" {} ", text::clock(e.time)), theme.dim()),
                Span::styled(format!("{:<14}", e.label()), style),
                Span::raw(format!(
                    "{} {} {}",
                    sanitize(&e.node),
                    e.gpu.map_or(String::new(), |g| format!("gpu{g}")),
                    sanitize(&e.message)
                )),
            ])
        })
        .collect();
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.dim())
        .title(Line::styled(
            " newest incidents (:incidents) ",
            theme.title(),
        ));
    f.render_widget(Paragraph::new(lines).block(block), area);
}
