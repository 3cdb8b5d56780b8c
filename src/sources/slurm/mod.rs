//! Slurm through slurmrestd: nodes, jobs and partitions, polled gently and
//! turned into whole snapshots. `exec` holds the write side (drain, resume,
//! requeue, priority) for the guarded actions.

pub mod client;
pub mod exec;
pub mod gres;
pub mod hostlist;
pub mod map;
pub mod wire;

use super::{Origin, SourceError, Update};
use client::{ApiVersion, Client};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

#[derive(Clone, PartialEq)]
pub struct SlurmConfig {
    /// `http://HOST:6820`, `https://…` or `unix:/path/to/slurmrestd.sock`.
    pub url: String,
    /// X-SLURM-USER-NAME.
    pub user: String,
    /// X-SLURM-USER-TOKEN (a JWT); never logged or written anywhere.
    pub token: Option<String>,
    pub interval: Duration,
    pub timeout: Duration,
    /// The cluster's name when the config sets it; else Slurm's own (its
    /// jobs say it), else the URL's host.
    pub cluster_name: Option<String>,
    /// The scontrol used where the REST version has no endpoint.
    pub scontrol: String,
    /// slurm.conf for scontrol (its SLURM_CONF); `None` for its default.
    pub slurm_conf: Option<std::path::PathBuf>,
    /// The REST API version to speak; `None`: the newest both know.
    pub api_version: Option<ApiVersion>,
}

/// Debug output never shows the token.
impl std::fmt::Debug for SlurmConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlurmConfig")
            .field("url", &self.url)
            .field("user", &self.user)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("interval", &self.interval)
            .field("timeout", &self.timeout)
            .field("cluster_name", &self.cluster_name)
            .field("scontrol", &self.scontrol)
            .field("slurm_conf", &self.slurm_conf)
            .field("api_version", &self.api_version)
            .finish()
    }
}

/// Polling backs off to this after repeated errors.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

use crate::host::now;

impl SlurmConfig {
    /// The name to show before Slurm has said its own: the configured one,
    /// else the URL's host.
    pub fn fallback_name(&self) -> String {
        if let Some(n) = &self.cluster_name {
            return n.clone();
        }
        let host = self
            .url
            .trim_start_matches("http://")
            .trim_start_matches("https://");
        if self.url.starts_with("unix:") {
            return "slurm".into();
        }
        host.split(['/', ':'])
            .next()
            .filter(|h| !h.is_empty())
            .unwrap_or("slurm")
            .to_string()
    }
}

/// One snapshot: nodes, jobs and partitions, asked for at once.
pub async fn fetch(
    client: &Client,
    v: ApiVersion,
    cfg: &SlurmConfig,
) -> Result<map::Mapped, SourceError> {
    let base = format!("/slurm/{v}");
    fn parse<T: serde::de::DeserializeOwned>(
        base: &str,
        what: &str,
        kind: &str,
        value: serde_json::Value,
    ) -> Result<(Vec<T>, Vec<String>), SourceError> {
        wire::list(value, what, kind).map_err(|e| SourceError::Decode {
            what: format!("GET {base}/{what}"),
            detail: crate::text::one_line(&e, 200),
        })
    }
    // Independent requests: concurrently, so a poll takes the slowest, not
    // the sum.
    let (np, jp, pp) = (
        format!("{base}/nodes"),
        format!("{base}/jobs"),
        format!("{base}/partitions"),
    );
    let (n, j, p) = tokio::try_join!(client.get(&np), client.get(&jp), client.get(&pp))?;
    // Slurm's own name: 23.11 on say it in every answer's meta; 22.05's
    // job records carry it.
    let said = [&n, &j, &p]
        .iter()
        .find_map(|v| v.pointer("/meta/slurm/cluster").and_then(|c| c.as_str()))
        .filter(|c| !c.is_empty())
        .map(str::to_string);
    let configured = cfg.cluster_name.clone().or(said);
    let fallback = cfg.fallback_name();
    // Decoding and mapping 100,000 records: off the async workers.
    tokio::task::spawn_blocking(move || {
        let (nodes, mut warnings) = parse::<wire::Node>(&base, "nodes", "node", n)?;
        let (jobs, w) = parse::<wire::Job>(&base, "jobs", "job", j)?;
        warnings.extend(w);
        let (parts, w) = parse::<wire::Partition>(&base, "partitions", "partition", p)?;
        warnings.extend(w);
        // Slurm's own name (every job record carries it) unless the
        // config names the cluster.
        let name = configured
            .or_else(|| {
                jobs.iter()
                    .map(|j| j.cluster.as_str())
                    .find(|c| !c.is_empty())
                    .map(str::to_string)
            })
            .unwrap_or(fallback);
        let mut m = map::cluster(&name, now(), &nodes, &jobs, &parts);
        warnings.append(&mut m.warnings);
        m.warnings = warnings;
        Ok(m)
    })
    .await
    .map_err(|e| SourceError::Other(format!("decoding slurmrestd's answers stopped: {e}")))?
}

