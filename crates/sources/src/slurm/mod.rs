//! Slurm through slurmrestd: nodes, jobs and partitions, polled gently and
//! turned into whole snapshots. `exec` holds the write side (drain, resume,
//! requeue, priority) for the guarded actions.

pub mod client;
pub mod doctor;
pub mod error;
pub mod exec;
pub mod gres;
pub mod hostlist;
pub mod map;
pub mod poll;
pub mod topology;
pub mod wire;

use super::{Origin, SourceError, Update};
use client::{ApiVersion, Client};
use std::sync::Arc;
use std::time::Duration;

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
    /// slurmrestd's time nightshift may use, as a fraction of one core:
    /// polls slow down past `interval` to keep within it.
    pub rest_budget: f64,
    /// With `jobs/state` (24.11 on): how often every job record is fetched
    /// (changed jobs are fetched at once).
    pub full_jobs_interval: Duration,
    /// The budget never stretches polls past this: half of
    /// `[actions] max_data_age_s`, so the data stays young enough to act on.
    pub max_interval: Duration,
    /// What tells a job to checkpoint on the way out (soft preemption), as
    /// `scancel --signal` names it: `SIGUSR1` unless the site's jobs trap
    /// another.
    pub checkpoint_signal: String,
    /// `[validate]`: the check a node passes before it goes back to
    /// service (`Action::Validate`).
    pub validate: crate::validate::ValidateSpec,
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
            .field("rest_budget", &self.rest_budget)
            .field("full_jobs_interval", &self.full_jobs_interval)
            .field("max_interval", &self.max_interval)
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

fn decode<T: serde::de::DeserializeOwned>(
    base: &str,
    what: &str,
    kind: &str,
    value: serde_json::Value,
) -> Result<(Vec<T>, Vec<String>), SourceError> {
    wire::list(value, what, kind).map_err(|e| SourceError::Decode {
        what: format!("GET {base}/{what}"),
        detail: crate::text::one_line(&e.0, 200),
    })
}

/// A GET and how long slurmrestd took over it.
async fn timed(client: &Client, path: &str) -> Result<(serde_json::Value, Duration), SourceError> {
    let t = std::time::Instant::now();
    let v = client.get(path).await?;
    Ok((v, t.elapsed()))
}

/// Where a poll's jobs come from: an answer to decode, or the job book
/// the cheap polls keep (shared, not copied).
enum Jobs {
    Answer(serde_json::Value),
    Book(Arc<Vec<wire::Job>>),
}

/// One poll's answers, before decoding.
struct Answers {
    nodes: serde_json::Value,
    partitions: serde_json::Value,
    jobs: Jobs,
    /// The reservations, or why they could not be read (a poll goes on
    /// without them: the nodes' state flags still say which are held).
    reservations: Result<serde_json::Value, String>,
}

/// `GET /reservations` and what it cost, its failure kept as a line.
async fn reservations(
    client: &Client,
    base: &str,
) -> Result<(Result<serde_json::Value, String>, Duration), SourceError> {
    let path = format!("{base}/reservations");
    Ok(match timed(client, &path).await {
        Ok((v, t)) => (Ok(v), t),
        Err(e) => (Err(format!("reservations not read: {e}")), Duration::ZERO),
    })
}

/// The reservations a poll uses: read again when `kept` is older than
/// `every` (they change rarely, and a node entering one says so by its own
/// state flags meanwhile), else the kept answer at no cost.
async fn reservations_kept(
    client: &Client,
    base: &str,
    kept: &mut Option<(Result<serde_json::Value, String>, std::time::Instant)>,
    every: Duration,
) -> Result<(Result<serde_json::Value, String>, Duration), SourceError> {
    if let Some((r, at)) = kept.as_ref()
        && at.elapsed() < every
    {
        return Ok((r.clone(), Duration::ZERO));
    }
    let (r, cost) = reservations(client, base).await?;
    *kept = Some((r.clone(), std::time::Instant::now()));
    Ok((r, cost))
}

