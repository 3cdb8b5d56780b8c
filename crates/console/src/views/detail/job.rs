//! One job: its shape and state, why it waits or what a restart costs, its
//! nodes.

use super::missing;
use crate::app::{App, Row};
use crate::columns::shape;
use crate::model::TimeLimit;
use crate::text::{self, sanitize};
use crate::views::ago;
use crate::views::table::{self, List};
use crate::views::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph};

/// The job screen's text: its facts, then the engine's answers.
fn job_lines(app: &App, j: &crate::model::Job, width: u16, theme: Theme) -> Vec<Line<'static>> {
    let c = &app.cluster;
    let now = c.time;
    let limit = match j.time_limit {
        Some(TimeLimit::Seconds(s)) => text::duration(s as i64),
        Some(TimeLimit::Unlimited) => "unlimited".into(),
        None => "-".into(),
    };
    let ck = &j.checkpoint;
    let ck_text = format!(
        "last {}  every {}  size {}",
        ago(now, ck.last.get()),
        ck.interval_s
            .get()
            .map_or("-".into(), |s| text::duration(s as i64)),
        ck.size_bytes.get().map_or("unknown".into(), text::bytes),
    );
    // A reason code (Slurm's `Resources`) on the state's line; a
    // scheduler's sentence (kube-scheduler's, Kueue's) once, in the why.
    let state_line = match (&j.reason, j.state.is_pending()) {
        (Some(r), true) if r.chars().count() <= 40 => {
            format!("{} (reason: {})", j.state.as_str(), sanitize(r))
        }
        (Some(_), true) => format!("{} (the scheduler's reason: below)", j.state.as_str()),
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
                text::opt(j.priority.get())
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
            format!(
                "{} / {}",
                ago(now, j.submit_time.get()),
                ago(now, j.start_time.get())
            ),
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
    let answers = crate::views::hang(crate::views::answers::job(app, &j.id, theme), width);
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
    text_lines
}

/// The rows of the job screen's text area, and of its nodes' list.
fn job_areas(area: Rect, j: &crate::model::Job, text_h: u16) -> [Rect; 2] {
    if j.nodes.is_empty() {
        return [area, Rect::default()];
    }
    // The nodes' list keeps at least a row; the text scrolls.
    let list_h = (j.nodes.len() as u16 + 3).min(area.height / 3).max(4);
    let text_h = text_h.min(area.height.saturating_sub(list_h));
    Layout::vertical([Constraint::Length(text_h), Constraint::Min(3)]).areas(area)
}

/// How far the job screen's text scrolls: to its last line.
pub fn max_scroll(app: &App, area: Rect) -> u16 {
    let Some(j) = app
        .screen()
        .target
        .as_deref()
        .and_then(|t| app.index.job(&app.cluster, t))
        .and_then(|ji| app.cluster.jobs.get(ji))
    else {
        return 0;
    };
    let lines = job_lines(app, j, area.width, Theme { color: false });
    let h = crate::views::wrapped_height(&lines, area.width);
    let [text, _] = job_areas(area, j, h);
    h.saturating_sub(text.height)
}

pub fn job(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let c = &app.cluster;
    let target = app.screen().target.as_deref();
    let Some(ji) = target.and_then(|t| app.index.job(&app.cluster, t)) else {
        return missing(f, area, theme, "job", target);
    };
    let j = &c.jobs[ji];
    let text_lines = job_lines(app, j, area.width, theme);
    let h = crate::views::wrapped_height(&text_lines, area.width);
    let [info, nodes_area] = job_areas(area, j, h);
    let scroll = app.screen().scroll.min(h.saturating_sub(info.height));
    f.render_widget(
        Paragraph::new(text_lines)
            .wrap(ratatui::widgets::Wrap { trim: false })
            .scroll((scroll, 0)),
        info,
    );
    if j.nodes.is_empty() {
        return;
    }
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
        len: app.nav.rows.len(),
        selected: Some(app.screen().selected),
        focused: true,
    };
    table::draw(
        f,
        nodes_area,
        theme,
        list,
        |i| {
            let Some(Row::Node(n)) = app.nav.rows.get(i).copied() else {
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
