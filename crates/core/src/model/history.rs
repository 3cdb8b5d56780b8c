//! A node's past hardware faults, for its history: the nodes that keep
//! failing (issue 29). Sources that can look back (Prometheus) deliver
//! them in `Cluster::history`; the engine adds the faults among the
//! snapshot's events (`engine::repeat`).

use super::Timestamp;
use serde::{Deserialize, Serialize};

/// What failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// An Xid of the hardware's (the catalog's remedy takes the GPU or the
    /// node out); application Xids are not a node's fault.
    Xid(u32),
    /// Uncorrectable (double-bit) ECC errors.
    Dbe,
    /// A row remap that failed.
    RemapFailed,
}

impl Fault {
    /// `Xid 79`, `DBE`, `row-remap failure`.
    pub fn label(self) -> String {
        match self {
            Fault::Xid(code) => format!("Xid {code}"),
            Fault::Dbe => "DBE".to_string(),
            Fault::RemapFailed => "row-remap failure".to_string(),
        }
    }
}

/// One fault a node had, when, and where it was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PastFault {
    pub time: Timestamp,
    pub node: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<u32>,
    pub fault: Fault,
    /// `events` (the source's own), `prometheus`.
    pub from: String,
}
