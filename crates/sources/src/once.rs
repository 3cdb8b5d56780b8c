//! One reading of the configured scheduler, whichever it is: what every
//! one-shot command (`get`, `why`, `blast`, `options`, the actions) starts
//! from. The one place the program's commands meet the backends by name.

use super::SourceConfig;
use crate::model::Cluster;

/// The scheduler's state now, and what it said on the side.
#[derive(Debug, Clone)]
pub struct Reading {
    pub cluster: Cluster,
    /// Things the reading skipped or could not read, one line each.
    pub warnings: Vec<String>,
    /// `sim`, `slurm` or `kube`: the audit's source.
    pub source: &'static str,
    /// Who the scheduler knows the operator as (Slurm's JWT user).
    pub scheduler_user: Option<String>,
    /// What the analysis remembers of the snapshots before this one: the
    /// sim's, watched as it ran (its storm and flaps are derived from
    /// them as a console derives them); none for a live source read once.
    pub memory: Option<crate::engine::memory::Memory>,
}

/// How often the sim's snapshots are observed as it runs to a one-shot's
/// moment: often enough for the deriver's holds (a storm's 10 s, a node
/// down's 30 s).
const SIM_WATCH_STEP_S: u64 = 10;

/// The sim run `seconds` on, its snapshots observed every
/// [`SIM_WATCH_STEP_S`] as a watching console observes them.
fn run_watched(
    s: &mut super::sim::Sim,
    seconds: u64,
    site: &crate::engine::SiteParams,
) -> crate::engine::memory::Memory {
    let mut m = crate::engine::memory::Memory::default();
    m.observe(&s.snapshot(), site);
    let mut left = seconds;
    while left > 0 {
        let by = left.min(SIM_WATCH_STEP_S);
        s.advance(by);
        left -= by;
        m.observe(&s.snapshot(), site);
    }
    m
}

/// Why the scheduler could not be read (or, for an action, reached).
#[derive(Debug, thiserror::Error)]
pub enum OnceError {
    #[error(transparent)]
    Sim(#[from] super::sim::SimError),
    #[error(transparent)]
    Source(#[from] super::SourceError),
    #[error(transparent)]
    Slurm(#[from] super::slurm::exec::CallError),
    #[error(transparent)]
    Kube(#[from] super::kube::exec::CallError),
}

/// Reads the scheduler once; `None` with no scheduler configured
/// (`--source none`). The sim is run `sim_seconds` first, watched.
pub async fn read(
    cfg: &SourceConfig,
    sim_seconds: u64,
    site: &crate::engine::SiteParams,
) -> Result<Option<Reading>, OnceError> {
    Ok(Some(match cfg {
        SourceConfig::Sim { sim, .. } => {
            let mut s = super::sim::Sim::new(*sim)?;
            let memory = run_watched(&mut s, sim_seconds, site);
            Reading {
                memory: Some(memory),
                ..sim_reading(&s)
            }
        }
        SourceConfig::Slurm(c) => {
            let m = super::slurm::fetch_once(c).await?;
            Reading {
                cluster: m.cluster,
                warnings: m.warnings,
                source: "slurm",
                scheduler_user: Some(c.user.clone()),
                memory: None,
            }
        }
        SourceConfig::Kube(c) => Reading {
            cluster: super::kube::fetch_once(c).await?,
            warnings: Vec::new(),
            source: "kube",
            scheduler_user: None,
            memory: None,
        },
        SourceConfig::None => return Ok(None),
    }))
}

/// A sim's state now as a reading.
pub fn sim_reading(s: &super::sim::Sim) -> Reading {
    Reading {
        cluster: s.snapshot(),
        warnings: Vec::new(),
        source: "sim",
        scheduler_user: None,
        memory: None,
    }
}

/// Reads the configured scheduler once and connects the executor that
/// acts on it (a sim of this process's own for the sim); `None` with no
/// scheduler configured. The one-shot commands' start: the program never
/// names a backend.
pub async fn connect(
    cfg: &SourceConfig,
    sim_seconds: u64,
    site: &crate::engine::SiteParams,
) -> Result<Option<(Reading, crate::protocol::scheduler::Executor)>, OnceError> {
    use crate::protocol::scheduler::Executor;
    Ok(Some(match cfg {
        SourceConfig::Sim { sim, .. } => {
            let mut s = super::sim::Sim::new(*sim)?;
            let memory = run_watched(&mut s, sim_seconds, site);
            let r = Reading {
                memory: Some(memory),
                ..sim_reading(&s)
            };
            (
                r,
                Executor::new(super::sim::Own(std::sync::Arc::new(std::sync::Mutex::new(
                    s,
                )))),
            )
        }
        SourceConfig::Slurm(c) => {
            let Some(r) = read(cfg, sim_seconds, site).await? else {
                return Ok(None);
            };
            (
                r,
                Executor::new(super::slurm::exec::Executor::connect(c).await?),
            )
        }
        SourceConfig::Kube(c) => {
            let Some(r) = read(cfg, sim_seconds, site).await? else {
                return Ok(None);
            };
            (
                r,
                Executor::new(super::kube::exec::Executor::connect(c).await?),
            )
        }
        SourceConfig::None => return Ok(None),
    }))
}
