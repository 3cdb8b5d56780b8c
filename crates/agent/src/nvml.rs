//! Reading GPUs through NVML (nvml-wrapper). Without a driver every call
//! here returns an error; the agent turns it into one clear line.

use super::{EventLog, GpuReadout};
use nvml_wrapper::Nvml;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{
    EccCounter, MemoryError, RetirementCause, TemperatureSensor,
};
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::structs::device::FieldId;
use std::sync::{Arc, Mutex};

/// NVML field ids (nvml.h) that nvml-wrapper has no safe getter for.
const FI_REMAPPED_COR: u32 = 142;
const FI_REMAPPED_UNC: u32 = 143;
const FI_REMAPPED_PENDING: u32 = 144;
const FI_REMAPPED_FAILURE: u32 = 145;
const FI_RECOVERY_ACTION: u32 = 230;

/// Why NVML cannot be used here, one line for the operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NvmlProblem {
    #[error(
        "NVML library not found (libnvidia-ml.so.1): no NVIDIA driver is installed on this machine (or --nvml-lib names no library)"
    )]
    NoLibrary,
    #[error("the NVIDIA driver is not loaded")]
    DriverNotLoaded,
    #[error("no permission to use NVML")]
    NoPermission,
    #[error("NVML failed: {0}")]
    Failed(String),
    #[error("cannot watch GPU {gpu} for events: {why}")]
    Watch { gpu: u32, why: String },
}

impl From<NvmlProblem> for String {
    fn from(e: NvmlProblem) -> String {
        e.to_string()
    }
}

/// What an NVML error means for the operator.
pub fn explain(e: &NvmlError) -> NvmlProblem {
    match e {
        NvmlError::LibloadingError(_) => NvmlProblem::NoLibrary,
        NvmlError::DriverNotLoaded => NvmlProblem::DriverNotLoaded,
        NvmlError::NoPermission => NvmlProblem::NoPermission,
        other => NvmlProblem::Failed(other.to_string()),
    }
}

/// NVML from the system's library, or from `lib` when given.
pub fn init(lib: Option<&std::path::Path>) -> Result<Nvml, NvmlProblem> {
    match lib {
        Some(path) => Nvml::builder().lib_path(path.as_os_str()).init(),
        None => Nvml::init(),
    }
    .map_err(|e| explain(&e))
}

fn as_u64(v: &SampleValue) -> u64 {
    match *v {
        SampleValue::F64(f) => f as u64,
        SampleValue::U32(u) => u64::from(u),
        SampleValue::U64(u) => u,
        SampleValue::I64(i) => i.max(0) as u64,
    }
}

/// Reads every GPU. A reading a GPU does not support stays `None`;
/// `last_xid` comes from the event log, `prev` gives GPM's first sample.
pub fn read_all(
    nvml: &Nvml,
    last_xid: &dyn Fn(u32) -> Option<u64>,
) -> Result<Vec<GpuReadout>, NvmlProblem> {
    let count = nvml.device_count().map_err(|e| explain(&e))?;
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count {
        let d = nvml.device_by_index(i).map_err(|e| explain(&e))?;
        let mem = d.memory_info().ok();
        let mut r = GpuReadout {
            index: i,
            uuid: d.uuid().ok(),
            name: d.name().ok(),
            gpu_util: d.utilization_rates().ok().map(|u| u.gpu),
            mem_used_bytes: mem.as_ref().map(|m| m.used),
            mem_total_bytes: mem.as_ref().map(|m| m.total),
            temp_c: d.temperature(TemperatureSensor::Gpu).ok(),
            power_mw: d.power_usage().ok(),
            sbe_volatile: d
                .total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile)
                .ok(),
            dbe_volatile: d
                .total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)
                .ok(),
            sbe_aggregate: d
                .total_ecc_errors(MemoryError::Corrected, EccCounter::Aggregate)
                .ok(),
            dbe_aggregate: d
                .total_ecc_errors(MemoryError::Uncorrected, EccCounter::Aggregate)
                .ok(),
            retired_pages_sbe: d
                .retired_pages(RetirementCause::MultipleSingleBitEccErrors)
                .ok()
                .map(|p| p.len() as u64),
            retired_pages_dbe: d
                .retired_pages(RetirementCause::DoubleBitEccError)
                .ok()
                .map(|p| p.len() as u64),
            last_xid: last_xid(i),
            ..GpuReadout::default()
        };
        let ids = [
            FI_REMAPPED_COR,
            FI_REMAPPED_UNC,
            FI_REMAPPED_PENDING,
            FI_REMAPPED_FAILURE,
            FI_RECOVERY_ACTION,
        ]
        .map(FieldId);
        if let Ok(values) = d.field_values_for(&ids) {
            for sample in values.into_iter().flatten() {
                let Ok(v) = sample.value.as_ref() else {
                    continue;
                };
                let v = as_u64(v);
                match sample.field.0 {
                    FI_REMAPPED_COR => r.remapped_rows_correctable = Some(v),
                    FI_REMAPPED_UNC => r.remapped_rows_uncorrectable = Some(v),
                    FI_REMAPPED_PENDING => r.remap_pending = Some(v > 0),
                    FI_REMAPPED_FAILURE => r.remap_failure = Some(v > 0),
                    FI_RECOVERY_ACTION => r.recovery_action = Some(v as u32),
                    _ => {}
                }
            }
        }
        r.sm_occupancy = sm_occupancy(nvml, &d);
        let [flit, data, replay, recovery] = nvlink_errors(&d);
        r.nvlink_crc_flit = flit;
        r.nvlink_crc_data = data;
        r.nvlink_replay = replay;
        r.nvlink_recovery = recovery;
        out.push(r);
    }
    Ok(out)
}

