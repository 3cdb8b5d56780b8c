//! One column specification per entity — node, GPU, job, incident — shared
//! by the TUI's lists and detail tables, their filters and sorts, and the
//! command line's tables (`get … -o table`). A column says what it shows
//! (text and a tone), how much it matters (priority: low-value columns are
//! dropped first on a narrow screen), how wide it may be, and how it sorts.
//! No ratatui here: the views map a tone to a colour.

mod gpus;
mod incidents;
mod jobs;
mod layout;
mod nodes;
#[cfg(test)]
mod tests;

pub use gpus::GPUS;
pub use incidents::{INCIDENTS, incident_jobs};
pub use jobs::{JOBS, shape};
pub use layout::{field_name, fit, layout, matches, sort_rows};
pub use nodes::NODES;

use crate::engine::analysis::Base;
use crate::model::{Cluster, Gpu, GpuHealth};
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

pub(super) fn tone_of(h: GpuHealth) -> Tone {
    match h {
        GpuHealth::Ok => Tone::Plain,
        GpuHealth::Warn => Tone::Warn,
        GpuHealth::Critical => Tone::Critical,
    }
}

pub(super) fn num(v: Option<f64>) -> Key {
    v.map_or(Key::None, Key::Num)
}

pub(super) fn txt(s: &str) -> Key {
    Key::Text(s.to_lowercase())
}
