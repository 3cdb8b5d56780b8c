//! The first screen: headline numbers, the node grid, the newest incidents.

use super::table::offset;
use super::theme::Theme;
use crate::app::App;
use crate::engine::incidents::IncidentKind;
use crate::model::{GpuHealth, NodeState};
use crate::text::{self, sanitize};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Sparkline};

/// Characters after a node's GPU glyphs: a space and its mark (`x79`, `drain`).
const MARK_W: usize = crate::app::GRID_MARK_W;

pub fn draw(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let cols = grid_columns(app, area.width.saturating_sub(2));
    // The grid: its rows plus a partition line, a domain line (when nodes
    // have domains) and borders; the incidents panel keeps at least 7
    // lines (5 incidents), first on the screen.
    let grid_rows = app.nav.grid.len().div_ceil(cols).max(1) as u16
        + 3
        + u16::from(!app.index.domains.is_empty());
    let incidents_h = (open_incidents(app) as u16 + 3).clamp(5, 9);
    // The selected incident's words whole, under its row (the table cuts
    // its last column at 80 and 120 columns).
    let whole = selected_incident_whole(app, theme, area.width);
    let whole_h = super::wrapped_height(&whole, area.width).min(3);
    let [summary, incidents, whole_area, grid] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Length(incidents_h),
        Constraint::Length(if whole.is_empty() { 0 } else { whole_h }),
        Constraint::Max(grid_rows),
    ])
    .areas(area);
    draw_summary(f, summary, app, theme);
    draw_incidents(f, incidents, app, theme);
    f.render_widget(
        Paragraph::new(whole).wrap(ratatui::widgets::Wrap { trim: false }),
        whole_area,
    );
    draw_grid(f, grid, app, theme);
}

/// The incident the cursor is on (the newest while the grid has the
/// focus): its node, event and what → status, whole, wrapped.
fn selected_incident_whole(app: &App, theme: Theme, width: u16) -> Vec<Line<'static>> {
    let focused = app.screen().pane == crate::app::Pane::First;
    let at = if focused { app.screen().selected } else { 0 };
    let Some(i) = app
        .analysis
        .as_ref()
        .and_then(|a| a.base.incidents.iter().filter(|i| i.is_open()).nth(at))
    else {
        return Vec::new();
    };
    let ctx = app.columns_ctx();
    let what = crate::columns::INCIDENTS
        .iter()
        .find(|c| c.name.starts_with("WHAT"))
        .map(|c| (c.cell)(&ctx, i).text)
        .unwrap_or_default();
    let gpu = i.gpu.map_or(String::new(), |g| format!(" GPU {g}"));
    super::hang(
        vec![Line::from(vec![
            Span::styled(
                format!(
                    " ▸ {}{gpu} {}: ",
                    sanitize(&i.node),
                    sanitize(&i.full_label())
                ),
                theme.title(),
            ),
            Span::raw(sanitize(&what).into_owned()),
        ])],
        width,
    )
}

fn open_incidents(app: &App) -> usize {
    app.analysis.as_ref().map_or(0, |a| {
        a.base.incidents.iter().filter(|i| i.is_open()).count()
    })
}

