//! GPU health from a Prometheus-compatible server (the path for big
//! clusters): one instant query per refresh for every DCGM family
//! (`/api/v1/query`), instead of scraping thousands of nodes from a laptop.
//! `status: error` is an error with Prometheus's text; warnings (partial
//! results) are reported and the rest kept; each reading carries its
//! sample's time, so stale series show their age.

use super::dcgm::Reading;
use super::dcgm::textformat::Sample;
use serde_json::Value;
use std::time::Duration;

/// Every family nightshift reads, in one selector.
pub const QUERY: &str = r#"{__name__=~"DCGM_FI_DEV_.*|DCGM_FI_PROF_.*|DCGM_EXP_XID_ERRORS_COUNT"}"#;

pub struct Prometheus {
    http: reqwest::Client,
    base: String,
    timeout: Duration,
}

/// Samples from an instant-query response; `warnings` come back beside.
pub fn samples_from(body: &Value) -> Result<(Vec<Sample>, Vec<String>), String> {
    let status = body.get("status").and_then(Value::as_str).unwrap_or("");
    if status != "success" {
        let kind = body
            .get("errorType")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        let msg = body
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("no error text");
        return Err(format!(
            "Prometheus query failed ({}): {}",
            crate::text::one_line(kind, 40),
            crate::text::one_line(msg, 300)
        ));
    }
    let warnings = body
        .get("warnings")
        .and_then(Value::as_array)
        .map(|w| {
            w.iter()
                .filter_map(Value::as_str)
                .take(5)
                .map(|s| format!("Prometheus warning: {}", crate::text::one_line(s, 300)))
                .collect()
        })
        .unwrap_or_default();
    let result = body
        .pointer("/data/result")
        .and_then(Value::as_array)
        .ok_or("Prometheus answered without data.result")?;
    let mut out = Vec::with_capacity(result.len());
    for series in result {
        let Some(metric) = series.get("metric").and_then(Value::as_object) else {
            continue;
        };
        let Some((ts, val)) = series
            .get("value")
            .and_then(Value::as_array)
            .and_then(|v| Some((v.first()?.as_f64()?, v.get(1)?.as_str()?)))
        else {
            continue;
        };
        let Some(name) = metric.get("__name__").and_then(Value::as_str) else {
            continue;
        };
        let mut labels: Vec<(String, String)> = metric
            .iter()
            .filter(|(k, _)| k.as_str() != "__name__")
            .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
            .collect();
        // Series without a host label are named after the target scraped.
        if !labels
            .iter()
            .any(|(k, _)| k == "Hostname" || k == "hostname")
            && let Some(instance) = metric.get("instance").and_then(Value::as_str)
        {
            labels.push((
                "hostname".into(),
                instance.split(':').next().unwrap_or(instance).to_string(),
            ));
        }
        let value = match val {
            "NaN" => f64::NAN,
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap_or(f64::NAN),
        };
        out.push(Sample {
            name: name.to_string(),
            labels,
            value,
            timestamp_ms: Some((ts * 1000.0) as i64),
        });
    }
    Ok((out, warnings))
}

impl Prometheus {
    pub fn new(url: &str, timeout: Duration) -> Result<Prometheus, String> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Prometheus {
            http,
            base: url.trim_end_matches('/').to_string(),
            timeout,
        })
    }

    /// One refresh: the readings, and warnings. Errors quote at most a
    /// line of what the server said.
    pub async fn query(&self) -> Result<(Vec<Reading>, Vec<String>), String> {
        let url = reqwest::Url::parse_with_params(
            &format!("{}/api/v1/query", self.base),
            &[("query", QUERY)],
        )
        .map_err(|e| format!("bad Prometheus URL {}: {e}", self.base))?;
        let resp = self.http.get(url.clone()).send().await.map_err(|e| {
            crate::sources::dcgm::scrape::http_error(
                &format!("Prometheus at {}", self.base),
                &e,
                self.timeout,
            )
            .to_string()
        })?;
        let status = resp.status().as_u16();
        let what = format!("Prometheus at {}", self.base);
        let text = crate::sources::http::text(resp, &what, self.timeout)
            .await
            .map_err(|e| e.to_string())?;
        let body: Value = serde_json::from_str(&text).map_err(|e| {
            format!(
                "{what}: HTTP {status}, not JSON ({e}): {}",
                crate::text::one_line(&text, 120)
            )
        })?;
        let (samples, mut warnings) = samples_from(&body)?;
        let (r, w) =
            crate::sources::dcgm::readings_checked(&samples, "unknown", crate::host::now());
        warnings.extend(w);
        Ok((r, warnings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_partial_and_stale_answers() {
        let err = samples_from(&serde_json::json!({"status": "error", "errorType": "bad_data", "error": "parse error at char 3"})).expect_err("error");
        assert!(
            err.contains("bad_data") && err.contains("parse error"),
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
        let (samples, warnings) = samples_from(&body).expect("samples");
        assert_eq!(warnings, ["Prometheus warning: a shard did not answer"]);
        let r = crate::sources::dcgm::readings(&samples, "unknown", 0);
        assert_eq!(r.len(), 1, "instance host and Hostname agree on gpu07");
        assert_eq!(r[0].host, "gpu07");
        assert_eq!(r[0].temperature_c, Some(61.0));
        assert_eq!(r[0].last_xid, Some(79));
        assert_eq!(
            r[0].time, 1_796_005_000,
            "the oldest sample dates the reading"
        );
    }
}
