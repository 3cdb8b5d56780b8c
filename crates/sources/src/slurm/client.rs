//! HTTP to slurmrestd (TCP or a unix socket) with JWT headers, and the
//! API-version discovery. Every response's `errors[]` is checked: slurmrestd
//! answers HTTP 200 with errors.

use super::SlurmConfig;
use super::error::SetupError;
use super::wire;
use crate::SourceError;
use crate::text;
use serde_json::Value;
use std::fmt;

/// API versions nightshift reads, oldest first. v0.0.38 is Slurm 22.05
/// (Debian 12, tested live); v0.0.39–v0.0.44 are 23.02–25.11; v0.0.45
/// is 26.05 (Debian testing, tested live with v0.0.42–v0.0.44 beside it).
pub const KNOWN: [u32; 8] = [38, 39, 40, 41, 42, 43, 44, 45];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ApiVersion(pub u32);

impl fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v0.0.{}", self.0)
    }
}

impl ApiVersion {
    /// Node updates over REST arrived with v0.0.39 (Slurm 23.02).
    pub fn can_update_nodes(self) -> bool {
        self.0 >= 39
    }

    /// `hold` in a job update (hold true, release false): read and tested
    /// live from v0.0.40 (Slurm 24.11) on.
    pub fn can_hold_jobs(self) -> bool {
        self.0 >= 40
    }

    /// `GET /job/{id}/requeue`: a requeue without scontrol, from v0.0.45
    /// (Slurm 26.05; read and tested live).
    pub fn has_requeue(self) -> bool {
        self.0 >= 45
    }

    /// `GET /jobs/state/`, every job's id and state and nothing else:
    /// Slurm 24.11's v0.0.40 and later.
    pub fn has_job_states(self) -> bool {
        self.0 >= 40
    }
}

impl std::str::FromStr for ApiVersion {
    type Err = SetupError;
    /// `v0.0.42`, `0.0.42` or `42`; only versions nightshift reads.
    fn from_str(s: &str) -> Result<Self, SetupError> {
        let t = s.trim();
        let n = t
            .strip_prefix("v0.0.")
            .or_else(|| t.strip_prefix("0.0."))
            .unwrap_or(t);
        match n.parse::<u32>() {
            Ok(v) if KNOWN.contains(&v) => Ok(ApiVersion(v)),
            _ => Err(SetupError::Version {
                given: s.to_string(),
                known: &KNOWN,
            }),
        }
    }
}

/// The newest version both sides know, or an error naming both lists.
pub fn choose(served: &[u32]) -> Result<ApiVersion, SetupError> {
    served
        .iter()
        .filter(|v| KNOWN.contains(v))
        .max()
        .map(|&v| ApiVersion(v))
        .ok_or_else(|| SetupError::NoCommonVersion {
            served: served.to_vec(),
            known: &KNOWN,
        })
}

