use super::{JobState, Timestamp};
use serde::{Deserialize, Serialize};

/// A job that held the GPU (or node) when an event happened, with its state
/// then: who an incident hit, captured by the source at the time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventJob {
    pub id: String,
    pub state: JobState,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// An Xid reported by the driver.
    Xid { code: u32 },
    /// An ECC event: uncorrectable errors, or a row remap pending/failed.
    Ecc {
        dbe: Option<u64>,
        sbe: Option<u64>,
        remap_pending: Option<bool>,
        remap_failed: Option<bool>,
    },
    /// A node changed scheduling state.
    NodeState { from: String, to: String },
    /// A network port of the node went down (`down`: it is down now) or
    /// flapped (its link-downed counter moved; it is up again).
    Link { port: String, down: bool },
    /// A GPU's NVLink error counters rose fast (a CRC storm).
    NvLink { errors: u64 },
}

/// One incident-worthy event: an Xid, an ECC error, a node state change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Sequence number, increasing per source.
    pub seq: u64,
    pub time: Timestamp,
    pub node: String,
    pub gpu: Option<u32>,
    #[serde(flatten)]
    pub kind: EventKind,
    pub message: String,
    /// The jobs on the GPU (or, for a node event, the node) when it happened.
    #[serde(default)]
    pub jobs: Vec<EventJob>,
}

impl Event {
    /// Short label for tables: `XID 79`, `ECC`, `NODE`.
    pub fn label(&self) -> String {
        match &self.kind {
            EventKind::Xid { code } => format!("XID {code}"),
            EventKind::Ecc {
                dbe, remap_failed, ..
            } => {
                if dbe.unwrap_or(0) > 0 {
                    "ECC DBE".to_string()
                } else if *remap_failed == Some(true) {
                    "REMAP FAIL".to_string()
                } else {
                    "ECC".to_string()
                }
            }
            EventKind::NodeState { to, .. } => format!("NODE {}", to.to_uppercase()),
            EventKind::Link { down: true, .. } => "IB DOWN".to_string(),
            EventKind::Link { down: false, .. } => "IB FLAP".to_string(),
            EventKind::NvLink { .. } => "NVLINK".to_string(),
        }
    }

    /// Whether it is the fabric's (a network port, NVLink), not a GPU's
    /// memory or engine.
    pub fn is_link(&self) -> bool {
        matches!(self.kind, EventKind::Link { .. } | EventKind::NvLink { .. })
    }

    pub fn xid(&self) -> Option<u32> {
        match self.kind {
            EventKind::Xid { code } => Some(code),
            _ => None,
        }
    }
}