/// Decodes and maps a poll's answers, off the async workers (100,000 job
/// records are hundreds of MB of JSON).
async fn assemble(base: String, cfg: &SlurmConfig, a: Answers) -> Result<map::Mapped, SourceError> {
    // Slurm's own name: 23.11 on say it in every answer's meta; 22.05's
    // job records carry it.
    let answered = match &a.jobs {
        Jobs::Answer(v) => Some(v),
        Jobs::Book(_) => None,
    };
    let said = [Some(&a.nodes), Some(&a.partitions), answered]
        .into_iter()
        .flatten()
        .find_map(|v| v.pointer("/meta/slurm/cluster").and_then(|c| c.as_str()))
        .filter(|c| !c.is_empty())
        .map(str::to_string);
    let configured = cfg.cluster_name.clone().or(said);
    let fallback = cfg.fallback_name();
    tokio::task::spawn_blocking(move || {
        let (nodes, mut warnings) = decode::<wire::Node>(&base, "nodes", "node", a.nodes)?;
        let (decoded, book);
        let jobs: &[wire::Job] = match a.jobs {
            Jobs::Answer(j) => {
                let (js, w) = decode::<wire::Job>(&base, "jobs", "job", j)?;
                warnings.extend(w);
                decoded = js;
                &decoded
            }
            Jobs::Book(b) => {
                book = b;
                &book
            }
        };
        let (parts, w) = decode::<wire::Partition>(&base, "partitions", "partition", a.partitions)?;
        warnings.extend(w);
        let resv: Vec<wire::Reservation> = match a.reservations {
            Ok(v) => match decode::<wire::Reservation>(&base, "reservations", "reservation", v) {
                Ok((r, w)) => {
                    warnings.extend(w);
                    r
                }
                Err(e) => {
                    warnings.push(format!("reservations not read: {e}"));
                    Vec::new()
                }
            },
            Err(e) => {
                warnings.push(e);
                Vec::new()
            }
        };
        let name = configured
            .or_else(|| {
                jobs.iter()
                    .map(|j| j.cluster.as_str())
                    .find(|c| !c.is_empty())
                    .map(str::to_string)
            })
            .unwrap_or(fallback);
        let mut m = map::cluster_with(&name, now(), &nodes, jobs, &parts, &resv);
        warnings.append(&mut m.warnings);
        m.warnings = warnings;
        Ok(m)
    })
    .await
    .map_err(|e| SourceError::Other(format!("decoding slurmrestd's answers stopped: {e}")))?
}

/// Nodes, jobs and partitions, asked for at once (independent requests:
/// a poll takes the slowest, not the sum), and what they cost slurmrestd.
async fn ask_all(
    client: &Client,
    base: &str,
    kept: &mut Option<(Result<serde_json::Value, String>, std::time::Instant)>,
    every: Duration,
) -> Result<(Answers, Duration), SourceError> {
    let (np, jp, pp) = (
        format!("{base}/nodes"),
        format!("{base}/jobs"),
        format!("{base}/partitions"),
    );
    let ((n, tn), (j, tj), (p, tp), (r, tr)) = tokio::try_join!(
        timed(client, &np),
        timed(client, &jp),
        timed(client, &pp),
        reservations_kept(client, base, kept, every)
    )?;
    let a = Answers {
        nodes: n,
        partitions: p,
        jobs: Jobs::Answer(j),
        reservations: r,
    };
    Ok((a, tn + tj + tp + tr))
}

/// One whole snapshot: nodes, jobs and partitions.
pub async fn fetch(
    client: &Client,
    v: ApiVersion,
    cfg: &SlurmConfig,
) -> Result<map::Mapped, SourceError> {
    let base = format!("/slurm/{v}");
    // One snapshot: its reservations are read now.
    let (a, _) = ask_all(client, &base, &mut None, Duration::ZERO).await?;
    assemble(base, cfg, a).await
}

/// The cluster once, for the command line, with its switches.
pub async fn fetch_once(cfg: &SlurmConfig) -> Result<map::Mapped, SourceError> {
    let client = Client::new(cfg)?;
    let v = client.discover().await?;
    let (m, switches) = tokio::join!(fetch(&client, v, cfg), topology::fetch(cfg));
    let mut m = m?;
    match switches {
        Ok(s) => topology::apply(&mut m.cluster, &topology::domains(&s)),
        Err(e) => m.warnings.push(format!("no switch topology: {e}")),
    }
    Ok(m)
}

/// The switches' domains, read at start and every [`topology::REFRESH`];
/// a failed read keeps the last and says so once.
#[derive(Default)]
struct Topology {
    read_at: Option<std::time::Instant>,
    by_node: std::collections::BTreeMap<String, Vec<crate::model::Domain>>,
    failing: bool,
}

