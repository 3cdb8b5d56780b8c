//! Plain-text answers of the decision engine for the command line. Every
//! string from a source is sanitised.

use crate::engine::blast::Blast;
use crate::engine::plan::Estimate;
use crate::engine::restore::{Quantity, Restore};
use crate::engine::why::Why;
use crate::text::{self, sanitize};
use std::fmt::Write;

fn q_secs(q: &Quantity) -> String {
    q.value.map_or_else(
        || "unknown".into(),
        |v| format!("{} ({v:.0} s)", text::duration(v.round() as i64)),
    )
}

fn line(out: &mut String, label: &str, value: String, q: &Quantity) {
    let _ = writeln!(
        out,
        "  {label:<16} {value:<24} [{}] {}",
        serde_json::to_value(q.source)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        sanitize(&q.note)
    );
}

/// "back in …" of a restore, the same words everywhere (CLI, TUI): the
/// total when it is known, else what it waits for.
pub fn back_in(r: &Restore) -> String {
    match r.total_s.value {
        Some(v) => text::duration(v.round() as i64),
        None => format!("unknown: {}", sanitize(&r.total_s.note)),
    }
}

pub fn restore(r: &Restore) -> String {
    let mut out = String::new();
    match &r.job {
        Some(j) => {
            let _ = writeln!(
                out,
                "restore of job {} ({} GPUs on {} node(s)):",
                sanitize(j),
                text::opt(r.gpus),
                r.nodes
            );
        }
        None => {
            let _ = writeln!(out, "restore what-if ({} node(s)):", r.nodes);
        }
    }
    line(
        &mut out,
        "lost work",
        q_secs(&r.lost_work_s),
        &r.lost_work_s,
    );
    line(
        &mut out,
        "lost GPU-hours",
        r.lost_gpu_hours
            .value
            .map_or("unknown".into(), |v| format!("{v:.1}")),
        &r.lost_gpu_hours,
    );
    if let Some(c) = &r.lost_cost {
        line(
            &mut out,
            "lost cost",
            c.value.map_or("unknown".into(), |v| format!("{v:.2}")),
            c,
        );
    }
    line(
        &mut out,
        "state",
        r.state_bytes
            .value
            .map_or("unknown".into(), |b| text::bytes(b as u64)),
        &r.state_bytes,
    );
    line(
        &mut out,
        "read bandwidth",
        r.read_bw
            .value
            .map_or("unknown".into(), |b| format!("{}/s", text::bytes(b as u64))),
        &r.read_bw,
    );
    line(&mut out, "state load", q_secs(&r.load_s), &r.load_s);
    line(
        &mut out,
        "requeue wait",
        q_secs(&r.requeue_wait_s),
        &r.requeue_wait_s,
    );
    line(&mut out, "start-up", q_secs(&r.startup_s), &r.startup_s);
    line(&mut out, "total to resume", q_secs(&r.total_s), &r.total_s);
    out
}

