//! One GPU: its readings, verdict, who its incidents hit, its history.

use super::{bars, missing};
use crate::app::App;
use crate::text::{self, sanitize};
use crate::views::ago;
use crate::views::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Sparkline};

/// The GPU screen's text: its readings, then the engine's verdict.
fn gpu_lines(app: &App, n: usize, g: usize, width: u16, theme: Theme) -> Vec<Line<'static>> {
    let c = &app.cluster;
    let gpu = &c.nodes[n].gpus[g];
    let health = app.gpu_severity(&gpu.node, gpu.index);
    let verdict = crate::views::hang(crate::views::answers::gpu(app, gpu, theme), width);
    let earlier = earlier_xids(app, &c.nodes[n].name, gpu.index);
    let unknown = || "- (not reported)".to_string();
    let pair = |a: Option<u64>, b: Option<u64>| format!("{} / {}", text::opt(a), text::opt(b));
    let yn =
        |b: Option<bool>| b.map_or_else(unknown, |b| if b { "YES".into() } else { "no".into() });
    let (readings, stale) = readings_from(app, gpu);
    let mut rows: Vec<(&str, String, Style)> = vec![
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
            pair(gpu.ecc.sbe_volatile.get(), gpu.ecc.sbe_aggregate.get()),
            Style::default(),
        ),
        (
            "ECC DBE volatile / aggregate",
            pair(gpu.ecc.dbe_volatile.get(), gpu.ecc.dbe_aggregate.get()),
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
    rows.extend(nvlink_rows(gpu, theme));
    if let Some(e) = earlier {
        rows.push(("Xids in the last hour", e, theme.health(health)));
    }
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
    lines
}