/// The `/slurm/v0.0.N/` versions named in an OpenAPI document's paths.
pub fn versions_in_openapi(doc: &Value) -> Vec<u32> {
    let mut out: Vec<u32> = doc
        .get("paths")
        .and_then(Value::as_object)
        .map(|paths| {
            paths
                .keys()
                .filter_map(|p| p.strip_prefix("/slurm/v0.0."))
                .filter_map(|rest| rest.split('/').next()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    out.sort_unstable();
    out.dedup();
    out
}

pub struct Client {
    http: reqwest::Client,
    base: String,
    user: String,
    token: Option<String>,
    url: String,
    timeout: std::time::Duration,
    /// The API version the config asks for; discovery checks it is served.
    pinned: Option<ApiVersion>,
}

impl Client {
    pub fn new(cfg: &SlurmConfig) -> Result<Client, SetupError> {
        let mut b = crate::http::client_builder()
            .timeout(cfg.timeout)
            .connect_timeout(cfg.timeout);
        let base = if let Some(path) = cfg.url.strip_prefix("unix:") {
            b = b.unix_socket(path);
            "http://localhost".to_string()
        } else if cfg.url.starts_with("http://") || cfg.url.starts_with("https://") {
            cfg.url.trim_end_matches('/').to_string()
        } else {
            return Err(SetupError::Url(cfg.url.clone()));
        };
        let http = b.build().map_err(|e| SetupError::Http(e.to_string()))?;
        Ok(Client {
            http,
            base,
            user: cfg.user.clone(),
            token: cfg.token.clone(),
            url: cfg.url.clone(),
            timeout: cfg.timeout,
            pinned: cfg.api_version,
        })
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut r = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("X-SLURM-USER-NAME", &self.user);
        if let Some(t) = &self.token {
            r = r.header("X-SLURM-USER-TOKEN", t);
        }
        r
    }

    async fn send(
        &self,
        req: reqwest::RequestBuilder,
        what: &str,
    ) -> Result<(u16, Value), SourceError> {
        let resp = req.send().await.map_err(|e| {
            if e.is_timeout() {
                SourceError::Timeout {
                    what: format!("{what} at {}", self.url),
                    secs: self.timeout.as_secs(),
                }
            } else {
                SourceError::Unreachable {
                    what: format!("slurmrestd at {}", self.url),
                    detail: text::one_line(&crate::http::error_chain(&e), 300),
                }
            }
        })?;
        let status = resp.status().as_u16();
        let body = crate::http::text(resp, what, self.timeout).await?;
        // 511: slurmrestd 24.11's answer to a token it cannot verify.
        if status == 401 || status == 403 || status == 511 {
            return Err(SourceError::Auth {
                what: format!("{what} (check the user name and the token, SLURM_JWT)"),
                status,
                detail: text::one_line(&body, 200),
            });
        }
        // A 100,000-job answer is hundreds of MB of JSON: decoded on a
        // blocking thread, never on an async worker.
        let (value, body) = tokio::task::spawn_blocking(move || {
            let v: Result<Value, serde_json::Error> = serde_json::from_str(&body);
            (v, body)
        })
        .await
        .map_err(|e| SourceError::Other(format!("{what}: decoding stopped: {e}")))?;
        let value: Value = match value {
            Ok(v) => v,
            Err(e) if status == 404 => {
                return Err(SourceError::NotFound {
                    what: what.to_string(),
                    detail: format!(": {}", text::one_line(&format!("{e}"), 100)),
                });
            }
            Err(e) => {
                return Err(SourceError::Decode {
                    what: format!("{what} (HTTP {status})"),
                    detail: format!("not JSON ({e}): {}", text::one_line(&body, 120)),
                });
            }
        };
        let errors = value
            .get("errors")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if let Some(msg) = wire::error_text(&errors) {
            return Err(SourceError::Api {
                what: what.to_string(),
                errors: vec![format!("{} (HTTP {status})", text::one_line(&msg, 300))],
            });
        }
        if status == 404 {
            return Err(SourceError::NotFound {
                what: what.to_string(),
                detail: String::new(),
            });
        }
        if !(200..300).contains(&status) {
            return Err(SourceError::Api {
                what: what.to_string(),
                errors: vec![format!("HTTP {status}")],
            });
        }
        Ok((status, value))
    }

    pub async fn get(&self, path: &str) -> Result<Value, SourceError> {
        self.send(
            self.request(reqwest::Method::GET, path),
            &format!("GET {path}"),
        )
        .await
        .map(|(_, v)| v)
    }

    pub async fn delete(&self, path: &str) -> Result<Value, SourceError> {
        self.send(
            self.request(reqwest::Method::DELETE, path),
            &format!("DELETE {path}"),
        )
        .await
        .map(|(_, v)| v)
    }

    pub async fn post(&self, path: &str, body: &Value) -> Result<Value, SourceError> {
        self.send(
            self.request(reqwest::Method::POST, path).json(body),
            &format!("POST {path}"),
        )
        .await
        .map(|(_, v)| v)
    }

    /// Finds the newest API version the server and nightshift share: from
    /// the OpenAPI document, else by asking each known version's ping.
    /// Bounded as a whole by `limits.discovery_timeout_s`: a server that
    /// accepts and never answers fails discovery in that time, not in
    /// (documents + versions) × the request timeout.
    pub async fn discover(&self) -> Result<ApiVersion, SourceError> {
        let bound = crate::limits::get().discovery_timeout_s;
        match tokio::time::timeout(
            std::time::Duration::from_secs_f64(bound),
            self.discover_unbounded(),
        )
        .await
        {
            Ok(r) => r,
            Err(_) => Err(SourceError::Timeout {
                what: format!(
                    "finding slurmrestd's API version at {} (limits.discovery_timeout_s)",
                    self.url
                ),
                secs: bound as u64,
            }),
        }
    }

    async fn discover_unbounded(&self) -> Result<ApiVersion, SourceError> {
        if let Some(v) = self.pinned {
            // Asked for by name: it must answer, else say which are served.
            return match self.get(&format!("/slurm/{v}/ping")).await {
                Ok(_) => Ok(v),
                Err(e @ (SourceError::Unreachable { .. } | SourceError::Auth { .. })) => Err(e),
                Err(e) => Err(SourceError::Other(format!(
                    "slurm.api_version is {v}, but slurmrestd at {} does not serve it ({e}); \
                     remove the setting to use the newest version it serves",
                    self.url
                ))),
            };
        }
        for doc in ["/openapi/v3", "/openapi"] {
            match self.get(doc).await {
                Ok(v) => {
                    let served = versions_in_openapi(&v);
                    if !served.is_empty() {
                        return Ok(choose(&served)?);
                    }
                }
                // Nobody there, or not allowed: pinging will not help.
                Err(e @ (SourceError::Unreachable { .. } | SourceError::Auth { .. })) => {
                    return Err(e);
                }
                Err(_) => {}
            }
        }
        let mut served = Vec::new();
        let mut last_err = None;
        for v in KNOWN.iter().rev() {
            match self.get(&format!("/slurm/v0.0.{v}/ping")).await {
                Ok(_) => served.push(*v),
                Err(e) => last_err = Some(e),
            }
            if !served.is_empty() {
                break;
            }
        }
        if served.is_empty()
            && let Some(
                e @ (SourceError::Unreachable { .. }
                | SourceError::Auth { .. }
                | SourceError::Timeout { .. }),
            ) = last_err
        {
            return Err(e);
        }
        Ok(choose(&served)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_newest_known_version() {
        assert_eq!(choose(&[36, 37, 38]), Ok(ApiVersion(38)));
        assert_eq!(choose(&[40, 41, 42, 46]), Ok(ApiVersion(42)));
        let err = choose(&[36, 37]).expect_err("unknown");
        assert!(
            err.to_string().contains("v0.0.36, v0.0.37") && err.to_string().contains("v0.0.38"),
            "{err}"
        );
    }

    #[test]
    fn versions_from_the_openapi_paths() {
        let doc = serde_json::json!({"paths": {"/slurm/v0.0.38/ping": {}, "/slurm/v0.0.37/jobs": {}, "/slurmdb/v0.0.38/jobs": {}, "/openapi": {}}});
        assert_eq!(versions_in_openapi(&doc), vec![37, 38]);
    }

    #[test]
    fn versions_by_name() {
        assert_eq!("v0.0.41".parse(), Ok(ApiVersion(41)));
        assert_eq!("0.0.40".parse(), Ok(ApiVersion(40)));
        assert_eq!("42".parse(), Ok(ApiVersion(42)));
        let err = "v0.0.37".parse::<ApiVersion>().expect_err("too old");
        assert!(err.to_string().contains("v0.0.38"), "{err}");
        assert!("v0.1.0".parse::<ApiVersion>().is_err());
    }
}
