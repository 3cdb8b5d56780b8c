//! The engine's answers as lines for the detail views: verdicts, the drain
//! blast radius, why a job waits, its restore time.

use super::theme::Theme;
use crate::app::App;
use crate::engine::analysis::FocusAnswer;
use crate::engine::incidents::IncidentKind;
use crate::engine::options::Options;
use crate::engine::plan::Estimate;
use crate::engine::restore::Quantity;
use crate::engine::xid::ActionClass;
use crate::model::Gpu;
use crate::text::{self, sanitize};
use ratatui::text::{Line, Span};

fn label(s: &str, theme: Theme) -> Span<'static> {
    Span::styled(format!(" {s:<13}"), theme.dim())
}

fn pending(theme: Theme) -> Line<'static> {
    Line::from(vec![
        Span::raw(" "),
        Span::styled("engine: computing…", theme.dim()),
    ])
}

/// Verdict and drain blast radius of a node: two lines.
pub fn node(app: &App, node: &str, theme: Theme) -> Vec<Line<'static>> {
    let Some(a) = &app.analysis else {
        return vec![pending(theme)];
    };
    let verdict = match a.node_verdict(node) {
        Some(v) => Line::from(vec![
            label("verdict", theme),
            Span::styled(
                sanitize(&v.verdict.summary).into_owned(),
                theme.action(v.verdict.action),
            ),
        ]),
        None => Line::from(vec![
            label("verdict", theme),
            Span::styled("healthy", theme.ok()),
        ]),
    };
    let drain = match &a.focus {
        Some(FocusAnswer::Node {
            name, drain: Ok(b), ..
        }) if name == node => {
            let text = if b.no_op {
                "already out of service: draining again changes nothing".to_string()
            } else {
                let jobs: Vec<String> = b
                    .killed
                    .iter()
                    .map(|k| {
                        format!(
                            "{} {} ({} GPUs{})",
                            sanitize(&k.id),
                            sanitize(&k.name),
                            text::opt(k.gpus),
                            if k.nodes.len() > 1 {
                                format!(", {} nodes", k.nodes.len())
                            } else {
                                String::new()
                            }
                        )
                    })
                    .collect();
                let share = b.partition.as_ref().map_or(String::new(), |p| {
                    format!(" ({:.0}% of {})", p.share * 100.0, sanitize(&p.name))
                });
                let kept = if b.keep_running.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; job(s) {} keep running (--no-requeue): it stays draining",
                        sanitize(&b.keep_running.join(", "))
                    )
                };
                format!(
                    "kills {}; {} GPU-h lost; {} GPUs out{share}; {} queued move{kept}",
                    if jobs.is_empty() {
                        "no jobs".to_string()
                    } else {
                        jobs.join(", ")
                    },
                    text::tenths(b.lost_gpu_hours),
                    b.gpus_out_of_service,
                    b.moved.len()
                )
            };
            Line::from(vec![label("if drained", theme), Span::raw(text)])
        }
        Some(FocusAnswer::Node {
            name,
            drain: Err(e),
            ..
        }) if name == node => Line::from(vec![
            label("if drained", theme),
            Span::styled(sanitize(&e.to_string()).into_owned(), theme.warn()),
        ]),
        _ => Line::from(vec![
            label("if drained", theme),
            Span::styled("computing…", theme.dim()),
        ]),
    };
    let mut out = vec![verdict];
    // Where its repair stands, when an incident asks for a drain.
    if let Some(inc) = a.base.node_incident(node) {
        out.push(Line::from(vec![
            label("incident", theme),
            Span::styled(
                format!("{} [{}] ", inc.full_label(), inc.stage.as_str()),
                theme.action(inc.action),
            ),
            Span::raw(sanitize(&inc.status).into_owned()),
        ]));
        if let Some(line) = app.autopilot_on(&inc.id) {
            out.push(Line::from(vec![
                label("autopilot", theme),
                Span::raw(sanitize(&line).into_owned()),
            ]));
        }
    }
    out.extend(history_line(a, node, theme));
    out.extend(armed_lines(app.armed_on(node), theme));
    out.push(drain);
    if let Some(FocusAnswer::Node {
        name,
        options: Some(o),
        ..
    }) = &a.focus
        && name == node
    {
        out.push(options_line("options", o, theme));
    }
    out
}

