//! The fleet path (issue 28): on a server holding more GPUs than
//! `[endpoints] prometheus_every_gpu_max`, a refresh does not ask for every
//! GPU's every series. The server answers
//! - which nodes have a GPU whose counters say it is broken (`broken_query`:
//!   a last Xid, an uncorrectable ECC error, a row remap pending or failed,
//!   a recovery action, NVLink errors) — a filter the server evaluates,
//!   answering one series per such node; every refresh;
//! - every `SLOW_ROUNDS` refreshes (a minute): per node in aggregate, GPUs reporting,
//!   mean utilization and SM occupancy (`aggregates_query`, one series per
//!   node), and the nodes with a GPU spinning in a collective
//!   (`spinning_query`);
//! - the full per-GPU series (`full_selector`) only for those nodes, the
//!   nodes of the jobs running on them (a gang's other ranks say whether it
//!   is stalled), and the nodes the console has open.
//!
//! Prometheus (and Thanos, Mimir, VictoriaMetrics behind the same API) does
//! the work it is built for; the console decodes thousands of series, not
//! millions. Figures: docs/performance.md, "A fleet through Prometheus".

use super::PromError;
use super::{Answer, Series};
use crate::model::Timestamp;
use std::collections::{BTreeMap, BTreeSet};

/// The labels a GPU's host is named by, as aggregates group them.
const BY_HOST: &str = "Hostname, hostname, instance";

/// Which label names a host's series, and its value there: how its full
/// series are selected.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostKey {
    pub label: &'static str,
    pub value: String,
}

impl HostKey {
    /// The host's name, as the every-series path names it (the `instance`
    /// without its port).
    pub fn host(&self) -> &str {
        if self.label == "instance" {
            self.value.split(':').next().unwrap_or(&self.value)
        } else {
            &self.value
        }
    }

    fn of(series: &Series) -> Option<HostKey> {
        ["Hostname", "hostname", "instance"]
            .into_iter()
            .find_map(|l| {
                series.label(l).filter(|v| !v.is_empty()).map(|v| HostKey {
                    label: l,
                    value: v.to_string(),
                })
            })
    }
}

/// One node's GPUs in aggregate, as the server answered.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeAggregate {
    pub key: HostKey,
    pub gpus: u32,
    /// Mean utilization, 0–1.
    pub utilization: Option<f64>,
    /// Mean SM occupancy, 0–1.
    pub sm_occupancy: Option<f64>,
    /// The answer's time.
    pub time: Timestamp,
}

/// What a series' value is offset by in the aggregates, so that one sum
/// per node carries two numbers: its count (`⌊sum / OFFSET⌋`) and the
/// values' own sum (the rest). Exact in f64 while a node has fewer than
/// 10,000 series of a family and each value is at most 100.
const OFFSET: f64 = 1e6;

/// Per node, in one answer: GPUs reporting with their mean utilization,
/// and SM occupancy's mean, each tagged by a `nightshift_agg` label.
///
/// Each family is selected once (its count and mean from one sum, see
/// `OFFSET`): on Debian's Prometheus at 80,000 GPUs, selecting a family
/// costs the server about as much as a refresh of the whole fleet path
/// should (docs/performance.md), so `count` and `avg` of the same family
/// were one selection too many. Blank sentinels and NaN are filtered out
/// by the comparison.
pub fn aggregates_query() -> String {
    format!(
        r#"label_replace(sum by ({BY_HOST}) ({UTIL_PERCENT} + {OFFSET}), "nightshift_agg", "util", "", "") or label_replace(sum by ({BY_HOST}) ({OCCUPANCY} + {OFFSET}), "nightshift_agg", "occ", "", "")"#
    )
}

/// How many GPUs report utilization, in one number: whether the server
/// holds a fleet, for a command that reads no healthy node.
/// One selection of both generations' names (a blank sentinel is far
/// over 100 in either unit).
pub fn count_query() -> String {
    r#"count({__name__=~"DCGM_FI_DEV_GPU_UTIL(_RATIO)?"} <= 100)"#.to_string()
}

/// Reads a `count_query` answer (no series: none).
pub fn count_from(body: Answer) -> Result<(u64, Vec<String>), PromError> {
    let (result, warnings) = super::instant_answer(body)?;
    let n = result
        .first()
        .and_then(|s| s.value)
        .map(|p| p.value)
        .filter(|n| n.is_finite() && *n >= 0.0)
        .unwrap_or(0.0);
    Ok((n as u64, warnings))
}

