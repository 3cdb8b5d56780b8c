//! GPU health from a Prometheus-compatible server (the path for big
//! clusters): one instant query per refresh for every DCGM family
//! (`/api/v1/query`), instead of scraping thousands of nodes from a laptop.
//! `status: error` is an error with Prometheus's text; warnings (partial
//! results) are reported and the rest kept; each reading carries its
//! sample's time, so stale series show their age.

use super::dcgm::Reading;
use super::dcgm::textformat::Sample;
use crate::model::{Backfill, GpuBackfill, Timestamp, XidSeen};
pub use answer::{Answer, Series};
use std::collections::BTreeMap;
use std::time::Duration;

pub mod answer;
pub mod faults;
pub mod fleet;

/// Every family nightshift reads, by name, in one selector (issue 28: not
/// every `DCGM_FI_*` family an exporter writes).
pub fn query() -> String {
    format!(
        r#"{{__name__=~"{}|{}"}}"#,
        crate::dcgm::read_families().collect::<Vec<_>>().join("|"),
        crate::dcgm::PER_LINK_FAMILIES
    )
}

/// The node exporter's InfiniBand families and its host names, by name.
pub const PORTS_QUERY: &str = r#"{__name__=~"node_infiniband_(state_id|physical_state_id|rate_bytes_per_second|link_downed_total|link_error_recovery_total|symbol_error_total|port_errors_received_total)|node_uname_info"}"#;

/// The back-fill's activity series, over the last hour.
/// Both generations of names (dcgm-exporter 4.9 renamed them).
pub const RANGE_ACTIVITY: &str =
    r#"{__name__=~"DCGM_FI_PROF_SM_OCCUPANCY(_RATIO)?|DCGM_FI_DEV_GPU_UTIL(_RATIO)?"}"#;
/// The back-fill's Xids: only GPUs that reported one, so the answer stays
/// small on a big cluster even when the activity one is too big.
pub const RANGE_XID: &str = r#"{__name__=~"DCGM_FI_DEV_XID_ERRORS?"} != 0"#;

#[derive(Clone)]
pub struct Prometheus {
    http: reqwest::Client,
    base: String,
    timeout: Duration,
}

pub use super::error::PromError;

/// An instant answer's series and warnings; an error answer (with
/// Prometheus's words), one without a result, or a range is an error.
pub(crate) fn instant_answer(body: Answer) -> Result<(Vec<Series>, Vec<String>), PromError> {
    let warnings = checked(&body)?;
    let data = body.data.ok_or(PromError::NoResult)?;
    if data.result_type.as_str() == "matrix" {
        return Err(PromError::MatrixToInstant);
    }
    Ok((data.result.0, warnings))
}

/// An error answer as an error with Prometheus's words; else its
/// warnings (five at most, a line each).
fn checked(body: &Answer) -> Result<Vec<String>, PromError> {
    if body.status.as_str() != "success" {
        let text = |t: &Option<answer::Text>, none: &str| {
            t.as_ref()
                .map_or(none.to_string(), |t| t.as_str().to_string())
        };
        return Err(PromError::Failed {
            kind: crate::text::one_line(&text(&body.error_type, "unknown"), 40),
            message: crate::text::one_line(&text(&body.error, "no error text"), 300),
        });
    }
    Ok(body
        .warnings
        .iter()
        .take(5)
        .map(|s| {
            format!(
                "Prometheus warning: {}",
                crate::text::one_line(s.as_str(), 300)
            )
        })
        .collect())
}

/// Samples from an instant-query response; `warnings` come back beside.
/// The answer's strings move into the samples (nothing is copied).
pub fn samples_from(body: Answer) -> Result<(Vec<Sample>, Vec<String>), PromError> {
    let (result, warnings) = instant_answer(body)?;
    let mut out = Vec::with_capacity(result.len());
    for series in result {
        let Some(p) = series.value else {
            continue;
        };
        if !p.time.is_finite() {
            continue;
        }
        // Series without a host label are named after the target scraped.
        let host = match series.label("Hostname").or(series.label("hostname")) {
            Some(_) => None,
            None => series.host().map(str::to_string),
        };
        let mut name = None;
        let mut labels: Vec<(String, String)> = Vec::with_capacity(series.metric.0.len() + 1);
        for (k, v) in series.metric.0 {
            if k == "__name__" {
                name = Some(v);
            } else {
                labels.push((k, v));
            }
        }
        let Some(name) = name else {
            continue;
        };
        if let Some(h) = host {
            labels.push(("hostname".into(), h));
        }
        out.push(Sample {
            name,
            labels,
            value: p.value,
            timestamp_ms: Some((p.time * 1000.0) as i64),
        });
    }
    Ok((out, warnings))
}