pub fn why(w: &Why) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "job {} is {}", sanitize(&w.job), w.state);
    for (i, c) in w.causes.iter().enumerate() {
        let _ = writeln!(out, "  {}. {}", i + 1, sanitize(&c.message));
    }
    let eta = match (&w.estimate, w.eta_s) {
        (Some(Estimate::Starts { start, nodes }), Some(s)) => format!(
            "in {} ({}) on {}",
            text::duration(s),
            text::datetime(*start),
            sanitize(&nodes.join(","))
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
    let _ = writeln!(out, "estimated start: {eta}");
    for s in w.estimate_note.iter().chain(&w.suggestions) {
        let _ = writeln!(out, "  → {}", sanitize(s));
    }
    out
}

pub fn blast(b: &Blast) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", sanitize(&b.summary));
    if !b.killed.is_empty() {
        let _ = writeln!(out, "jobs that die:");
        for k in &b.killed {
            let _ = writeln!(
                out,
                "  {} {} ({}, {} GPUs on {}){}{} — lost {} GPU-hours, back in {}",
                sanitize(&k.id),
                sanitize(&k.name),
                sanitize(&k.user),
                text::opt(k.gpus),
                sanitize(&k.nodes.join(",")),
                if k.via_gang { ", via its gang" } else { "" },
                if k.requeued {
                    ", requeued"
                } else {
                    ", cancelled"
                },
                k.restore
                    .lost_gpu_hours
                    .value
                    .map_or("?".into(), |v| format!("{v:.1}")),
                back_in(&k.restore),
            );
        }
    }
    let _ = writeln!(
        out,
        "GPUs freed: {}; out of service: {}",
        b.gpus_freed, b.gpus_out_of_service
    );
    if let Some(p) = &b.partition {
        let _ = writeln!(
            out,
            "capacity removed: {:.1}% of partition {} ({} of {}), {:.1}% of the cluster",
            p.share * 100.0,
            sanitize(&p.name),
            p.gpus_removed,
            p.gpus_total,
            b.cluster.share * 100.0
        );
    }
    if !b.moved.is_empty() {
        let _ = writeln!(out, "queued jobs that move:");
        for m in &b.moved {
            let when = |t: Option<i64>| t.map_or("no estimate".into(), text::datetime);
            let delta = m.delta_s.map_or("-".into(), |d| {
                if d >= 0 {
                    format!("+{}", text::duration(d))
                } else {
                    format!("-{}", text::duration(-d))
                }
            });
            let _ = writeln!(
                out,
                "  {} {} ({}): {} → {} ({delta})",
                sanitize(&m.id),
                sanitize(&m.name),
                sanitize(&m.user),
                when(m.before),
                when(m.after)
            );
        }
    }
    if !b.jumped.is_empty() {
        let _ = writeln!(out, "jobs it jumps: {}", sanitize(&b.jumped.join(", ")));
    }
    if !b.falls_behind.is_empty() {
        let _ = writeln!(
            out,
            "jobs it falls behind: {}",
            sanitize(&b.falls_behind.join(", "))
        );
    }
    if !b.users.is_empty() {
        let _ = writeln!(
            out,
            "users affected: {}; teams: {}",
            sanitize(&b.users.join(", ")),
            sanitize(&b.teams.join(", "))
        );
    }
    out
}

/// "8 GPUs for 15m00s", "-" when nothing is taken out.
pub fn capacity_out(c: &crate::engine::options::CapacityOut) -> String {
    match (c.gpus, c.for_s) {
        (0, _) => "-".into(),
        (g, Some(s)) => format!("{} for {}", text::count(Some(g), "GPU"), text::duration(s)),
        (g, None) => format!("{}, for ?", text::count(Some(g), "GPU")),
    }
}

/// When the jobs run again, in a table cell: `never` for a hung job that
/// nothing restarts.
pub fn resume_in(o: &crate::engine::options::Choice) -> String {
    match o.resume_in_s {
        Some(0) => "-".into(),
        Some(s) => text::duration(s),
        None if o.name == "do_nothing" => "never".into(),
        None => "?".into(),
    }
}

