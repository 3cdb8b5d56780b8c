use super::Timestamp;
use serde::{Deserialize, Serialize};

/// ECC error counters. `None` means the source did not report the counter
/// (dcgm-exporter ships with ECC fields off by default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EccCounts {
    /// Correctable (single-bit) errors since the last driver load.
    pub sbe_volatile: Option<u64>,
    /// Uncorrectable (double-bit) errors since the last driver load.
    pub dbe_volatile: Option<u64>,
    /// Correctable errors over the GPU's lifetime.
    pub sbe_aggregate: Option<u64>,
    /// Uncorrectable errors over the GPU's lifetime.
    pub dbe_aggregate: Option<u64>,
}

/// The last Xid a GPU reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastXid {
    pub code: u32,
    pub time: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    pub node: String,
    pub index: u32,
    pub uuid: Option<String>,
    pub model: Option<String>,
    /// The job holding this GPU, when the scheduler says which GPU it holds.
    pub job: Option<String>,
    pub memory_used_mib: Option<u64>,
    pub memory_total_mib: Option<u64>,
    /// Fraction of warp slots occupied, 0–1 (DCGM_FI_PROF_SM_OCCUPANCY).
    pub sm_occupancy: Option<f64>,
    /// Fraction of time at least one warp was active on an SM, 0–1.
    pub sm_active: Option<f64>,
    /// GPU utilisation as NVML reports it, 0–1.
    pub utilization: Option<f64>,
    pub temperature_c: Option<f64>,
    pub power_w: Option<f64>,
    pub ecc: EccCounts,
    pub row_remap_pending: Option<bool>,
    pub row_remap_failed: Option<bool>,
    pub last_xid: Option<LastXid>,
    /// What the driver says recovery needs (NVML field 230).
    pub recovery_action: Option<RecoveryAction>,
    /// Where the readings came from (`sim`, `dcgm http://…`, `prometheus`).
    pub reading_source: Option<String>,
    /// When they were read; old readings are shown with their age.
    pub reading_time: Option<Timestamp>,
}

/// NVML's recovery action for a GPU (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryAction {
    None,
    GpuReset,
    NodeReboot,
    DrainP2p,
    DrainAndReset,
}

/// A coarse health colour for display. The decision engine gives verdicts;
/// this is only what the counters say at a glance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuHealth {
    Ok,
    /// Needs a look: a pending row remap, an application Xid.
    Warn,
    /// Take it out of service: uncorrectable ECC, failed remap, hardware Xid.
    Critical,
}

/// Xids that mean the GPU or node itself is in trouble, not the application.
/// Any other Xid (13, 31, 43 … application errors; 63 and 92, which ask for
/// attention at the next drain) only warns.
const HARDWARE_XIDS: &[u32] = &[46, 48, 62, 64, 74, 79, 95, 119, 120, 140, 143];

/// Whether an Xid points at the GPU or node rather than the application.
pub fn is_hardware_xid(code: u32) -> bool {
    HARDWARE_XIDS.contains(&code)
}

impl Gpu {
    /// A GPU with only its identity known; every reading unknown.
    pub fn unknown(node: &str, index: u32) -> Gpu {
        Gpu {
            node: node.to_string(),
            index,
            uuid: None,
            model: None,
            job: None,
            memory_used_mib: None,
            memory_total_mib: None,
            sm_occupancy: None,
            sm_active: None,
            utilization: None,
            temperature_c: None,
            power_w: None,
            ecc: EccCounts::default(),
            row_remap_pending: None,
            row_remap_failed: None,
            last_xid: None,
            recovery_action: None,
            reading_source: None,
            reading_time: None,
        }
    }

    pub fn health(&self) -> GpuHealth {
        let dbe = self.ecc.dbe_volatile.unwrap_or(0) > 0;
        let hw_xid = self
            .last_xid
            .as_ref()
            .is_some_and(|x| is_hardware_xid(x.code));
        if dbe || self.row_remap_failed == Some(true) || hw_xid {
            return GpuHealth::Critical;
        }
        if self.row_remap_pending == Some(true) || self.last_xid.is_some() {
            return GpuHealth::Warn;
        }
        GpuHealth::Ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_gpu_is_ok_and_reports_nothing() {
        let g = Gpu::unknown("n1", 0);
        assert_eq!(g.health(), GpuHealth::Ok);
        assert_eq!(g.sm_occupancy, None);
        assert_eq!(g.ecc.dbe_volatile, None);
    }

    #[test]
    fn health_follows_counters_and_xids() {
        let mut g = Gpu::unknown("n1", 0);
        g.last_xid = Some(LastXid {
            code: 13,
            time: Some(1),
        });
        assert_eq!(g.health(), GpuHealth::Warn);
        g.last_xid = Some(LastXid {
            code: 79,
            time: Some(2),
        });
        assert_eq!(g.health(), GpuHealth::Critical);
        let mut g = Gpu::unknown("n1", 1);
        g.row_remap_pending = Some(true);
        assert_eq!(g.health(), GpuHealth::Warn);
        g.ecc.dbe_volatile = Some(1);
        assert_eq!(g.health(), GpuHealth::Critical);
    }
}
