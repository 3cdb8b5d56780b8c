//! GPU health from node endpoints speaking dcgm-exporter's metric names:
//! dcgm-exporter itself, nightshift's own agent, or a Prometheus that
//! scrapes them. Samples become per-GPU readings; readings are merged into
//! the scheduler's snapshot by host name (a node only an endpoint knows
//! still appears, marked as such).

pub mod merge;
pub mod ports;
pub mod scrape;
pub mod textformat;

use crate::model::{Count, EccCounts, Timestamp};
use std::collections::BTreeMap;
use textformat::Sample;

/// What one node endpoint says about one GPU. `None`: not reported (a
/// family turned off in the exporter's CSV, a blank value), never zero.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    pub host: String,
    pub index: u32,
    pub uuid: Option<String>,
    pub model: Option<String>,
    pub sm_occupancy: Option<f64>,
    pub sm_active: Option<f64>,
    pub utilization: Option<f64>,
    pub temperature_c: Option<f64>,
    pub power_w: Option<f64>,
    pub memory_used_mib: Option<u64>,
    pub memory_free_mib: Option<u64>,
    pub ecc: EccCounts,
    /// NVLink error counters, over all the GPU's links.
    pub nvlink: crate::model::NvLinkErrors,
    /// The same per link, where the exporter gives them.
    pub nvlink_links: BTreeMap<u32, crate::model::NvLinkErrors>,
    pub row_remap_pending: Option<bool>,
    pub row_remap_failed: Option<bool>,
    /// The exporter's last Xid (0: none since the driver loaded).
    pub last_xid: Option<u32>,
    /// Xids from the windowed counter (`DCGM_EXP_XID_ERRORS_COUNT`, `xid` label).
    pub recent_xids: Vec<u32>,
    /// What the driver says recovery needs (nightshift agent's
    /// `nightshift_gpu_recovery_action`: NVML field 230).
    pub recovery_action: Option<crate::model::RecoveryAction>,
    /// Kubernetes pod holding it, when the exporter maps pods.
    pub pod: Option<String>,
    /// That pod's namespace.
    pub namespace: Option<String>,
    /// When the endpoint said it.
    pub time: Timestamp,
    /// Which generation of dcgm-exporter's names it came in.
    pub names: Option<MetricNames>,
}

impl Reading {
    pub fn memory_total_mib(&self) -> Option<u64> {
        Some(self.memory_used_mib? + self.memory_free_mib?)
    }
}

/// Values dcgm-exporter writes for "no data" (DCGM's blank sentinels).
pub(crate) fn blank(v: f64) -> bool {
    !v.is_finite() || v >= 9.2e18 || (2_147_483_632.0..=2_147_483_647.0).contains(&v)
}

/// Per field: the sum and count of MIG instance values.
type MigSums = BTreeMap<&'static str, (f64, u32)>;

/// Readings from one scrape. `default_host` names the GPUs when the series
/// carry no `Hostname`/`hostname` label.
pub fn readings(samples: &[Sample], default_host: &str, time: Timestamp) -> Vec<Reading> {
    readings_checked(samples, default_host, time).0
}

