//! One column specification per entity — node, GPU, job, incident — shared
//! by the TUI's lists and detail tables, their filters and sorts, and the
//! command line's tables (`get … -o table`). A column says what it shows
//! (text and a tone), how much it matters (priority: low-value columns are
//! dropped first on a narrow screen), how wide it may be, and how it sorts.
//! No ratatui here: the views map a tone to a colour.

use crate::engine::analysis::Base;
use crate::engine::incidents::{Incident, Stage};
use crate::model::{Cluster, Gpu, GpuHealth, Job, JobState, Node, NodeState};
use crate::text::{self, sanitize};
use std::cmp::Ordering;

/// How a cell should look, whatever the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Plain,
    Ok,
    Warn,
    Critical,
    Dim,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub text: String,
    pub tone: Tone,
}

impl Cell {
    fn plain(text: impl Into<String>) -> Cell {
        Cell {
            text: text.into(),
            tone: Tone::Plain,
        }
    }

    fn tone(text: impl Into<String>, tone: Tone) -> Cell {
        Cell {
            text: text.into(),
            tone,
        }
    }
}

/// What a column sorts by.
#[derive(Debug, Clone, PartialEq)]
pub enum Key {
    Num(f64),
    Text(String),
    /// Unknown values sort last either way.
    None,
}

impl Key {
    pub fn order(&self, other: &Key) -> Ordering {
        match (self, other) {
            (Key::None, Key::None) => Ordering::Equal,
            (Key::None, _) => Ordering::Greater,
            (_, Key::None) => Ordering::Less,
            (Key::Num(a), Key::Num(b)) => a.partial_cmp(b).unwrap_or(Ordering::Equal),
            (Key::Text(a), Key::Text(b)) => a.cmp(b),
            (Key::Num(_), Key::Text(_)) => Ordering::Less,
            (Key::Text(_), Key::Num(_)) => Ordering::Greater,
        }
    }
}

/// What a cell may look at besides its row.
pub struct Ctx<'a> {
    pub cluster: &'a Cluster,
    /// The engine's answers (health, incidents), when computed.
    pub base: Option<&'a Base>,
    /// Readings older than this are shown as stale.
    pub stale_after_s: u64,
}

impl Ctx<'_> {
    fn gpu_health(&self, g: &Gpu) -> GpuHealth {
        self.base
            .map_or(GpuHealth::Ok, |b| b.gpu_severity(&g.node, g.index))
    }

    fn stale(&self, g: &Gpu) -> bool {
        g.reading_time
            .is_some_and(|t| (self.cluster.time - t).max(0) as u64 > self.stale_after_s)
    }
}

pub struct Column<T: ?Sized> {
    pub name: &'static str,
    /// 0 is never dropped; the highest goes first when space runs out.
    pub priority: u8,
    /// Never narrower than this (an id or a name stays readable).
    pub min: u16,
    /// Never wider than this; the fill column takes what is left.
    pub max: u16,
    pub fill: bool,
    pub cell: fn(&Ctx, &T) -> Cell,
    pub sort: fn(&Ctx, &T) -> Key,
}

fn tone_of(h: GpuHealth) -> Tone {
    match h {
        GpuHealth::Ok => Tone::Plain,
        GpuHealth::Warn => Tone::Warn,
        GpuHealth::Critical => Tone::Critical,
    }
}

fn num(v: Option<f64>) -> Key {
    v.map_or(Key::None, Key::Num)
}

fn txt(s: &str) -> Key {
    Key::Text(s.to_lowercase())
}

// ---- nodes ----------------------------------------------------------------

fn node_state_tone(s: NodeState) -> Tone {
    match s {
        NodeState::Up => Tone::Ok,
        NodeState::Cordoned | NodeState::Draining => Tone::Warn,
        NodeState::Drain | NodeState::Down | NodeState::Unknown => Tone::Critical,
    }
}

fn node_max_temp(n: &Node) -> Option<f64> {
    n.gpus
        .iter()
        .filter_map(|g| g.temperature_c)
        .fold(None, |m: Option<f64>, t| Some(m.map_or(t, |m| m.max(t))))
}

