use super::{GpuHealth, Timestamp, is_hardware_xid};
use serde::{Deserialize, Serialize};

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
        }
    }

    /// How loudly to show it: hardware Xids and uncorrectable ECC are
    /// critical, everything else a warning.
    pub fn severity(&self) -> GpuHealth {
        match &self.kind {
            EventKind::Xid { code } if is_hardware_xid(*code) => GpuHealth::Critical,
            EventKind::Ecc {
                dbe, remap_failed, ..
            } if dbe.unwrap_or(0) > 0 || *remap_failed == Some(true) => GpuHealth::Critical,
            EventKind::NodeState { to, .. } if to == "down" => GpuHealth::Critical,
            _ => GpuHealth::Warn,
        }
    }

    pub fn xid(&self) -> Option<u32> {
        match self.kind {
            EventKind::Xid { code } => Some(code),
            _ => None,
        }
    }
}