impl Topology {
    async fn refresh(&mut self, cfg: &SlurmConfig) {
        if self
            .read_at
            .is_some_and(|t| t.elapsed() < topology::REFRESH)
        {
            return;
        }
        self.read_at = Some(std::time::Instant::now());
        match topology::fetch(cfg).await {
            Ok(s) => {
                self.by_node = topology::domains(&s);
                self.failing = false;
            }
            Err(e) => {
                if !self.failing {
                    tracing::warn!("slurm: no switch topology: {e}");
                }
                self.failing = true;
            }
        }
    }
}

/// The poll loop's memory between polls: the API version, the job book
/// and the two cadences.
struct Poller {
    client: Client,
    cfg: SlurmConfig,
    version: Option<ApiVersion>,
    book: poll::JobBook,
    /// Nodes, partitions and the job states (before 24.11: all jobs).
    cadence: poll::Cadence,
    /// Every job record, with `jobs/state` (24.11 on).
    full: poll::Cadence,
    /// The last reservations read and when: re-read every
    /// `full_jobs_interval`, not every poll.
    reservations: Option<(Result<serde_json::Value, String>, std::time::Instant)>,
}

impl Poller {
    fn new(client: Client, cfg: SlurmConfig) -> Poller {
        Poller {
            cadence: poll::Cadence::new(cfg.interval, cfg.rest_budget).ceiling(cfg.max_interval),
            full: poll::Cadence::new(cfg.full_jobs_interval, cfg.rest_budget),
            client,
            cfg,
            version: None,
            book: poll::JobBook::default(),
            reservations: None,
        }
    }

    /// Speaking `v` from now on: with job states the budget is shared
    /// between the quick polls and the full job lists.
    fn speak(&mut self, v: ApiVersion) {
        self.version = Some(v);
        self.book = poll::JobBook::default();
        let (quick, full) = if v.has_job_states() {
            (self.cfg.rest_budget / 2.0, self.cfg.rest_budget / 2.0)
        } else {
            (self.cfg.rest_budget, 0.0)
        };
        self.cadence = poll::Cadence::new(self.cfg.interval, quick).ceiling(self.cfg.max_interval);
        self.full = poll::Cadence::new(self.cfg.full_jobs_interval, full);
    }

    /// The refresh as the header shows it: the interval, whether the
    /// budget stretched it, and what is fetched how often.
    fn refresh(&self) -> (Duration, bool, String) {
        let quick = self.cadence.describe("a poll");
        let stretched = self.cadence.stretched();
        match self.version {
            Some(v) if v.has_job_states() => (
                self.cadence.interval(),
                stretched,
                format!(
                    "{quick}; changed jobs at once, {}",
                    self.full.describe("all jobs")
                ),
            ),
            _ => (self.cadence.interval(), stretched, quick),
        }
    }

    async fn poll(&mut self) -> Result<map::Mapped, SourceError> {
        let v = match self.version {
            Some(v) => v,
            None => {
                let v = self.client.discover().await?;
                tracing::info!("slurmrestd at {} speaks {v}", self.cfg.url);
                self.speak(v);
                v
            }
        };
        let base = format!("/slurm/{v}");
        if !v.has_job_states() {
            let every = self.cfg.full_jobs_interval;
            let (a, cost) = ask_all(&self.client, &base, &mut self.reservations, every).await?;
            self.cadence.observe(cost);
            return assemble(base, &self.cfg, a).await;
        }
        let (np, pp, sp) = (
            format!("{base}/nodes"),
            format!("{base}/partitions"),
            format!("{base}/jobs/state"),
        );
        let ((n, tn), (p, tp), (states, ts), (r, tr)) = tokio::try_join!(
            timed(&self.client, &np),
            timed(&self.client, &pp),
            timed(&self.client, &sp),
            reservations_kept(
                &self.client,
                &base,
                &mut self.reservations,
                self.cfg.full_jobs_interval
            )
        )?;
        let fresh = poll::states(&states).map_err(|e| SourceError::Decode {
            what: format!("GET {sp}"),
            detail: e.to_string(),
        })?;
        let mut quick = tn + tp + ts + tr;
        let at = std::time::Instant::now();
        let plan = self.book.plan(&fresh, at, self.full.interval());
        let full = match plan {
            poll::JobPlan::Nothing => false,
            poll::JobPlan::Full => true,
            poll::JobPlan::Some(ids) => match self.some_jobs(&base, &ids).await {
                Ok((jobs, cost)) => {
                    quick += cost;
                    self.book.update(jobs, fresh.clone());
                    false
                }
                // A job gone between the two answers, say: all of them.
                Err(e) => {
                    tracing::debug!("slurm: fetching {} changed jobs: {e}", ids.len());
                    true
                }
            },
        };
        if full {
            let (jobs, cost) = timed(&self.client, &format!("{base}/jobs")).await?;
            self.full.observe(cost);
            let b = base.clone();
            let (records, warnings) =
                tokio::task::spawn_blocking(move || decode::<wire::Job>(&b, "jobs", "job", jobs))
                    .await
                    .map_err(|e| SourceError::Other(format!("decoding jobs stopped: {e}")))??;
            for w in warnings {
                tracing::warn!("slurm: {w}");
            }
            self.book.replace_all(records, fresh, at);
        }
        self.cadence.observe(quick);
        let a = Answers {
            nodes: n,
            partitions: p,
            jobs: Jobs::Book(self.book.records()),
            reservations: r,
        };
        assemble(base, &self.cfg, a).await
    }