/// Per slot: sum and count, of the GPU's own series and of its MIG
/// instances' (used only where the GPU's own has nothing).
#[derive(Default)]
struct Acc {
    own: Vec<(f64, u32)>,
    mig: Vec<(f64, u32)>,
}

impl Acc {
    fn add(&mut self, slots: usize, mig: bool, i: usize, v: f64) {
        let s = if mig { &mut self.mig } else { &mut self.own };
        s.resize(slots, (0.0, 0));
        s[i].0 += v;
        s[i].1 += 1;
    }

    /// Percent per slot, from values where `full` is 100%.
    fn percent(&self, slots: usize, full: f64) -> Vec<Option<u8>> {
        let mean = |s: &Vec<(f64, u32)>, i: usize| {
            s.get(i)
                .filter(|(_, n)| *n > 0)
                .map(|(sum, n)| sum / f64::from(*n))
        };
        (0..slots)
            .map(|i| {
                mean(&self.own, i)
                    .or_else(|| mean(&self.mig, i))
                    .map(|v| ((v / full).clamp(0.0, 1.0) * 100.0).round() as u8)
            })
            .collect()
    }
}

#[derive(Default)]
struct GpuAcc {
    occupancy: Acc,
    utilization: Acc,
    /// The last-Xid gauge's samples, in time order.
    xid: Vec<(Timestamp, u32)>,
}

/// Builds a back-fill from `query_range` answers.
pub struct BackfillBuilder {
    /// The window (start, step, slots) and the notes; its GPUs are filled
    /// in by `finish`.
    window: Backfill,
    gpus: BTreeMap<(String, u32), GpuAcc>,
    series: u64,
}

impl BackfillBuilder {
    /// Slots of `step` seconds, the first at `start`.
    pub fn new(start: Timestamp, step: i64, slots: usize) -> BackfillBuilder {
        BackfillBuilder {
            window: Backfill {
                start,
                step: step.max(1),
                slots,
                ..Backfill::default()
            },
            gpus: BTreeMap::new(),
            series: 0,
        }
    }

    /// Adds one answer (a matrix). An error answer is an error with
    /// Prometheus's text; series nightshift does not read are skipped.
    pub fn add(&mut self, body: &Answer) -> Result<(), PromError> {
        self.window.notes.extend(checked(body)?);
        let data = body.data.as_ref().ok_or(PromError::NoResult)?;
        if data.result_type.as_str() != "matrix" {
            return Err(PromError::NoMatrix);
        }
        let max_series = crate::limits::get().max_series_per_scrape;
        let max_gpu = crate::limits::get().max_gpus_per_node;
        for series in &data.result.0 {
            self.series += 1;
            if self.series > max_series {
                return Err(PromError::TooManySeries(max_series));
            }
            let (Some(name), Some(host), Some(gpu)) = (
                series.label("__name__"),
                series.host(),
                series
                    .label("gpu")
                    .and_then(|g| g.parse::<u32>().ok())
                    .filter(|&g| g < max_gpu),
            ) else {
                continue;
            };
            let mig = series.metric.contains("GPU_I_ID");
            let values = &series.values.0;
            let acc = self.gpus.entry((host.to_string(), gpu)).or_default();
            let (window, slots) = (&self.window, self.window.slots);
            let points = values.iter().filter_map(|p| {
                let t = Some(p.time).filter(|t| t.is_finite())? as Timestamp;
                let v = Some(p.value).filter(|v| v.is_finite())?;
                (!super::dcgm::blank(v)).then_some((t, v))
            });
            let slot = |t: Timestamp| window.slot(t);
            match name {
                "DCGM_FI_PROF_SM_OCCUPANCY" | "DCGM_FI_PROF_SM_OCCUPANCY_RATIO" => {
                    for (t, v) in points {
                        if let Some(i) = slot(t) {
                            acc.occupancy.add(slots, mig, i, v);
                        }
                    }
                }
                "DCGM_FI_DEV_GPU_UTIL" | "DCGM_FI_DEV_GPU_UTIL_RATIO" => {
                    // A percentage before dcgm-exporter 4.9, a ratio since.
                    let scale = if name.ends_with("_RATIO") { 100.0 } else { 1.0 };
                    for (t, v) in points.map(|(t, v)| (t, v * scale)) {
                        if let Some(i) = slot(t) {
                            acc.utilization.add(slots, mig, i, v);
                        }
                    }
                }
                "DCGM_FI_DEV_XID_ERRORS" | "DCGM_FI_DEV_XID_ERROR" if !mig => {
                    acc.xid.extend(
                        points
                            .filter(|&(_, v)| (0.0..1e9).contains(&v))
                            .map(|(t, v)| (t, v.round() as u32))
                            .take(slots.saturating_mul(4)),
                    );
                }
                _ => {}
            }
        }
        Ok(())
    }

