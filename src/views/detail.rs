//! Detail views: one node, one GPU, one job.

use super::ago;
use super::table::{self, List};
use super::theme::Theme;
use crate::app::{App, Row};
use crate::columns::shape;
use crate::model::TimeLimit;
use crate::text::{self, sanitize};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Sparkline, SparklineBar};

fn missing(f: &mut Frame, area: Rect, theme: Theme, what: &str, target: Option<&str>) {
    let msg = format!(
        "{what} {} is not in the current data",
        sanitize(target.unwrap_or("?"))
    );
    f.render_widget(Paragraph::new(Line::styled(msg, theme.warn())), area);
}

fn kv(k: &str, v: String, theme: Theme) -> Vec<Span<'static>> {
    vec![
        Span::styled(format!("{k} "), theme.dim()),
        Span::raw(format!("{v}  ")),
    ]
}

/// Sparkline bars from a percent history; unknown readings leave a gap.
fn bars(series: Option<&std::collections::VecDeque<Option<u8>>>, width: u16) -> Vec<SparklineBar> {
    let Some(s) = series else { return Vec::new() };
    let skip = s.len().saturating_sub(width as usize);
    s.iter()
        .skip(skip)
        .map(|v| SparklineBar::from(v.map(u64::from)))
        .collect()
}

pub fn node(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let c = &app.cluster;
    let target = app.screen().target.as_deref();
    let Some(&n) = target.and_then(|t| app.index.node_by_name.get(t)) else {
        return missing(f, area, theme, "node", target);
    };
    let node = &c.nodes[n];
    let gpu_h = node.gpus.len() as u16 + 3;
    let answers = super::answers::node(app, &node.name, theme);
    // The engine's words wrap; they are never cut at the screen's edge.
    let answers_h = super::wrapped_height(&answers, area.width);
    let [info, engine, gpus_area, jobs_area] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Length(answers_h),
        Constraint::Length(gpu_h),
        Constraint::Min(3),
    ])
    .areas(area);
    f.render_widget(
        Paragraph::new(answers).wrap(ratatui::widgets::Wrap { trim: false }),
        engine,
    );
    let [text_area, spark_area] =
        Layout::horizontal([Constraint::Min(40), Constraint::Length(32)]).areas(info);
    let mut l1 = vec![Span::styled(
        format!(" {} ", sanitize(&node.name)),
        theme.title(),
    )];
    l1.push(Span::styled(
        format!("{} ", node.state.as_str()),
        theme.node_state(node.state),
    ));
    l1.extend(kv(
        "partition",
        sanitize(&node.partitions.join(",")).into_owned(),
        theme,
    ));
    l1.extend(kv(
        "topology",
        node.topology
            .as_deref()
            .map_or("-".into(), |t| sanitize(t).into_owned()),
        theme,
    ));
    let mut l2 = vec![Span::raw(" ")];
    l2.extend(kv(
        "model",
        node.gpu_model
            .as_deref()
            .map_or("-".into(), |m| sanitize(m).into_owned()),
        theme,
    ));
    l2.extend(kv(
        "GPUs",
        format!(
            "{}/{} allocated, {} free",
            node.gpus_allocated(),
            node.gpu_count,
            node.gpus_free()
        ),
        theme,
    ));
    let mut l3 = vec![Span::raw(" ")];
    match &node.reason {
        Some(r) => {
            l3.extend(kv("reason", sanitize(r).into_owned(), theme));
            l3.extend(kv(
                "by",
                node.reason_set_by
                    .as_deref()
                    .map_or("-".into(), |b| sanitize(b).into_owned()),
                theme,
            ));
            l3.extend(kv("since", ago(c.time, node.reason_time), theme));
        }
        None => l3.extend(kv("reason", "-".into(), theme)),
    }
    let labels: Vec<String> = node
        .labels
        .iter()
        .map(|(k, v)| format!("{}={}", sanitize(k), sanitize(v)))
        .collect();
    let mut l4 = vec![Span::raw(" ")];
    l4.extend(kv(
        "labels",
        if labels.is_empty() {
            "-".into()
        } else {
            labels.join(" ")
        },
        theme,
    ));
    f.render_widget(
        Paragraph::new(vec![
            Line::from(l1),
            Line::from(l2),
            Line::from(l3),
            Line::from(l4),
        ]),
        text_area,
    );
    let occ = bars(
        app.history.node_occ.get(&node.name),
        spark_area.width.saturating_sub(2),
    );
    let title = format!(" SM occupancy {} ", text::percent(node.mean_sm_occupancy()));
    f.render_widget(
        Sparkline::default()
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(title)
                    .border_style(theme.dim()),
            )
            .data(occ)
            .max(100)
            .style(theme.ok()),
        spark_area,
    );

    let focus = app.screen().focus;
    let sel = app.screen().selected;
    let gpus = table::Columns {
        title: "gpus (enter: gpu detail, tab: jobs)".into(),
        cols: crate::columns::GPUS,
        skip: &["NODE"],
        len: node.gpus.len(),
        selected: (focus == 0).then_some(sel),
        focused: focus == 0,
        sort: None,
        emphasis: None,
    };
    table::draw_columns(f, gpus_area, theme, &app.columns_ctx(), gpus, |i| {
        node.gpus.get(i)
    });

    let on_node = app.index.jobs_on(&node.name);
    let jobs = List {
        title: "jobs on this node (enter: job detail, tab: gpus)".into(),
        header: &[
            "ID",
            "NAME",
            "USER",
            "SHAPE",
            "GPUS HERE",
            "ELAPSED",
            "GANG",
        ],
        widths: &[
            Constraint::Length(6),
            Constraint::Fill(1),
            Constraint::Length(8),
            Constraint::Length(6),
            Constraint::Length(9),
            Constraint::Length(8),
            Constraint::Fill(1),
        ],
        len: on_node.len(),
        selected: (focus == 1).then_some(sel),
        focused: focus == 1,
    };
    table::draw(
        f,
        jobs_area,
        theme,
        jobs,
        |i| {
            let Some(j) = on_node.get(i).and_then(|&j| c.jobs.get(j)) else {
                return vec![];
            };
            let here = node
                .gpus
                .iter()
                .filter(|g| g.job.as_deref() == Some(j.id.as_str()))
                .count();
            let gang = if j.nodes.len() > 1 {
                format!("{} nodes: whole gang dies with one rank", j.nodes.len())
            } else {
                "-".into()
            };
            vec![
                Cell::from(sanitize(&j.id).into_owned()),
                Cell::from(sanitize(&j.name).into_owned()),
                Cell::from(sanitize(&j.user).into_owned()),
                Cell::from(shape(j)),
                Cell::from(here.to_string()),
                Cell::from(j.elapsed_s(c.time).map_or("-".into(), text::duration)),
                Cell::from(gang).style(if j.nodes.len() > 1 {
                    theme.warn()
                } else {
                    Style::default()
                }),
            ]
        },
        |_| Style::default(),
    );
}