/// Per partition, in the header's words: GPUs in all, allocated, critical
/// (GPUs whose own health says take them out: one bad GPU is one, not its
/// node's eight) and unavailable (not allocated, on nodes out of service).
/// The narrowest failure domains (leaf switches, racks), a failing one
/// first and marked, each with its free GPUs: `ib-leaf-2 FAILING 4 links
/// down │ ib-leaf-1 0 free │ …`. None when no node has a domain.
fn domain_line(app: &App, theme: Theme) -> Option<Line<'static>> {
    let ds = &app.index.domains;
    let first = ds.first()?;
    let failing = |name: &str| {
        app.analysis.as_ref().is_some_and(|a| {
            a.base
                .incidents
                .iter()
                .any(|i| i.kind == IncidentKind::Domain && i.is_open() && i.node == name)
        })
    };
    let mut order: Vec<&crate::engine::fabric::DomainView> = ds.iter().collect();
    order.sort_by_key(|d| (!failing(&d.name), d.ports_down == 0));
    let mut spans = vec![Span::styled(format!("{} ", first.level), theme.dim())];
    for (k, d) in order.iter().enumerate() {
        if k > 0 {
            spans.push(Span::styled(" │ ", theme.dim()));
        }
        spans.push(Span::styled(sanitize(&d.name).into_owned(), theme.title()));
        if failing(&d.name) {
            spans.push(Span::styled(" FAILING", theme.critical()));
        }
        if d.ports_down > 0 {
            spans.push(Span::styled(
                format!(" {} link(s) down", d.ports_down),
                theme.critical(),
            ));
        }
        spans.push(Span::raw(format!(" {}/{} free", d.gpus_free, d.gpus_total)));
    }
    Some(Line::from(spans))
}

