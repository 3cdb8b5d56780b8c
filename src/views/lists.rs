//! The list views: nodes, GPUs, jobs and the queue, incidents.

use super::table::{self, List};
use super::theme::Theme;
use crate::app::{App, Row, View};
use crate::engine::incidents::Stage;
use crate::model::{Gpu, GpuHealth, Job};
use crate::text::{self, sanitize};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::widgets::{Block, Borders, Cell, Sparkline};

fn title(app: &App, name: &str) -> String {
    let f = &app.screen().filter;
    if f.is_empty() {
        name.to_string()
    } else {
        format!("{name} /{}", sanitize(f))
    }
}

pub fn nodes(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let c = &app.cluster;
    let list = List {
        title: title(app, "nodes"),
        header: &[
            "NAME", "PART", "STATE", "GPUS", "SM OCC", "TEMP", "DBE", "LAST XID", "REASON",
        ],
        widths: &[
            Constraint::Length(10),
            Constraint::Length(5),
            Constraint::Length(8),
            Constraint::Length(5),
            Constraint::Length(6),
            Constraint::Length(5),
            Constraint::Length(4),
            Constraint::Length(14),
            Constraint::Fill(1),
        ],
        len: app.rows.len(),
        selected: Some(app.screen().selected),
        focused: true,
    };
    let node_of = |i: usize| match app.rows.get(i) {
        Some(Row::Node(n)) => c.nodes.get(*n),
        _ => None,
    };
    table::draw(
        f,
        area,
        theme,
        list,
        |i| {
            let Some(n) = node_of(i) else { return vec![] };
            let max_t = n
                .gpus
                .iter()
                .filter_map(|g| g.temperature_c)
                .fold(None, |m: Option<f64>, t| Some(m.map_or(t, |m| m.max(t))));
            let dbe: u64 = n.gpus.iter().filter_map(|g| g.ecc.dbe_volatile).sum();
            vec![
                Cell::from(sanitize(&n.name).into_owned()),
                Cell::from(sanitize(&n.partitions.join(",")).into_owned()),
                Cell::from(n.state.as_str()).style(theme.node_state(n.state)),
                Cell::from(format!("{}/{}", n.gpus_allocated(), n.gpu_count)),
                Cell::from(text::percent(n.mean_sm_occupancy())),
                Cell::from(max_t.map_or("-".into(), |t| format!("{t:.0}C"))),
                Cell::from(dbe.to_string()).style(if dbe > 0 {
                    theme.critical()
                } else {
                    Style::default()
                }),
                Cell::from(n.last_xid().map_or("-".into(), |(g, x)| {
                    format!(
                        "{} gpu{g} {}",
                        x.code,
                        x.time.map_or(String::new(), text::clock)
                    )
                }))
                .style(if n.last_xid().is_some() {
                    theme.critical()
                } else {
                    Style::default()
                }),
                Cell::from(
                    n.reason
                        .as_deref()
                        .map_or("-".into(), |r| sanitize(r).into_owned()),
                ),
            ]
        },
        |_| Style::default(),
    );
}

/// The cells of one GPU row; `with_node` adds the node column.
/// Whether a GPU's readings are older than the stale threshold.
pub(super) fn stale(app: &App, g: &Gpu) -> bool {
    g.reading_time
        .is_some_and(|t| (app.cluster.time - t).max(0) as u64 > app.stale_after.as_secs())
}