pub fn gpu(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let c = &app.cluster;
    let Some((n, g)) = app.gpu_target() else {
        return missing(f, area, theme, "gpu", app.screen().target.as_deref());
    };
    let gpu = &c.nodes[n].gpus[g];
    let health = app.gpu_severity(&gpu.node, gpu.index);
    let verdict = super::answers::gpu(app, gpu, theme);
    let [info, spark] = Layout::vertical([
        Constraint::Length(11 + super::wrapped_height(&verdict, area.width)),
        Constraint::Min(4),
    ])
    .areas(area);
    let unknown = || "- (not reported)".to_string();
    let pair = |a: Option<u64>, b: Option<u64>| format!("{} / {}", text::opt(a), text::opt(b));
    let yn =
        |b: Option<bool>| b.map_or_else(unknown, |b| if b { "YES".into() } else { "no".into() });
    let age = gpu.reading_time.map(|t| (c.time - t).max(0));
    let stale = age.is_some_and(|a| a as u64 > app.stale_after.as_secs());
    let readings = match (&gpu.reading_source, age) {
        (Some(src), Some(a)) => format!(
            "{}, {} old{}",
            sanitize(src),
            text::duration(a),
            if stale {
                " — STALE: its endpoint is not answering"
            } else {
                ""
            }
        ),
        (Some(src), None) => sanitize(src).into_owned(),
        _ => "- (no node endpoint)".into(),
    };
    let rows: Vec<(&str, String, Style)> = vec![
        (
            "readings from",
            readings,
            if stale {
                theme.alarm()
            } else {
                Style::default()
            },
        ),
        (
            "uuid",
            gpu.uuid
                .as_deref()
                .map_or_else(unknown, |u| sanitize(u).into_owned()),
            Style::default(),
        ),
        (
            "model",
            gpu.model
                .as_deref()
                .map_or_else(unknown, |m| sanitize(m).into_owned()),
            Style::default(),
        ),
        (
            "job",
            gpu.job.as_deref().map_or("- (idle)".into(), |j| {
                format!("{} (enter opens it)", sanitize(j))
            }),
            Style::default(),
        ),
        (
            "SM occupancy / active / util",
            format!(
                "{} / {} / {}",
                text::percent(gpu.sm_occupancy),
                text::percent(gpu.sm_active),
                text::percent(gpu.utilization)
            ),
            Style::default(),
        ),
        (
            "memory / temp / power",
            format!(
                "{} of {} MiB / {} / {}",
                text::opt(gpu.memory_used_mib),
                text::opt(gpu.memory_total_mib),
                gpu.temperature_c.map_or("-".into(), |t| format!("{t:.0}C")),
                gpu.power_w.map_or("-".into(), |p| format!("{p:.0}W"))
            ),
            Style::default(),
        ),
        (
            "ECC SBE volatile / aggregate",
            pair(gpu.ecc.sbe_volatile, gpu.ecc.sbe_aggregate),
            Style::default(),
        ),
        (
            "ECC DBE volatile / aggregate",
            pair(gpu.ecc.dbe_volatile, gpu.ecc.dbe_aggregate),
            if gpu.ecc.dbe_volatile.unwrap_or(0) > 0 {
                theme.critical()
            } else {
                Style::default()
            },
        ),
        (
            "row remap pending / failed",
            format!(
                "{} / {}",
                yn(gpu.row_remap_pending),
                yn(gpu.row_remap_failed)
            ),
            Style::default(),
        ),
        (
            "last Xid",
            gpu.last_xid.as_ref().map_or("-".into(), |x| {
                format!(
                    "{} at {} ({})",
                    x.code,
                    x.time.map_or("?".into(), text::datetime),
                    ago(c.time, x.time)
                )
            }),
            theme.health(health),
        ),
    ];
    let mut lines = vec![Line::from(vec![
        Span::styled(
            format!(" {} gpu {} ", sanitize(&gpu.node), gpu.index),
            theme.title(),
        ),
        Span::styled(format!("{health:?}").to_lowercase(), theme.health(health)),
    ])];
    lines.extend(rows.into_iter().map(|(k, v, style)| {
        Line::from(vec![
            Span::styled(format!(" {k:<30}"), theme.dim()),
            Span::styled(v, style),
        ])
    }));
    lines.extend(verdict);
    f.render_widget(
        Paragraph::new(lines).wrap(ratatui::widgets::Wrap { trim: false }),
        info,
    );
    let node_name = &c.nodes[n].name;
    let series = app.history.gpu_occ.get(node_name).and_then(|v| v.get(g));
    f.render_widget(
        Sparkline::default()
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(" SM occupancy history ")
                    .border_style(theme.dim()),
            )
            .data(bars(series, spark.width.saturating_sub(2)))
            .max(100)
            .style(theme.ok()),
        spark,
    );
}

