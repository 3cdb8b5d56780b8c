//! Screens. Rendering reads the app's state and draws; it changes nothing.

pub(crate) mod answers;
pub mod component;
mod detail;
pub mod fleet;
mod lists;
mod modal;
mod overview;
pub(crate) mod table;
pub(crate) mod theme;
mod wrap;
pub(crate) use wrap::hang;

pub use table::offset;
pub use theme::Theme;

use crate::app::{App, Input, Overlay};
use crate::text::{self, sanitize};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

/// Below this size the console shows a one-line notice instead of views.
pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 16;

pub fn render(f: &mut Frame, app: &App) {
    let area = f.area();
    if area.width == 0 || area.height == 0 {
        return;
    }
    let theme = Theme {
        color: !app.no_color,
    };
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let msg = format!(
            "nightshift: terminal {}x{} is too small, needs {MIN_WIDTH}x{MIN_HEIGHT}",
            area.width, area.height
        );
        // Wrapped: a notice cut at the screen's edge says nothing.
        f.render_widget(
            Paragraph::new(Line::styled(msg, theme.warn())).wrap(Wrap { trim: true }),
            area,
        );
        return;
    }
    // A status message gets its own line(s), wrapped, above the footer;
    // `m` reopens it in the message log.
    let status: Vec<Line> = match (&app.flash, &app.dialog.modal) {
        (Some(msg), None) => vec![Line::from(vec![Span::styled(
            format!(" {} ", sanitize(msg)),
            theme.badge(),
        )])],
        _ => Vec::new(),
    };
    let status_h = wrapped_height(&status, area.width).min(3);
    let [header, body, status_area, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(if status.is_empty() { 0 } else { status_h }),
        Constraint::Length(1),
    ])
    .areas(area);
    if !status.is_empty() {
        f.render_widget(
            Paragraph::new(status).wrap(Wrap { trim: false }),
            status_area,
        );
    }
    draw_header(f, header, app, theme);
    if app.data_age().is_none() && app.cluster.nodes.is_empty() {
        // Nothing read yet: say what is awaited and why it is late, never
        // a screen of zeros that were not read.
        draw_waiting(f, body, app, theme);
    } else {
        component::for_view(app.screen().view).draw(f, body, app, theme);
    }
    draw_footer(f, footer, app, theme);
    match app.overlay {
        Some(Overlay::Help) => draw_help(f, body, app, theme),
        Some(Overlay::Messages) => draw_messages(f, body, app, theme),
        Some(Overlay::Kpis { window_s }) => draw_kpis(f, body, app, window_s, theme),
        None => {}
    }
    modal::draw(f, body, app, theme);
}

/// The header's badges after the data's age: its quality, the steps
/// armed, the autopilot.
fn status_badges(app: &App, theme: Theme, spans: &mut Vec<Span<'static>>) {
    if let Some(q) = app.quality_badge() {
        spans.push(Span::styled(format!(" · {}", sanitize(&q)), theme.badge()));
    }
    if !app.arming().steps().is_empty() {
        spans.push(Span::styled(
            format!(" armed {} ", app.arming().steps().len()),
            theme.badge(),
        ));
    }
    if let Some((word, alarm)) = app.autopilot_badge() {
        let style = if alarm { theme.alarm() } else { theme.badge() };
        spans.push(Span::styled(format!(" {} ", sanitize(&word)), style));
    }
}

/// The most characters of a cluster's name the header shows.
const HEADER_NAME_MAX: usize = 32;