/// Readings and what was odd about them. The same series more than once
/// (an exporter bug, two exporters on one host) keeps the worst of its
/// values — every non-zero Xid, the highest error counts, a set remap flag
/// — never just the last, and is reported.
pub fn readings_checked(
    samples: &[Sample],
    default_host: &str,
    time: Timestamp,
) -> (Vec<Reading>, Vec<String>) {
    // (host, gpu) → reading; MIG instance series fill in only what the
    // GPU's own series did not give.
    let mut by_gpu: BTreeMap<(String, u32), (Reading, MigSums)> = BTreeMap::new();
    // Series seen: (name, host, gpu, MIG instance), to find duplicates.
    let mut seen: std::collections::HashSet<(&str, &str, u32, Option<&str>)> =
        std::collections::HashSet::new();
    let mut duplicates = 0usize;
    let mut example: Option<String> = None;
    for s in samples {
        let Some(gpu) = s.label("gpu").and_then(|g| g.parse::<u32>().ok()) else {
            continue;
        };
        let host = s
            .label("Hostname")
            .or_else(|| s.label("hostname"))
            .unwrap_or(default_host)
            .to_string();
        let mig = s.label("GPU_I_ID").is_some();
        let host_label = s
            .label("Hostname")
            .or_else(|| s.label("hostname"))
            .unwrap_or(default_host);
        let duplicate = !seen.insert((s.name.as_str(), host_label, gpu, s.label("GPU_I_ID")));
        if duplicate {
            duplicates += 1;
            example.get_or_insert_with(|| format!("{} of {host_label} GPU {gpu}", s.name));
        }
        // A reading is as old as its oldest sample (Prometheus gives each
        // its time; a scrape is all `time`).
        let entry = by_gpu.entry((host.clone(), gpu)).or_insert_with(|| {
            (
                Reading {
                    host,
                    index: gpu,
                    time: i64::MAX,
                    ..Reading::default()
                },
                BTreeMap::new(),
            )
        });
        let (r, mig_acc) = entry;
        if let Some(ms) = s.timestamp_ms {
            r.time = r.time.min(ms / 1000);
        }
        take_labels(r, s);
        let field = field_of(&s.name);
        let link = nvlink_link_field(&s.name);
        if let Some(names) = field.map(|f| f.1).or(link.map(|l| l.2)) {
            r.names = Some(match r.names {
                Some(n) => n.and(names),
                None => names,
            });
        }
        if field.is_some_and(|f| f.0 == "xid_window") {
            if let Some(x) = s.label("xid").and_then(|x| x.parse().ok())
                && s.value > 0.0
                && !r.recent_xids.contains(&x)
            {
                r.recent_xids.push(x);
            }
            continue;
        }
        if blank(s.value) {
            continue;
        }
        let v = s.value;
        if let Some((kind, link, _)) = link {
            let e = r.nvlink_links.entry(link).or_default();
            let slot = match kind {
                "CRC_FLIT" => &mut e.crc_flit,
                "CRC_DATA" => &mut e.crc_data,
                "REPLAY" => &mut e.replay,
                _ => &mut e.recovery,
            };
            // A repeated series keeps its highest count.
            let v = v.max(0.0) as u64;
            *slot = Count::of(slot.get().map_or(v, |x| x.max(v)));
            continue;
        }
        let Some((field, _)) = field else { continue };
        if field == "xid" && v > 0.0 && v < 1e9 {
            // Every non-zero Xid counts, whichever line it came on.
            let code = v.round() as u32;
            if r.last_xid.is_some_and(|x| x > 0 && x != code) && !r.recent_xids.contains(&code) {
                r.recent_xids.push(code);
            }
        }
        if mig {
            let acc = mig_acc.entry(field).or_insert((0.0, 0));
            acc.0 += v;
            acc.1 += 1;
        } else if duplicate {
            set_worst(r, field, v);
        } else {
            set(r, field, v);
        }
    }
    let mut warnings = Vec::new();
    if duplicates > 0 {
        warnings.push(format!(
            "{duplicates} duplicate series (e.g. {}): kept the worst value of each",
            example.unwrap_or_default()
        ));
    }
    let readings = by_gpu
        .into_values()
        .map(|(r, mig)| finish(r, mig, time))
        .collect();
    (readings, warnings)
}

/// What a sample's labels say of its GPU, where the reading has nothing
/// yet: UUID, model, the pod on it.
fn take_labels(r: &mut Reading, s: &Sample) {
    if r.uuid.is_none() {
        r.uuid = s.label("UUID").map(str::to_string);
    }
    if r.model.is_none() {
        r.model = s.label("modelName").map(str::to_string);
    }
    if r.pod.is_none() {
        r.pod = s.label("pod").filter(|p| !p.is_empty()).map(str::to_string);
        r.namespace = s
            .label("namespace")
            .filter(|p| !p.is_empty())
            .map(str::to_string);
    }
}

