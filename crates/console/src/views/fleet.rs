//! The fleet overview (`nightshift --all`): each cluster's open incidents
//! by severity, GPUs out of service, queue and longest wait, its data's age
//! and its error; then every open incident of every cluster, its cluster's
//! name first.

use super::theme::Theme;
use crate::fleet::Fleet;
use crate::model::GpuHealth;
use crate::text::{self, sanitize};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

/// The overview, or the cluster on screen.
pub fn render(f: &mut Frame, fleet: &Fleet) {
    if let Some(m) = fleet.active.and_then(|i| fleet.members.get(i)) {
        return super::render(f, &m.app);
    }
    let area = f.area();
    if area.width == 0 || area.height == 0 {
        return;
    }
    let no_color = fleet.members.first().is_some_and(|m| m.app.no_color);
    let theme = Theme { color: !no_color };
    if area.width < super::MIN_WIDTH || area.height < super::MIN_HEIGHT {
        f.render_widget(
            Paragraph::new(Line::styled(
                format!(
                    "nightshift: terminal {}x{} is too small, needs {}x{}",
                    area.width,
                    area.height,
                    super::MIN_WIDTH,
                    super::MIN_HEIGHT
                ),
                theme.warn(),
            ))
            .wrap(Wrap { trim: true }),
            area,
        );
        return;
    }
    let failing = fleet
        .members
        .iter()
        .filter(|m| m.app.failing_origin().is_some())
        .count();
    let clusters_h = (fleet.members.len() + failing) as u16 + 3;
    let [header, clusters, incidents, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(clusters_h),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(area);
    let rows = fleet.rows();
    let attention = fleet
        .members
        .iter()
        .enumerate()
        .filter(|(m, member)| {
            rows.iter()
                .any(|(r, i)| r == m && i.severity == GpuHealth::Critical)
                || member.app.is_stale()
                || member.app.failing_origin().is_some()
        })
        .count();
    f.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(" nightshift fleet ", theme.title()),
            Span::raw(format!(
                " {} │ {attention} need attention",
                text::count(Some(fleet.members.len()), "cluster")
            )),
        ])),
        header,
    );
    draw_clusters(f, clusters, fleet, &rows, theme);
    draw_incidents(f, incidents, fleet, &rows, theme);
    let foot = match (&fleet.command, &fleet.flash) {
        (Some(t), _) => Line::from(vec![
            Span::styled(" :", theme.warn()),
            Span::raw(format!("{}▏", sanitize(t))),
        ]),
        (None, Some(msg)) => Line::styled(format!(" {} ", sanitize(msg)), theme.badge()),
        (None, None) => Line::styled(
            " 1-9 open a cluster · j/k enter open an incident · :ctx NAME · esc (in a cluster) back here · q quit",
            theme.dim(),
        ),
    };
    f.render_widget(Paragraph::new(foot), footer);
}

