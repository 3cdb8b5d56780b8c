//! The job columns.

use super::{Cell, Column, Ctx, Key, Tone, num, txt};
use crate::model::{Job, JobState};
use crate::text::{self, sanitize};

// ---- jobs -----------------------------------------------------------------

fn job_state_tone(s: JobState) -> Tone {
    match s {
        JobState::Failed => Tone::Critical,
        s if s.is_pending() => Tone::Warn,
        s if s.holds_resources() => Tone::Ok,
        _ => Tone::Dim,
    }
}

/// Shape as `N×G` (nodes × GPUs per node) or a total.
pub fn shape(j: &Job) -> String {
    match (j.node_count, j.gpus_per_node) {
        (Some(n), Some(g)) => format!("{n}×{g}"),
        _ => text::opt(j.gpus_requested()),
    }
}

/// Running time for a running job, waiting time for a pending one.
fn job_time(c: &Ctx, j: &Job) -> Option<i64> {
    let now = c.cluster.time;
    if j.state.holds_resources() {
        j.elapsed_s(now)
    } else if j.state.is_pending() {
        j.wait_s(now)
    } else {
        None
    }
}

/// The engine's estimated start of a pending job: `22:19` (today),
/// `12-01 03:00` (another day this year), `2027-12-02` (another year), or
/// why there is none.
fn eta(c: &Ctx, j: &Job) -> (String, Option<i64>) {
    use crate::engine::plan::Estimate;
    let Some(base) = c.base else {
        return ("…".into(), None);
    };
    // By id: the analysis may be of an earlier snapshot than the rows.
    match base.estimate_for(&j.id) {
        Some(Estimate::Starts { start, .. }) if *start <= c.cluster.time => {
            ("now".into(), Some(*start))
        }
        Some(Estimate::Starts { start, .. }) => {
            (text::moment_short(*start, c.cluster.time), Some(*start))
        }
        Some(Estimate::Blocked { .. }) => ("blocked".into(), None),
        // Never, unless it waits for something that can change: a node
        // out of service coming back, jobs without a time limit ending.
        Some(Estimate::NoFit {
            permanent: true, ..
        }) => ("never".into(), None),
        Some(Estimate::NoFit { .. }) => ("no est.".into(), None),
        None => ("-".into(), None),
    }
}

pub const JOBS: &[Column<Job>] = &[
    Column {
        name: "ID",
        priority: 0,
        min: 5,
        // Kubernetes ids are NAMESPACE/NAME.
        max: 28,
        fill: false,
        cell: |_, j| Cell::plain(sanitize(&j.id)),
        sort: |_, j| match j.id.parse::<f64>() {
            Ok(n) => Key::Num(n),
            Err(_) => txt(&j.id),
        },
    },
    Column {
        name: "STATE",
        priority: 0,
        min: 7,
        max: 10,
        fill: false,
        cell: |_, j| Cell::tone(j.state.as_str(), job_state_tone(j.state)),
        sort: |_, j| txt(j.state.as_str()),
    },
    Column {
        name: "NAME",
        priority: 1,
        min: 8,
        max: 28,
        fill: false,
        cell: |_, j| Cell::plain(sanitize(&j.name)),
        sort: |_, j| txt(&j.name),
    },
    Column {
        name: "USER",
        priority: 1,
        min: 5,
        max: 12,
        fill: false,
        cell: |_, j| Cell::plain(sanitize(&j.user)),
        sort: |_, j| txt(&j.user),
    },
    Column {
        name: "GPUS",
        priority: 1,
        min: 4,
        max: 6,
        fill: false,
        cell: |_, j| Cell::plain(shape(j)),
        sort: |_, j| num(j.gpus_requested().map(f64::from)),
    },
    Column {
        name: "TIME",
        priority: 2,
        min: 6,
        max: 7,
        fill: false,
        cell: |c, j| Cell::plain(job_time(c, j).map_or("-".into(), text::duration)),
        sort: |c, j| num(job_time(c, j).map(|t| t as f64)),
    },
    Column {
        name: "ETA",
        priority: 2,
        min: 5,
        max: 11,
        fill: false,
        cell: |c, j| {
            if j.state.is_pending() {
                Cell::tone(eta(c, j).0, Tone::Warn)
            } else {
                Cell::tone("-", Tone::Dim)
            }
        },
        sort: |c, j| {
            if j.state.is_pending() {
                num(eta(c, j).1.map(|t| t as f64))
            } else {
                Key::None
            }
        },
    },
    Column {
        name: "ACCOUNT",
        priority: 3,
        min: 6,
        max: 12,
        fill: false,
        cell: |_, j| {
            Cell::plain(
                j.account
                    .as_deref()
                    .map_or("-".into(), |a| sanitize(a).into_owned()),
            )
        },
        sort: |_, j| txt(j.account.as_deref().unwrap_or("")),
    },
    Column {
        name: "PART",
        priority: 3,
        min: 4,
        max: 10,
        fill: false,
        cell: |_, j| Cell::plain(sanitize(&j.partition)),
        sort: |_, j| txt(&j.partition),
    },
    Column {
        name: "PRIO",
        priority: 4,
        min: 4,
        max: 10,
        fill: false,
        cell: |_, j| Cell::plain(text::opt(j.priority.get())),
        sort: |_, j| num(j.priority.get().map(|p| p as f64)),
    },
    Column {
        name: "NODES / REASON",
        priority: 2,
        min: 10,
        max: u16::MAX,
        fill: true,
        cell: |_, j| {
            Cell::plain(sanitize(&if j.state.holds_resources() {
                j.nodes.join(",")
            } else {
                j.reason.clone().unwrap_or_else(|| "-".into())
            }))
        },
        sort: |_, j| txt(j.reason.as_deref().unwrap_or("")),
    },
];
