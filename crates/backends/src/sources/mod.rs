//! Sources: each backend turns its wire format into model updates on a channel.
//!
//! A source runs on the tokio runtime, never on the UI's thread, and sends
//! whole snapshots: the UI keeps the newest and knows how old it is.

pub mod dcgm;
pub mod endpoints;
pub mod error;
pub mod http;
pub mod kube;
pub mod prometheus;
pub mod sim;
pub mod site_topology;
pub mod slurm;
#[cfg(test)]
pub(crate) mod testserver;
pub mod validate;

use crate::model::Cluster;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

pub use error::SourceError;

/// Where data comes from: the scheduler, or one node endpoint. Each has its
/// own age and last error; the age of one never stands in for another's.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Origin {
    /// The scheduler (sim, slurmrestd): jobs, nodes, the queue.
    Scheduler,
    /// A dcgm-exporter / agent URL, or a Prometheus server.
    Endpoint(String),
}

impl Origin {
    pub fn name(&self) -> String {
        match self {
            Origin::Scheduler => "scheduler".into(),
            Origin::Endpoint(u) => u.clone(),
        }
    }
}

/// What a source tells the UI.
#[derive(Debug, Clone)]
pub enum Update {
    /// The newest complete picture of the cluster. It says nothing about
    /// freshness: that is `Status`, per origin.
    Snapshot(Arc<Cluster>),
    /// One origin was polled: it answered (`None`), or this went wrong and
    /// its last data stands, growing stale.
    Status {
        origin: Origin,
        error: Option<SourceError>,
    },
    /// GPU history from before nightshift opened (Prometheus), once, with
    /// hosts named as the scheduler names its nodes.
    Backfill(Arc<crate::model::Backfill>),
    /// How often an origin is polled now, and why (the configured interval,
    /// or slower to keep within slurmrestd's budget); sent when it changes.
    Refresh {
        origin: Origin,
        every: std::time::Duration,
        /// Slower than configured, to keep within slurmrestd's budget.
        stretched: bool,
        note: String,
    },
    /// An origin answered, but slowly or in part (`note`, for the header);
    /// `None`: whole and in time again. The answer itself stands.
    Quality {
        origin: Origin,
        note: Option<String>,
    },
    /// Something the on-call should know that is no origin's data: the
    /// console's recording stopped, for one.
    Notice(String),
    /// Playing a recording: where it is and how it plays.
    Playback(Playback),
    /// A replay jumped: what the analysis remembers of the recorded
    /// snapshots before the next one, read from the recording's start. The
    /// analyst takes it in place of its own, so the console after a jump
    /// answers what `--replay --at` answers for that moment (stalls since
    /// when they began, every fault of the night).
    Recalled(Arc<crate::engine::memory::Memory>),
}

/// A recording's playback as the console shows it in the header.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Playback {
    pub paused: bool,
    /// Recorded seconds per second.
    pub speed: f64,
    /// The snapshot shown, and the recording's first and last.
    pub at: crate::model::Timestamp,
    pub start: crate::model::Timestamp,
    pub end: crate::model::Timestamp,
    /// Nothing more to play.
    pub ended: bool,
}

impl Update {
    pub fn ok(origin: Origin) -> Update {
        Update::Status {
            origin,
            error: None,
        }
    }

    pub fn failed(origin: Origin, e: SourceError) -> Update {
        Update::Status {
            origin,
            error: Some(e),
        }
    }
}

/// Which backend to read, with its settings.
#[derive(Debug, Clone)]
pub enum SourceConfig {
    Sim {
        sim: sim::SimConfig,
        speed: f64,
    },
    Slurm(slurm::SlurmConfig),
    Kube(kube::KubeConfig),
    /// No scheduler: only node endpoints.
    None,
}

impl SourceConfig {
    pub fn name(&self) -> &'static str {
        match self {
            SourceConfig::Sim { .. } => "sim",
            SourceConfig::Slurm(_) => "slurm",
            SourceConfig::Kube(_) => "kube",
            SourceConfig::None => "endpoints",
        }
    }

    /// How often fresh data is expected; older data is marked stale.
    pub fn expected_interval(&self) -> Duration {
        match self {
            SourceConfig::Sim { speed, .. } => {
                if *speed > 0.0 {
                    Duration::from_secs_f64((1.0 / speed).clamp(0.2, 60.0))
                } else {
                    Duration::from_secs(60)
                }
            }
            SourceConfig::Slurm(c) => c.interval,
            SourceConfig::Kube(c) => c.interval,
            SourceConfig::None => Duration::from_secs(15),
        }
    }
}

/// How actions reach a running source.
#[derive(Debug, Clone)]
pub enum Control {
    /// The sim's command channel.
    Sim(mpsc::Sender<sim::CommandRequest>),
    /// Slurm is acted on through its own connection (see slurm::exec).
    Slurm(Box<slurm::SlurmConfig>),
    /// Kubernetes is acted on through its own client (see kube::exec).
    Kube(Box<kube::KubeConfig>),
    /// Nothing to act on: no scheduler.
    None,
}

/// Starts the source on the current tokio runtime; updates arrive on the
/// returned channel until the receiver is dropped.
///
/// `open`: the nodes the console has open (a fleet's Prometheus reads
/// their GPUs in full); `nothing_open()` where nothing opens any.
pub fn spawn(
    cfg: SourceConfig,
    endpoints: &endpoints::Endpoints,
    site: &site_topology::SiteDomains,
    open: Opened,
) -> Result<(mpsc::Receiver<Update>, Control), error::StartError> {
    let (rx, control) = spawn_source(cfg, endpoints, open)?;
    if site.is_empty() {
        Ok((rx, control))
    } else {
        Ok((site_topology::spawn(rx, site.clone()), control))
    }
}

/// The nodes the console has open, as it last said.
pub type Opened = tokio::sync::watch::Receiver<Vec<String>>;

/// For a caller that opens no node (a one-shot command, a recording).
pub fn nothing_open() -> Opened {
    tokio::sync::watch::channel(Vec::new()).1
}

fn spawn_source(
    cfg: SourceConfig,
    endpoints: &endpoints::Endpoints,
    open: Opened,
) -> Result<(mpsc::Receiver<Update>, Control), error::StartError> {
    let (tx, rx) = mpsc::channel(16);
    let control = match cfg {
        SourceConfig::None => {
            if endpoints.is_empty() {
                return Err(error::StartError::NoEndpoints);
            }
            return Ok((
                endpoints::spawn(None, endpoints.clone(), open)?,
                Control::None,
            ));
        }
        SourceConfig::Sim {
            sim: sim_cfg,
            speed,
        } => {
            let sim = sim::Sim::new(sim_cfg)?;
            let (ctx, crx) = mpsc::channel(4);
            tokio::spawn(sim::run(sim, speed, tx, crx));
            Control::Sim(ctx)
        }
        SourceConfig::Slurm(cfg) => {
            tokio::spawn(slurm::run(cfg.clone(), tx));
            Control::Slurm(Box::new(cfg))
        }
        SourceConfig::Kube(cfg) => {
            tokio::spawn(kube::run(cfg.clone(), tx));
            Control::Kube(Box::new(cfg))
        }
    };
    if endpoints.is_empty() {
        Ok((rx, control))
    } else {
        Ok((
            endpoints::spawn(Some(rx), endpoints.clone(), open)?,
            control,
        ))
    }
}
