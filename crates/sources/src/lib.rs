//! Sources: each backend turns its wire format into model updates on a channel.
//!
//! A source runs on the tokio runtime, never on the UI's thread, and sends
//! whole snapshots: the UI keeps the newest and knows how old it is.

// The core's modules under their own names, so `crate::model` reads the
// same in every crate.
use nightshift_core::{engine, host, limits, model, protocol, text};

/// Strategies the property tests share (this crate's and those above it).
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;

pub mod assemble;
pub mod dcgm;
pub mod doctor;
pub mod endpoints;
pub mod error;
pub mod http;
pub mod kube;
pub mod once;
pub mod prometheus;
pub mod retry;
pub mod sim;
pub mod site_topology;
pub mod slurm;
#[cfg(test)]
pub(crate) mod testserver;
pub mod validate;

use std::time::Duration;
use tokio::sync::mpsc;

pub use error::SourceError;

pub use crate::protocol::source::{Origin, Playback, Update};

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
    /// The simulated cluster's settings, when the source is the sim.
    pub fn sim(&self) -> Option<sim::SimConfig> {
        match self {
            SourceConfig::Sim { sim, .. } => Some(*sim),
            _ => None,
        }
    }

    /// How fast time passes: the sim's speed, real time for the rest.
    pub fn speed(&self) -> f64 {
        match self {
            SourceConfig::Sim { speed, .. } => *speed,
            _ => 1.0,
        }
    }

    /// Whether kubeconfig contexts name its clusters (Kubernetes).
    pub fn has_contexts(&self) -> bool {
        matches!(self, SourceConfig::Kube(_))
    }

    /// Whether there is a scheduler at all (`--source none`: endpoints only).
    pub fn has_scheduler(&self) -> bool {
        !matches!(self, SourceConfig::None)
    }
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

impl Control {
    /// The executor that acts on this source: the sim's command channel,
    /// or a new connection to Slurm or Kubernetes.
    pub async fn connect(
        &self,
    ) -> Result<crate::protocol::scheduler::Executor, crate::protocol::scheduler::NoExecutor> {
        use crate::protocol::scheduler::Executor;
        use crate::protocol::scheduler::NoExecutor;
        let unreachable = |e: &dyn std::fmt::Display| NoExecutor::Unreachable(e.to_string());
        Ok(match self {
            Control::Sim(tx) => Executor::new(sim::Channel(tx.clone())),
            Control::Slurm(cfg) => Executor::new(
                slurm::exec::Executor::connect(cfg)
                    .await
                    .map_err(|e| unreachable(&e))?,
            ),
            Control::Kube(cfg) => Executor::new(
                kube::exec::Executor::connect(cfg)
                    .await
                    .map_err(|e| unreachable(&e))?,
            ),
            Control::None => return Err(NoExecutor::NoScheduler),
        })
    }

    /// The audit's source name, and who the scheduler knows the operator
    /// as (Slurm's JWT user).
    pub fn identity(&self) -> (&'static str, Option<String>) {
        match self {
            Control::Sim(_) => ("sim", None),
            Control::Slurm(cfg) => ("slurm", Some(cfg.user.clone())),
            Control::Kube(_) => ("kube", None),
            Control::None => ("none", None),
        }
    }
}

/// Starts the source on the current tokio runtime; updates arrive on the
/// returned channel until the receiver is dropped.
///
/// The snapshot is made and finished (`assembly`: `[topology]`'s domains,
/// the recording) in one task: the scheduler's poller alone, or the
/// endpoints' merge over it. Nothing between it and the receiver passes
/// it on or rewrites it.
///
/// `open`: the nodes the console has open (a fleet's Prometheus reads
/// their GPUs in full); `nothing_open()` where nothing opens any.
pub fn spawn(
    cfg: SourceConfig,
    endpoints: &endpoints::Endpoints,
    assembly: assemble::Assembly,
    open: Opened,
) -> Result<(mpsc::Receiver<Update>, Control), error::StartError> {
    let (tx, rx) = mpsc::channel(16);
    if endpoints.is_empty() {
        let control = spawn_scheduler(cfg, assemble::Outlet::new(tx, assembly))?;
        if matches!(control, Control::None) {
            return Err(error::StartError::NoEndpoints);
        }
        return Ok((rx, control));
    }
    let control = spawn_scheduler(cfg, tx.into())?;
    let sched = (!matches!(control, Control::None)).then_some(rx);
    Ok((
        endpoints::spawn_with(sched, endpoints.clone(), open, assembly)?,
        control,
    ))
}

/// The nodes the console has open, as it last said.
pub type Opened = tokio::sync::watch::Receiver<Vec<String>>;

/// For a caller that opens no node (a one-shot command, a recording).
pub fn nothing_open() -> Opened {
    tokio::sync::watch::channel(Vec::new()).1
}

/// The scheduler's poller, sending to `out`; `Control::None` (nothing
/// started) without a scheduler.
fn spawn_scheduler(cfg: SourceConfig, out: assemble::Outlet) -> Result<Control, error::StartError> {
    Ok(match cfg {
        SourceConfig::None => Control::None,
        SourceConfig::Sim {
            sim: sim_cfg,
            speed,
        } => {
            let sim = sim::Sim::new(sim_cfg)?;
            let (ctx, crx) = mpsc::channel(4);
            tokio::spawn(sim::run(sim, speed, out, crx));
            Control::Sim(ctx)
        }
        SourceConfig::Slurm(cfg) => {
            tokio::spawn(slurm::run(cfg.clone(), out));
            Control::Slurm(Box::new(cfg))
        }
        SourceConfig::Kube(cfg) => {
            tokio::spawn(kube::run(cfg.clone(), out));
            Control::Kube(Box::new(cfg))
        }
    })
}
