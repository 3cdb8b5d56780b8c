//! The action popup: the guard's preview, the confirmation prompt, the
//! running state, the outcome with its undo.

use super::theme::Theme;
use crate::app::{App, Modal};
use crate::text::{self, sanitize};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

pub fn draw(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let Some(modal) = &app.dialog.modal else {
        return;
    };
    let mut lines: Vec<Line> = Vec::new();
    // Pinned under the body, always visible: what to type, how to cancel.
    let mut prompt: Vec<Line> = Vec::new();
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
            if let Some((a, when)) = app.arming().on_confirm()
                && a == action
            {
                lines.push(Line::styled(
                    format!(
                        "not sent now: confirming arms it — {} (through the guard again then)",
                        sanitize(&crate::engine::armed::describe_plan(a, when))
                    ),
                    theme.alarm(),
                ));
            }
            if let Some(plan) = &app.dialog.plan.note {
                lines.push(Line::styled(sanitize(plan).into_owned(), theme.title()));
            }
            match preview {
                None => lines.push(Line::styled("computing the blast radius…", theme.dim())),
                Some(p) => preview_lines(p, typed, theme, &mut lines, &mut prompt),
            }
            // What the last key did (a wrong name, a refusal), under the prompt.
            if let Some(msg) = &app.flash {
                prompt.push(Line::styled(sanitize(msg).into_owned(), theme.alarm()));
            }
            prompt.push(Line::styled("esc cancels", theme.dim()));
            if action.is_destructive() {
                " destructive action "
            } else {
                " action "
            }
        }
        Modal::Options { target } => {
            options_body(app, target, theme, &mut lines);
            prompt.push(Line::styled(
                "1–9 open that option's guarded preview (enter: the recommended one); esc closes",
                theme.dim(),
            ));
            " options "
        }
        Modal::Rearm { armed } => {
            lines.push(Line::styled(
                format!(
                    "{} step(s) were armed before this console started; each is sent when its condition is seen, through the guard:",
                    armed.len()
                ),
                theme.title(),
            ));
            for a in armed {
                lines.push(Line::raw(format!(
                    "  {}  (armed {})",
                    sanitize(&crate::engine::armed::describe(a)),
                    text::datetime(a.armed_at)
                )));
            }
            prompt.push(Line::styled(
                "y keeps them armed; n cancels them; esc keeps them",
                theme.dim(),
            ));
            " armed before "
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
            if let (true, Some(next)) = (*ok, app.dialog.plan.next.first()) {
                prompt.push(Line::from(vec![
                    Span::styled("n", theme.title()),
                    Span::styled(
                        format!(
                            " previews step {} of {}: {} ({} left)",
                            app.dialog.plan.upcoming(),
                            app.dialog.plan.total,
                            sanitize(&next.describe()),
                            app.dialog.plan.next.len()
                        ),
                        theme.dim(),
                    ),
                ]));
            }
            if let Some(u) = &app.dialog.last_undo {
                prompt.push(Line::from(vec![
                    Span::styled("u", theme.title()),
                    Span::styled(
                        format!(" undoes it ({})", sanitize(&u.describe())),
                        theme.dim(),
                    ),
                ]));
            }
            prompt.push(Line::styled(
                "any other key closes this; `nightshift audit` shows the record",
                theme.dim(),
            ));
            if *ok { " done " } else { " failed " }
        }
    };
    popup(f, area, app, theme, title, lines, prompt);
}