fn partition_line(app: &App, theme: Theme) -> Line<'static> {
    let c = &app.cluster;
    let base = app.analysis.as_ref().map(|a| &a.base);
    let mut spans = Vec::new();
    // The sums come with the snapshot; only the unusable nodes (few) are
    // looked at per frame, GPU by GPU.
    for p in &app.index.partition_gpus {
        let mut critical = 0u32;
        for name in base.iter().flat_map(|b| b.unusable.iter()) {
            let Some(n) = app.index.node(c, name).and_then(|i| c.nodes.get(i)) else {
                continue;
            };
            if n.partitions.contains(&p.name) {
                critical += n
                    .gpus
                    .iter()
                    .filter(|g| {
                        base.is_some_and(|b| {
                            b.gpu_severity(&n.name, g.index) == GpuHealth::Critical
                        })
                    })
                    .count() as u32;
            }
        }
        spans.push(Span::styled(
            format!("{} ", sanitize(&p.name)),
            theme.title(),
        ));
        spans.push(Span::raw(format!("{}/{} alloc ", p.allocated, p.total)));
        spans.push(Span::styled(
            format!("{critical} critical "),
            if critical > 0 {
                theme.critical()
            } else {
                theme.dim()
            },
        ));
        spans.push(Span::styled(
            format!("{} unavail", p.out),
            if p.out > 0 { theme.warn() } else { theme.dim() },
        ));
        spans.push(Span::styled(" │ ", theme.dim()));
    }
    spans.pop();
    Line::from(spans)
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
    // The incidents the table below lists: open ones, and how many of
    // them began in the last hour (events were counted here before, a
    // number no row matched).
    let (open, recent) = app.analysis.as_ref().map_or((0, 0), |a| {
        let open: Vec<_> = a.base.incidents.iter().filter(|i| i.is_open()).collect();
        let recent = open.iter().filter(|i| i.time >= now - 3600).count();
        (open.len(), recent)
    });
    let l3 = Line::from(vec![
        Span::styled(" Incidents ", theme.title()),
        Span::styled(
            format!("{open} open, {recent} of them begun in the last hour"),
            if open > 0 {
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
    // The scale in numbers: a steady queue is a flat line at its height.
    // The queue now is the snapshot's (the chart samples less often).
    let now = s.jobs_pending as u64;
    let max = tail.iter().copied().max().unwrap_or(0).max(now);
    let spark = Sparkline::default()
        .block(super::chart_block(
            format!(" queue {now} (max {max}) "),
            &app.history.span(tail.len()),
            theme,
        ))
        .data(tail)
        .max(max.max(1))
        .style(theme.warn());
    f.render_widget(spark, spark_area);
}

/// Each node as `name ▆▆▆X▆▆▆▆ x79`: one glyph per GPU (height = SM
/// occupancy, X = critical, ! = warning, · idle, - unavailable), then a mark
/// for the node's last Xid or state.
fn draw_grid(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let c = &app.cluster;
    let inner_w = area.width.saturating_sub(2);
    // One line for the partitions, one for the domains (when nodes have
    // them), the rest for the grid.
    let domains = domain_line(app, theme);
    let visible_rows = area.height.saturating_sub(3 + u16::from(domains.is_some())) as usize;
    let (name_w, gpus_w) = cell_widths(app);
    let cols = grid_columns(app, inner_w);
    let focused = app.screen().pane == crate::app::Pane::Second;
    let sel = if focused {
        app.screen().selected
    } else {
        usize::MAX
    };
    let first_row = offset(if focused { sel / cols } else { 0 }, visible_rows);
    let total = app.nav.grid.len();
    let last = ((first_row + visible_rows) * cols).min(total);
    let position = if total == 0 {
        "no nodes".to_string()
    } else {
        format!("{}-{last} of {total}", first_row * cols + 1)
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(if focused { theme.title() } else { theme.dim() })
        .title(Line::styled(
            format!(" nodes {position}, problems first (tab) "),
            theme.title(),
        ))
        .title_bottom(Line::styled(
            " ▁▅█ SM occupancy  X critical  ! warning  · idle  - unavailable ",
            theme.dim(),
        ));
    let inner = block.inner(area);
    f.render_widget(block, area);
    let mut lines = Vec::with_capacity(visible_rows + 2);
    lines.push(partition_line(app, theme));
    lines.extend(domains);
    for r in first_row..first_row + visible_rows {
        let mut spans = Vec::new();
        for k in 0..cols {
            let i = r * cols + k;
            let Some(&n) = app.nav.grid.get(i) else {
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
            // Out of service: its state (a cordoned node read by its Xid).
            // In service: the Xid of the incident the analysis names for it
            // (its DBE's 48, not the 63 the remap left after), else its
            // last Xid (issue 39).
            let incident_xid = app
                .analysis
                .as_ref()
                .and_then(|a| a.base.node_incident(&node.name))
                .and_then(|i| i.xid);
            let xid = incident_xid.or_else(|| node.last_xid().map(|(_, x)| x.code));
            // A node no scheduler reports (an endpoint's only) is not out
            // of service: its Xid too.
            let (mark, style) = match (node.state, xid) {
                (NodeState::Up | NodeState::Unknown, Some(code)) => {
                    (format!("x{code}"), theme.critical())
                }
                (NodeState::Up, None) => (String::new(), theme.dim()),
                (s, _) => (s.short().to_string(), theme.node_state(s)),
            };
            // A space after the mark: `cordon` ran into the next name.
            spans.push(Span::styled(format!("{mark:<w$} ", w = MARK_W - 2), style));
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
    crate::app::grid_columns(&app.index, width)
}

/// The open incidents with what to do, selectable (the first focus of the
/// first screen): `enter` opens the node, `D` drains it.
fn draw_incidents(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let focused = app.screen().pane == crate::app::Pane::First;
    let rows: Vec<usize> = app
        .analysis
        .as_ref()
        .map(|a| {
            a.base
                .incidents
                .iter()
                .enumerate()
                .filter(|(_, i)| i.is_open())
                .map(|(k, _)| k)
                .collect()
        })
        .unwrap_or_default();
    let unread = |i: usize| {
        rows.get(i)
            .and_then(|&k| app.incident(k))
            .is_some_and(|x| app.is_unread(x))
    };
    let list = super::table::Columns {
        title: format!(
            "open incidents (:incidents){}",
            if focused { "" } else { " — tab" }
        ),
        cols: crate::columns::INCIDENTS,
        skip: &["STAGE"],
        len: rows.len(),
        selected: focused.then_some(app.screen().selected),
        focused,
        sort: None,
        emphasis: Some(&unread),
    };
    super::table::draw_columns(f, area, theme, &app.columns_ctx(), list, |i| {
        rows.get(i).and_then(|&k| app.incident(k))
    });
}