/// A node's hardware faults this month, when there are two or more of a
/// kind (one is the incident's own line): a repeat offender goes to repair.
/// An armed step a line: what, and what it waits for.
fn armed_lines(armed: Vec<(String, String)>, theme: Theme) -> Vec<Line<'static>> {
    armed
        .into_iter()
        .map(|(plan, status)| {
            Line::from(vec![
                label("armed", theme),
                Span::styled(sanitize(&plan).into_owned(), theme.warn()),
                Span::styled(
                    format!(" — {} (:disarm cancels)", sanitize(&status)),
                    theme.dim(),
                ),
            ])
        })
        .collect()
}

fn history_line(
    a: &crate::engine::analysis::Analysis,
    node: &str,
    theme: Theme,
) -> Option<Line<'static>> {
    let h = a.base.history(node).filter(|h| h.faults[0].count >= 2)?;
    let style = if h.is_repeat_offender() {
        theme.critical()
    } else {
        theme.warn()
    };
    let mut spans = vec![
        label("history", theme),
        Span::styled(sanitize(&h.line).into_owned(), style),
    ];
    if h.is_repeat_offender() {
        spans.push(Span::styled(
            " — a repeat offender: repair (RMA), not another reboot",
            style,
        ));
    }
    Some(Line::from(spans))
}

/// The recommended option in one line, and the key that compares them all.
pub fn options_line(what: &str, o: &Options, theme: Theme) -> Line<'static> {
    let mut spans = vec![label(what, theme)];
    if let Some(r) = o.recommended() {
        spans.push(Span::styled(format!("▶ {}", r.title), theme.ok()));
        spans.push(Span::raw(format!(" — {}", sanitize(&r.why))));
    }
    spans.push(Span::styled(
        format!("  (O: compare all {})", o.options.len()),
        theme.dim(),
    ));
    Line::from(spans)
}

/// A GPU's verdict and evidence, as the analyst found them: the same
/// verdict its node, the incidents and the command line show.
pub fn gpu(app: &App, gpu: &Gpu, theme: Theme) -> Vec<Line<'static>> {
    let Some(a) = &app.analysis else {
        return vec![pending(theme)];
    };
    let healthy = crate::engine::health::Verdict {
        action: ActionClass::None,
        summary: "healthy".into(),
        evidence: Vec::new(),
    };
    let v = a
        .base
        .gpu_verdict(&gpu.node, gpu.index)
        .map_or(&healthy, |g| &g.verdict);
    let mut lines = vec![Line::from(vec![
        label("verdict", theme),
        Span::styled(
            if v.action == ActionClass::None {
                "healthy".into()
            } else {
                v.action.advice().to_string()
            },
            theme.action(v.action),
        ),
    ])];
    for e in v.evidence.iter().take(4) {
        lines.push(Line::from(vec![
            label("", theme),
            Span::raw(format!("· {}", sanitize(e))),
        ]));
    }
    // Who its incidents hit, then and now: an idle GPU may have just
    // killed a job.
    for inc in a
        .base
        .incidents
        .iter()
        .filter(|i| {
            *i.node == *gpu.node && i.gpu == Some(gpu.index) && i.kind != IncidentKind::Stall
        })
        .take(3)
    {
        let jobs = if inc.jobs.is_empty() {
            "no job".to_string()
        } else {
            crate::columns::incident_jobs(inc)
        };
        lines.push(Line::from(vec![
            label("hit", theme),
            Span::styled(format!("{} ", inc.full_label()), theme.health(inc.severity)),
            Span::raw(format!(
                "at {} hit {} [{}]",
                text::clock(inc.time),
                sanitize(&jobs),
                inc.stage.as_str()
            )),
        ]));
    }
    lines
}

fn secs(q: &Quantity) -> String {
    q.value.map_or_else(
        || "unknown".to_string(),
        |v| text::duration(v.round() as i64),
    )
}