    pub fn finish(self) -> Backfill {
        let (slots, start, step) = (self.window.slots, self.window.start, self.window.step);
        let gpus = self
            .gpus
            .into_iter()
            .map(|(k, mut a)| {
                a.xid.sort_by_key(|&(t, _)| t);
                let mut xids: Vec<XidSeen> = Vec::new();
                let mut last = None;
                for (i, &(t, code)) in a.xid.iter().enumerate() {
                    if code != 0 && last != Some(code) {
                        xids.push(XidSeen {
                            code,
                            first_seen: t,
                            at_window_start: i == 0 && t - start < step,
                        });
                    }
                    last = Some(code);
                }
                let b = GpuBackfill {
                    occupancy: a.occupancy.percent(slots, 1.0),
                    utilization: a.utilization.percent(slots, 100.0),
                    xids,
                };
                (k, b)
            })
            .collect();
        Backfill {
            gpus,
            ..self.window
        }
    }
}

impl Prometheus {
    pub fn new(url: &str, timeout: Duration) -> Result<Prometheus, PromError> {
        let http = crate::http::client_builder()
            .timeout(timeout)
            .build()
            .map_err(|e| PromError::Http(e.to_string()))?;
        Ok(Prometheus {
            http,
            base: url.trim_end_matches('/').to_string(),
            timeout,
        })
    }

    /// One refresh: the readings, and warnings. Errors quote at most a
    /// line of what the server said.
    pub async fn query(&self) -> Result<(Vec<Reading>, Vec<String>), PromError> {
        self.query_with(&query()).await
    }

    /// The readings an instant query `q` selects.
    pub async fn query_with(&self, q: &str) -> Result<(Vec<Reading>, Vec<String>), PromError> {
        let body = self.get_json("query", &[("query", q.to_string())]).await?;
        let (samples, mut warnings) = samples_from(body)?;
        let (r, w) = crate::dcgm::readings_checked(&samples, "unknown", crate::host::now());
        warnings.extend(w);
        Ok((r, warnings))
    }

    /// The network ports the node exporters it scrapes report.
    pub async fn ports(
        &self,
    ) -> Result<(Vec<crate::dcgm::ports::PortReading>, Vec<String>), PromError> {
        let body = self
            .get_json("query", &[("query", PORTS_QUERY.to_string())])
            .await?;
        let (samples, warnings) = samples_from(body)?;
        Ok((
            crate::dcgm::ports::ports_from(&samples, "unknown", crate::host::now()),
            warnings,
        ))
    }

    /// How many GPUs report a utilization (one series back).
    pub async fn gpu_count(&self) -> Result<u64, PromError> {
        let body = self
            .get_json("query", &[("query", fleet::count_query())])
            .await?;
        Ok(fleet::count_from(body)?.0)
    }

