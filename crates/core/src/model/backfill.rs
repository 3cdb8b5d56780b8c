//! An hour of GPU history from before nightshift opened, read from
//! Prometheus (`query_range`): SM occupancy and utilization in fixed time
//! slots, and the Xids each GPU reported, with when they were first seen.

use super::Timestamp;
use std::collections::BTreeMap;

/// Seconds between the charts' samples.
pub const HISTORY_STEP: i64 = 30;
/// Samples the charts keep: an hour.
pub const HISTORY_SLOTS: usize = 120;

/// One GPU's history. Percentages 0–100; `None`: no sample in that slot.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuBackfill {
    pub occupancy: Vec<Option<u8>>,
    pub utilization: Vec<Option<u8>>,
    /// Each Xid the GPU's last-Xid gauge changed to, in time order.
    pub xids: Vec<XidSeen>,
}

/// An Xid in the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XidSeen {
    pub code: u32,
    /// The first sample that showed it.
    pub first_seen: Timestamp,
    /// It was already there at the window's first sample: it happened at
    /// or before `first_seen`, not at it.
    pub at_window_start: bool,
}

/// History for many GPUs, in slots of `step` seconds from `start`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Backfill {
    pub start: Timestamp,
    pub step: i64,
    pub slots: usize,
    /// By host (a node name once the endpoints have mapped it) and GPU.
    pub gpus: BTreeMap<(String, u32), GpuBackfill>,
    /// What went wrong or was odd, in a line each (shown to the operator).
    pub notes: Vec<String>,
}

impl Backfill {
    /// The slot that holds time `t`, if the window covers it.
    pub fn slot(&self, t: Timestamp) -> Option<usize> {
        if self.step <= 0 || t < self.start - self.step / 2 {
            return None;
        }
        let i = usize::try_from((t - self.start + self.step / 2) / self.step).ok()?;
        (i < self.slots).then_some(i)
    }

    /// The same history with its hosts renamed (to the scheduler's node
    /// names). Two hosts that map to one node keep the first.
    pub fn renamed(self, mut node_for: impl FnMut(&str) -> String) -> Backfill {
        let mut gpus = BTreeMap::new();
        for ((host, gpu), b) in self.gpus {
            gpus.entry((node_for(&host), gpu)).or_insert(b);
        }
        Backfill { gpus, ..self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_cover_the_window_and_nothing_else() {
        let b = Backfill {
            start: 1000,
            step: 30,
            slots: 4,
            ..Backfill::default()
        };
        assert_eq!(b.slot(984), None, "more than half a step before");
        assert_eq!(b.slot(985), Some(0));
        assert_eq!(b.slot(1014), Some(0));
        assert_eq!(b.slot(1015), Some(1));
        assert_eq!(b.slot(1090), Some(3));
        assert_eq!(b.slot(1105), None, "past the last slot");
    }
}
