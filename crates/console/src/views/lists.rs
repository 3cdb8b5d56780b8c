//! The list views: nodes, GPUs, jobs and the queue, incidents — each drawn
//! from its column specification (src/columns.rs), which also filters and
//! sorts it.

use super::table::{self, Columns};
use super::theme::Theme;
use crate::app::{App, Row, View};
use crate::columns;
use crate::text::sanitize;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Sparkline, Wrap};

fn title(app: &App, name: &str) -> String {
    let f = &app.screen().filter;
    if f.is_empty() {
        name.to_string()
    } else {
        format!("{name} /{}", sanitize(f))
    }
}

fn list<'a, T>(app: &App, name: &str, cols: &'a [columns::Column<T>]) -> Columns<'a, T> {
    Columns {
        title: title(app, name),
        cols,
        skip: &[],
        len: app.nav.rows.len(),
        selected: Some(app.screen().selected),
        focused: true,
        sort: app.screen().sort,
        emphasis: None,
    }
}

pub fn nodes(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let c = &app.cluster;
    table::draw_columns(
        f,
        area,
        theme,
        &app.columns_ctx(),
        list(app, "nodes", columns::NODES),
        |i| match app.nav.rows.get(i) {
            Some(Row::Node(n)) => c.nodes.get(*n).map(|n| &**n),
            _ => None,
        },
    );
}

pub fn gpus(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let c = &app.cluster;
    table::draw_columns(
        f,
        area,
        theme,
        &app.columns_ctx(),
        list(app, "gpus", columns::GPUS),
        |i| match app.nav.rows.get(i) {
            Some(Row::Gpu(n, g)) => c.nodes.get(*n).and_then(|n| n.gpus.get(*g)),
            _ => None,
        },
    );
}

pub fn jobs(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let c = &app.cluster;
    let queue = app.screen().view == View::Queue;
    let area = if queue {
        let [spark, rest] =
            Layout::vertical([Constraint::Length(4), Constraint::Min(3)]).areas(area);
        let q: Vec<u64> = app.history.queue_len.iter().copied().collect();
        let tail = &q[q
            .len()
            .saturating_sub(spark.width.saturating_sub(2) as usize)..];
        let max = tail.iter().copied().max().unwrap_or(0);
        let title = format!(
            " pending jobs: now {}, max {max}, min {} ",
            tail.last().copied().unwrap_or(0),
            tail.iter().copied().min().unwrap_or(0)
        );
        f.render_widget(
            Sparkline::default()
                .block(super::chart_block(
                    title,
                    &app.history.span(tail.len()),
                    theme,
                ))
                .data(tail)
                .max(max.max(1))
                .style(theme.warn()),
            spark,
        );
        rest
    } else {
        area
    };
    let name = if queue {
        "queue (scheduler order)"
    } else {
        "jobs"
    };
    table::draw_columns(
        f,
        area,
        theme,
        &app.columns_ctx(),
        list(app, name, columns::JOBS),
        |i| match app.nav.rows.get(i) {
            Some(Row::Job(j)) => c.jobs.get(*j).map(|j| &**j),
            _ => None,
        },
    );
}

pub fn incidents(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    // Under the table, the selected incident whole: its advice is never cut.
    let selected = match app.selected_row() {
        Some(Row::Incident(k)) => app.incident(k),
        _ => None,
    };
    let area = match selected {
        Some(inc) => {
            let lines = incident_lines(app, inc, theme);
            let inner = area.width.saturating_sub(2).max(1);
            let h: u16 = lines
                .iter()
                .map(|l| (l.width().max(1) as u16).div_ceil(inner))
                .sum::<u16>()
                .min(area.height / 2)
                + 2;
            let [table_area, pane] =
                Layout::vertical([Constraint::Min(5), Constraint::Length(h)]).areas(area);
            f.render_widget(
                Paragraph::new(lines).wrap(Wrap { trim: false }).block(
                    Block::default()
                        .borders(Borders::ALL)
                        .border_style(theme.dim())
                        .title(Line::styled(
                            // No action key where none acts (a replay,
                            // read-only): issue 39.
                            if app.replay.on || app.read_only {
                                " selected (enter: node) "
                            } else {
                                " selected (enter: node, D: drain) "
                            },
                            theme.title(),
                        )),
                ),
                pane,
            );
            table_area
        }
        None => area,
    };
    let unread = |i: usize| match app.nav.rows.get(i) {
        Some(Row::Incident(k)) => app.incident(*k).is_some_and(|x| app.is_unread(x)),
        _ => false,
    };
    let mut l = list(
        app,
        "incidents (newest first; bold: not opened yet)",
        columns::INCIDENTS,
    );
    l.emphasis = Some(&unread);
    table::draw_columns(f, area, theme, &app.columns_ctx(), l, |i| {
        match app.nav.rows.get(i) {
            Some(Row::Incident(k)) => app.incident(*k),
            _ => None,
        }
    });
}

/// An incident in full, for the pane under a list: what, what to do, who.
pub(super) fn incident_lines(
    app: &App,
    inc: &crate::engine::incidents::Incident,
    theme: Theme,
) -> Vec<Line<'static>> {
    let mut lines = vec![
        Line::from(vec![
            Span::styled(
                format!("{} ", inc.short_label()),
                theme.health(inc.severity),
            ),
            Span::raw(format!(
                "on {}{} at {}: {}",
                sanitize(&inc.node),
                inc.gpu.map_or(String::new(), |g| format!(" GPU {g}")),
                crate::text::clock(inc.time),
                sanitize(&inc.message)
            )),
        ]),
        Line::from(vec![
            Span::styled(
                format!("[{}] ", inc.stage.as_str()),
                theme.action(inc.action),
            ),
            Span::raw(sanitize(&inc.status).into_owned()),
        ]),
    ];
    if let Some(line) = app.autopilot_on(&inc.id) {
        lines.push(Line::from(vec![
            Span::styled("autopilot: ", theme.badge()),
            Span::raw(sanitize(&line).into_owned()),
        ]));
    }
    if !inc.jobs.is_empty() {
        lines.push(Line::from(vec![
            Span::styled("hit: ", theme.dim()),
            Span::raw(sanitize(&columns::incident_jobs(inc)).into_owned()),
        ]));
    }
    for e in inc.evidence.iter().take(2) {
        lines.push(Line::styled(format!("· {}", sanitize(e)), theme.dim()));
    }
    lines
}