fn node_dbe(n: &Node) -> u64 {
    n.gpus.iter().filter_map(|g| g.ecc.dbe_volatile).sum()
}

pub const NODES: &[Column<Node>] = &[
    Column {
        name: "NAME",
        priority: 0,
        min: 8,
        max: 24,
        fill: false,
        cell: |_, n| Cell::plain(sanitize(&n.name)),
        sort: |_, n| txt(&n.name),
    },
    Column {
        name: "STATE",
        priority: 0,
        min: 8,
        max: 8,
        fill: false,
        cell: |_, n| Cell::tone(n.state.as_str(), node_state_tone(n.state)),
        sort: |_, n| txt(n.state.as_str()),
    },
    Column {
        name: "GPUS",
        priority: 1,
        min: 5,
        max: 7,
        fill: false,
        cell: |_, n| Cell::plain(format!("{}/{}", n.gpus_allocated(), n.gpu_count)),
        sort: |_, n| Key::Num(f64::from(n.gpus_allocated())),
    },
    Column {
        name: "HEALTH",
        priority: 0,
        min: 8,
        max: 8,
        fill: false,
        cell: |c, n| {
            let h = c.base.map_or(GpuHealth::Ok, |b| b.node_severity(&n.name));
            Cell::tone(format!("{h:?}").to_lowercase(), tone_of(h))
        },
        sort: |c, n| {
            let h = c.base.map_or(GpuHealth::Ok, |b| b.node_severity(&n.name));
            Key::Num(-(h as u8 as f64))
        },
    },
    Column {
        name: "LAST XID",
        priority: 1,
        min: 8,
        max: 16,
        fill: false,
        cell: |_, n| match n.last_xid() {
            Some((g, x)) => Cell::tone(
                format!(
                    "{} gpu{g} {}",
                    x.code,
                    x.time.map_or(String::new(), text::clock)
                ),
                Tone::Critical,
            ),
            None => Cell::plain("-"),
        },
        sort: |_, n| num(n.last_xid().map(|(_, x)| x.time.unwrap_or(0) as f64)),
    },
    Column {
        name: "PART",
        priority: 2,
        min: 4,
        max: 12,
        fill: false,
        cell: |_, n| Cell::plain(sanitize(&n.partitions.join(","))),
        sort: |_, n| txt(&n.partitions.join(",")),
    },
    Column {
        name: "SM OCC",
        priority: 3,
        min: 6,
        max: 6,
        fill: false,
        cell: |_, n| Cell::plain(text::percent(n.mean_sm_occupancy())),
        sort: |_, n| num(n.mean_sm_occupancy()),
    },
    Column {
        name: "DBE",
        priority: 2,
        min: 3,
        max: 5,
        fill: false,
        cell: |_, n| {
            let d = node_dbe(n);
            Cell::tone(
                d.to_string(),
                if d > 0 { Tone::Critical } else { Tone::Plain },
            )
        },
        sort: |_, n| Key::Num(node_dbe(n) as f64),
    },
    Column {
        name: "TEMP",
        priority: 4,
        min: 4,
        max: 5,
        fill: false,
        cell: |_, n| Cell::plain(node_max_temp(n).map_or("-".into(), |t| format!("{t:.0}C"))),
        sort: |_, n| num(node_max_temp(n)),
    },
    Column {
        name: "REASON",
        priority: 1,
        min: 10,
        max: u16::MAX,
        fill: true,
        cell: |_, n| {
            Cell::plain(
                n.reason
                    .as_deref()
                    .map_or("-".into(), |r| sanitize(r).into_owned()),
            )
        },
        sort: |_, n| txt(n.reason.as_deref().unwrap_or("")),
    },
];

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
                    text::opt(g.ecc.dbe_volatile),
                    text::opt(g.ecc.dbe_aggregate)
                ),
                if g.ecc.dbe_volatile.unwrap_or(0) > 0 {
                    Tone::Critical
                } else {
                    Tone::Plain
                },
            )
        },
        sort: |_, g| num(g.ecc.dbe_volatile.map(|d| d as f64)),
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
                text::opt(g.ecc.sbe_volatile),
                text::opt(g.ecc.sbe_aggregate)
            ))
        },
        sort: |_, g| num(g.ecc.sbe_volatile.map(|d| d as f64)),
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