/// The cluster once, for the command line.
pub async fn fetch_once(cfg: &SlurmConfig) -> Result<map::Mapped, SourceError> {
    let client = Client::new(cfg).map_err(SourceError::Other)?;
    let v = client.discover().await?;
    fetch(&client, v, cfg).await
}

/// Turns node state changes between polls into incidents. Nodes already
/// out of service at the first poll are reported once, at the time their
/// reason was set.
#[derive(Debug, Default)]
pub struct NodeWatch {
    last: std::collections::HashMap<String, crate::model::NodeState>,
    events: Vec<crate::model::Event>,
    seq: u64,
}

/// Node-state incidents kept.
const KEEP_EVENTS: usize = 1000;

impl NodeWatch {
    pub fn observe(&mut self, c: &mut crate::model::Cluster) {
        use crate::model::{Event, EventKind, NodeState};
        let first = self.last.is_empty();
        for n in &c.nodes {
            let before = self.last.insert(n.name.clone(), n.state);
            let from = match before {
                Some(b) if b == n.state => continue,
                Some(b) => b.as_str().to_string(),
                None if first && n.state != NodeState::Up => "-".to_string(),
                None => continue,
            };
            self.seq += 1;
            let time = if before.is_none() {
                n.reason_time.unwrap_or(c.time)
            } else {
                c.time
            };
            self.events.push(Event {
                seq: self.seq,
                time,
                node: n.name.clone(),
                gpu: None,
                kind: EventKind::NodeState {
                    from,
                    to: n.state.as_str().to_string(),
                },
                message: n.reason.clone().unwrap_or_default(),
                jobs: c.jobs_at(&n.name, None),
            });
        }
        self.events.sort_by_key(|e| (e.time, e.seq));
        if self.events.len() > KEEP_EVENTS {
            let cut = self.events.len() - KEEP_EVENTS;
            self.events.drain(..cut);
        }
        c.events = self.events.clone();
    }
}

/// Polls until the receiver goes away. On errors the last snapshot stands
/// (the UI shows its age) and polling backs off, doubling up to a minute;
/// it recovers by itself when slurmrestd answers again.
pub async fn run(cfg: SlurmConfig, tx: mpsc::Sender<Update>) {
    let client = match Client::new(&cfg) {
        Ok(c) => c,
        Err(e) => {
            let _ = tx
                .send(Update::failed(Origin::Scheduler, SourceError::Other(e)))
                .await;
            return;
        }
    };
    let mut version: Option<ApiVersion> = None;
    let mut wait = cfg.interval;
    let mut watch = NodeWatch::default();
    loop {
        let result = match version {
            Some(v) => fetch(&client, v, &cfg).await,
            None => match client.discover().await {
                Ok(v) => {
                    tracing::info!("slurmrestd at {} speaks {v}", cfg.url);
                    version = Some(v);
                    fetch(&client, v, &cfg).await
                }
                Err(e) => Err(e),
            },
        };
        let updates = match result {
            Ok(m) => {
                for w in &m.warnings {
                    tracing::warn!("slurm: {w}");
                }
                let mut c = m.cluster;
                wait = cfg.interval;
                watch.observe(&mut c);
                vec![Update::Snapshot(Arc::new(c)), Update::ok(Origin::Scheduler)]
            }
            Err(e) => {
                tracing::warn!("slurm: {e}");
                wait = (wait * 2).min(MAX_BACKOFF);
                // The server may have been upgraded under us.
                if e.is_not_found() {
                    version = None;
                }
                vec![Update::failed(Origin::Scheduler, e)]
            }
        };
        for u in updates {
            if tx.send(u).await.is_err() {
                return;
            }
        }
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests;
