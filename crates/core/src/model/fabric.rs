//! The fabric around the GPUs: the failure domains a node shares with
//! others (its leaf switch, spine, NVLink domain, rack, power feed) and its
//! network ports (InfiniBand or RoCE HCA ports).

use serde::{Deserialize, Serialize};

/// A failure domain a node belongs to: what it shares with other nodes and
/// fails with them. `level` says what kind (`leaf`, `spine`, `nvlink`,
/// `rack`, `power`, or a label's name), `name` which one (`ib-leaf-2`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Domain {
    pub level: String,
    pub name: String,
}

impl Domain {
    pub fn new(level: &str, name: &str) -> Domain {
        Domain {
            level: level.to_string(),
            name: name.to_string(),
        }
    }
}

/// InfiniBand port states as the kernel numbers them (`state` in sysfs,
/// the node exporter's `node_infiniband_state_id`).
pub const IB_STATE_DOWN: u32 = 1;
pub const IB_STATE_ACTIVE: u32 = 4;
/// Physical state `LinkUp` (`node_infiniband_physical_state_id`).
pub const IB_PHYS_LINK_UP: u32 = 5;

/// One HCA port of a node. `None`: not reported, never zero.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IbPort {
    /// The HCA (`mlx5_0`).
    pub device: String,
    pub port: u32,
    /// Logical state: 1 down, 2 init, 3 armed, 4 active, 5 active-defer.
    pub state: Option<u32>,
    /// Physical state: 2 polling, 3 disabled, 5 link up, …
    pub physical_state: Option<u32>,
    pub rate_bytes_per_second: Option<f64>,
    /// Times the link went down (the counter a flap moves).
    pub link_downed: Option<u64>,
    /// Times the link recovered from errors without going down.
    pub link_error_recovery: Option<u64>,
    pub symbol_errors: Option<u64>,
    pub receive_errors: Option<u64>,
}

impl IbPort {
    /// `mlx5_0/1`.
    pub fn name(&self) -> String {
        format!("{}/{}", self.device, self.port)
    }

    /// Whether the port is down (any state but active), when known.
    pub fn is_down(&self) -> Option<bool> {
        self.state.map(|s| s != IB_STATE_ACTIVE && s != 5)
    }

    /// The state in words: `ACTIVE`, `DOWN`, `INIT`.
    pub fn state_word(&self) -> &'static str {
        match self.state {
            Some(1) => "DOWN",
            Some(2) => "INIT",
            Some(3) => "ARMED",
            Some(4) => "ACTIVE",
            Some(5) => "ACTIVE_DEFER",
            Some(_) => "OTHER",
            None => "?",
        }
    }

    /// The physical state in words: `LinkUp`, `Disabled`, `Polling`.
    pub fn physical_word(&self) -> &'static str {
        match self.physical_state {
            Some(1) => "Sleep",
            Some(2) => "Polling",
            Some(3) => "Disabled",
            Some(4) => "PortConfigurationTraining",
            Some(5) => "LinkUp",
            Some(6) => "LinkErrorRecovery",
            Some(7) => "PhyTest",
            Some(_) => "Other",
            None => "?",
        }
    }

    /// The link rate in Gb/s, as `ibstat` prints it.
    pub fn gbit_per_second(&self) -> Option<f64> {
        self.rate_bytes_per_second.map(|r| r * 8.0 / 1e9)
    }
}