/// The engine's estimated start of a pending job: `in 1h06m`, `22:19`,
/// `12-01 03:00` (another day), or why there is none.
fn eta(c: &Ctx, j: &Job) -> (String, Option<i64>) {
    use crate::engine::plan::Estimate;
    let Some(base) = c.base else {
        return ("…".into(), None);
    };
    let Some(i) = c.cluster.jobs.iter().position(|x| x.id == j.id) else {
        return ("-".into(), None);
    };
    match base.plan.estimate(i) {
        Some(Estimate::Starts { start, .. }) if *start <= c.cluster.time => {
            ("now".into(), Some(*start))
        }
        Some(Estimate::Starts { start, .. }) => {
            let same_day = start / 86_400 == c.cluster.time / 86_400;
            let when = if same_day {
                text::clock(*start)[..5].to_string()
            } else {
                text::datetime(*start)[5..16].replace('T', " ")
            };
            (when, Some(*start))
        }
        Some(Estimate::Blocked { .. }) => ("blocked".into(), None),
        Some(Estimate::NoFit { .. }) => ("never".into(), None),
        None => ("-".into(), None),
    }
}

pub const JOBS: &[Column<Job>] = &[
    Column {
        name: "ID",
        priority: 0,
        min: 5,
        max: 12,
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
        cell: |_, j| Cell::plain(text::opt(j.priority)),
        sort: |_, j| num(j.priority.map(|p| p as f64)),
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
        cell: |_, i| Cell::tone(i.label.clone(), tone_of(i.severity)),
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

// ---- layout ---------------------------------------------------------------

/// A fill column (a free-text status) is content at this width; wider is a
/// bonus, not a reason to drop another column.
const FILL_ENOUGH: u16 = 40;

/// Column widths for a table `width` wide; `natural` is each column's widest
/// content (header included) among the rows shown. Columns are dropped,
/// least important first, until the rest fit at their minimum *and* no
/// column is cut short while a less important one is shown — a name is
/// never cut to keep a temperature. Spare width then goes to columns in
/// priority order, each up to what its content needs (and its maximum), and
/// what is left to the fill column. `None`: dropped.
pub fn layout<T: ?Sized>(cols: &[Column<T>], natural: &[u16], width: u16) -> Vec<Option<u16>> {
    let mut shown: Vec<bool> = vec![true; cols.len()];
    loop {
        let w = widths(cols, natural, width, &shown);
        let fits = fits(cols, &shown, width);
        // The most important column left short of what it needs.
        let short = (0..cols.len())
            .filter(|&i| shown[i])
            .filter(|&i| {
                let hi = cols[i].max.max(cols[i].min);
                let cap = if cols[i].fill {
                    FILL_ENOUGH.min(hi)
                } else {
                    hi
                };
                let need = natural.get(i).copied().unwrap_or(0).clamp(cols[i].min, cap);
                w[i] < need
            })
            .map(|i| cols[i].priority)
            .min();
        // The least important shown column, the rightmost of equals, that
        // matters less than what is short (or anything, when it does not fit).
        let drop = (0..cols.len())
            .filter(|&i| shown[i] && cols[i].priority > 0)
            .filter(|&i| !fits || short.is_some_and(|p| cols[i].priority > p))
            .max_by_key(|&i| (cols[i].priority, i));
        match drop {
            Some(d) if !fits || short.is_some() => shown[d] = false,
            _ => return (0..cols.len()).map(|i| shown[i].then_some(w[i])).collect(),
        }
    }
}

fn fits<T: ?Sized>(cols: &[Column<T>], shown: &[bool], width: u16) -> bool {
    let n = shown.iter().filter(|&&s| s).count() as u32;
    let need: u32 = cols
        .iter()
        .zip(shown)
        .filter(|(_, s)| **s)
        .map(|(c, _)| u32::from(c.min))
        .sum::<u32>()
        + n.saturating_sub(1);
    need <= u32::from(width)
}

/// Widths of the shown columns: minimums, then spare width by priority.
fn widths<T: ?Sized>(cols: &[Column<T>], natural: &[u16], width: u16, shown: &[bool]) -> Vec<u16> {
    let n = shown.iter().filter(|&&s| s).count() as u32;
    let mut w: Vec<u16> = cols.iter().map(|c| c.min).collect();
    let used: u32 = (0..cols.len())
        .filter(|&i| shown[i])
        .map(|i| u32::from(w[i]))
        .sum::<u32>()
        + n.saturating_sub(1);
    let mut spare = u32::from(width).saturating_sub(used);
    let mut order: Vec<usize> = (0..cols.len()).filter(|&i| shown[i]).collect();
    order.sort_by_key(|&i| (cols[i].priority, i));
    for &i in &order {
        // A maximum below the minimum means the minimum.
        let hi = cols[i].max.max(cols[i].min);
        let want = natural.get(i).copied().unwrap_or(0).clamp(cols[i].min, hi);
        let grow = u32::from(want.saturating_sub(w[i])).min(spare);
        w[i] += grow as u16;
        spare -= grow;
    }
    if let Some(fill) = (0..cols.len()).find(|&i| shown[i] && cols[i].fill) {
        w[fill] = w[fill].saturating_add(spare.min(u32::from(u16::MAX)) as u16);
    }
    w
}

/// `text` in at most `width` columns: whole, or cut with `…` — never a
/// prefix that could name another thing.
pub fn fit(text: &str, width: u16) -> String {
    let width = width as usize;
    if text.chars().count() <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out: String = text.chars().take(width - 1).collect();
    out.push('…');
    out
}

/// Rows in a column's order; `reverse` flips it, unknowns stay last.
pub fn sort_rows<T>(ctx: &Ctx, col: &Column<T>, rows: &mut [(usize, &T)], reverse: bool) {
    rows.sort_by(|a, b| {
        let (ka, kb) = ((col.sort)(ctx, a.1), (col.sort)(ctx, b.1));
        let o = match (&ka, &kb) {
            (Key::None, _) | (_, Key::None) => ka.order(&kb),
            _ if reverse => kb.order(&ka),
            _ => ka.order(&kb),
        };
        o.then(a.0.cmp(&b.0))
    });
}

/// Whether a row matches a filter: text on any column (`alice`), the
/// inverse (`!alice`), or a field (`state:pending`, `!state:running`).
pub fn matches<T>(ctx: &Ctx, cols: &[Column<T>], row: &T, filter: &str) -> bool {
    let f = filter.trim();
    if f.is_empty() {
        return true;
    }
    let (negate, f) = match f.strip_prefix('!') {
        Some(rest) => (true, rest.trim()),
        None => (false, f),
    };
    let f = f.to_lowercase();
    let hit = match f.split_once(':') {
        Some((field, value)) if cols.iter().any(|c| field_name(c.name) == field) => cols
            .iter()
            .filter(|c| field_name(c.name) == field)
            .any(|c| (c.cell)(ctx, row).text.to_lowercase().contains(value)),
        _ => cols
            .iter()
            .any(|c| (c.cell)(ctx, row).text.to_lowercase().contains(&f)),
    };
    hit != negate
}

/// A column's name as a filter field: `LAST XID` → `lastxid`,
/// `NODES / REASON` → `reason`, `SM OCC` → `smocc`.
pub fn field_name(name: &str) -> String {
    let n = name.rsplit('/').next().unwrap_or(name);
    n.chars()
        .filter(|c| c.is_alphanumeric())
        .collect::<String>()
        .to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_screens_drop_low_value_columns_and_wide_ones_share_by_priority() {
        let natural: Vec<u16> = vec![8, 8, 5, 8, 12, 4, 6, 3, 4, 40];
        let at = |w| layout(NODES, &natural, w);
        let shown = |v: &[Option<u16>]| -> Vec<&str> {
            NODES
                .iter()
                .zip(v)
                .filter(|(_, w)| w.is_some())
                .map(|(c, _)| c.name)
                .collect()
        };
        let narrow = at(60);
        assert!(shown(&narrow).contains(&"NAME") && shown(&narrow).contains(&"HEALTH"));
        assert!(
            !shown(&narrow).contains(&"TEMP"),
            "TEMP goes first: {:?}",
            shown(&narrow)
        );
        let total: u16 = narrow.iter().flatten().sum::<u16>() + shown(&narrow).len() as u16 - 1;
        assert!(total <= 60, "{total}");
        let wide = at(200);
        assert_eq!(shown(&wide).len(), NODES.len(), "all fit");
        // NAME gets what its content needs, no more; the fill column the rest.
        assert_eq!(wide[0], Some(8));
        let total: u16 = wide.iter().flatten().sum::<u16>() + NODES.len() as u16 - 1;
        assert_eq!(total, 200);
    }

    proptest::proptest! {
        /// Any widths and contents: never a panic, never wider than given
        /// when the columns that cannot be dropped fit.
        #[test]
        fn layout_never_panics(width in 0u16..400, natural in proptest::collection::vec(0u16..200, 13)) {
            let v = layout(GPUS, &natural, width);
            let shown: Vec<u16> = v.iter().flatten().copied().collect();
            let total: u32 = shown.iter().map(|&w| u32::from(w)).sum::<u32>() + shown.len().saturating_sub(1) as u32;
            let floor: u32 = GPUS.iter().filter(|c| c.priority == 0).map(|c| u32::from(c.min) + 1).sum();
            if u32::from(width) >= floor {
                proptest::prop_assert!(total <= u32::from(width), "{total} > {width}");
            }
        }
    }

    #[test]
    fn a_cut_value_says_so() {
        assert_eq!(fit("h100-03", 7), "h100-03");
        assert_eq!(fit("h100-03", 6), "h100-…");
        assert_eq!(fit("a-very-long-job-name", 8), "a-very-…");
        assert_eq!(fit("x", 0), "");
    }

    #[test]
    fn filters_on_any_column_inverse_and_by_field() {
        use crate::sources::sim::{Sim, SimConfig};
        let c = Sim::new(SimConfig::default()).expect("sim").snapshot();
        let base = Base::compute(
            &c,
            None,
            &crate::engine::SiteParams::default(),
            &crate::engine::xid::XidCatalog::default(),
        );
        let ctx = Ctx {
            cluster: &c,
            base: Some(&base),
            stale_after_s: 60,
        };
        let jobs = |f: &str| -> Vec<&str> {
            c.jobs
                .iter()
                .filter(|j| matches(&ctx, JOBS, j, f))
                .map(|j| j.id.as_str())
                .collect()
        };
        let alice = jobs("alice");
        assert!(alice.contains(&"4700"));
        assert!(jobs("!alice").iter().all(|id| !alice.contains(id)));
        let pending = jobs("state:pending");
        assert!(!pending.is_empty());
        assert!(
            pending
                .iter()
                .all(|id| c.job(id).is_some_and(|j| j.state.is_pending()))
        );
        let crit: Vec<&Gpu> = c
            .gpus()
            .map(|(_, g)| g)
            .filter(|g| matches(&ctx, GPUS, g, "crit"))
            .collect();
        assert_eq!(crit.len(), 1, "the Xid 79 GPU");
        let x79: Vec<&Gpu> = c
            .gpus()
            .map(|(_, g)| g)
            .filter(|g| matches(&ctx, GPUS, g, "lastxid:79"))
            .collect();
        assert_eq!((x79[0].node.as_str(), x79[0].index), ("h100-03", 3));
        let drained: Vec<&Node> = c
            .nodes
            .iter()
            .filter(|n| matches(&ctx, NODES, n, "drain"))
            .collect();
        assert_eq!(drained.len(), 1);
    }
}