fn draw_header(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let c = &app.cluster;
    let mut spans = vec![Span::styled(" nightshift ", theme.title())];
    if app.read_only {
        spans.push(Span::styled(" READ-ONLY ", theme.badge()));
    }
    // Playing a recording: its state first, so that 80 columns keep it.
    if let Some(p) = app.replay.state() {
        spans.push(Span::styled(format!(" {} ", playback(p)), theme.badge()));
    }
    let unread = app.unread();
    if unread > 0 {
        spans.push(Span::styled(format!(" ● {unread} new "), theme.alarm()));
    }
    // One cluster of several: its name first (esc on the first screen
    // goes back to the fleet).
    // Names are cut to HEADER_NAME_MAX: a 10 KB cluster name must not
    // push the data's age off the line.
    if let Some(ctx) = &app.context {
        spans.push(Span::styled(
            format!(" ◆ {} ", text::cut(&sanitize(ctx), HEADER_NAME_MAX)),
            theme.title(),
        ));
    }
    if c.name.is_empty() {
        spans.push(Span::raw(format!(" {} │ ", app.source_name)));
    } else {
        spans.push(Span::raw(format!(
            " {} │ {} │ ",
            app.source_name,
            text::cut(&sanitize(&c.name), HEADER_NAME_MAX)
        )));
    }
    match app.data_age() {
        // A recording's clock is in its badge; its age says nothing.
        Some(_) if app.replay.state().is_some() => {}
        None => spans.push(Span::styled(
            " waiting for the first answer ",
            theme.badge(),
        )),
        Some(age) => {
            spans.push(Span::raw(format!(
                "{}Z │ ",
                text::clock(app.source_clock())
            )));
            let secs = age.as_secs() as i64;
            if app.is_stale() {
                spans.push(Span::styled(
                    format!(" STALE {} old ", text::duration(secs)),
                    theme.alarm(),
                ));
            } else {
                spans.push(Span::styled(format!("data {secs}s old"), theme.dim()));
            }
            if let Some(r) = app.refresh_badge() {
                spans.push(Span::styled(format!(" · {r}"), theme.dim()));
            }
            status_badges(app, theme, &mut spans);
            if let Some(lag) = app.analysis_lag_s() {
                spans.push(Span::styled(
                    format!(" · engine {} behind", text::duration(lag)),
                    theme.dim(),
                ));
            }
        }
    }
    // The origin in trouble, with its own age, until it answers again.
    if let Some((origin, e, age)) = app.failing_origin() {
        spans.push(Span::raw(" "));
        // The scheduler's age is the STALE badge's; an endpoint's is its own.
        let age = match (origin, age) {
            (crate::protocol::source::Origin::Scheduler, Some(_)) => String::new(),
            (_, None) => " (never answered)".to_string(),
            (_, Some(a)) => format!(" (last answer {} ago)", text::duration(a.as_secs() as i64)),
        };
        // The scheduler's errors name it (slurmrestd, the sim); an endpoint
        // is named by its URL.
        let who = match origin {
            crate::protocol::source::Origin::Scheduler => String::new(),
            o => format!("{}: ", sanitize(&o.name())),
        };
        spans.push(Span::styled(
            format!(" {who}{}{age} ", sanitize(e)),
            theme.alarm(),
        ));
    }
    let crumbs: Vec<String> = app
        .nav
        .stack()
        .iter()
        .map(|s| match &s.target {
            Some(t) => format!("{} {}", s.view.title(), sanitize(t)),
            None => s.view.title().to_string(),
        })
        .collect();
    // Where we are, in the room left: the last two steps, the last, or
    // the last shortened with `…` — never a name cut to another name.
    let used: usize = spans.iter().map(|s| s.width()).sum();
    let room = (area.width as usize).saturating_sub(used + 2);
    let two = crumbs[crumbs.len().saturating_sub(2)..].join(" › ");
    let last = crumbs.last().cloned().unwrap_or_default();
    let crumb = if two.chars().count() <= room {
        two
    } else if last.chars().count() <= room {
        last
    } else {
        crate::columns::fit(&last, u16::try_from(room).unwrap_or(u16::MAX))
    };
    spans.push(Span::styled(format!("  {crumb}"), theme.dim()));
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// `▶ 2× 02:53 / 02:57 (40 %)`, `⏸ 02:53 / 02:57 (40 %)`, `■ end 02:57`.
pub fn playback(p: &crate::protocol::source::Playback) -> String {
    if p.ended {
        return format!("■ end {}", text::clock(p.end));
    }
    let span = (p.end - p.start).max(1) as f64;
    let pct = ((p.at - p.start) as f64 / span * 100.0).clamp(0.0, 100.0);
    let speed = if p.speed >= 1.0 {
        format!("{}×", p.speed)
    } else {
        format!("{:.2}×", p.speed)
    };
    let sign = if p.paused {
        "⏸".to_string()
    } else {
        format!("▶ {speed}")
    };
    format!(
        "{sign} {} / {} ({pct:.0} %)",
        text::clock(p.at),
        text::clock(p.end)
    )
}

/// Before the first answer: what is awaited, each origin's error whole.
fn draw_waiting(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let mut lines = vec![Line::styled(
        format!(
            "waiting for the first answer from the {} source: nothing is shown until it is read",
            app.source_name
        ),
        theme.title(),
    )];
    for (origin, st) in app.freshness().origins() {
        let who = match origin {
            crate::protocol::source::Origin::Scheduler => app.source_name.to_string(),
            o => o.name(),
        };
        match &st.error {
            Some(e) => lines.push(Line::from(vec![
                Span::styled(format!("{}: ", sanitize(&who)), theme.critical()),
                Span::raw(sanitize(e).into_owned()),
            ])),
            None => lines.push(Line::styled(
                format!("{}: no answer yet", sanitize(&who)),
                theme.dim(),
            )),
        }
    }
    lines.extend(doctor_hint(app, theme));
    lines.push(Line::styled(
        "it is asked again by itself; every error stays in the message log (m)",
        theme.dim(),
    ));
    f.render_widget(
        Paragraph::new(hang(lines, area.width.saturating_sub(2)))
            .wrap(Wrap { trim: false })
            .block(Block::default().borders(Borders::ALL)),
        area,
    );
}

fn draw_footer(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let line = match &app.input {
        Input::Command(t) => Line::from(vec![
            Span::styled(":", theme.title()),
            Span::raw(format!("{t}▏")),
        ]),
        Input::Filter(t) => Line::from(vec![
            Span::styled("/", theme.title()),
            Span::raw(format!("{t}▏")),
        ]),
        // While a dialog is open the footer is its prompt: what to type, how
        // to cancel, how to scroll — never the normal keys.
        Input::Normal if app.dialog.modal.is_some() => modal::footer(app, theme, area.width),
        Input::Normal => {
            let mut spans = Vec::new();
            let filter = &app.screen().filter;
            if !filter.is_empty() {
                spans.push(Span::styled(
                    format!("filter: {} ", sanitize(filter)),
                    theme.warn(),
                ));
            }
            let (hints, actions) = app.footer_keys();
            // What fits: `?` and `q` always; then the action keys and the
            // rest in that order, each whole or not at all.
            let used: usize = spans.iter().map(|s| s.width()).sum();
            let width = |k: &str, w: &str| k.chars().count() + w.chars().count() + 5;
            let always: Vec<(&str, &str)> = vec![("?", "help"), ("q", "quit")];
            let mut room = (area.width as usize)
                .saturating_sub(used)
                .saturating_sub(always.iter().map(|(k, w)| width(k, w)).sum());
            let mut shown: Vec<(&str, &str)> = Vec::new();
            for &(k, w) in actions
                .iter()
                .chain(hints.iter())
                .filter(|(k, _)| *k != "?" && *k != "q")
            {
                if width(k, w) <= room {
                    room -= width(k, w);
                    shown.push((k, w));
                }
            }
            for (k, what) in shown.into_iter().chain(always) {
                spans.push(Span::styled(format!("<{k}>"), theme.title()));
                spans.push(Span::styled(format!(" {what}  "), theme.dim()));
            }
            Line::from(spans)
        }
    };
    f.render_widget(Paragraph::new(line), area);
}

pub const HELP: &[(&str, &str)] = &[
    (":overview :nodes :gpus", "switch view (also :no :gp)"),
    (":jobs :queue :incidents", "switch view (also :jo :qu :inc)"),
    (
        "enter",
        "open the selected row: incident → node → gpu → job",
    ),
    ("esc", "clear the filter, else go back"),
    (
        ":job ID :node N :gpu N/I",
        "open that object; tab completes after : (twice: the candidates)",
    ),
    ("j k ↑ ↓ h l ← →", "move (h l across the node grid)"),
    ("g G home end", "first, last"),
    ("pgup pgdn ctrl-u ctrl-d", "a page up, down"),
    (
        "mouse",
        "click selects (again: opens), the wheel scrolls; --no-mouse leaves it to the terminal",
    ),
    ("tab", "overview: incidents / node grid; node: GPUs / jobs"),
    (
        "/crit /!crit /state:x",
        "filter on any column, the inverse, a field",
    ),
    ("1 … 9  0", "sort by that column (its mark); again: reverse"),
    ("D  C  U", "drain+requeue, cordon, resume the node"),
    (":reason TEXT", "change the selected node's drain reason"),
    (
        ":disarm :disarm all",
        "cancel the armed steps of the node or job open (or all)",
    ),
    ("u (after an action)", "undo it, through its own preview"),
    (
        "P  :autopilot resume",
        "pause the autopilot everywhere (at once); resume it",
    ),
    ("R  T  H  E", "requeue, top priority, hold, release the job"),
    (
        "O",
        "options side by side (incident, node, running job); 1–9 opens one",
    ),
    (
        "paste",
        "text for the filter, a command or a typed name; never confirms",
    ),
    (
        "m  :messages",
        "the message log: every status message again",
    ),
    (
        ":kpis  :kpis 8h",
        "the scheduler's health numbers over a window",
    ),
    ("> <", "replay (--replay FILE): twice as fast, half as fast"),
    ("space", "replay: pause, play"),
    ("n", "replay: on to the next incident"),
    (":at 03:10  :at +90m", "replay: jump to that time"),
    ("ctrl-z", "suspend; the shell's fg brings it back"),
    (
        ":ctx NAME",
        "with --all: that cluster (tab completes); esc on its first screen: the fleet",
    ),
    (
        "?",
        "this help (j k pgup pgdn scroll it; any other key closes)",
    ),
    ("q  ctrl-c  :q", "quit"),
];

/// The short words the console prints, for a newcomer: one meaning each,
/// the same in the console, the CLI and the report (the help shows them
/// after the keys; the README's "Words" table says the same).
pub const WORDS: &[(&str, &str)] = &[
    (
        "alloc idle unavail",
        "GPUs held by jobs / free on nodes in service / not held, on nodes out of service (drained, down, cordoned)",
    ),
    (
        "critical",
        "GPUs whose own health says take them out: one bad GPU is one, not its node's eight",
    ),
    (
        "util",
        "GPU utilization as NVML reports it: the share of time a kernel ran, not how much of the GPU it used",
    ),
    (
        "SM occupancy",
        "the share of warp slots in use: real work (a hung collective shows high util, near-zero occupancy)",
    ),
    (
        "DBE V/A  SBE V/A",
        "uncorrectable / correctable ECC errors: volatile (since the driver loaded) / aggregate (the GPU's lifetime)",
    ),
    (
        "REMAP p/f",
        "row remap pending (takes effect at the next GPU reset) / failed (no spare rows left: replace the GPU); y, n, ? unknown",
    ),
    (
        "drain+reboot  drain+reset",
        "the catalog's action: drain the node, then reboot it / reset the GPU",
    ),
    (
        "reset@drain",
        "keep running; reset the GPU at the next drain window (a pending row remap)",
    ),
    (
        "restart job",
        "the application faulted: restart the job, the GPU is fine",
    ),
    (
        "XID 48 +2",
        "an incident and the other events of the same failure it gathers (its evidence)",
    ),
    ("N jumped", "the pending jobs a priority change overtakes"),
    (
        "GPU-hours lost",
        "GPUs × time since the later of the last checkpoint and the (re)start, up to when the work is thrown away",
    ),
];

/// The help lines that are action keys.
const ACTION_KEYS: &[&str] = &[
    "D  C  U",
    "R  T  H  E",
    ":reason TEXT",
    "u (after an action)",
];

/// The help's lines for this console: keys in a column as wide as the
/// widest, their text wrapped under itself; no action keys in read-only
/// mode (they do nothing there).
pub fn help_lines(width: u16, read_only: bool, theme: Theme) -> Vec<Line<'static>> {
    let keys_w = HELP
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0)
        + 2;
    let row = |(k, what): &(&str, &'static str)| {
        Line::from(vec![
            Span::styled(format!("{k:<keys_w$}"), theme.title()),
            Span::raw(*what),
        ])
    };
    let mut lines: Vec<Line> = HELP
        .iter()
        .filter(|(k, _)| !(read_only && ACTION_KEYS.contains(k)))
        .map(row)
        .collect();
    lines.push(Line::raw(""));
    lines.push(Line::styled("words", theme.title()));
    lines.extend(WORDS.iter().map(row));
    hang(lines, width)
}