/// The cells of one GPU row; `with_node` adds the node column. Stale
/// readings are marked `~` and dimmed, never shown as if fresh.
pub(super) fn gpu_cells(
    g: &Gpu,
    health: GpuHealth,
    theme: Theme,
    with_node: bool,
    stale: bool,
) -> Vec<Cell<'static>> {
    let live = |text: String| {
        if stale && text != "-" {
            Cell::from(format!("~{text}")).style(theme.dim())
        } else {
            Cell::from(text)
        }
    };
    let mem = match (g.memory_used_mib, g.memory_total_mib) {
        (Some(u), Some(t)) => format!("{:.0}/{:.0}G", u as f64 / 1024.0, t as f64 / 1024.0),
        (None, Some(t)) => format!("-/{:.0}G", t as f64 / 1024.0),
        _ => "-".into(),
    };
    let yn = |b: Option<bool>| match b {
        Some(true) => "Y",
        Some(false) => "n",
        None => "-",
    };
    let remap_style = if g.row_remap_failed == Some(true) {
        theme.critical()
    } else if g.row_remap_pending == Some(true) {
        theme.warn()
    } else {
        Style::default()
    };
    let dbe_style = if g.ecc.dbe_volatile.unwrap_or(0) > 0 {
        theme.critical()
    } else {
        Style::default()
    };
    let mut cells = Vec::new();
    if with_node {
        cells.push(Cell::from(sanitize(&g.node).into_owned()));
    }
    cells.extend([
        Cell::from(g.index.to_string()),
        Cell::from(
            g.job
                .as_deref()
                .map_or("-".into(), |j| sanitize(j).into_owned()),
        ),
        live(text::percent(g.sm_occupancy)),
        live(text::percent(g.utilization)),
        live(mem),
        live(g.temperature_c.map_or("-".into(), |t| format!("{t:.0}C"))),
        live(g.power_w.map_or("-".into(), |p| format!("{p:.0}W"))),
        Cell::from(format!(
            "{}/{}",
            text::opt(g.ecc.sbe_volatile),
            text::opt(g.ecc.sbe_aggregate)
        )),
        Cell::from(format!(
            "{}/{}",
            text::opt(g.ecc.dbe_volatile),
            text::opt(g.ecc.dbe_aggregate)
        ))
        .style(dbe_style),
        Cell::from(format!(
            "{}/{}",
            yn(g.row_remap_pending),
            yn(g.row_remap_failed)
        ))
        .style(remap_style),
        Cell::from(g.last_xid.as_ref().map_or("-".into(), |x| {
            format!("{} {}", x.code, x.time.map_or(String::new(), text::clock))
        }))
        .style(theme.health(health)),
    ]);
    cells
}

pub(super) const GPU_HEADER: [&str; 11] = [
    "GPU", "JOB", "SM OCC", "UTIL", "MEM", "TEMP", "POWER", "SBE V/A", "DBE V/A", "REMAP",
    "LAST XID",
];
pub(super) const GPU_WIDTHS: [Constraint; 11] = [
    Constraint::Length(3),
    Constraint::Length(6),
    Constraint::Length(6),
    Constraint::Length(4),
    Constraint::Length(7),
    Constraint::Length(4),
    Constraint::Length(5),
    Constraint::Length(7),
    Constraint::Length(7),
    Constraint::Length(5),
    Constraint::Fill(1),
];

pub fn gpus(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let c = &app.cluster;
    let mut header = vec!["NODE"];
    header.extend(GPU_HEADER);
    let mut widths = vec![Constraint::Length(10)];
    widths.extend(GPU_WIDTHS);
    let list = List {
        title: title(app, "gpus"),
        header: &header,
        widths: &widths,
        len: app.rows.len(),
        selected: Some(app.screen().selected),
        focused: true,
    };
    let gpu_of = |i: usize| match app.rows.get(i) {
        Some(Row::Gpu(n, g)) => c.nodes.get(*n).and_then(|n| n.gpus.get(*g)),
        _ => None,
    };
    table::draw(
        f,
        area,
        theme,
        list,
        |i| {
            gpu_of(i).map_or_else(Vec::new, |g| {
                let health = app.gpu_severity(&g.node, g.index);
                gpu_cells(g, health, theme, true, stale(app, g))
            })
        },
        |_| Style::default(),
    );
}