/// Utilization in percent, in both generations of names: a percentage
/// before dcgm-exporter 4.9 (`DCGM_FI_DEV_GPU_UTIL`), a 0–1 ratio since
/// (`DCGM_FI_DEV_GPU_UTIL_RATIO`). Blank sentinels are left out.
const UTIL_PERCENT: &str =
    "((DCGM_FI_DEV_GPU_UTIL <= 100) or (100 * DCGM_FI_DEV_GPU_UTIL_RATIO <= 100))";
/// SM occupancy, 0–1, in both generations of names.
const OCCUPANCY: &str =
    "((DCGM_FI_PROF_SM_OCCUPANCY <= 1) or (DCGM_FI_PROF_SM_OCCUPANCY_RATIO <= 1))";

/// (count, mean) from an `OFFSET` sum.
fn count_and_mean(sum: f64) -> Option<(u32, f64)> {
    if !sum.is_finite() || sum < OFFSET {
        return None;
    }
    let n = (sum / OFFSET).floor();
    let mean = (sum - n * OFFSET) / n;
    Some((n.min(1e6) as u32, mean))
}

/// Values past this are dcgm-exporter's blank sentinels, not counts.
const BLANK: &str = "2147483632";

/// The nodes with a GPU whose counters say it is broken or breaking, one
/// series each: a last Xid, uncorrectable ECC errors, a row remap pending
/// or failed, a recovery action, NVLink errors. Asked every refresh.
pub fn broken_query() -> String {
    let positive = |f: &str| format!("{f} > 0 < {BLANK}");
    let parts: Vec<String> = [
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_ROW_REMAP_PENDING",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "nightshift_gpu_recovery_action",
        "DCGM_EXP_XID_ERRORS_COUNT",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
        // dcgm-exporter 4.9 and later (DCGM 4.7's names).
        "DCGM_FI_DEV_XID_ERROR",
        "DCGM_FI_DEV_ROW_REMAP_FAILED",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_TOTAL",
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_TOTAL",
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_TOTAL",
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_TOTAL",
    ]
    .into_iter()
    .map(positive)
    .collect();
    format!("group by ({BY_HOST}) ({})", parts.join(" or "))
}

/// The nodes with a GPU that shows the hung-collective signature at the
/// engine's thresholds (`stall_util_min`, `stall_occupancy_max`, 0–1), one
/// series each. The engine calls a gang stalled only after
/// `stall_window_s` (5 min) of it, so this is asked with the aggregates,
/// not every refresh.
pub fn spinning_query(stall_util_min: f64, stall_occupancy_max: f64) -> String {
    format!(
        "group by ({BY_HOST}) ({UTIL_PERCENT} >= {} and {OCCUPANCY} <= {})",
        (stall_util_min * 100.0).clamp(0.0, 100.0),
        stall_occupancy_max.clamp(0.0, 1.0)
    )
}

/// Refreshes per ask for the aggregates and for the spinning GPUs (the
/// aggregates on the first of them, the spinning GPUs on the second; the
/// others ask for the broken GPUs alone): with the default 10 s interval,
/// every minute — the grid's means of healthy nodes are a minute old at most
/// (their age is kept with them), and the engine needs 5 minutes of the
/// stall signature anyway. Each family selected costs Debian's Prometheus
/// about 0.3 s of CPU at 80,000 GPUs (docs/performance.md): the
/// aggregates and the spinning GPUs select four, the broken GPUs one per
/// family the exporters write of the ten it names.
pub const SLOW_ROUNDS: u64 = 6;

/// Hosts per full-series query: keeps each query's URL short.
pub const HOSTS_PER_QUERY: usize = 200;

