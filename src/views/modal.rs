//! The action popup: the guard's preview, the confirmation prompt, the
//! running state, the outcome with its undo.

use super::theme::Theme;
use crate::actions::runner::Modal;
use crate::app::App;
use crate::text::{self, sanitize};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

pub fn draw(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let Some(modal) = &app.modal else { return };
    let mut lines: Vec<Line> = Vec::new();
    let title = match modal {
        Modal::Confirm {
            action,
            preview,
            typed,
        } => {
            lines.push(Line::styled(
                sanitize(&action.describe()).into_owned(),
                theme.title(),
            ));
            match preview {
                None => lines.push(Line::styled("computing the blast radius…", theme.dim())),
                Some(p) => {
                    match &p.blast {
                        Some(Ok(b)) => {
                            for k in &b.killed {
                                lines.push(Line::from(vec![
                                    Span::styled("  dies: ", theme.critical()),
                                    Span::raw(format!(
                                        "{} {} ({}, {} GPUs on {} node(s){}) — {} GPU-h lost, back in {}",
                                        sanitize(&k.id),
                                        sanitize(&k.name),
                                        sanitize(&k.user),
                                        text::opt(k.gpus),
                                        k.nodes.len(),
                                        if k.via_gang { ", via its gang" } else { "" },
                                        k.restore.lost_gpu_hours.value.map_or("?".into(), |v| format!("{v:.1}")),
                                        k.restore.total_s.value.map_or("?".into(), |v| text::duration(v as i64)),
                                    )),
                                ]));
                            }
                            if let Some(part) = &b.partition {
                                lines.push(Line::raw(format!(
                                    "  capacity: {} GPUs out of service ({:.0}% of {}), {} GPUs freed",
                                    b.gpus_out_of_service,
                                    part.share * 100.0,
                                    sanitize(&part.name),
                                    b.gpus_freed
                                )));
                            }
                            if !b.moved.is_empty() || !b.jumped.is_empty() {
                                lines.push(Line::raw(format!(
                                    "  queue: {} job(s) move, {} jumped",
                                    b.moved.len(),
                                    b.jumped.len()
                                )));
                            }
                            if b.killed.is_empty() && b.partition.is_none() {
                                lines.push(Line::raw(format!("  {}", sanitize(&b.summary))));
                            }
                        }
                        Some(Err(e)) => {
                            lines.push(Line::styled(format!("  {}", sanitize(e)), theme.warn()))
                        }
                        None => lines.push(Line::raw(format!("  {}", sanitize(&p.summary)))),
                    }
                    if p.no_op {
                        lines.push(Line::styled(
                            "  already so: confirming sends nothing",
                            theme.ok(),
                        ));
                    }
                    for c in &p.calls {
                        lines.push(Line::from(vec![
                            Span::styled("  will send: ", theme.dim()),
                            Span::raw(sanitize(c).into_owned()),
                        ]));
                    }
                    if let Some(u) = &p.undo {
                        lines.push(Line::from(vec![
                            Span::styled("  undo: ", theme.dim()),
                            Span::raw(u.clone()),
                        ]));
                    }
                    lines.push(Line::raw(""));
                    match &p.refusal {
                        Some(r) => lines.push(Line::styled(format!("REFUSED: {r}"), theme.alarm())),
                        None => lines.push(Line::from(vec![
                            Span::styled(format!("{}: ", p.confirm_prompt()), theme.warn()),
                            Span::raw(format!("{}▏", sanitize(typed))),
                        ])),
                    }
                }
            }
            lines.push(Line::styled("esc cancels", theme.dim()));
            if action.is_destructive() {
                " destructive action "
            } else {
                " action "
            }
        }
        Modal::Running { action } => {
            lines.push(Line::raw(format!(
                "{}: sent, verifying…",
                sanitize(&action.describe())
            )));
            " running "
        }
        Modal::Done { message, ok } => {
            lines.push(Line::styled(
                sanitize(message).into_owned(),
                if *ok { theme.ok() } else { theme.critical() },
            ));
            lines.push(Line::styled(
                "any key closes this; `nightshift audit` shows the record",
                theme.dim(),
            ));
            if *ok { " done " } else { " failed " }
        }
    };
    let w = area.width.saturating_sub(4).min(100);
    let h = (lines.len() as u16 + 2).min(area.height);
    let popup = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    f.render_widget(Clear, popup);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.critical())
        .title(Line::styled(title, theme.title()));
    f.render_widget(
        Paragraph::new(lines)
            .block(block)
            .wrap(Wrap { trim: false }),
        popup,
    );
}