/// A preview's lines: what dies, what it costs, what will be sent, the
/// undo, the warnings; and the prompt under them (what to type, or why it
/// is refused).
fn preview_lines(
    p: &crate::protocol::action::Preview,
    typed: &str,
    theme: Theme,
    lines: &mut Vec<Line<'static>>,
    prompt: &mut Vec<Line<'static>>,
) {
    // One cluster of several: which one, before anything else.
    if let Some(c) = &p.cluster {
        lines.push(Line::from(vec![
            Span::styled("  cluster: ", theme.dim()),
            Span::styled(sanitize(c).into_owned(), theme.title()),
        ]));
    }
    match &p.blast {
        Some(Ok(b)) => {
            for k in &b.killed {
                lines.push(Line::from(vec![
                    Span::styled("  dies: ", theme.critical()),
                    Span::raw(format!(
                        "{} {} ({}, {} on {}{}) — {} GPU-h lost, back in {}",
                        sanitize(&k.id),
                        sanitize(&k.name),
                        sanitize(&k.user),
                        text::count(k.gpus, "GPU"),
                        text::count(Some(k.nodes.len()), "node"),
                        if k.via_gang { ", via its gang" } else { "" },
                        k.restore
                            .lost_gpu_hours
                            .value
                            .map_or("?".into(), |v| format!("{v:.1}")),
                        crate::report::back_in(&k.restore),
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
            if !b.moved.is_empty() || !b.jumped.is_empty() || !b.falls_behind.is_empty() {
                lines.push(Line::raw(format!(
                    "  queue: {} job(s) move, {} jumped{}",
                    b.moved.len(),
                    b.jumped.len(),
                    if b.falls_behind.is_empty() {
                        String::new()
                    } else {
                        format!(", falls behind {}", b.falls_behind.len())
                    }
                )));
            }
            if b.killed.is_empty() && b.partition.is_none() {
                lines.push(Line::raw(format!("  {}", sanitize(&b.summary))));
            }
        }
        Some(Err(e)) => lines.push(Line::styled(
            format!("  {}", sanitize(&e.to_string())),
            theme.warn(),
        )),
        None => lines.push(Line::raw(format!("  {}", sanitize(&p.summary)))),
    }
    for c in &p.calls {
        lines.push(Line::from(vec![
            Span::styled("  will send: ", theme.dim()),
            Span::raw(sanitize(c).into_owned()),
        ]));
    }
    if let Some(u) = p.undo_line() {
        lines.push(Line::from(vec![
            Span::styled("  undo: ", theme.dim()),
            Span::raw(sanitize(&u).into_owned()),
        ]));
    }
    for w in &p.warnings {
        lines.push(Line::styled(format!("  {}", sanitize(w)), theme.critical()));
    }
    match &p.refusal {
        Some(r) if p.force_token().is_some() => {
            prompt.push(Line::styled(format!("REFUSED BY {r}"), theme.alarm()));
            prompt.push(Line::from(vec![
                Span::styled(format!("{}: ", p.confirm_prompt()), theme.warn()),
                Span::raw(format!("{}▏", sanitize(typed))),
            ]));
        }
        Some(r) => prompt.push(Line::styled(format!("REFUSED: {r}"), theme.alarm())),
        None => prompt.push(Line::from(vec![
            Span::styled(format!("{}: ", p.confirm_prompt()), theme.warn()),
            Span::raw(format!("{}▏", sanitize(typed))),
        ])),
    }
}

/// The dialog over `area`, sized to its lines: the body scrolls, the
/// prompt under it stays.
fn popup(
    f: &mut Frame,
    area: Rect,
    app: &App,
    theme: Theme,
    title: &'static str,
    lines: Vec<Line<'static>>,
    prompt: Vec<Line<'static>>,
) {
    let w = area.width.saturating_sub(4).min(100);
    let inner_w = w.saturating_sub(2).max(1) as usize;
    // Wrapped continuing under their own text, not at the dialog's edge.
    let lines = super::hang(lines, w.saturating_sub(2));
    let prompt = super::hang(prompt, w.saturating_sub(2));
    // Lines as wrapped at the popup's width, to size it.
    let rows = |ls: &[Line]| -> u16 {
        ls.iter()
            .map(|l| (l.width().max(1)).div_ceil(inner_w) as u16)
            .sum()
    };
    let prompt_h = rows(&prompt).min(area.height.saturating_sub(2));
    let h = (rows(&lines) + prompt_h + 2).min(area.height);
    let popup = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    f.render_widget(Clear, popup);
    let inner_h = h.saturating_sub(2);
    let body_h = inner_h.saturating_sub(prompt_h);
    // The body scrolls (↑ ↓ pgup pgdn); the prompt below it never does.
    let total = rows(&lines);
    let max_scroll = total.saturating_sub(body_h);
    let scroll = app.dialog.scroll.min(max_scroll);
    let below = max_scroll - scroll;
    let mut block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.critical())
        .title(Line::styled(title, theme.title()));
    if below > 0 || scroll > 0 {
        let more = match (scroll > 0, below > 0) {
            (true, true) => format!(" ↑↓ {below} more lines below "),
            (false, true) => format!(" ↓ pgdn: {below} more lines "),
            _ => " ↑ pgup: more above ".to_string(),
        };
        block = block.title_bottom(Line::styled(more, theme.warn()).right_aligned());
    }
    let inner = block.inner(popup);
    f.render_widget(block, popup);
    let body = Rect {
        height: body_h,
        ..inner
    };
    let pinned = Rect {
        y: inner.y + body_h,
        height: inner.height - body_h,
        ..inner
    };
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((scroll, 0)),
        body,
    );
    f.render_widget(Paragraph::new(prompt).wrap(Wrap { trim: false }), pinned);
}

/// The footer while a dialog is open: its prompt and keys, in `width`
/// columns — shortened, never cut, when the whole does not fit.
pub fn footer(app: &App, theme: Theme, width: u16) -> Line<'static> {
    let full = footer_line(app, theme, false);
    if full.width() <= usize::from(width) {
        full
    } else {
        footer_line(app, theme, true)
    }
}

fn footer_line(app: &App, theme: Theme, short: bool) -> Line<'static> {
    let key = |k: &str, what: &str| {
        vec![
            Span::styled(format!("<{k}>"), theme.title()),
            Span::styled(format!(" {what}  "), theme.dim()),
        ]
    };
    let mut spans: Vec<Span<'static>> = Vec::new();
    match &app.dialog.modal {
        Some(Modal::Confirm { preview, .. }) => {
            match preview {
                Some(p) if p.refusal.is_some() && p.force_token().is_none() => spans.push(
                    Span::styled(" refused: nothing can be sent ", theme.alarm()),
                ),
                Some(p) => {
                    let prompt = match (short, p.force_token(), &p.token) {
                        (false, _, _) => p.confirm_prompt(),
                        (true, Some(f), _) => format!("type `{f}` ⏎ to override"),
                        (true, None, Some(t)) => format!("type {t} ⏎ to confirm"),
                        (true, None, None) => "y to confirm".into(),
                    };
                    spans.push(Span::styled(format!(" {prompt} "), theme.badge()))
                }
                None => spans.push(Span::styled(" computing the preview… ", theme.dim())),
            }
            spans.push(Span::raw(" "));
            spans.extend(key("esc", "cancel"));
            if !short {
                spans.extend(key("↑↓ pgup pgdn", "scroll"));
            }
        }
        Some(Modal::Running { .. }) => {
            spans.push(Span::styled(
                " sent: waiting for the outcome ",
                theme.badge(),
            ));
            spans.extend(key("esc", "hide"));
        }
        Some(Modal::Rearm { .. }) => {
            spans.extend(key("y", "keep armed"));
            spans.extend(key("n", "cancel them"));
        }
        Some(Modal::Options { .. }) => {
            spans.extend(key("1–9", "preview that option"));
            spans.extend(key("enter", "the recommended"));
            spans.extend(key("esc", "close"));
        }
        Some(Modal::Done { .. }) => {
            if app.dialog.last_undo.is_some() {
                spans.extend(key("u", "undo"));
            }
            spans.extend(key("any key", "close"));
        }
        None => {}
    }
    Line::from(spans)
}

/// The options table: one row per option with its terms, the recommended
/// one marked, then each option's why and calls.
fn options_body(app: &App, target: &str, theme: Theme, lines: &mut Vec<Line<'static>>) {
    let Some(o) = app.options_of(target) else {
        lines.push(Line::styled("computing the options…", theme.dim()));
        return;
    };
    lines.push(Line::styled(
        format!("{}: {}", sanitize(target), sanitize(&o.target.problem)),
        theme.title(),
    ));
    if !o.target.hung.is_empty() {
        lines.push(Line::styled(
            format!("hung: {}", sanitize(&o.target.hung.join(", "))),
            theme.critical(),
        ));
    }
    lines.push(Line::styled(
        format!(
            "    {:>10} {:>9} {:<17} {}",
            "lost GPU-h", "back in", "out of service", "moves"
        ),
        theme.dim(),
    ));
    for (i, c) in o.options.iter().enumerate() {
        let style = if c.recommended {
            theme.ok()
        } else if !c.available() {
            theme.dim()
        } else {
            ratatui::style::Style::default()
        };
        lines.push(Line::from(vec![
            Span::styled(format!("{} ", i + 1), theme.title()),
            Span::styled(
                format!(
                    "{}{}",
                    if c.recommended {
                        "▶ "
                    } else if c.available() {
                        "  "
                    } else {
                        "✗ "
                    },
                    sanitize(&c.title)
                ),
                style,
            ),
        ]));
        lines.push(Line::raw(format!(
            "    {:>10} {:>9} {:<17} {}",
            c.gpu_hours_lost.map_or("?".into(), |h| format!("{h:.1}")),
            crate::report::resume_in(c),
            crate::report::capacity_out(&c.capacity_out),
            text::opt(c.queue_moves)
        )));
        let why = if c.recommended {
            format!("recommended: {}", c.why)
        } else {
            c.why.clone()
        };
        lines.push(Line::styled(
            format!("       {}", sanitize(&why)),
            if c.recommended {
                theme.ok()
            } else {
                theme.dim()
            },
        ));
    }
}
