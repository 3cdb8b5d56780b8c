use super::{Count, Timestamp};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// ECC error counters. Unknown (`Count::UNKNOWN`, `null` in JSON) means the
/// source did not report the counter (dcgm-exporter ships with ECC fields
/// off by default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EccCounts {
    /// Correctable (single-bit) errors since the last driver load.
    pub sbe_volatile: Count,
    /// Uncorrectable (double-bit) errors since the last driver load.
    pub dbe_volatile: Count,
    /// Correctable errors over the GPU's lifetime.
    pub sbe_aggregate: Count,
    /// Uncorrectable errors over the GPU's lifetime.
    pub dbe_aggregate: Count,
}

/// NVLink error counters of a GPU, over all its links, since the driver
/// loaded (dcgm-exporter's `DCGM_FI_DEV_NVLINK_*_ERROR_COUNT_TOTAL`, which
/// sites enable in its counters file). Unknown: not reported. Their rate,
/// not their total, says whether a link is failing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvLinkErrors {
    /// Flow-control (flit) CRC errors.
    pub crc_flit: Count,
    /// Data CRC errors.
    pub crc_data: Count,
    /// Retries (replays) of a transfer.
    pub replay: Count,
    /// Link recoveries.
    pub recovery: Count,
}

impl NvLinkErrors {
    /// The counters summed over `links` (a counter no link reports stays
    /// unknown).
    pub fn sum<'a>(links: impl IntoIterator<Item = &'a NvLinkErrors>) -> NvLinkErrors {
        let add = |a: Count, b: Count| match (a.get(), b.get()) {
            (Some(x), Some(y)) => Count::of(x.saturating_add(y)),
            (Some(_), None) => a,
            (None, _) => b,
        };
        links
            .into_iter()
            .fold(NvLinkErrors::default(), |s, l| NvLinkErrors {
                crc_flit: add(s.crc_flit, l.crc_flit),
                crc_data: add(s.crc_data, l.crc_data),
                replay: add(s.replay, l.replay),
                recovery: add(s.recovery, l.recovery),
            })
    }

    /// The errors of every kind reported, summed; `None` when none is.
    pub fn total(&self) -> Option<u64> {
        let known = [self.crc_flit, self.crc_data, self.replay, self.recovery].map(Count::get);
        known.iter().any(Option::is_some).then(|| {
            known
                .iter()
                .flatten()
                .fold(0u64, |a, b| a.saturating_add(*b))
        })
    }
}

/// The last Xid a GPU reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastXid {
    pub code: u32,
    pub time: Option<Timestamp>,
    /// The driver's message, where the source gives it (a Kubernetes
    /// condition, the kernel log): Blackwell's NVLink Xids say `Fatal` or
    /// `Nonfatal` there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    pub node: Arc<str>,
    pub index: u32,
    pub uuid: Option<Arc<str>>,
    pub model: Option<Arc<str>>,
    /// The job holding this GPU, when the scheduler says which GPU it holds.
    pub job: Option<String>,
    pub memory_used_mib: Option<u64>,
    pub memory_total_mib: Option<u64>,
    /// Fraction of warp slots occupied, 0–1 (DCGM_FI_PROF_SM_OCCUPANCY).
    pub sm_occupancy: Option<f64>,
    /// Fraction of time at least one warp was active on an SM, 0–1.
    pub sm_active: Option<f64>,
    /// GPU utilization as NVML reports it, 0–1.
    pub utilization: Option<f64>,
    pub temperature_c: Option<f64>,
    pub power_w: Option<f64>,
    pub ecc: EccCounts,
    /// NVLink error counters (recordings made before they were read have
    /// none).
    #[serde(default)]
    pub nvlink: NvLinkErrors,
    /// The same counters per link, where the exporter reports them (DCGM's
    /// `…_ERROR_COUNT_L<n>` fields): which link is failing.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub nvlink_links: std::collections::BTreeMap<u32, NvLinkErrors>,
    pub row_remap_pending: Option<bool>,
    pub row_remap_failed: Option<bool>,
    pub last_xid: Option<Box<LastXid>>,
    /// What the driver says recovery needs (NVML field 230).
    pub recovery_action: Option<RecoveryAction>,
    /// Where the readings came from (`sim`, `dcgm http://…`, `prometheus`).
    pub reading_source: Option<Arc<str>>,
    /// When they were read; old readings are shown with their age.
    pub reading_time: Option<Timestamp>,
    /// Which generation of dcgm-exporter's metric names they came in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric_names: Option<MetricNames>,
}