    /// The records of a few jobs, by id, at once.
    async fn some_jobs(
        &self,
        base: &str,
        ids: &[String],
    ) -> Result<(Vec<wire::Job>, Duration), SourceError> {
        let answers = futures_util::future::try_join_all(
            ids.iter()
                .map(|id| async move { timed(&self.client, &format!("{base}/job/{id}")).await }),
        )
        .await?;
        let mut jobs = Vec::new();
        let mut cost = Duration::ZERO;
        for (v, t) in answers {
            cost += t;
            let (mut js, warnings) = decode::<wire::Job>(base, "jobs", "job", v)?;
            for w in warnings {
                tracing::warn!("slurm: {w}");
            }
            jobs.append(&mut js);
        }
        Ok((jobs, cost))
    }
}

/// Polls until the receiver goes away. On errors the last snapshot stands
/// (the UI shows its age) and polling backs off, doubling up to a minute;
/// it recovers by itself when slurmrestd answers again. The interval
/// stretches to keep slurmrestd within its budget, and the header says so.
pub async fn run(cfg: SlurmConfig, out: impl Into<crate::assemble::Outlet>) {
    let mut tx = out.into();
    let client = match Client::new(&cfg) {
        Ok(c) => c,
        Err(e) => {
            let _ = tx
                .send(Update::failed(Origin::Scheduler, SourceError::from(e)))
                .await;
            return;
        }
    };
    let mut poller = Poller::new(client, cfg.clone());
    let mut backoff: Option<crate::retry::Retry> = None;
    let mut told: Option<(Duration, bool, String)> = None;
    let mut topo = Topology::default();
    loop {
        let result = poller.poll().await;
        topo.refresh(&cfg).await;
        let mut updates = Vec::new();
        let wait = match result {
            Ok(m) => {
                for w in &m.warnings {
                    tracing::warn!("slurm: {w}");
                }
                let mut c = m.cluster;
                backoff = None;
                // Readings only: node state changes that last are the
                // engine's to tell (`engine::derive`), for every source.
                topology::apply(&mut c, &topo.by_node);
                let refresh = poller.refresh();
                if told.as_ref() != Some(&refresh) {
                    tracing::info!("slurm: {}", refresh.2);
                    updates.push(Update::Refresh {
                        origin: Origin::Scheduler,
                        every: refresh.0,
                        stretched: refresh.1,
                        note: refresh.2.clone(),
                    });
                    told = Some(refresh);
                }
                updates.push(Update::Snapshot(Arc::new(c)));
                updates.push(Update::ok(Origin::Scheduler));
                poller.cadence.interval()
            }
            Err(e) => {
                tracing::warn!("slurm: {e}");
                // Doubling with jitter: many consoles that lost slurmrestd
                // together do not come back in step.
                let b = backoff
                    .get_or_insert_with(|| {
                        crate::retry::Retry::new(poller.cadence.interval(), MAX_BACKOFF)
                    })
                    .next_delay();
                // The server may have been upgraded under us.
                if e.is_not_found() {
                    poller.version = None;
                }
                updates.push(Update::failed(Origin::Scheduler, e));
                b
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
