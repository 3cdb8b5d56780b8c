//! A node's hardware faults over the last weeks (issue 29), from what
//! Prometheus remembers: the Xid gauge (`DCGM_FI_DEV_XID_ERRORS`, the last
//! Xid a GPU reported), volatile double-bit ECC errors and row-remap
//! failures, each asked as a filter (`> 0`) over `[engine]
//! repeat_offender`'s window. A fault is where a run of non-zero samples
//! begins, or where the value changes within one (another Xid code, more
//! DBEs). Sampled every `step_for(window)` seconds (4 min 19 s over 30
//! days): a fault whose gauge was cleared sooner than that can be missed,
//! and the same Xid twice without a reset between is one.

use super::{Answer, PromError, Prometheus};
use crate::model::{Fault, PastFault, Timestamp};

/// The families asked, each with the fault its non-zero values are.
const FAMILIES: &[(&str, FaultOf)] = &[
    ("DCGM_FI_DEV_XID_ERRORS", FaultOf::Xid),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", FaultOf::Dbe),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", FaultOf::RemapFailed),
    // dcgm-exporter 4.9 and later (DCGM 4.7's names).
    ("DCGM_FI_DEV_XID_ERROR", FaultOf::Xid),
    ("DCGM_FI_DEV_ROW_REMAP_FAILED", FaultOf::RemapFailed),
];

#[derive(Debug, Clone, Copy)]
enum FaultOf {
    Xid,
    Dbe,
    RemapFailed,
}

impl FaultOf {
    fn fault(self, v: f64) -> Option<Fault> {
        match self {
            FaultOf::Xid => (v >= 1.0 && v <= f64::from(u32::MAX)).then_some(Fault::Xid(v as u32)),
            FaultOf::Dbe => Some(Fault::Dbe),
            FaultOf::RemapFailed => Some(Fault::RemapFailed),
        }
    }
}

/// Prometheus answers at most 11,000 points a series: the step that
/// covers the window in 10,000, and at least a minute.
pub fn step_for(window_s: i64) -> i64 {
    (window_s / 10_000).max(60)
}

/// The faults in one `query_range` answer of `family`'s filter, by host.
fn faults_of(body: &Answer, of: FaultOf, step: i64) -> Result<Vec<PastFault>, PromError> {
    super::checked(body)?;
    let result = &body.data.as_ref().ok_or(PromError::NoResult)?.result.0;
    let max = crate::limits::get().max_series_per_scrape;
    if result.len() as u64 > max {
        return Err(PromError::TooManySeries(max));
    }
    let mut out = Vec::new();
    for series in result {
        let Some(host) = series.host() else {
            continue;
        };
        let gpu = series.label("gpu").and_then(|g| g.parse::<u32>().ok());
        let mut prev: Option<(Timestamp, f64)> = None;
        for p in &series.values.0 {
            if !p.time.is_finite() || p.value.is_nan() {
                continue;
            }
            let (t, v) = (p.time as Timestamp, p.value);
            let begins = prev.is_none_or(|(pt, pv)| t - pt > step + step / 2 || pv != v);
            if begins && let Some(fault) = of.fault(v) {
                out.push(PastFault {
                    time: t,
                    node: host.to_string(),
                    gpu,
                    fault,
                    from: "prometheus".into(),
                });
            }
            prev = Some((t, v));
        }
    }
    Ok(out)
}

impl Prometheus {
    /// The GPUs' hardware faults in the `window_s` before `end`, by host
    /// (the caller names them as the scheduler does).
    pub async fn fault_history(
        &self,
        end: Timestamp,
        window_s: i64,
    ) -> Result<Vec<PastFault>, PromError> {
        self.faults_asked(end, window_s, |family| vec![format!("{family} > 0")])
            .await
    }

    /// The same for these hosts alone: a fleet's server reads their
    /// series, never every GPU's weeks.
    pub async fn fault_history_of(
        &self,
        end: Timestamp,
        window_s: i64,
        keys: &std::collections::BTreeSet<super::fleet::HostKey>,
    ) -> Result<Vec<PastFault>, PromError> {
        self.faults_asked(end, window_s, |family| {
            super::fleet::fault_queries(family, keys)
        })
        .await
    }

    /// Each family's queries (`queries(family)`) over the window.
    async fn faults_asked(
        &self,
        end: Timestamp,
        window_s: i64,
        queries: impl Fn(&str) -> Vec<String>,
    ) -> Result<Vec<PastFault>, PromError> {
        let step = step_for(window_s);
        let mut out = Vec::new();
        for (family, of) in FAMILIES {
            for query in queries(family) {
                let params = [
                    ("query", query),
                    ("start", (end - window_s).to_string()),
                    ("end", end.to_string()),
                    ("step", step.to_string()),
                ];
                let body = self.get_json("query_range", &params).await?;
                out.extend(faults_of(&body, *of, step)?);
            }
        }
        out.sort_by_key(|f| f.time);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_fault_is_where_a_run_of_non_zero_samples_begins_or_changes() {
        let step = 300;
        let body = json!({"status": "success", "data": {"resultType": "matrix", "result": [
            {"metric": {"__name__": "DCGM_FI_DEV_XID_ERRORS", "Hostname": "gpu07", "gpu": "3"},
             // 79 for three samples, gone (rebooted), 79 again, then 48.
             "values": [[1000, "79"], [1300, "79"], [1600, "79"], [4000, "79"], [4300, "48"]]},
            {"metric": {"__name__": "DCGM_FI_DEV_XID_ERRORS", "instance": "gpu08:9400", "gpu": "x"},
             "values": [[1000, "13"], [1300, "NaN?"]]}
        ]}});
        let f = faults_of(&crate::prometheus::answer(body), FaultOf::Xid, step).expect("faults");
        let got: Vec<(Timestamp, &str, Option<u32>, Fault)> = f
            .iter()
            .map(|f| (f.time, f.node.as_str(), f.gpu, f.fault))
            .collect();
        assert_eq!(
            got,
            vec![
                (1000, "gpu07", Some(3), Fault::Xid(79)),
                (4000, "gpu07", Some(3), Fault::Xid(79)),
                (4300, "gpu07", Some(3), Fault::Xid(48)),
                (1000, "gpu08", None, Fault::Xid(13)),
            ]
        );
        assert!(
            faults_of(
                &crate::prometheus::answer(json!({"status": "success"})),
                FaultOf::Dbe,
                step
            )
            .is_err()
        );
        assert_eq!(step_for(30 * 86_400), 259);
        assert_eq!(step_for(3600), 60);
    }
}
