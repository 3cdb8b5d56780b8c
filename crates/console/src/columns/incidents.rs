//! The incident columns.

use super::{Cell, Column, Key, Tone, num, tone_of, txt};
use crate::engine::incidents::{Incident, Stage};
use crate::model::JobState;
use crate::text::{self, sanitize};

// ---- incidents ------------------------------------------------------------

/// `4700(running→pending),4701~`: each job hit, its state then → now; `~`
/// for one hit through its gang.
pub fn incident_jobs(i: &Incident) -> String {
    if i.jobs.is_empty() {
        return "-".into();
    }
    i.jobs
        .iter()
        .map(|j| {
            let st = |s: Option<JobState>| s.map_or("gone", |s| s.as_str());
            let states = match (j.state_then, j.state_now) {
                (Some(a), Some(b)) if a == b => a.as_str().to_string(),
                (then, now) => format!("{}→{}", st(then), st(now)),
            };
            format!("{}{}({states})", j.id, if j.via_gang { "~" } else { "" })
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn action_tone(i: &Incident) -> Tone {
    if !i.is_open() {
        Tone::Dim
    } else {
        tone_of(i.action.severity())
    }
}

pub const INCIDENTS: &[Column<Incident>] = &[
    Column {
        name: "TIME",
        priority: 1,
        min: 8,
        max: 8,
        fill: false,
        cell: |_, i| Cell::plain(text::clock(i.time)),
        sort: |_, i| Key::Num(-(i.time as f64)),
    },
    Column {
        name: "NODE",
        priority: 0,
        min: 7,
        max: 20,
        fill: false,
        cell: |_, i| Cell::plain(sanitize(&i.node)),
        sort: |_, i| txt(&i.node),
    },
    Column {
        name: "GPU",
        priority: 2,
        min: 3,
        max: 3,
        fill: false,
        cell: |_, i| Cell::plain(text::opt(i.gpu)),
        sort: |_, i| num(i.gpu.map(f64::from)),
    },
    Column {
        name: "EVENT",
        priority: 0,
        min: 10,
        max: 13,
        fill: false,
        cell: |_, i| Cell::tone(i.short_label(), tone_of(i.severity)),
        sort: |_, i| Key::Num(-(i.severity as u8 as f64)),
    },
    Column {
        name: "DO",
        priority: 0,
        min: 11,
        max: 12,
        fill: false,
        cell: |_, i| Cell::tone(i.action.short(), action_tone(i)),
        sort: |_, i| Key::Num(-(i.action as u8 as f64)),
    },
    Column {
        name: "STAGE",
        priority: 3,
        min: 8,
        max: 15,
        fill: false,
        cell: |_, i| Cell::tone(i.stage.as_str(), action_tone(i)),
        sort: |_, i| Key::Num(i.stage as u8 as f64),
    },
    Column {
        name: "JOBS",
        priority: 1,
        min: 6,
        max: 24,
        fill: false,
        cell: |_, i| Cell::plain(sanitize(&incident_jobs(i))),
        sort: |_, i| Key::Num(i.jobs.len() as f64),
    },
    Column {
        name: "WHAT → STATUS",
        priority: 1,
        min: 12,
        max: u16::MAX,
        fill: true,
        cell: |_, i| {
            Cell::tone(
                if i.stage == Stage::Open {
                    format!("{} → {}", sanitize(&i.message), sanitize(&i.status))
                } else {
                    format!("[{}] {}", i.stage.as_str(), sanitize(&i.status))
                },
                if i.is_open() { Tone::Plain } else { Tone::Dim },
            )
        },
        sort: |_, i| txt(&i.status),
    },
];