fn draw_help(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let popup = full_height_popup(area, 100);
    let inner_w = popup.width.saturating_sub(2);
    let lines = help_lines(inner_w, app.read_only, theme);
    let inner_h = popup.height.saturating_sub(2);
    let total = wrapped_height(&lines, inner_w);
    let scroll = app.overlay_scroll.min(overlay_max_scroll(app));
    let more = if total > inner_h {
        format!(
            " keys {}–{} of {} (j k pgdn pgup scroll; any other key closes) ",
            scroll + 1,
            (scroll + inner_h).min(total),
            total
        )
    } else {
        " keys (any key closes) ".to_string()
    };
    f.render_widget(Clear, popup);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Line::styled(more, theme.title()));
    f.render_widget(
        Paragraph::new(lines)
            .block(block)
            .wrap(Wrap { trim: false })
            .scroll((scroll, 0)),
        popup,
    );
}

/// `17m30s ago` on the snapshot's clock.
pub(crate) fn ago(now: i64, t: Option<i64>) -> String {
    t.map_or_else(
        || "-".into(),
        |t| format!("{} ago", text::duration(now - t)),
    )
}

/// Rows `lines` take wrapped at `width` (word wrap may take a little more:
/// callers leave the paragraph room to scroll).
pub(crate) fn wrapped_height(lines: &[Line], width: u16) -> u16 {
    let w = width.max(1) as usize;
    lines
        .iter()
        .map(|l| l.width().max(1).div_ceil(w) as u16)
        .sum()
}