/// DCGM's per-link NVLink error fields (`DCGM_FI_DEV_NVLINK_CRC_FLIT_
/// ERROR_COUNT_L3`, `…_CRC_FLIT_ERROR_L3_TOTAL`): the counter's kind and
/// the link.
fn nvlink_link_field(name: &str) -> Option<(&str, u32, MetricNames)> {
    let rest = name.strip_prefix("DCGM_FI_DEV_NVLINK_")?;
    // `…_ERROR_COUNT_L3` before DCGM 4.7, `…_ERROR_L3_TOTAL` since.
    let (kind, link, names) = match rest.split_once("_ERROR_COUNT_L") {
        Some((kind, link)) => (kind, link, MetricNames::Legacy),
        None => {
            let (kind, link) = rest.split_once("_ERROR_L")?;
            (kind, link.strip_suffix("_TOTAL")?, MetricNames::Dcgm47)
        }
    };
    let link = link.parse().ok()?;
    matches!(kind, "CRC_FLIT" | "CRC_DATA" | "REPLAY" | "RECOVERY").then_some((kind, link, names))
}

/// Every family nightshift reads, by name, in both generations of
/// dcgm-exporter's names, and the reading's field each fills: the names
/// of DCGM 4.6 and before (dcgm-exporter up to 4.8), then the names DCGM
/// 4.7 gives the same fields (dcgm-exporter 4.9 and later; DCGM's own
/// table of deprecated aliases, `dcgm_fields`). Where a field changed its
/// unit with its name, the new one is its own field here (utilization a
/// 0–1 ratio, not a percentage; GPU memory in bytes, not MiB).
const FAMILIES: [(&str, &str, MetricNames); 37] = {
    use MetricNames::{Dcgm47, Legacy};
    [
        ("DCGM_FI_PROF_SM_OCCUPANCY", "sm_occupancy", Legacy),
        ("DCGM_FI_PROF_SM_ACTIVE", "sm_active", Legacy),
        ("DCGM_FI_DEV_GPU_UTIL", "util", Legacy),
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gr_active", Legacy),
        ("DCGM_FI_DEV_GPU_TEMP", "temp", Legacy),
        ("DCGM_FI_DEV_POWER_USAGE", "power", Legacy),
        ("DCGM_FI_DEV_FB_USED", "fb_used", Legacy),
        ("DCGM_FI_DEV_FB_FREE", "fb_free", Legacy),
        (
            "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
            "nvl_crc_flit",
            Legacy,
        ),
        (
            "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
            "nvl_crc_data",
            Legacy,
        ),
        (
            "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
            "nvl_replay",
            Legacy,
        ),
        (
            "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
            "nvl_recovery",
            Legacy,
        ),
        ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "remap_failed", Legacy),
        ("DCGM_FI_DEV_XID_ERRORS", "xid", Legacy),
        ("DCGM_FI_PROF_SM_OCCUPANCY_RATIO", "sm_occupancy", Dcgm47),
        ("DCGM_FI_PROF_SM_UTIL_RATIO", "sm_active", Dcgm47),
        ("DCGM_FI_DEV_GPU_UTIL_RATIO", "util_ratio", Dcgm47),
        ("DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO", "gr_active", Dcgm47),
        ("DCGM_FI_DEV_GPU_TEMP_CELSIUS", "temp", Dcgm47),
        ("DCGM_FI_DEV_BOARD_POWER_WATTS", "power", Dcgm47),
        // Not in DCGM's alias table (a new field, not a rename): named as
        // 4.9's DCGM_FI_DEV_FB_CAPACITY_BYTES is.
        ("DCGM_FI_DEV_FB_USED_BYTES", "fb_used_bytes", Dcgm47),
        ("DCGM_FI_DEV_FB_FREE_BYTES", "fb_free_bytes", Dcgm47),
        (
            "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_TOTAL",
            "nvl_crc_flit",
            Dcgm47,
        ),
        (
            "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_TOTAL",
            "nvl_crc_data",
            Dcgm47,
        ),
        (
            "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_TOTAL",
            "nvl_replay",
            Dcgm47,
        ),
        (
            "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_TOTAL",
            "nvl_recovery",
            Dcgm47,
        ),
        ("DCGM_FI_DEV_ROW_REMAP_FAILED", "remap_failed", Dcgm47),
        ("DCGM_FI_DEV_XID_ERROR", "xid", Dcgm47),
        // The same name in both generations.
        (
            "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
            "sbe_vol",
            MetricNames::Either,
        ),
        (
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
            "dbe_vol",
            MetricNames::Either,
        ),
        (
            "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
            "sbe_agg",
            MetricNames::Either,
        ),
        (
            "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
            "dbe_agg",
            MetricNames::Either,
        ),
        (
            "DCGM_FI_DEV_ROW_REMAP_PENDING",
            "remap_pending",
            MetricNames::Either,
        ),
        // nightshift's agent's and the exporter's own.
        (
            "nightshift_gpu_recovery_action",
            "recovery",
            MetricNames::Either,
        ),
        (
            "DCGM_EXP_XID_ERRORS_COUNT",
            "xid_window",
            MetricNames::Either,
        ),
        (
            "DCGM_FI_DEV_XID_ERRORS_ACTIVE",
            "xid_window",
            MetricNames::Either,
        ),
        ("DCGM_FI_DEV_XID_ERROR_ACTIVE", "xid_window", Dcgm47),
    ]
};