pub fn job(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let c = &app.cluster;
    let target = app.screen().target.as_deref();
    let Some(&ji) = target.and_then(|t| app.index.job_by_id.get(t)) else {
        return missing(f, area, theme, "job", target);
    };
    let j = &c.jobs[ji];
    let now = c.time;
    let limit = match j.time_limit {
        Some(TimeLimit::Seconds(s)) => text::duration(s as i64),
        Some(TimeLimit::Unlimited) => "unlimited".into(),
        None => "-".into(),
    };
    let ck = &j.checkpoint;
    let ck_text = format!(
        "last {}  every {}  size {}",
        ago(now, ck.last),
        ck.interval_s
            .map_or("-".into(), |s| text::duration(s as i64)),
        ck.size_bytes.map_or("unknown".into(), text::bytes),
    );
    let state_line = match (&j.reason, j.state.is_pending()) {
        (Some(r), true) => format!("{} (reason: {})", j.state.as_str(), sanitize(r)),
        _ => j.state.as_str().to_string(),
    };
    let lines: Vec<(&str, String)> = vec![
        ("name", sanitize(&j.name).into_owned()),
        (
            "user / account",
            format!(
                "{} / {}",
                sanitize(&j.user),
                j.account
                    .as_deref()
                    .map_or("-".into(), |a| sanitize(a).into_owned())
            ),
        ),
        (
            "partition / qos / priority",
            format!(
                "{} / {} / {}",
                sanitize(&j.partition),
                j.qos
                    .as_deref()
                    .map_or("-".into(), |q| sanitize(q).into_owned()),
                text::opt(j.priority)
            ),
        ),
        ("state", state_line),
        (
            "shape",
            format!(
                "{} = {} GPUs{}",
                shape(j),
                text::opt(j.gpus_requested()),
                j.gang
                    .as_ref()
                    .map_or(String::new(), |g| format!(", gang {}", sanitize(g)))
            ),
        ),
        (
            "submitted / started",
            format!("{} / {}", ago(now, j.submit_time), ago(now, j.start_time)),
        ),
        (
            "elapsed / limit",
            format!(
                "{} / {}",
                j.elapsed_s(now).map_or("-".into(), text::duration),
                limit
            ),
        ),
        ("checkpoint", ck_text),
    ];
    let answers = super::answers::job(app, &j.id, theme);
    let mut text_lines = vec![Line::from(vec![Span::styled(
        format!(" job {} ", sanitize(&j.id)),
        theme.title(),
    )])];
    text_lines.extend(lines.into_iter().map(|(k, v)| {
        Line::from(vec![
            Span::styled(format!(" {k:<28}"), theme.dim()),
            Span::raw(v),
        ])
    }));
    text_lines.extend(answers);
    let info_h = super::wrapped_height(&text_lines, area.width);
    let [info, nodes_area] = if j.nodes.is_empty() {
        [area, Rect::default()]
    } else {
        Layout::vertical([Constraint::Length(info_h), Constraint::Min(3)]).areas(area)
    };
    if j.nodes.is_empty() {
        // Nothing below: let long reasons wrap.
        f.render_widget(
            Paragraph::new(text_lines).wrap(ratatui::widgets::Wrap { trim: false }),
            info,
        );
        return;
    }
    f.render_widget(
        Paragraph::new(text_lines).wrap(ratatui::widgets::Wrap { trim: false }),
        info,
    );
    let list = List {
        title: "nodes (enter: node detail)".into(),
        header: &["NODE", "STATE", "GPUS", "SM OCC", "LAST XID"],
        widths: &[
            Constraint::Length(12),
            Constraint::Length(9),
            Constraint::Length(16),
            Constraint::Length(7),
            Constraint::Fill(1),
        ],
        len: app.rows.len(),
        selected: Some(app.screen().selected),
        focused: true,
    };
    table::draw(
        f,
        nodes_area,
        theme,
        list,
        |i| {
            let Some(Row::Node(n)) = app.rows.get(i).copied() else {
                return vec![];
            };
            let node = &c.nodes[n];
            let mine: Vec<&crate::model::Gpu> = node
                .gpus
                .iter()
                .filter(|g| g.job.as_deref() == Some(j.id.as_str()))
                .collect();
            let occ: Vec<f64> = mine.iter().filter_map(|g| g.sm_occupancy).collect();
            let mean = (!occ.is_empty()).then(|| occ.iter().sum::<f64>() / occ.len() as f64);
            let idx: Vec<String> = mine.iter().map(|g| g.index.to_string()).collect();
            let xid = node.last_xid();
            vec![
                Cell::from(sanitize(&node.name).into_owned()),
                Cell::from(node.state.as_str()).style(theme.node_state(node.state)),
                Cell::from(idx.join(",")),
                Cell::from(text::percent(mean)),
                Cell::from(xid.map_or("-".into(), |(g, x)| format!("{} on gpu{g}", x.code))).style(
                    if xid.is_some() {
                        theme.critical()
                    } else {
                        Style::default()
                    },
                ),
            ]
        },
        |_| Style::default(),
    );
}