/// Xids Prometheus saw in the hour before nightshift opened, in a line.
fn earlier_xids(app: &App, node: &str, gpu: u32) -> Option<String> {
    app.history.xids.get(&(node.to_string(), gpu)).map(|xs| {
        xs.iter()
            .map(|x| {
                if x.at_window_start {
                    format!("{} (by {})", x.code, text::clock(x.first_seen))
                } else {
                    format!("{} at {}", x.code, text::clock(x.first_seen))
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// Where the GPU's readings come from and how old they are; whether they
/// are stale.
fn readings_from(app: &App, gpu: &crate::model::Gpu) -> (String, bool) {
    let c = &app.cluster;
    let age = gpu.reading_time.map(|t| (c.time - t).max(0));
    let stale = age.is_some_and(|a| a as u64 > app.freshness().stale_after().as_secs());
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
    (readings, stale)
}

/// NVLink's error counters in a line, where the exporter reports them
/// (they are off in dcgm-exporter until a site turns them on): a row of
/// "not reported" would cost an 80×24 screen a chart.
fn nvlink_errors(gpu: &crate::model::Gpu) -> Option<String> {
    let n = &gpu.nvlink;
    n.total()?;
    Some(format!(
        "CRC flit {}, CRC data {}, replay {}, recovery {}",
        text::opt(n.crc_flit.get()),
        text::opt(n.crc_data.get()),
        text::opt(n.replay.get()),
        text::opt(n.recovery.get())
    ))
}

/// The NVLink rows: the totals, then the links with errors.
fn nvlink_rows(gpu: &crate::model::Gpu, theme: Theme) -> Vec<(&'static str, String, Style)> {
    let mut rows: Vec<(&'static str, String, Style)> = nvlink_errors(gpu)
        .map(|v| ("NVLink errors (all links)", v, Style::default()))
        .into_iter()
        .collect();
    rows.extend(nvlink_by_link(gpu).map(|(v, bad)| {
        let style = if bad { theme.warn() } else { Style::default() };
        ("NVLink errors by link", v, style)
    }));
    rows
}

/// The links with errors, each with its counters (`L3: CRC flit 4150,
/// replay 1050`), or that all the links reported are clean; and whether
/// any has errors. `None` where the exporter gives no per-link counters.
fn nvlink_by_link(gpu: &crate::model::Gpu) -> Option<(String, bool)> {
    if gpu.nvlink_links.is_empty() {
        return None;
    }
    let bad: Vec<String> = gpu
        .nvlink_links
        .iter()
        .filter(|(_, e)| e.total().unwrap_or(0) > 0)
        .map(|(l, e)| {
            let parts: Vec<String> = [
                ("CRC flit", e.crc_flit),
                ("CRC data", e.crc_data),
                ("replay", e.replay),
                ("recovery", e.recovery),
            ]
            .into_iter()
            .filter_map(|(k, v)| v.get().filter(|v| *v > 0).map(|v| format!("{k} {v}")))
            .collect();
            format!("L{l}: {}", parts.join(", "))
        })
        .collect();
    Some(if bad.is_empty() {
        (
            format!("all {} links reported are clean", gpu.nvlink_links.len()),
            false,
        )
    } else {
        (bad.join(" · "), true)
    })
}

/// The text's area and the charts' (at least four rows).
fn gpu_areas(area: Rect, text_h: u16) -> [Rect; 2] {
    Layout::vertical([Constraint::Length(text_h), Constraint::Min(4)]).areas(area)
}

/// How far the GPU screen's text scrolls: to its last line.
pub fn max_scroll(app: &App, area: Rect) -> u16 {
    let Some((n, g)) = app.gpu_target() else {
        return 0;
    };
    let lines = gpu_lines(app, n, g, area.width, Theme { color: false });
    let h = crate::views::wrapped_height(&lines, area.width);
    let [text, _] = gpu_areas(area, h);
    h.saturating_sub(text.height)
}

pub fn gpu(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let c = &app.cluster;
    let Some((n, g)) = app.gpu_target() else {
        return missing(f, area, theme, "gpu", app.screen().target.as_deref());
    };
    let gpu = &c.nodes[n].gpus[g];
    let lines = gpu_lines(app, n, g, area.width, theme);
    let h = crate::views::wrapped_height(&lines, area.width);
    let [info, spark] = gpu_areas(area, h);
    let scroll = app.screen().scroll.min(h.saturating_sub(info.height));
    f.render_widget(
        Paragraph::new(lines)
            .wrap(ratatui::widgets::Wrap { trim: false })
            .scroll((scroll, 0)),
        info,
    );
    let node_name = &c.nodes[n].name;
    let from_prom = app.history.backfill_note();
    // Utilization beside occupancy when there is room: busy with nothing
    // resident is the hung-collective signature.
    let (occ_area, util_area) = if spark.height >= 8 {
        let [a, b] =
            Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(spark);
        (a, Some(b))
    } else {
        (spark, None)
    };
    let occ = app.history.gpu_occ.get(node_name).and_then(|v| v.get(g));
    let data = bars(occ, occ_area.width.saturating_sub(2));
    let shown = data.len();
    f.render_widget(
        Sparkline::default()
            .block(crate::views::chart_block(
                format!(
                    " SM occupancy {} (0–100%){from_prom} ",
                    text::percent(gpu.sm_occupancy)
                ),
                &app.history.span(shown),
                theme,
            ))
            .data(data)
            .max(100)
            .style(theme.ok()),
        occ_area,
    );
    if let Some(area) = util_area {
        let util = app.history.gpu_util.get(node_name).and_then(|v| v.get(g));
        let data = bars(util, area.width.saturating_sub(2));
        let shown = data.len();
        f.render_widget(
            Sparkline::default()
                .block(crate::views::chart_block(
                    format!(
                        " utilization {} (0–100%){from_prom} ",
                        text::percent(gpu.utilization)
                    ),
                    &app.history.span(shown),
                    theme,
                ))
                .data(data)
                .max(100)
                .style(theme.ok()),
            area,
        );
    }
}