pub use crate::model::MetricNames;

/// Every family nightshift reads, by name (a Prometheus asks for these,
/// not for every `DCGM_FI_*` family an exporter writes — clocks, PCIe,
/// bandwidth — at each refresh).
pub fn read_families() -> impl Iterator<Item = &'static str> {
    FAMILIES.iter().map(|f| f.0)
}

/// The per-link NVLink error families, in both generations
/// (`…_ERROR_COUNT_L<n>`, then `…_ERROR_L<n>_TOTAL`), as a Prometheus regex.
pub const PER_LINK_FAMILIES: &str =
    "DCGM_FI_DEV_NVLINK_(CRC_FLIT|CRC_DATA|REPLAY|RECOVERY)_ERROR_(COUNT_L[0-9]+|L[0-9]+_TOTAL)";

/// The reading's field a family fills, where nightshift reads it, and the
/// generation of names it belongs to.
fn field_of(name: &str) -> Option<(&'static str, MetricNames)> {
    // Every sample of every scrape asks: one lookup, not a walk of the
    // table (built once from it).
    type Index = std::collections::HashMap<&'static str, (&'static str, MetricNames)>;
    static INDEX: std::sync::OnceLock<Index> = std::sync::OnceLock::new();
    INDEX
        .get_or_init(|| {
            FAMILIES
                .iter()
                .map(|&(name, field, names)| (name, (field, names)))
                .collect()
        })
        .get(name)
        .copied()
}

/// A GPU's reading completed: the scrape's time when no sample had its
/// own, and the MIG instances' means where the GPU's series said nothing
/// (per-GPU fields repeat on every instance; activity is per instance:
/// the mean is the GPU's).
fn finish(mut r: Reading, mig: MigSums, time: Timestamp) -> Reading {
    if r.time == i64::MAX {
        r.time = time;
    }
    // Per-link counters alone (no _TOTAL fields): their sum is the GPU's.
    if r.nvlink.total().is_none() && !r.nvlink_links.is_empty() {
        r.nvlink = crate::model::NvLinkErrors::sum(r.nvlink_links.values());
    }
    for (field, (sum, n)) in mig {
        if !is_set(&r, field) {
            // Per-GPU fields repeat on every instance; activity is
            // per instance: the mean is the GPU's.
            set(&mut r, field, sum / f64::from(n));
        }
    }
    r
}

/// A repeated series: counters keep their highest value, flags stay set, a
/// non-zero Xid is never replaced by zero; other gauges take the newest.
fn set_worst(r: &mut Reading, field: &str, v: f64) {
    let more = |old: Option<u64>| old.is_none_or(|o| (v.max(0.0).round() as u64) > o);
    let keep_new = match field {
        "sbe_vol" => more(r.ecc.sbe_volatile.get()),
        "dbe_vol" => more(r.ecc.dbe_volatile.get()),
        "sbe_agg" => more(r.ecc.sbe_aggregate.get()),
        "dbe_agg" => more(r.ecc.dbe_aggregate.get()),
        "nvl_crc_flit" => more(r.nvlink.crc_flit.get()),
        "nvl_crc_data" => more(r.nvlink.crc_data.get()),
        "nvl_replay" => more(r.nvlink.replay.get()),
        "nvl_recovery" => more(r.nvlink.recovery.get()),
        "remap_pending" => r.row_remap_pending != Some(true),
        "remap_failed" => r.row_remap_failed != Some(true),
        "xid" => r.last_xid.is_none_or(|x| x == 0),
        _ => true,
    };
    if keep_new {
        set(r, field, v);
    }
}

