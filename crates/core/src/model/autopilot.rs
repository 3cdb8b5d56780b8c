//! The autopilot as every console shows it (issue 61): the running
//! autopilot's last round (its status file beside the audit log), whether
//! a person paused it (the audit log), and what it does about each
//! incident. Plain data.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a console knows of the autopilot.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AutopilotStatus {
    /// Its last round; `None`: no autopilot has run on this audit log.
    pub round: Option<AutopilotRound>,
    /// Paused by a person, for every process on this audit log.
    pub paused: Option<AutopilotPaused>,
}

/// One round of a running autopilot, as it wrote it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AutopilotRound {
    pub host: String,
    pub pid: u32,
    /// Wall clock, Unix seconds.
    pub at: i64,
    /// How often it rounds.
    pub interval_s: u64,
    pub cluster: String,
    /// Its policies by mode.
    pub live: usize,
    pub shadow: usize,
    /// Per incident id: what it does about it now, one line (`drain now
    /// and requeue — done`, `waits for the condition to hold 30s`,
    /// `paged: the guard refuses …`).
    pub handling: BTreeMap<String, String>,
}

impl AutopilotRound {
    /// Whether it is still rounding at wall time `now`: its last round
    /// within three intervals (and 10 s).
    pub fn running_at(&self, now: i64) -> bool {
        now - self.at <= 3 * self.interval_s as i64 + 10
    }
}

/// Who paused it, when, and why.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AutopilotPaused {
    pub by: String,
    pub host: String,
    /// Wall clock.
    pub at: i64,
    pub why: String,
}
