//! The post-mortem as Markdown, for an incident ticket.

use super::NightReport;
use crate::text::{self, sanitize};
use std::fmt::Write;

fn md(s: &str) -> String {
    // Sanitised, and nothing that would break a table row.
    sanitize(s).replace('|', "\\|").replace('\n', " ")
}

/// Markdown that reads well pasted into an incident ticket.
pub fn markdown(r: &NightReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Night report: {} ({})\n\n{} → {} UTC, {} incident(s), {} action(s), {} GPU-hours lost by the jobs the incidents hit{}.\n",
        md(&r.cluster),
        md(&r.source),
        text::datetime(r.from),
        text::datetime(r.to),
        r.incidents.len(),
        r.actions.len(),
        text::tenths(r.gpu_hours_lost),
        match r.kpis.as_ref().and_then(crate::report::lost_total) {
            Some(all) => format!(
                " ({} by every job, in the health numbers below)",
                text::tenths(all)
            ),
            None => String::new(),
        }
    );
    if let Some(t) = &r.truncated {
        let _ = writeln!(out, "> The recording ends early: {}\n", md(t));
    }
    let _ = writeln!(out, "## Timeline\n");
    for i in &r.incidents {
        incident(&mut out, i);
    }
    actions(&mut out, r);
    let _ = writeln!(out, "## Still open at the end\n");
    if r.open_at_end.is_empty() {
        let _ = writeln!(out, "Nothing.\n");
    }
    for o in &r.open_at_end {
        let _ = writeln!(out, "- {}", md(o));
    }
    if !r.repeat_offenders.is_empty() {
        let _ = writeln!(out, "\n## Nodes that keep failing\n");
        for h in &r.repeat_offenders {
            let _ = writeln!(
                out,
                "- {}: {} — take it out for repair (RMA), not another reboot",
                md(&h.node),
                md(&h.line)
            );
        }
    }
    if let Some(k) = &r.kpis {
        let _ = writeln!(out, "\n## Scheduler health\n\n```");
        out.push_str(&crate::report::kpis(k));
        let _ = writeln!(out, "```");
    }
    out
}

/// One incident of the timeline: what, where, the evidence, whom it hit
/// and what they lost, the first action, how it stood at the end.
fn incident(out: &mut String, i: &super::IncidentEntry) {
    let gpu = i.gpu.map_or(String::new(), |g| format!(" GPU {g}"));
    let _ = writeln!(
        out,
        "### {} {} on {}{} — {}\n",
        text::clock(i.time),
        md(&i.label),
        md(&i.node),
        gpu,
        md(&i.meaning)
    );
    let _ = writeln!(out, "- catalog: {}", md(&i.advice));
    if i.evidence.len() > 1 {
        for e in &i.evidence {
            let _ = writeln!(out, "- evidence: {}", md(e));
        }
    }
    if let Some(b) = i.burning_gpu_hours_per_hour {
        let _ = writeln!(
            out,
            "- stalled: burning {b:.0} GPU-hours per hour while hung"
        );
    }
    for j in &i.jobs {
        let who = format!(
            "- job {} {} ({}){}: **{}**",
            md(&j.id),
            md(j.name.as_deref().unwrap_or("-")),
            md(j.user.as_deref().unwrap_or("-")),
            if j.via_gang { ", via its gang" } else { "" },
            md(&j.fate),
        );
        // A job that kept running lost nothing: no "0.0 lost" line.
        if matches!(j.fate.as_str(), "still running" | "completed") {
            let _ = writeln!(out, "{who} — nothing lost");
            continue;
        }
        let lost = j.gpu_hours_lost.map_or("unknown".into(), |h| {
            if h > 0.0 && h < 0.1 {
                format!("{h:.2}")
            } else {
                format!("{h:.1}")
            }
        });
        // What happened first, then what was estimated at the time: an
        // estimate is never told as the outcome (issue 58).
        let estimated = match j.restore_s {
            Some(s) => format!("back in {}", text::duration(s.round() as i64)),
            None => "restore time unknown".into(),
        };
        let back = match j.ran_again_after_s {
            Some(r) => format!(
                "ran again {} after it stopped (estimated then: {estimated})",
                text::duration(r)
            ),
            None if j.fate == "requeued" => {
                format!(
                    "not seen running again by the recording's end (estimated then: {estimated})"
                )
            }
            None => estimated,
        };
        let since = if j.fate.starts_with("stalled") {
            "unsaved (lost when it is requeued)"
        } else {
            "lost since its checkpoint or restart"
        };
        let _ = writeln!(out, "{who} — {lost} GPU-hours {since}, {back}");
    }
    // "ACTION TARGET by WHO at HH:MM:SS", one way for the first and the rest.
    let said = |a: &super::Action| {
        format!(
            "{} {} by {} at {}",
            md(&a.action),
            md(&a.target),
            md(&a.operator),
            text::clock(a.time)
        )
    };
    match (&i.first_action, i.time_to_action_s) {
        (Some(a), Some(s)) => {
            let _ = writeln!(
                out,
                "- action: {}, {} after the incident — {}",
                said(a),
                text::duration(s),
                md(&a.outcome)
            );
        }
        _ => {
            let _ = writeln!(out, "- action: none recorded");
        }
    }
    for a in &i.later_actions {
        let _ = writeln!(out, "- then: {} — {}", said(a), md(&a.outcome));
    }
    let _ = writeln!(out, "- at the end: {}\n", md(&i.stage_at_end));
}

/// The actions of the night as a table, then each one's preview.
fn actions(out: &mut String, r: &NightReport) {
    let _ = writeln!(out, "## Actions\n");
    if r.actions.is_empty() {
        let _ = writeln!(out, "None recorded.\n");
    } else {
        let _ = writeln!(out, "| time | who | action | target | answers | outcome |");
        let _ = writeln!(out, "|---|---|---|---|---|---|");
        for a in &r.actions {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                text::clock(a.time),
                md(&a.operator),
                md(&a.action),
                md(&a.target),
                md(a.incident.as_deref().unwrap_or("-")),
                md(&a.outcome)
            );
        }
        let _ = writeln!(out);
        for a in &r.actions {
            let _ = writeln!(out, "- {} preview: {}", md(&a.target), md(&a.preview));
        }
        let _ = writeln!(out);
    }
}