/// The message log, newest first, wrapped.
/// A panel at most `max_w` wide, centred, the body's full height.
fn full_height_popup(area: Rect, max_w: u16) -> Rect {
    let w = area.width.min(max_w);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y,
        width: w,
        height: area.height,
    }
}

/// `:kpis`: the scheduler's health numbers since the console opened (or
/// over the replayed night), over the window asked for.
fn draw_kpis(f: &mut Frame, area: Rect, app: &App, window: i64, theme: Theme) {
    let popup = full_height_popup(area, 110);
    let w = popup.width;
    let lines: Vec<Line> = match app.kpi_figures.clone() {
        Some(k) => {
            let mut l: Vec<Line> = crate::report::kpis(&k)
                .lines()
                .map(|x| Line::raw(x.to_string()))
                .collect();
            if k.observed_s < window {
                l.push(Line::styled(
                    format!(
                        "observed {} of the {} asked: the console keeps what it saw since it opened (nightshift record keeps the night)",
                        text::duration(k.observed_s),
                        text::duration(window)
                    ),
                    theme.dim(),
                ));
            }
            l
        }
        None => vec![Line::styled("no snapshot yet", theme.dim())],
    };
    let lines = hang(lines, w.saturating_sub(2));
    f.render_widget(Clear, popup);
    f.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: false }).block(
            Block::default().borders(Borders::ALL).title(Line::styled(
                format!(
                    " scheduler health, last {} (:kpis 8h for another window; any key closes) ",
                    text::duration(window)
                ),
                theme.title(),
            )),
        ),
        popup,
    );
}