/// The generation of dcgm-exporter's metric names a reading came in:
/// DCGM's names before 4.7 (dcgm-exporter up to 4.8), DCGM 4.7's (4.9 and
/// later: `DCGM_FI_DEV_GPU_UTIL_RATIO`, `DCGM_FI_PROF_SM_OCCUPANCY_RATIO`,
/// …), or both at once (a custom collector).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetricNames {
    #[serde(rename = "dcgm-exporter 4.8 and before")]
    Legacy,
    #[serde(rename = "dcgm-exporter 4.9 and later (DCGM 4.7 names)")]
    Dcgm47,
    #[serde(rename = "both generations")]
    Mixed,
    /// A name both generations share (the ECC counters): says nothing.
    #[serde(rename = "either")]
    Either,
}

impl MetricNames {
    /// What two names of one reading say together.
    pub fn and(self, other: MetricNames) -> MetricNames {
        use MetricNames::*;
        match (self, other) {
            (Either, x) | (x, Either) => x,
            (a, b) if a == b => a,
            _ => Mixed,
        }
    }
}

/// A node's GPUs in aggregate, as a big fleet's Prometheus answers them
/// (one series per node, not per GPU): what the grid and the lists show
/// for a healthy node nobody has opened. Per-GPU readings, where there
/// are any, come first; this stands only where there are none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSummary {
    /// GPUs that reported.
    pub gpus: u32,
    /// Their mean utilization, 0–1.
    pub utilization: Option<f64>,
    /// Their mean SM occupancy, 0–1.
    pub sm_occupancy: Option<f64>,
    /// Where it came from and when.
    pub source: String,
    pub time: Timestamp,
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

/// How loudly to show something. Only the decision engine decides it (from
/// the Xid catalog and the counters: `engine::health`); the model has no
/// rules of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuHealth {
    Ok,
    /// Needs a look: a pending row remap, an application Xid.
    Warn,
    /// Take it out of service: uncorrectable ECC, failed remap, hardware Xid.
    Critical,
}

impl Gpu {
    /// A GPU with only its identity known; every reading unknown.
    pub fn unknown(node: &str, index: u32) -> Gpu {
        Gpu::unknown_on(&node.into(), index)
    }

    /// The same on a node whose name its GPUs share.
    pub fn unknown_on(node: &Arc<str>, index: u32) -> Gpu {
        Gpu {
            node: node.clone(),
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
            nvlink: NvLinkErrors::default(),
            nvlink_links: std::collections::BTreeMap::new(),
            row_remap_pending: None,
            row_remap_failed: None,
            last_xid: None,
            recovery_action: None,
            reading_source: None,
            reading_time: None,
            metric_names: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_gpu_reports_nothing() {
        let g = Gpu::unknown("n1", 0);
        assert_eq!(g.sm_occupancy, None);
        assert_eq!(g.ecc.dbe_volatile, None);
        assert_eq!(g.last_xid, None);
    }
}
/// A node's eight GPUs fit mimalloc's 2,560-byte class (at 424 bytes they
/// took 3,584): at 10,000 nodes, held about twice by the sim and the
/// console, that is ~20 MB of the 10k console's memory (issue 42). A new
/// reading that needs room goes in a `Count` or a box, or this fails.
#[cfg(test)]
#[test]
fn a_gpu_stays_within_its_size_class() {
    assert!(
        std::mem::size_of::<Gpu>() <= 320,
        "{}",
        std::mem::size_of::<Gpu>()
    );
}