    /// The last `slots` × `step` seconds up to `end`, for the charts.
    /// Either query may fail alone (the activity one is big on a big
    /// cluster): what came back is kept and the failure is a note. A
    /// fleet's (`activity` false) is its Xids alone: every GPU's hour of
    /// activity is millions of points, and its charts are per node.
    pub async fn backfill(
        &self,
        end: Timestamp,
        step: i64,
        slots: usize,
        activity: bool,
    ) -> Backfill {
        let start = end - step * (slots.saturating_sub(1) as i64);
        let mut bodies = Vec::new();
        let mut notes = Vec::new();
        if !activity {
            notes.push("a fleet: no per-GPU activity history (its Xids only)".to_string());
        }
        let mut queries = vec![
            ("SM occupancy and utilization", RANGE_ACTIVITY.to_string()),
            ("Xids", RANGE_XID.to_string()),
        ];
        if !activity {
            // A fleet: first which hosts had an Xid in the window (one
            // pass over each GPU's hour), then those hosts' history alone.
            let q = fleet::xid_hosts_query(end - start + step);
            queries = match self.get_json("query", &[("query", q)]).await {
                Ok(body) => match fleet::hosts_from(body) {
                    Ok((hosts, _)) => fleet::xid_history_queries(&hosts)
                        .into_iter()
                        .map(|q| ("Xids", q))
                        .collect(),
                    Err(e) => {
                        notes.push(format!("no Xids history: {e}"));
                        Vec::new()
                    }
                },
                Err(e) => {
                    notes.push(format!("no Xids history: {e}"));
                    Vec::new()
                }
            };
        }
        for (what, q) in queries {
            let params = [
                ("query", q),
                ("start", start.to_string()),
                ("end", end.to_string()),
                ("step", step.to_string()),
            ];
            match self.get_json("query_range", &params).await {
                Ok(b) => bodies.push((what, b)),
                Err(e) => notes.push(format!("no {what} history: {e}")),
            }
        }
        let built = tokio::task::spawn_blocking(move || {
            let mut b = BackfillBuilder::new(start, step, slots);
            let mut notes = notes;
            for (what, body) in &bodies {
                if let Err(e) = b.add(body) {
                    notes.push(format!("no {what} history: {e}"));
                }
            }
            let mut out = b.finish();
            out.notes.extend(notes);
            out
        })
        .await;
        built.unwrap_or_else(|e| Backfill {
            notes: vec![format!("the history back-fill failed: {e}")],
            ..Backfill::default()
        })
    }

    /// GET `/api/v1/{path}`: its answer, parsed as it streams in (off the
    /// async workers) and bounded by what it keeps
    /// (`limits.max_series_per_scrape`, `limits.max_answer_held_bytes`);
    /// its bytes count against the budget of every answer in flight.
    pub(crate) async fn get_json(
        &self,
        path: &str,
        params: &[(&str, String)],
    ) -> Result<Answer, PromError> {
        let url = reqwest::Url::parse_with_params(&format!("{}/api/v1/{path}", self.base), params)
            .map_err(|e| PromError::Url {
                base: self.base.clone(),
                why: e.to_string(),
            })?;
        let resp = self.http.get(url.clone()).send().await.map_err(|e| {
            crate::http::http_error(&format!("Prometheus at {}", self.base), &e, self.timeout)
        })?;
        let status = resp.status().as_u16();
        let what = format!("Prometheus at {}", self.base);
        let limits = crate::limits::get();
        let (series, bytes) = (limits.max_series_per_scrape, limits.max_answer_held_bytes);
        use crate::http::{StreamError, parse_streamed};
        use answer::ParseError;
        parse_streamed(resp, &what, self.timeout, move |r| {
            answer::parse_bounded(r, series, bytes)
        })
        .await
        .map_err(|e| match e {
            StreamError::Source(s) => PromError::Source(s),
            StreamError::Parse {
                error: ParseError::Held(passed),
                ..
            } => PromError::Held { what, passed },
            StreamError::Parse {
                error: ParseError::Json(e),
                start,
            } => PromError::NotJson {
                what,
                status,
                why: e.to_string(),
                start,
            },
            StreamError::Task(t) => PromError::Parse(t),
        })
    }
}