fn message_lines(app: &App, width: u16, theme: Theme) -> Vec<Line<'static>> {
    let mut lines: Vec<Line> = app
        .messages
        .iter()
        .rev()
        .map(|(t, m)| {
            // The source's clock, as everywhere; the wall clock beside it
            // where they differ by more than a minute.
            let wall = if (t.wall - t.source).abs() > 60 {
                format!(" (wall {})", text::clock(t.wall))
            } else {
                String::new()
            };
            Line::from(vec![
                Span::styled(format!("{}{wall} ", text::clock(t.source)), theme.dim()),
                Span::raw(sanitize(m).into_owned()),
            ])
        })
        .collect();
    if lines.is_empty() {
        lines.push(Line::styled("no messages yet", theme.dim()));
    }
    if let Some(hint) = doctor_hint(app, theme) {
        lines.insert(0, hint);
    }
    hang(lines, width)
}

/// While a source fails: where to look for why (`nightshift doctor`).
fn doctor_hint(app: &App, theme: Theme) -> Option<Line<'static>> {
    app.freshness().any_failing().then(|| {
        Line::styled(
            "a source fails: `nightshift doctor` (same flags, another terminal) checks the source, its token, the endpoints and the audit log, each with what to fix",
            theme.warn(),
        )
    })
}

