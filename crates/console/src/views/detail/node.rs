//! One node: its state, the engine's verdict and drain blast radius, its
//! GPUs and its jobs.

use super::{bars, kv, missing};
use crate::app::{App, Pane};
use crate::columns::shape;
use crate::model::Node;
use crate::text::{self, sanitize};
use crate::views::ago;
use crate::views::table::{self, List};
use crate::views::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Sparkline};

pub fn node(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let c = &app.cluster;
    let target = app.screen().target.as_deref();
    let Some(n) = target.and_then(|t| app.index.node(c, t)) else {
        return missing(f, area, theme, "node", target);
    };
    let node = &c.nodes[n];
    let answers = crate::views::hang(
        crate::views::answers::node(app, &node.name, theme),
        area.width,
    );
    let [l1, l2, l3, l4] = facts(app, node, theme);
    // Heights at this size, in the order of what matters at 3am: the
    // engine's words whole (they wrap, never cut), the node's facts
    // wrapped at word boundaries, at least three of its jobs, and the GPUs
    // in the rest (their table scrolls to the selected one).
    let wide = area.width >= 110;
    let text_w = if wide { area.width - 32 } else { area.width };
    // On a short screen (80×24) the facts take two lines and leave the
    // labels to `get nodes -o json` and bigger screens.
    let info_lines = if area.height < 30 {
        let mut first = l1;
        first.extend(l2);
        vec![Line::from(first), Line::from(l3)]
    } else {
        vec![
            Line::from(l1),
            Line::from(l2),
            Line::from(l3),
            Line::from(l4),
        ]
    };
    let info_h = crate::views::wrapped_height(&info_lines, text_w).clamp(2, 6);
    let answers_h = crate::views::wrapped_height(&answers, area.width);
    let on_node = app.index.jobs_on(&app.cluster, &node.name);
    let jobs_h = on_node.len().clamp(1, 3) as u16 + 3;
    let gpu_full = node.gpus.len() as u16 + 3;
    let left = area
        .height
        .saturating_sub(info_h + answers_h + jobs_h)
        .max(4);
    let gpu_h = gpu_full.min(left);
    let [info, engine, gpus_area, jobs_area] = Layout::vertical([
        Constraint::Length(info_h),
        Constraint::Length(answers_h),
        Constraint::Length(gpu_h),
        Constraint::Min(jobs_h.min(4)),
    ])
    .areas(area);
    f.render_widget(
        Paragraph::new(answers).wrap(ratatui::widgets::Wrap { trim: false }),
        engine,
    );
    let [text_area, spark_area] = if wide {
        Layout::horizontal([Constraint::Min(40), Constraint::Length(32)]).areas(info)
    } else {
        [info, Rect::default()]
    };
    f.render_widget(
        Paragraph::new(info_lines).wrap(ratatui::widgets::Wrap { trim: true }),
        text_area,
    );
    occupancy_chart(f, spark_area, app, node, theme);

    let pane = app.screen().pane;
    let sel = app.screen().selected;
    let gpus = table::Columns {
        title: match (&node.gpu_summary, node.gpus.is_empty()) {
            // A fleet's node nobody had open: its aggregate until the
            // source reads each GPU (it does so when the node is opened).
            (Some(s), true) => format!(
                "gpus: {} in aggregate, util {}, SM occupancy {} — reading each GPU…",
                s.gpus,
                text::percent(s.utilization),
                text::percent(s.sm_occupancy)
            ),
            _ => "gpus (enter: gpu detail, tab: jobs)".into(),
        },
        cols: crate::columns::GPUS,
        skip: &["NODE"],
        len: node.gpus.len(),
        selected: (pane == Pane::First).then_some(sel),
        focused: pane == Pane::First,
        sort: None,
        emphasis: None,
    };
    table::draw_columns(f, gpus_area, theme, &app.columns_ctx(), gpus, |i| {
        node.gpus.get(i)
    });

    jobs_table(f, jobs_area, app, node, on_node, theme);
}

/// The node's facts, a line each: name, state, partition, failure domains
/// (narrowest first); model and GPUs; its reason and network ports; its
/// labels.
fn facts(app: &App, node: &Node, theme: Theme) -> [Vec<Span<'static>>; 4] {
    let c = &app.cluster;
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
        "domains",
        if node.domains.is_empty() {
            "-".into()
        } else {
            node.domains
                .iter()
                .map(|d| sanitize(&d.name).into_owned())
                .collect::<Vec<_>>()
                .join(", ")
        },
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
    if !node.ib_ports.is_empty() {
        let ports: Vec<String> = node.ib_ports.iter().map(port_words).collect();
        let down = node.ib_ports.iter().any(|p| p.is_down() == Some(true));
        l3.push(Span::styled("network ", theme.dim()));
        l3.push(Span::styled(
            format!("{}  ", ports.join(", ")),
            if down {
                theme.critical()
            } else {
                Style::default()
            },
        ));
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
    [l1, l2, l3, l4]
}

/// A port in a few words: `mlx5_0/1 ACTIVE 400G downed 2`.
fn port_words(p: &crate::model::IbPort) -> String {
    let mut s = format!("{} {}", sanitize(&p.name()), p.state_word());
    if p.is_down() == Some(true) {
        s.push_str(&format!(" ({})", p.physical_word()));
    }
    if let Some(g) = p.gbit_per_second() {
        s.push_str(&format!(" {g:.0}G"));
    }
    if let Some(d) = p.link_downed.filter(|d| *d > 0) {
        s.push_str(&format!(" downed {d}"));
    }
    let errors = p.symbol_errors.unwrap_or(0) + p.receive_errors.unwrap_or(0);
    if errors > 0 {
        s.push_str(&format!(" errors {errors}"));
    }
    s
}

/// The node's SM occupancy over the charts' window.
fn occupancy_chart(f: &mut Frame, spark_area: Rect, app: &App, node: &Node, theme: Theme) {
    let occ = bars(
        app.history.node_occ.get(&node.name),
        spark_area.width.saturating_sub(2),
    );
    let title = format!(
        " SM occupancy {} (0–100%){} ",
        text::percent(node.mean_sm_occupancy()),
        app.history.backfill_note()
    );
    let shown = occ.len();
    f.render_widget(
        Sparkline::default()
            .block(crate::views::chart_block(
                title,
                &app.history.span(shown),
                theme,
            ))
            .data(occ)
            .max(100)
            .style(theme.ok()),
        spark_area,
    );
}

/// The jobs with a rank on the node.
fn jobs_table(
    f: &mut Frame,
    jobs_area: Rect,
    app: &App,
    node: &Node,
    on_node: &[usize],
    theme: Theme,
) {
    let c = &app.cluster;
    let pane = app.screen().pane;
    let sel = app.screen().selected;
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
        selected: (pane == Pane::Second).then_some(sel),
        focused: pane == Pane::Second,
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