fn draw_clusters(
    f: &mut Frame,
    area: Rect,
    fleet: &Fleet,
    rows: &[(usize, &crate::engine::incidents::Incident)],
    theme: Theme,
) {
    let mut lines = vec![Line::styled(
        format!(
            " {:<2} {:<12} {:<6} {:>4} {:>4} {:>7} {:>5} {:>9}  {}",
            "#", "CLUSTER", "SOURCE", "CRIT", "WARN", "GPU OUT", "QUEUE", "MAX WAIT", "DATA"
        ),
        theme.dim(),
    )];
    for (m, member) in fleet.members.iter().enumerate() {
        let app = &member.app;
        let count = |sev: GpuHealth| {
            rows.iter()
                .filter(|(r, i)| *r == m && i.severity == sev)
                .count()
        };
        let (crit, warn) = (count(GpuHealth::Critical), count(GpuHealth::Warn));
        let s = &app.index.summary;
        let waiting = app.data_age().is_none();
        let (out, queue, wait) = if waiting {
            ("-".to_string(), "-".to_string(), "-".to_string())
        } else {
            (
                s.gpus_unavailable.to_string(),
                s.jobs_pending.to_string(),
                s.longest_wait_s(app.cluster.time)
                    .map_or("-".into(), text::duration),
            )
        };
        let mut spans = vec![
            Span::raw(format!(" {:<2} ", m + 1)),
            Span::styled(
                format!("{:<12} ", text::cut(&sanitize(&member.name), 12)),
                theme.title(),
            ),
            Span::raw(format!("{:<6} ", text::cut(&app.source_name, 6))),
            Span::styled(
                format!("{crit:>4} "),
                if crit > 0 {
                    theme.critical()
                } else {
                    theme.dim()
                },
            ),
            Span::styled(
                format!("{warn:>4} "),
                if warn > 0 { theme.warn() } else { theme.dim() },
            ),
            Span::raw(format!("{out:>7} {queue:>5} {wait:>9}  ")),
        ];
        spans.extend(freshness(app, theme));
        lines.push(Line::from(spans));
        // Its failing origin on a line of its own, as long as the row.
        if let Some((origin, e, _)) = app.failing_origin() {
            let who = match origin {
                crate::protocol::source::Origin::Scheduler => String::new(),
                o => format!("{}: ", o.name()),
            };
            lines.push(Line::styled(
                format!("    {}{}", sanitize(&who), sanitize(e)),
                theme.alarm(),
            ));
        }
    }
    f.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::ALL)
                .title(" clusters (1-9: open one) "),
        ),
        area,
    );
}

/// A cluster's data age, `STALE` when it is.
fn freshness(app: &crate::app::App, theme: Theme) -> Vec<Span<'static>> {
    let mut spans = Vec::new();
    match app.data_age() {
        None => spans.push(Span::styled("waiting for the first answer", theme.badge())),
        Some(age) if app.is_stale() => spans.push(Span::styled(
            format!("STALE {} old", text::duration(age.as_secs() as i64)),
            theme.alarm(),
        )),
        Some(age) => spans.push(Span::styled(format!("{}s old", age.as_secs()), theme.dim())),
    }
    spans
}

fn draw_incidents(
    f: &mut Frame,
    area: Rect,
    fleet: &Fleet,
    rows: &[(usize, &crate::engine::incidents::Incident)],
    theme: Theme,
) {
    let inner_h = area.height.saturating_sub(3) as usize;
    let first = fleet.selected.saturating_sub(inner_h.saturating_sub(1));
    let mut lines = vec![Line::styled(
        format!(
            " {:<12} {:<8} {:<14} {:<22} {}",
            "CLUSTER", "SEVERITY", "NODE", "WHAT", "STATUS"
        ),
        theme.dim(),
    )];
    if rows.is_empty() {
        lines.push(Line::styled(
            " no open incident in any cluster",
            theme.dim(),
        ));
    }
    for (n, (m, i)) in rows.iter().enumerate().skip(first).take(inner_h.max(1)) {
        // The GPU with its node (`:gpu NODE/GPU` opens it), so that a long
        // label never cuts it off.
        let node = match i.gpu {
            Some(g) => format!("{}/{g}", i.node),
            None => i.node.clone(),
        };
        let what = i.full_label();
        let sev = match i.severity {
            GpuHealth::Critical => ("critical", theme.critical()),
            GpuHealth::Warn => ("warning", theme.warn()),
            GpuHealth::Ok => ("info", theme.dim()),
        };
        let line = Line::from(vec![
            Span::styled(
                format!(
                    " {:<12} ",
                    text::cut(&sanitize(&fleet.members[*m].name), 12)
                ),
                theme.title(),
            ),
            Span::styled(format!("{:<8} ", sev.0), sev.1),
            Span::raw(format!(
                "{:<14} {:<22} {}",
                text::cut(&sanitize(&node), 14),
                text::cut(&sanitize(&what), 22),
                sanitize(&i.status)
            )),
        ]);
        lines.push(if n == fleet.selected {
            line.style(Style::default().add_modifier(ratatui::style::Modifier::REVERSED))
        } else {
            line
        });
    }
    f.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::ALL)
                .title(" incidents, every cluster (enter: open in its cluster) "),
        ),
        area,
    );
}
