//! The GPU columns.

use super::{Cell, Column, Ctx, Key, Tone, num, tone_of, txt};
use crate::model::Gpu;
use crate::text::{self, sanitize};

// ---- GPUs -----------------------------------------------------------------

/// A reading, marked `~` when it is older than the stale threshold.
fn reading(c: &Ctx, g: &Gpu, s: String) -> Cell {
    if c.stale(g) && s != "-" {
        Cell::tone(format!("~{s}"), Tone::Dim)
    } else {
        Cell::plain(s)
    }
}

fn yn(b: Option<bool>) -> &'static str {
    match b {
        Some(true) => "Y",
        Some(false) => "n",
        None => "-",
    }
}

pub const GPUS: &[Column<Gpu>] = &[
    Column {
        name: "NODE",
        priority: 0,
        min: 8,
        max: 24,
        fill: false,
        cell: |_, g| Cell::plain(sanitize(&g.node)),
        sort: |_, g| txt(&g.node),
    },
    Column {
        name: "GPU",
        priority: 0,
        min: 3,
        max: 3,
        fill: false,
        cell: |_, g| Cell::plain(g.index.to_string()),
        sort: |_, g| Key::Num(f64::from(g.index)),
    },
    Column {
        name: "HEALTH",
        priority: 0,
        min: 8,
        max: 8,
        fill: false,
        cell: |c, g| {
            let h = c.gpu_health(g);
            Cell::tone(format!("{h:?}").to_lowercase(), tone_of(h))
        },
        sort: |c, g| Key::Num(-(c.gpu_health(g) as u8 as f64)),
    },
    Column {
        name: "LAST XID",
        priority: 0,
        min: 8,
        max: 14,
        fill: false,
        cell: |c, g| match &g.last_xid {
            Some(x) => Cell::tone(
                format!("{} {}", x.code, x.time.map_or(String::new(), text::clock)),
                tone_of(c.gpu_health(g)),
            ),
            None => Cell::plain("-"),
        },
        sort: |_, g| num(g.last_xid.as_ref().map(|x| f64::from(x.code))),
    },
    Column {
        name: "JOB",
        priority: 1,
        min: 6,
        max: 12,
        fill: false,
        cell: |_, g| {
            Cell::plain(
                g.job
                    .as_deref()
                    .map_or("-".into(), |j| sanitize(j).into_owned()),
            )
        },
        sort: |_, g| txt(g.job.as_deref().unwrap_or("")),
    },
    Column {
        name: "SM OCC",
        priority: 1,
        min: 6,
        max: 6,
        fill: false,
        cell: |c, g| reading(c, g, text::percent(g.sm_occupancy)),
        sort: |_, g| num(g.sm_occupancy),
    },
    Column {
        name: "UTIL",
        priority: 2,
        min: 4,
        max: 5,
        fill: false,
        cell: |c, g| reading(c, g, text::percent(g.utilization)),
        sort: |_, g| num(g.utilization),
    },
    Column {
        name: "DBE V/A",
        priority: 1,
        min: 7,
        max: 9,
        fill: false,
        cell: |_, g| {
            Cell::tone(
                format!(
                    "{}/{}",
                    text::opt(g.ecc.dbe_volatile.get()),
                    text::opt(g.ecc.dbe_aggregate.get())
                ),
                if g.ecc.dbe_volatile.unwrap_or(0) > 0 {
                    Tone::Critical
                } else {
                    Tone::Plain
                },
            )
        },
        sort: |_, g| num(g.ecc.dbe_volatile.get().map(|d| d as f64)),
    },
    Column {
        name: "REMAP",
        priority: 2,
        min: 5,
        max: 5,
        fill: false,
        cell: |_, g| {
            Cell::tone(
                format!("{}/{}", yn(g.row_remap_pending), yn(g.row_remap_failed)),
                if g.row_remap_failed == Some(true) {
                    Tone::Critical
                } else if g.row_remap_pending == Some(true) {
                    Tone::Warn
                } else {
                    Tone::Plain
                },
            )
        },
        sort: |_, g| {
            Key::Num(
                f64::from(u8::from(g.row_remap_failed == Some(true))) * 2.0
                    + f64::from(u8::from(g.row_remap_pending == Some(true))),
            )
        },
    },
    Column {
        name: "SBE V/A",
        priority: 3,
        min: 7,
        max: 11,
        fill: false,
        cell: |_, g| {
            Cell::plain(format!(
                "{}/{}",
                text::opt(g.ecc.sbe_volatile.get()),
                text::opt(g.ecc.sbe_aggregate.get())
            ))
        },
        sort: |_, g| num(g.ecc.sbe_volatile.get().map(|d| d as f64)),
    },
    Column {
        name: "MEM",
        priority: 3,
        min: 7,
        max: 9,
        fill: false,
        cell: |c, g| {
            let m = match (g.memory_used_mib, g.memory_total_mib) {
                (Some(u), Some(t)) => {
                    format!("{:.0}/{:.0}G", u as f64 / 1024.0, t as f64 / 1024.0)
                }
                (None, Some(t)) => format!("-/{:.0}G", t as f64 / 1024.0),
                _ => "-".into(),
            };
            reading(c, g, m)
        },
        sort: |_, g| num(g.memory_used_mib.map(|m| m as f64)),
    },
    Column {
        name: "TEMP",
        priority: 4,
        min: 4,
        max: 5,
        fill: false,
        cell: |c, g| {
            reading(
                c,
                g,
                g.temperature_c.map_or("-".into(), |t| format!("{t:.0}C")),
            )
        },
        sort: |_, g| num(g.temperature_c),
    },
    Column {
        name: "POWER",
        priority: 4,
        min: 5,
        max: 6,
        fill: true,
        cell: |c, g| reading(c, g, g.power_w.map_or("-".into(), |p| format!("{p:.0}W"))),
        sort: |_, g| num(g.power_w),
    },
];