/// Every family nightshift reads, for these hosts only (all named by the
/// same label). The values are matched exactly (regex-quoted).
pub fn full_selector(label: &str, values: &[&str]) -> String {
    let alts: Vec<String> = values.iter().map(|v| regex_quote(v)).collect();
    let families = super::query();
    // `{__name__=~"…"}` → `{__name__=~"…", Hostname=~"a|b"}`
    let inner = families.trim_end_matches('}');
    format!(r#"{inner}, {label}=~"{}"}}"#, alts.join("|"))
}

/// A literal for a RE2 regex inside a PromQL double-quoted string.
fn regex_quote(v: &str) -> String {
    let mut out = String::with_capacity(v.len() + 4);
    for ch in v.chars() {
        if "\\.+*?()|[]{}^$".contains(ch) {
            // `\\` in PromQL's string is one `\` for the regex.
            out.push_str("\\\\");
            out.push(ch);
        } else if ch == '"' {
            out.push_str("\\\"");
        } else if ch.is_control() {
            // Never sent: no host name holds one.
            continue;
        } else {
            out.push(ch);
        }
    }
    out
}

/// Reads the aggregates' answer.
pub fn aggregates_from(body: Answer) -> Result<(Vec<NodeAggregate>, Vec<String>), PromError> {
    let (rows, warnings) = tagged_rows(body)?;
    let mut by_host: BTreeMap<HostKey, NodeAggregate> = BTreeMap::new();
    for (key, tag, value, time) in rows {
        let a = by_host.entry(key.clone()).or_insert(NodeAggregate {
            key,
            gpus: 0,
            utilization: None,
            sm_occupancy: None,
            time,
        });
        a.time = a.time.min(time);
        let Some((n, mean)) = count_and_mean(value) else {
            continue;
        };
        match tag.as_str() {
            "util" => {
                a.gpus = n;
                a.utilization = Some((mean / 100.0).clamp(0.0, 1.0));
            }
            "occ" => a.sm_occupancy = Some(mean.clamp(0.0, 1.0)),
            _ => {}
        }
    }
    let max = crate::limits::get().max_series_per_scrape;
    if by_host.len() as u64 > max {
        return Err(PromError::TooManySeries(max));
    }
    Ok((
        by_host.into_values().filter(|a| a.gpus > 0).collect(),
        warnings,
    ))
}

/// Reads a `broken_query` or `spinning_query` answer: the hosts, each once.
pub fn hosts_from(body: Answer) -> Result<(BTreeSet<HostKey>, Vec<String>), PromError> {
    let (rows, warnings) = tagged_rows(body)?;
    Ok((rows.into_iter().map(|(k, ..)| k).collect(), warnings))
}

/// One series of an aggregate answer: its host, its `nightshift_agg` tag,
/// value and time.
type Row = (HostKey, String, f64, Timestamp);

/// The rows of an instant answer; series without a host label are skipped.
fn tagged_rows(body: Answer) -> Result<(Vec<Row>, Vec<String>), PromError> {
    let (result, warnings) = super::instant_answer(body)?;
    let rows = result
        .iter()
        .filter_map(|series| {
            let key = HostKey::of(series)?;
            let tag = series.label("nightshift_agg").unwrap_or("").to_string();
            let p = series.value?;
            let time = Some(p.time).filter(|t| t.is_finite())? as Timestamp;
            Some((key, tag, p.value, time))
        })
        .collect();
    Ok((rows, warnings))
}

/// The full-series queries for `keys`: grouped by the label that names
/// them, at most `HOSTS_PER_QUERY` hosts each.
pub fn full_queries(keys: &BTreeSet<HostKey>) -> Vec<String> {
    per_label(keys, full_selector)
}

/// Which hosts had a GPU with an Xid within the last `window_s` seconds:
/// one pass over each GPU's hour, where a range query of every GPU costs
/// one pass per step.
/// The Xid gauge in both generations of names (`DCGM_FI_DEV_XID_ERRORS`,
/// `DCGM_FI_DEV_XID_ERROR` since dcgm-exporter 4.9).
const XID: &str = r#"{__name__=~"DCGM_FI_DEV_XID_ERRORS?"}"#;

pub fn xid_hosts_query(window_s: i64) -> String {
    format!(
        "group by ({BY_HOST}) (max_over_time({XID}[{}s]) > 0 < {BLANK})",
        window_s.max(1)
    )
}

/// The Xid history's range queries for these hosts alone.
pub fn xid_history_queries(keys: &BTreeSet<HostKey>) -> Vec<String> {
    per_label(keys, |label, values| {
        let alts: Vec<String> = values.iter().map(|v| regex_quote(v)).collect();
        format!(
            r#"{{__name__=~"DCGM_FI_DEV_XID_ERRORS?",{label}=~"{}"}} != 0"#,
            alts.join("|")
        )
    })
}

/// `family`'s non-zero samples for these hosts alone (their fault
/// history: issue 29), one query per label and per `HOSTS_PER_QUERY`.
pub fn fault_queries(family: &str, keys: &BTreeSet<HostKey>) -> Vec<String> {
    per_label(keys, |label, values| {
        let alts: Vec<String> = values.iter().map(|v| regex_quote(v)).collect();
        format!(r#"{family}{{{label}=~"{}"}} > 0"#, alts.join("|"))
    })
}

/// One query per label that names hosts and per `HOSTS_PER_QUERY` of them.
fn per_label(keys: &BTreeSet<HostKey>, query: impl Fn(&str, &[&str]) -> String) -> Vec<String> {
    let mut by_label: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for k in keys {
        by_label.entry(k.label).or_default().push(&k.value);
    }
    by_label
        .into_iter()
        .flat_map(|(label, values)| {
            values
                .chunks(HOSTS_PER_QUERY)
                .map(|c| query(label, c))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::prometheus::answer;
    use serde_json::Value;

    fn row(labels: Value, v: &str) -> Value {
        serde_json::json!({"metric": labels, "value": [1796006000.0, v]})
    }

    #[test]
    fn aggregates_are_read_per_host_whatever_label_names_it() {
        let body = serde_json::json!({"status": "success", "warnings": ["one store did not answer"],
            "data": {"resultType": "vector", "result": [
            // 8 GPUs at 50 % on average; occupancy 0.25 on average.
            row(serde_json::json!({"Hostname": "gpu07", "instance": "fed:9400", "nightshift_agg": "util"}), "8000400"),
            row(serde_json::json!({"Hostname": "gpu07", "instance": "fed:9400", "nightshift_agg": "occ"}), "8000002"),
            row(serde_json::json!({"instance": "gpu08:9400", "nightshift_agg": "util"}), "4000000"),
            row(serde_json::json!({"instance": "gpu08:9400", "nightshift_agg": "occ"}), "NaN"),
            // No utilization: no GPU counted, not a node of GPUs.
            row(serde_json::json!({"instance": "x:9400", "nightshift_agg": "occ"}), "1000000.5"),
            row(serde_json::json!({"job": "dcgm", "nightshift_agg": "util"}), "3000000"),
        ]}});
        let (a, w) = aggregates_from(answer(body)).expect("aggregates");
        assert_eq!(w, ["Prometheus warning: one store did not answer"]);
        assert_eq!(a.len(), 2, "{a:?}");
        assert_eq!(a[0].key.host(), "gpu07");
        assert_eq!(a[0].key.label, "Hostname");
        assert_eq!(
            (a[0].gpus, a[0].utilization, a[0].sm_occupancy),
            (8, Some(0.5), Some(0.25))
        );
        assert_eq!(a[1].key.host(), "gpu08");
        assert_eq!(a[1].key.value, "gpu08:9400");
        assert_eq!(
            (a[1].gpus, a[1].utilization, a[1].sm_occupancy),
            (4, Some(0.0), None)
        );
        assert_eq!(count_and_mean(16.0 * OFFSET + 1600.0), Some((16, 100.0)));
        assert_eq!(count_and_mean(999_999.0), None);
        let err = aggregates_from(answer(serde_json::json!({"status": "error", "errorType": "timeout", "error": "query timed out"})))
            .expect_err("error");
        assert!(err.to_string().contains("query timed out"), "{err}");
    }

    #[test]
    fn full_series_are_selected_by_exact_host_names() {
        let keys: BTreeSet<HostKey> = [
            HostKey {
                label: "Hostname",
                value: "gpu07.dc".into(),
            },
            HostKey {
                label: "instance",
                value: "gpu08:9400".into(),
            },
        ]
        .into_iter()
        .collect();
        let q = full_queries(&keys);
        assert_eq!(q.len(), 2, "one query per label: {q:?}");
        assert!(q[0].contains(r#"Hostname=~"gpu07\\.dc""#), "{}", q[0]);
        assert!(
            q[0].starts_with(r#"{__name__=~"DCGM_FI_PROF_SM_OCCUPANCY|"#),
            "{}",
            q[0]
        );
        assert!(q[1].contains(r#"instance=~"gpu08:9400""#), "{}", q[1]);
        let many: BTreeSet<HostKey> = (0..450)
            .map(|i| HostKey {
                label: "Hostname",
                value: format!("n{i}"),
            })
            .collect();
        assert_eq!(full_queries(&many).len(), 3);
        assert_eq!(
            xid_history_queries(&keys),
            [
                r#"{__name__=~"DCGM_FI_DEV_XID_ERRORS?",Hostname=~"gpu07\\.dc"} != 0"#,
                r#"{__name__=~"DCGM_FI_DEV_XID_ERRORS?",instance=~"gpu08:9400"} != 0"#
            ]
        );
        assert_eq!(regex_quote(r#"a"b|c"#), r#"a\"b\\|c"#);
    }

    #[test]
    fn the_problem_filters_use_the_engines_stall_thresholds() {
        let q = spinning_query(0.9, 0.05);
        assert!(
            q.contains(&format!("{UTIL_PERCENT} >= 90 and {OCCUPANCY} <= 0.05")),
            "{q}"
        );
        assert!(
            q.starts_with("group by (Hostname, hostname, instance) ("),
            "{q}"
        );
        let q = broken_query();
        assert!(q.contains("DCGM_FI_DEV_XID_ERRORS > 0 < 2147483632"), "{q}");
    }
}