/// Bytes as whole MiB.
fn mib(bytes: f64) -> u64 {
    (bytes.max(0.0) / 1_048_576.0).round() as u64
}

fn set(r: &mut Reading, field: &str, v: f64) {
    let count = || v.max(0.0).round() as u64;
    match field {
        "sm_occupancy" => r.sm_occupancy = Some(v.clamp(0.0, 1.0)),
        "sm_active" => r.sm_active = Some(v.clamp(0.0, 1.0)),
        "util" => r.utilization = Some((v / 100.0).clamp(0.0, 1.0)),
        "util_ratio" => r.utilization = Some(v.clamp(0.0, 1.0)),
        // Graphics-engine activity stands in for utilization only when
        // NVML's is absent; GPU_UTIL, when present, replaces it.
        "gr_active" if r.utilization.is_none() => r.utilization = Some(v.clamp(0.0, 1.0)),
        "temp" => r.temperature_c = Some(v),
        "power" => r.power_w = Some(v),
        "fb_used" => r.memory_used_mib = Some(count()),
        "fb_free" => r.memory_free_mib = Some(count()),
        "fb_used_bytes" => r.memory_used_mib = Some(mib(v)),
        "fb_free_bytes" => r.memory_free_mib = Some(mib(v)),
        "sbe_vol" => r.ecc.sbe_volatile = Some(count()).into(),
        "dbe_vol" => r.ecc.dbe_volatile = Some(count()).into(),
        "sbe_agg" => r.ecc.sbe_aggregate = Some(count()).into(),
        "dbe_agg" => r.ecc.dbe_aggregate = Some(count()).into(),
        "nvl_crc_flit" => r.nvlink.crc_flit = Some(count()).into(),
        "nvl_crc_data" => r.nvlink.crc_data = Some(count()).into(),
        "nvl_replay" => r.nvlink.replay = Some(count()).into(),
        "nvl_recovery" => r.nvlink.recovery = Some(count()).into(),
        "remap_pending" => r.row_remap_pending = Some(v > 0.0),
        "remap_failed" => r.row_remap_failed = Some(v > 0.0),
        "xid" => r.last_xid = Some(count() as u32),
        "recovery" => {
            use crate::model::RecoveryAction;
            // NVML's nvmlDeviceGpuRecoveryAction_t values.
            r.recovery_action = match count() {
                0 => Some(RecoveryAction::None),
                1 => Some(RecoveryAction::GpuReset),
                2 => Some(RecoveryAction::NodeReboot),
                3 => Some(RecoveryAction::DrainP2p),
                4 => Some(RecoveryAction::DrainAndReset),
                _ => None,
            }
        }
        _ => {}
    }
}

fn is_set(r: &Reading, field: &str) -> bool {
    match field {
        "sm_occupancy" => r.sm_occupancy.is_some(),
        "sm_active" => r.sm_active.is_some(),
        "util" | "util_ratio" | "gr_active" => r.utilization.is_some(),
        "temp" => r.temperature_c.is_some(),
        "power" => r.power_w.is_some(),
        "fb_used" | "fb_used_bytes" => r.memory_used_mib.is_some(),
        "fb_free" | "fb_free_bytes" => r.memory_free_mib.is_some(),
        "sbe_vol" => r.ecc.sbe_volatile.is_some(),
        "dbe_vol" => r.ecc.dbe_volatile.is_some(),
        "sbe_agg" => r.ecc.sbe_aggregate.is_some(),
        "dbe_agg" => r.ecc.dbe_aggregate.is_some(),
        "nvl_crc_flit" => r.nvlink.crc_flit.is_some(),
        "nvl_crc_data" => r.nvlink.crc_data.is_some(),
        "nvl_replay" => r.nvlink.replay.is_some(),
        "nvl_recovery" => r.nvlink.recovery.is_some(),
        "remap_pending" => r.row_remap_pending.is_some(),
        "remap_failed" => r.row_remap_failed.is_some(),
        "xid" => r.last_xid.is_some(),
        "recovery" => r.recovery_action.is_some(),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
