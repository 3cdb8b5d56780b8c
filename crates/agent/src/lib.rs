//! `nightshift agent`: runs on a GPU node, reads every GPU through NVML,
//! and serves `/metrics` under dcgm-exporter's names (so scraping and
//! Prometheus work unchanged), `/events` (Xid and ECC events with sequence
//! numbers, so a console that reconnects misses none — the exporter's
//! last-Xid gauge loses events) and `/healthz`.

use nightshift_core::host;

pub mod fabric;
pub mod nvml;
pub mod server;

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::fmt::Write;

/// What NVML said about one GPU at one moment. `None`: not supported or
/// not readable on this GPU, never a made-up zero.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GpuReadout {
    pub index: u32,
    pub uuid: Option<String>,
    pub name: Option<String>,
    /// Percent.
    pub gpu_util: Option<u32>,
    pub mem_used_bytes: Option<u64>,
    pub mem_total_bytes: Option<u64>,
    pub temp_c: Option<u32>,
    pub power_mw: Option<u32>,
    pub sbe_volatile: Option<u64>,
    pub dbe_volatile: Option<u64>,
    pub sbe_aggregate: Option<u64>,
    pub dbe_aggregate: Option<u64>,
    pub retired_pages_sbe: Option<u64>,
    pub retired_pages_dbe: Option<u64>,
    pub remapped_rows_correctable: Option<u64>,
    pub remapped_rows_uncorrectable: Option<u64>,
    pub remap_pending: Option<bool>,
    pub remap_failure: Option<bool>,
    /// NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset).
    pub recovery_action: Option<u32>,
    /// 0–1, through GPM (Hopper and newer).
    pub sm_occupancy: Option<f64>,
    /// The last Xid the event set delivered for this GPU.
    pub last_xid: Option<u64>,
    /// NVLink error counters summed over the GPU's active links.
    pub nvlink_crc_flit: Option<u64>,
    pub nvlink_crc_data: Option<u64>,
    pub nvlink_replay: Option<u64>,
    pub nvlink_recovery: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentEvent {
    pub seq: u64,
    /// Unix seconds.
    pub time: i64,
    pub gpu: u32,
    /// `xid`, `sbe` or `dbe`.
    pub kind: String,
    pub xid: Option<u64>,
}

/// Events kept for reconnecting consoles.
pub const EVENT_LOG_LEN: usize = 10_000;

#[derive(Debug, Default)]
pub struct EventLog {
    events: VecDeque<AgentEvent>,
    next: u64,
}

impl EventLog {
    pub fn push(&mut self, time: i64, gpu: u32, kind: &str, xid: Option<u64>) -> u64 {
        self.next += 1;
        if self.events.len() == EVENT_LOG_LEN {
            self.events.pop_front();
        }
        self.events.push_back(AgentEvent {
            seq: self.next,
            time,
            gpu,
            kind: kind.into(),
            xid,
        });
        self.next
    }

    /// The newest Xid of `gpu`, without copying the log.
    pub fn last_xid(&self, gpu: u32) -> Option<u64> {
        self.events
            .iter()
            .rev()
            .find(|e| e.gpu == gpu && e.kind == "xid")
            .and_then(|e| e.xid)
    }

    /// Events after `seq`, oldest first.
    pub fn since(&self, seq: u64) -> Vec<AgentEvent> {
        self.events
            .iter()
            .filter(|e| e.seq > seq)
            .cloned()
            .collect()
    }
}

/// Labels dcgm-exporter puts on every series.
fn labels(host: &str, g: &GpuReadout) -> String {
    let esc = |s: &str| {
        s.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    };
    format!(
        "gpu=\"{i}\",UUID=\"{u}\",device=\"nvidia{i}\",modelName=\"{m}\",Hostname=\"{h}\"",
        i = g.index,
        u = esc(g.uuid.as_deref().unwrap_or("")),
        m = esc(g.name.as_deref().unwrap_or("")),
        h = esc(host)
    )
}

/// A reading as one of dcgm-exporter's families.
type Field = fn(&GpuReadout) -> Option<f64>;