pub fn options(o: &crate::engine::options::Options) -> String {
    let mut out = String::new();
    let t = &o.target;
    let _ = writeln!(
        out,
        "options for {} {}: {}",
        t.kind,
        sanitize(&t.name),
        sanitize(&t.problem)
    );
    if !t.jobs.is_empty() {
        let jobs: Vec<String> = t
            .jobs
            .iter()
            .map(|j| {
                if t.hung.contains(j) {
                    format!("{} (hung)", sanitize(j))
                } else {
                    sanitize(j).into_owned()
                }
            })
            .collect();
        let _ = writeln!(out, "jobs that lose work: {}", jobs.join(", "));
    }
    let width = o
        .options
        .iter()
        .map(|c| c.title.chars().count())
        .max()
        .unwrap_or(6)
        .max(6);
    let _ = writeln!(
        out,
        "   {:<width$}  {:>10}  {:>9}  {:<18}  MOVES",
        "OPTION", "LOST GPU-h", "BACK IN", "OUT OF SERVICE"
    );
    for c in &o.options {
        let _ = writeln!(
            out,
            " {} {:<width$}  {:>10}  {:>9}  {:<18}  {}",
            if c.recommended {
                "*"
            } else if c.available() {
                " "
            } else {
                "x"
            },
            c.title,
            c.gpu_hours_lost.map_or("?".into(), |h| format!("{h:.1}")),
            resume_in(c),
            capacity_out(&c.capacity_out),
            text::opt(c.queue_moves),
        );
    }
    if let Some(r) = o.recommended() {
        let _ = writeln!(out, "recommended: {} — {}", r.title, sanitize(&r.why));
    }
    for (i, c) in o.options.iter().enumerate() {
        let _ = writeln!(out, "{}. {}", i + 1, c.title);
        for a in &c.actions {
            let _ = writeln!(out, "     {}", sanitize(a));
        }
        if !c.recommended && (c.unknowns.is_empty() || !c.available()) {
            let _ = writeln!(out, "     why not: {}", sanitize(&c.why));
        }
        for u in &c.unknowns {
            let _ = writeln!(out, "     unknown: {}", sanitize(u));
        }
        if let Some(r) = &c.risk {
            let _ = writeln!(out, "     risks: {}", sanitize(r));
        }
    }
    out
}

fn share(x: Option<f64>) -> String {
    x.map_or("unknown".into(), |v| format!("{:.1}%", v * 100.0))
}

fn waits_table(out: &mut String, title: &str, w: &[crate::engine::kpis::Wait]) {
    let _ = writeln!(out, "queue wait by {title}:");
    if w.is_empty() {
        let _ = writeln!(out, "  no job started in the window");
    }
    for x in w {
        let _ = writeln!(
            out,
            "  {:<18} {:>4} started  mean {:>8}  p95 {:>8}",
            sanitize(&x.group),
            x.jobs,
            x.mean_s
                .map_or("-".into(), |m| text::duration(m.round() as i64)),
            x.p95_s.map_or("-".into(), text::duration)
        );
    }
}

pub fn kpis(k: &crate::engine::kpis::Kpis) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "scheduler health {} → {} ({} observed, {} snapshots)",
        text::datetime(k.from),
        text::datetime(k.to),
        text::duration(k.observed_s),
        k.samples
    );
    let _ = writeln!(
        out,
        "GPUs:              {} allocated, {} mean SM occupancy",
        share(k.gpu_allocated),
        share(k.gpu_sm_occupancy)
    );
    waits_table(&mut out, "partition", &k.wait_by_partition);
    waits_table(&mut out, "job size", &k.wait_by_size);
    let _ = writeln!(
        out,
        "requeues:          {} ({} per hour); failed jobs: {}",
        k.requeues,
        k.requeues_per_hour
            .map_or("-".into(), |r| format!("{r:.1}")),
        k.failures
    );
    let _ = writeln!(
        out,
        "fragmentation:     {} of the time a job waiting for capacity could not start with enough GPUs free in total",
        share(k.fragmentation)
    );
    let h = |x: Option<f64>| x.map_or("unknown".into(), |v| format!("{v:.1}"));
    let _ = writeln!(
        out,
        "GPU-hours lost:    {} by failed jobs, {} by requeued jobs{} (since their checkpoints or restarts)",
        h(k.lost_gpu_hours_failed),
        h(k.lost_gpu_hours_requeued),
        k.lost_gpu_hours_hung.map_or(String::new(), |v| format!(
            ", {v:.1} by hung jobs still holding their GPUs"
        ))
    );
    let _ = writeln!(
        out,
        "node availability: {} ({:.1} node-hours drained, down or cordoned)",
        share(k.node_availability),
        k.node_hours_out
    );
    out
}

/// GPU-hours lost by every job of the window: failed, requeued and (where
/// known) hung; `None` while any part is unknown.
pub fn lost_total(k: &crate::engine::kpis::Kpis) -> Option<f64> {
    Some(
        k.lost_gpu_hours_failed?
            + k.lost_gpu_hours_requeued?
            + k.lost_gpu_hours_hung.unwrap_or(0.0),
    )
}