#[cfg(test)]
pub(crate) fn answer(v: serde_json::Value) -> Answer {
    serde_json::from_value(v).expect("a Prometheus answer")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_partial_and_stale_answers() {
        let err = samples_from(answer(serde_json::json!({"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}))).expect_err("error");
        assert!(
            err.to_string().contains("bad_data") && err.to_string().contains("parse error"),
            "{err}"
        );
        let body = serde_json::json!({
            "status": "success",
            "warnings": ["a shard did not answer"],
            "data": {"resultType": "vector", "result": [
                {"metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", "gpu": "0", "instance": "gpu07:9400", "job": "dcgm"}, "value": [1796006000.5, "61"]},
                {"metric": {"__name__": "DCGM_FI_DEV_XID_ERRORS", "gpu": "0", "Hostname": "gpu07", "instance": "x:9400"}, "value": [1796005000, "79"]}
            ]}
        });
        let (samples, warnings) = samples_from(answer(body)).expect("samples");
        assert_eq!(warnings, ["Prometheus warning: a shard did not answer"]);
        let r = crate::dcgm::readings(&samples, "unknown", 0);
        assert_eq!(r.len(), 1, "instance host and Hostname agree on gpu07");
        assert_eq!(r[0].host, "gpu07");
        assert_eq!(r[0].temperature_c, Some(61.0));
        assert_eq!(r[0].last_xid, Some(79));
        assert_eq!(
            r[0].time, 1_796_005_000,
            "the oldest sample dates the reading"
        );
    }

    /// A range answer as Prometheus writes one: occupancy of a GPU and of a
    /// MIG-split GPU, utilization, a blank sentinel, a point outside the
    /// window, and a last-Xid gauge that goes 0 → 79 → 79 → 48.
    #[test]
    fn range_answers_become_slots_and_xid_times() {
        let start = 1_796_000_000i64;
        let m = |labels: serde_json::Value, values: &[(i64, &str)]| serde_json::json!({"metric": labels, "values": values.iter().map(|(t, v)| serde_json::json!([*t as f64, v])).collect::<Vec<_>>()});
        let activity = serde_json::json!({"status": "success", "data": {"resultType": "matrix", "result": [
            m(serde_json::json!({"__name__": "DCGM_FI_PROF_SM_OCCUPANCY", "gpu": "0", "Hostname": "gpu07"}),
              &[(start, "0.5"), (start + 30, "0.25"), (start + 60, "NaN"), (start + 3600, "1")]),
            m(serde_json::json!({"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0", "Hostname": "gpu07"}),
              &[(start, "100"), (start + 30, "9223372036854775794")]),
            // No Hostname: the instance names the host; MIG instances average.
            m(serde_json::json!({"__name__": "DCGM_FI_PROF_SM_OCCUPANCY", "gpu": "1", "GPU_I_ID": "1", "instance": "gpu08:9400"}),
              &[(start, "0.2")]),
            m(serde_json::json!({"__name__": "DCGM_FI_PROF_SM_OCCUPANCY", "gpu": "1", "GPU_I_ID": "2", "instance": "gpu08:9400"}),
              &[(start, "0.4")]),
            m(serde_json::json!({"__name__": "DCGM_FI_PROF_SM_OCCUPANCY", "instance": "gpu08:9400"}),
              &[(start, "0.9")]),
        ]}});
        let xid = serde_json::json!({"status": "success", "warnings": ["partial"], "data": {"resultType": "matrix", "result": [
            m(serde_json::json!({"__name__": "DCGM_FI_DEV_XID_ERRORS", "gpu": "3", "Hostname": "gpu07"}),
              &[(start, "79"), (start + 60, "79"), (start + 90, "48")]),
            // Scraped from a later time: its first Xid is not from before.
            m(serde_json::json!({"__name__": "DCGM_FI_DEV_XID_ERRORS", "gpu": "4", "Hostname": "gpu07"}),
              &[(start + 60, "0"), (start + 90, "13")]),
        ]}});
        let mut b = BackfillBuilder::new(start, 30, 4);
        b.add(&answer(activity)).expect("activity");
        b.add(&answer(xid)).expect("xid");
        let b = b.finish();
        assert_eq!(b.notes, ["Prometheus warning: partial"]);
        let g0 = &b.gpus[&("gpu07".to_string(), 0)];
        assert_eq!(g0.occupancy, [Some(50), Some(25), None, None]);
        assert_eq!(g0.utilization, [Some(100), None, None, None]);
        let g1 = &b.gpus[&("gpu08".to_string(), 1)];
        assert_eq!(g1.occupancy, [Some(30), None, None, None]);
        assert!(
            !b.gpus.keys().any(|(h, g)| h == "gpu08" && *g != 1),
            "a series without a gpu label is skipped"
        );
        let x = &b.gpus[&("gpu07".to_string(), 3)].xids;
        assert_eq!(
            x,
            &[
                XidSeen {
                    code: 79,
                    first_seen: start,
                    at_window_start: true
                },
                XidSeen {
                    code: 48,
                    first_seen: start + 90,
                    at_window_start: false
                }
            ]
        );
        assert_eq!(
            b.gpus[&("gpu07".to_string(), 4)].xids,
            [XidSeen {
                code: 13,
                first_seen: start + 90,
                at_window_start: false
            }]
        );
        // Errors are errors, with Prometheus's words; an instant answer
        // is not a range.
        let mut b = BackfillBuilder::new(start, 30, 4);
        let err = b
            .add(&answer(serde_json::json!({"status": "error", "errorType": "execution", "error": "query processing would load too many samples"})))
            .expect_err("error");
        assert!(err.to_string().contains("too many samples"), "{err}");
        let err = b
            .add(&answer(serde_json::json!({"status": "success", "data": {"resultType": "vector", "result": []}})))
            .expect_err("vector");
        assert!(err.to_string().contains("matrix"), "{err}");
    }
}