/// dcgm-exporter's families the agent writes: name, type, help, value.
const FAMILIES: [(&str, &str, &str, Field); 21] = [
    (
        "DCGM_FI_DEV_GPU_UTIL",
        "gauge",
        "GPU utilization (in %).",
        |g| g.gpu_util.map(f64::from),
    ),
    (
        "DCGM_FI_DEV_FB_USED",
        "gauge",
        "Framebuffer memory used (in MiB).",
        |g| g.mem_used_bytes.map(|b| (b >> 20) as f64),
    ),
    (
        "DCGM_FI_DEV_FB_FREE",
        "gauge",
        "Framebuffer memory free (in MiB).",
        |g| Some(((g.mem_total_bytes? - g.mem_used_bytes?) >> 20) as f64),
    ),
    (
        "DCGM_FI_DEV_GPU_TEMP",
        "gauge",
        "GPU temperature (in C).",
        |g| g.temp_c.map(f64::from),
    ),
    (
        "DCGM_FI_DEV_POWER_USAGE",
        "gauge",
        "Power draw (in W).",
        |g| g.power_mw.map(|p| f64::from(p) / 1000.0),
    ),
    (
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "counter",
        "Total number of single-bit volatile ECC errors.",
        |g| g.sbe_volatile.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "counter",
        "Total number of double-bit volatile ECC errors.",
        |g| g.dbe_volatile.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
        "counter",
        "Total number of single-bit persistent ECC errors.",
        |g| g.sbe_aggregate.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
        "counter",
        "Total number of double-bit persistent ECC errors.",
        |g| g.dbe_aggregate.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_RETIRED_SBE",
        "counter",
        "Total number of retired pages due to single-bit errors.",
        |g| g.retired_pages_sbe.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_RETIRED_DBE",
        "counter",
        "Total number of retired pages due to double-bit errors.",
        |g| g.retired_pages_dbe.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for correctable errors.",
        |g| g.remapped_rows_correctable.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for uncorrectable errors.",
        |g| g.remapped_rows_uncorrectable.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_ROW_REMAP_PENDING",
        "gauge",
        "Whether remapping of rows is pending.",
        |g| g.remap_pending.map(|b| f64::from(u8::from(b))),
    ),
    (
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "gauge",
        "Whether remapping of rows has failed.",
        |g| g.remap_failure.map(|b| f64::from(u8::from(b))),
    ),
    (
        "DCGM_FI_PROF_SM_OCCUPANCY",
        "gauge",
        "The ratio of number of warps resident on an SM.",
        |g| g.sm_occupancy,
    ),
    (
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink flow-control CRC errors.",
        |g| g.nvlink_crc_flit.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink data CRC errors.",
        |g| g.nvlink_crc_data.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink retries.",
        |g| g.nvlink_replay.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink recovery errors.",
        |g| g.nvlink_recovery.map(|v| v as f64),
    ),
    (
        "DCGM_FI_DEV_XID_ERRORS",
        "gauge",
        "Value of the last XID error encountered.",
        |g| Some(g.last_xid.unwrap_or(0) as f64),
    ),
];

/// The readouts as dcgm-exporter would write them. A value NVML could not
/// read is left out, so the family reads as unknown downstream.
pub fn to_metrics(host: &str, gpus: &[GpuReadout]) -> String {
    let mut out = String::new();
    for &(name, kind, help, get) in FAMILIES.iter() {
        let values: Vec<(String, f64)> = gpus
            .iter()
            .filter_map(|g| get(g).map(|v| (labels(host, g), v)))
            .collect();
        if values.is_empty() {
            continue;
        }
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (l, v) in values {
            let _ = writeln!(out, "{name}{{{l}}} {v}");
        }
    }
    let recovery: Vec<String> = gpus
        .iter()
        .filter_map(|g| {
            g.recovery_action
                .map(|a| format!("nightshift_gpu_recovery_action{{{}}} {a}", labels(host, g)))
        })
        .collect();
    if !recovery.is_empty() {
        let _ = writeln!(
            out,
            "# HELP nightshift_gpu_recovery_action NVML recovery action (0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset).\n# TYPE nightshift_gpu_recovery_action gauge"
        );
        for r in recovery {
            let _ = writeln!(out, "{r}");
        }
    }
    out
}

#[cfg(test)]
mod tests;