fn draw_messages(f: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let popup = full_height_popup(area, 120);
    let lines = message_lines(app, popup.width.saturating_sub(2), theme);
    let scroll = app.overlay_scroll.min(overlay_max_scroll(app));
    f.render_widget(Clear, popup);
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((scroll, 0))
            .block(Block::default().borders(Borders::ALL).title(Line::styled(
                " messages, newest first (j k pgdn pgup scroll; any other key closes) ",
                theme.title(),
            ))),
        popup,
    );
}

/// How far the screen's text and the open overlay reach past the
/// terminal: the app's [`crate::app::Measure`] (the console is built
/// `App::new(…).measured_by(views::extent)`).
pub fn extent(app: &App) -> crate::app::Extent {
    crate::app::Extent {
        screen: screen_max_scroll(app),
        overlay: overlay_max_scroll(app),
    }
}

/// How far the screen's own text scrolls (the job screen's): to its last
/// line at the terminal's size.
pub fn screen_max_scroll(app: &App) -> u16 {
    let (w, h) = app.size;
    let body = Rect::new(0, 0, w, h.saturating_sub(2));
    component::for_view(app.screen().view).max_scroll(app, body)
}

/// How far the open overlay (help, the message log) can scroll: its
/// wrapped rows past the body's height. The keys clamp to it, so that a
/// key up after the end moves at once.
pub fn overlay_max_scroll(app: &App) -> u16 {
    let (w, h) = app.size;
    // The body: the screen less the header and the footer; the panel's
    // borders take two more rows and columns.
    let body = Rect::new(0, 0, w, h.saturating_sub(2));
    let theme = Theme { color: false };
    let (popup, lines) = if app.overlay == Some(Overlay::Help) {
        let p = full_height_popup(body, 100);
        (
            p,
            help_lines(p.width.saturating_sub(2), app.read_only, theme),
        )
    } else if app.overlay == Some(Overlay::Messages) {
        let p = full_height_popup(body, 120);
        (p, message_lines(app, p.width.saturating_sub(2), theme))
    } else {
        return 0;
    };
    wrapped_height(&lines, popup.width.saturating_sub(2))
        .saturating_sub(popup.height.saturating_sub(2))
}

/// A chart's frame that says its scale and its span: `title` on top,
/// `-12m … now` along the bottom.
pub(crate) fn chart_block(title: String, span: &str, theme: Theme) -> Block<'static> {
    Block::default()
        .borders(Borders::ALL)
        .title(title)
        .title_bottom(Line::styled(format!(" -{span} "), theme.dim()))
        .title_bottom(Line::styled(" now ", theme.dim()).right_aligned())
        .border_style(theme.dim())
}