/// Shape as `N×G` (nodes × GPUs per node) or a total.
pub(super) fn shape(j: &Job) -> String {
    match (j.node_count, j.gpus_per_node) {
        (Some(n), Some(g)) => format!("{n}×{g}"),
        _ => text::opt(j.gpus_requested()),
    }
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
        let title = format!(
            " pending jobs over time (now {}) ",
            q.last().copied().unwrap_or(0)
        );
        f.render_widget(
            Sparkline::default()
                .block(
                    Block::default()
                        .borders(Borders::ALL)
                        .title(title)
                        .border_style(theme.dim()),
                )
                .data(tail)
                .style(theme.warn()),
            spark,
        );
        rest
    } else {
        area
    };
    let list = List {
        title: title(
            app,
            if queue {
                "queue (scheduler order)"
            } else {
                "jobs"
            },
        ),
        header: &[
            "ID",
            "NAME",
            "USER",
            "ACCOUNT",
            "PART",
            "STATE",
            "GPUS",
            "TIME",
            "PRIO",
            "NODES / REASON",
        ],
        widths: &[
            Constraint::Length(8),
            Constraint::Fill(3),
            Constraint::Length(7),
            Constraint::Length(7),
            Constraint::Length(4),
            Constraint::Length(9),
            Constraint::Length(4),
            Constraint::Length(6),
            Constraint::Length(10),
            Constraint::Fill(2),
        ],
        len: app.rows.len(),
        selected: Some(app.screen().selected),
        focused: true,
    };
    let job_of = |i: usize| match app.rows.get(i) {
        Some(Row::Job(j)) => c.jobs.get(*j),
        _ => None,
    };
    let now = c.time;
    table::draw(
        f,
        area,
        theme,
        list,
        |i| {
            let Some(j) = job_of(i) else { return vec![] };
            let time = if j.state.holds_resources() {
                j.elapsed_s(now).map_or("-".into(), text::duration)
            } else if j.state.is_pending() {
                j.wait_s(now).map_or("-".into(), text::duration)
            } else {
                "-".into()
            };
            let tail = if j.state.holds_resources() {
                j.nodes.join(",")
            } else {
                j.reason.clone().unwrap_or_else(|| "-".into())
            };
            let state_style = match j.state {
                crate::model::JobState::Failed => theme.critical(),
                s if s.is_pending() => theme.warn(),
                s if s.holds_resources() => theme.ok(),
                _ => theme.dim(),
            };
            vec![
                Cell::from(sanitize(&j.id).into_owned()),
                Cell::from(sanitize(&j.name).into_owned()),
                Cell::from(sanitize(&j.user).into_owned()),
                Cell::from(
                    j.account
                        .as_deref()
                        .map_or("-".into(), |a| sanitize(a).into_owned()),
                ),
                Cell::from(sanitize(&j.partition).into_owned()),
                Cell::from(j.state.as_str()).style(state_style),
                Cell::from(shape(j)),
                Cell::from(time),
                Cell::from(text::opt(j.priority)),
                Cell::from(sanitize(&tail).into_owned()),
            ]
        },
        |_| Style::default(),
    );
}

pub fn incidents(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let c = &app.cluster;
    let list = List {
        title: title(app, "incidents (newest first)"),
        header: &[
            "TIME",
            "NODE",
            "GPU",
            "EVENT",
            "DO",
            "JOBS",
            "WHAT → STATUS",
        ],
        widths: &[
            Constraint::Length(8),
            Constraint::Length(9),
            Constraint::Length(3),
            Constraint::Length(13),
            Constraint::Length(12),
            Constraint::Length(14),
            Constraint::Fill(1),
        ],
        len: app.rows.len(),
        selected: Some(app.screen().selected),
        focused: true,
    };
    let incident_of = |i: usize| match app.rows.get(i) {
        Some(Row::Incident(k)) => app.incident(*k),
        _ => None,
    };
    let _ = c;
    table::draw(
        f,
        area,
        theme,
        list,
        |i| {
            let Some(inc) = incident_of(i) else {
                return vec![];
            };
            let stage_style = if inc.is_open() {
                theme.action(inc.action)
            } else {
                theme.dim()
            };
            vec![
                Cell::from(text::clock(inc.time)),
                Cell::from(sanitize(&inc.node).into_owned()),
                Cell::from(text::opt(inc.gpu)),
                Cell::from(inc.label.clone()).style(theme.health(inc.severity)),
                Cell::from(inc.action.short()).style(stage_style),
                Cell::from(sanitize(&crate::output::incident_jobs(inc)).into_owned()),
                Cell::from(if inc.stage == Stage::Open {
                    format!("{} → {}", sanitize(&inc.message), sanitize(&inc.status))
                } else {
                    format!("[{}] {}", inc.stage.as_str(), sanitize(&inc.status))
                })
                .style(stage_style),
            ]
        },
        |_| Style::default(),
    );
}