/// NVLink links a GPU may have (NVML_NVLINK_MAX_LINKS on Blackwell).
const MAX_LINKS: u32 = 18;

/// The GPU's NVLink error counters summed over its active links: CRC
/// flit, CRC data, replay, recovery. A counter no link reports stays
/// `None` (no NVLink, or a GPU that does not count it).
fn nvlink_errors(d: &nvml_wrapper::Device) -> [Option<u64>; 4] {
    use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
    let kinds = [
        ErrorCounter::DlCrcFlit,
        ErrorCounter::DlCrcData,
        ErrorCounter::DlReplay,
        ErrorCounter::DlRecovery,
    ];
    let mut sums = [None; 4];
    for link in 0..MAX_LINKS {
        let l = d.link_wrapper_for(link);
        if !matches!(l.is_active(), Ok(true)) {
            continue;
        }
        for (sum, kind) in sums.iter_mut().zip(kinds.iter()) {
            if let Ok(v) = l.error_counter(*kind) {
                *sum = Some(sum.unwrap_or(0u64).saturating_add(v));
            }
        }
    }
    sums
}

/// SM occupancy over ~100 ms through GPM; `None` where GPM is unsupported
/// (before Hopper) or fails.
fn sm_occupancy(nvml: &Nvml, d: &nvml_wrapper::Device) -> Option<f64> {
    let first = d.gpm_sample().ok()?;
    std::thread::sleep(std::time::Duration::from_millis(100));
    let second = d.gpm_sample().ok()?;
    let results =
        nvml_wrapper::gpm::gpm_metrics_get(nvml, &first, &second, &[GpmMetricId::SmOccupancy])
            .ok()?;
    // GPM reports percent.
    results
        .into_iter()
        .flatten()
        .next()
        .map(|m| (m.value / 100.0).clamp(0.0, 1.0))
}

/// Waits for Xid and ECC events on every GPU, for ever, logging each: the
/// event set delivers every one, where the exporter's gauge keeps the last.
pub fn watch_events(nvml: &Nvml, log: &Arc<Mutex<EventLog>>) -> Result<(), NvmlProblem> {
    let mut set = nvml.create_event_set().map_err(|e| explain(&e))?;
    let count = nvml.device_count().map_err(|e| explain(&e))?;
    for i in 0..count {
        let d = nvml.device_by_index(i).map_err(|e| explain(&e))?;
        let want = EventTypes::CRITICAL_XID_ERROR
            | EventTypes::SINGLE_BIT_ECC_ERROR
            | EventTypes::DOUBLE_BIT_ECC_ERROR;
        set = d
            .register_events(want, set)
            .map_err(|e| NvmlProblem::Watch {
                gpu: i,
                why: e.error.to_string(),
            })?;
    }
    loop {
        match set.wait(1000) {
            Ok(ev) => {
                let gpu = ev.device.index().unwrap_or(u32::MAX);
                let now = crate::host::now();
                let (kind, xid) = if ev.event_type.contains(EventTypes::CRITICAL_XID_ERROR) {
                    (
                        "xid",
                        match ev.event_data {
                            Some(XidError::Value(x)) => Some(x),
                            _ => None,
                        },
                    )
                } else if ev.event_type.contains(EventTypes::DOUBLE_BIT_ECC_ERROR) {
                    ("dbe", None)
                } else {
                    ("sbe", None)
                };
                tracing::warn!("GPU {gpu}: {kind} event {xid:?}");
                if let Ok(mut l) = log.lock() {
                    l.push(now, gpu, kind, xid);
                }
            }
            Err(NvmlError::Timeout) => {}
            Err(e) => return Err(explain(&e)),
        }
    }
}