/// Why the job waits (pending) or what a restart costs (running).
pub fn job(app: &App, id: &str, theme: Theme) -> Vec<Line<'static>> {
    let Some(a) = &app.analysis else {
        return vec![pending(theme)];
    };
    let Some(FocusAnswer::Job {
        id: fid,
        why,
        restore,
        options,
    }) = &a.focus
    else {
        return vec![pending(theme)];
    };
    if fid != id {
        return vec![pending(theme)];
    }
    let mut lines = armed_lines(app.armed_for_job(id), theme);
    if let Some(w) = why {
        lines.push(Line::from(vec![Span::styled(
            " why it waits",
            theme.title(),
        )]));
        for (i, c) in w.causes.iter().enumerate() {
            lines.push(Line::from(vec![
                Span::raw(format!("  {}. ", i + 1)),
                Span::raw(sanitize(&c.message).into_owned()),
            ]));
        }
        let eta = match (&w.estimate, w.eta_s) {
            (Some(Estimate::Starts { start, .. }), Some(0)) => {
                format!("now ({})", text::clock(*start))
            }
            (Some(Estimate::Starts { start, .. }), Some(s)) => format!(
                "in {} ({}) at the latest: the worst case, when running jobs reach their time limits",
                text::duration(s),
                if start / 86_400 == app.cluster.time / 86_400 {
                    text::clock(*start)
                } else {
                    text::datetime(*start)
                }
            ),
            (Some(Estimate::Blocked { reason }), _) => format!("none while {}", sanitize(reason)),
            (
                Some(Estimate::NoFit {
                    reason, waits_for, ..
                }),
                _,
            ) => format!(
                "none: {}",
                sanitize(&Estimate::no_fit_text(reason, waits_for, "start"))
            ),
            _ => "-".into(),
        };
        lines.push(Line::from(vec![
            label("est. start", theme),
            Span::styled(eta, theme.warn()),
        ]));
        // The estimate's sentence when the line above does not say it all
        // (starts now, never, blocked); then what would help.
        let said_above =
            matches!(&w.estimate, Some(Estimate::Starts { start, .. }) if *start > a.base.time);
        let note = w.estimate_note.iter().filter(|_| !said_above);
        for s in note.chain(&w.suggestions).take(3) {
            lines.push(Line::from(vec![
                Span::styled("  → ", theme.ok()),
                Span::raw(sanitize(s).into_owned()),
            ]));
        }
    }
    if let Some(r) = restore {
        lines.push(Line::from(vec![Span::styled(
            " if restarted now",
            theme.title(),
        )]));
        let lost = match r.lost_gpu_hours.value {
            Some(h) => format!(
                "{} of work, {} GPU-hours{}",
                secs(&r.lost_work_s),
                text::tenths(h),
                r.lost_cost
                    .as_ref()
                    .and_then(|c| c.value)
                    .map_or(String::new(), |c| format!(", cost {c:.0}"))
            ),
            None => "unknown".into(),
        };
        let note = |q: &Quantity| format!("  [{}]", sanitize(&q.note));
        lines.push(Line::from(vec![
            label("lost", theme),
            Span::raw(lost),
            Span::styled(note(&r.lost_work_s), theme.dim()),
        ]));
        lines.push(Line::from(vec![
            label("state load", theme),
            Span::raw(format!(
                "{} ({})",
                secs(&r.load_s),
                r.state_bytes
                    .value
                    .map_or("size unknown".into(), |b| text::bytes(b as u64))
            )),
            Span::styled(note(&r.read_bw), theme.dim()),
        ]));
        lines.push(Line::from(vec![
            label("back in", theme),
            Span::styled(secs(&r.total_s), theme.warn()),
            Span::raw(format!(
                " = wait {} + start-up {} + load {}",
                secs(&r.requeue_wait_s),
                secs(&r.startup_s),
                secs(&r.load_s)
            )),
        ]));
    }
    if let Some(o) = options {
        lines.push(options_line("to preempt", o, theme));
    }
    lines
}
