//! The built-in simulated cluster: the embedded default source.
//!
//! It plays one night on call. At start-up (02:47:30 UTC on its own clock) a
//! 4-node × 8-GPU training gang has just hung on an Xid 79 ("GPU has fallen
//! off the bus"); the A100 partition has 16 GPUs free in fragments of 1–3 per
//! node while an 8-GPU job waits; the `vision` team sits at its GPU quota; a
//! node is drained for burn-in. Then, on a timeline: an application Xid 13
//! (+40 s), an uncorrectable ECC error with Xid 48 and a pending row remap
//! (+100 s), the Xid 63 that records the remap (+160 s). Around that, jobs
//! arrive, start, checkpoint and finish, and SM occupancy moves.
//!
//! Everything is drawn from one seeded ChaCha8 generator in a fixed order, so a
//! seed gives the same night every time.

mod commands;
pub use commands::{NO_REQUEUE, SimError};
mod layout;
mod metrics;
mod scheduler;
mod timeline;

use crate::model::{Cluster, Event, EventKind, Job, JobState, Partition, Quota, Timestamp};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

/// The sim's clock at start-up: 2026-11-30 02:47:30 UTC.
pub const START_TIME: Timestamp = 1_796_006_850;
/// Fewest nodes the night's scenario fits in.
pub const MIN_NODES: usize = 16;
/// Finished jobs stay visible this long.
const KEEP_FINISHED_S: i64 = 900;
/// Events kept in a snapshot.
const KEEP_EVENTS: usize = 2000;
/// A broken node that has been drained and emptied is rebooted by the
/// datacenter technician this long after the drain: its GPUs come back
/// clean (the remedy), and it stays drained until someone resumes it.
pub const REPAIR_S: i64 = 600;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimConfig {
    pub seed: u64,
    /// Number of nodes (8 GPUs each), half H100 and half A100.
    pub nodes: usize,
    /// Total jobs to generate at start-up (running plus a pending backlog);
    /// `None` for the natural mix of the scenario.
    pub jobs: Option<usize>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 1,
            nodes: MIN_NODES,
            jobs: None,
        }
    }
}

/// What the sim knows about a job that a real scheduler would not tell us.
#[derive(Debug, Clone)]
pub(crate) struct SimJob {
    /// Shared with the snapshots until it changes: a snapshot of 100,000
    /// jobs copies pointers, not jobs (issue 14).
    pub job: Arc<Job>,
    /// How long it will run once started.
    pub duration_s: u64,
    /// Typical SM occupancy of its kernels.
    pub base_occ: f64,
    /// Fraction of GPU memory it uses.
    pub mem_frac: f64,
    /// Stuck in a collective after a rank's GPU failed: no progress, no checkpoints.
    pub hung: bool,
    /// A pending reason the scheduler never clears (Dependency, JobHeldUser).
    pub blocked: bool,
}

impl SimJob {
    /// The job to change (a copy when a snapshot still holds it).
    pub fn job_mut(&mut self) -> &mut Job {
        Arc::make_mut(&mut self.job)
    }

    /// Sets the scheduler's reason, copying the job only if it changes.
    pub fn set_reason(&mut self, reason: Option<&str>) {
        if self.job.reason.as_deref() != reason {
            self.job_mut().reason = reason.map(str::to_string);
        }
    }
}

/// Index of a node inside the sim, with its partition.
#[derive(Debug, Clone)]
pub(crate) struct SimPartition {
    pub partition: Partition,
    pub nodes: Vec<usize>,
}

pub struct Sim {
    pub(crate) cfg: SimConfig,
    pub(crate) rng: ChaCha8Rng,
    pub(crate) now: Timestamp,
    pub(crate) nodes: Vec<Arc<crate::model::Node>>,
    pub(crate) partitions: Vec<SimPartition>,
    pub(crate) jobs: Vec<SimJob>,
    pub(crate) events: Vec<Event>,
    pub(crate) quotas: Vec<(String, u32)>,
    pub(crate) next_job_id: u64,
    pub(crate) next_seq: u64,
    pub(crate) timeline: timeline::Timeline,
    /// Something changed that may let a pending job start.
    pub(crate) sched_dirty: bool,
    /// One copy of each team's and QOS's name for all of their jobs.
    pub(crate) names: crate::model::Names,
}

impl Sim {
    /// The one shared copy of `name` (a team's, a QOS's).
    pub(crate) fn name(&mut self, name: &str) -> Arc<str> {
        self.names.get(name)
    }

    /// Lays out the cluster as it stands at [`START_TIME`].
    pub fn new(cfg: SimConfig) -> Result<Sim, SimError> {
        if cfg.nodes < MIN_NODES {
            return Err(SimError::TooFewNodes {
                min: MIN_NODES,
                asked: cfg.nodes,
            });
        }
        let mut sim = Sim {
            cfg,
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            now: START_TIME,
            nodes: Vec::new(),
            partitions: Vec::new(),
            jobs: Vec::new(),
            events: Vec::new(),
            quotas: Vec::new(),
            next_job_id: 4700,
            next_seq: 1,
            timeline: timeline::Timeline::default(),
            sched_dirty: true,
            names: crate::model::Names::default(),
        };
        layout::build(&mut sim);
        scheduler::schedule(&mut sim);
        metrics::update_all(&mut sim);
        Ok(sim)
    }

    /// Advances the sim clock by one second.
    pub fn step(&mut self) {
        self.now += 1;
        timeline::fire_due(self);
        timeline::fabric_step(self);
        self.finish_jobs();
        self.checkpoint_jobs();
        self.repair_drained();
        scheduler::arrivals(self);
        if self.sched_dirty && scheduler::pass_due(self.nodes.len(), self.now) {
            scheduler::schedule(self);
        }
        metrics::update(self);
        self.prune();
    }

    pub fn advance(&mut self, seconds: u64) {
        for _ in 0..seconds {
            self.step();
        }
    }

    /// The cluster as a scheduler and node endpoints would report it now.
    pub fn snapshot(&self) -> Cluster {
        let quotas = self
            .quotas
            .iter()
            .map(|(account, limit)| Quota {
                account: account.clone(),
                gpu_limit: Some(*limit),
                gpus_in_use: self.gpus_in_use(account),
            })
            .collect();
        Cluster {
            history: Vec::new(),
            no_job_signal: false,
            reservations: Vec::new(),
            name: format!("sim-{}", self.cfg.nodes),
            source: "sim".into(),
            time: self.now,
            partitions: self
                .partitions
                .iter()
                .map(|p| p.partition.clone())
                .collect(),
            nodes: self.nodes.clone(),
            jobs: self.jobs.iter().map(|j| j.job.clone()).collect(),
            events: self.events.clone(),
            quotas,
        }
    }

    pub(crate) fn gpus_in_use(&self, account: &str) -> u32 {
        self.jobs
            .iter()
            .filter(|j| j.job.state.holds_resources() && j.job.account.as_deref() == Some(account))
            .filter_map(|j| j.job.gpus_requested())
            .sum()
    }

    pub(crate) fn push_event(
        &mut self,
        node: &str,
        gpu: Option<u32>,
        kind: EventKind,
        message: &str,
    ) {
        self.push_event_at(self.now, node, gpu, kind, message);
    }

    pub(crate) fn push_event_at(
        &mut self,
        time: Timestamp,
        node: &str,
        gpu: Option<u32>,
        kind: EventKind,
        message: &str,
    ) {
        let jobs = self.jobs_at(node, gpu);
        self.events.push(Event {
            seq: self.next_seq,
            time,
            node: node.to_string(),
            gpu,
            kind,
            message: message.to_string(),
            jobs,
        });
        self.next_seq += 1;
    }

    /// The jobs an event on `node`/`gpu` hits, as a snapshot would say.
    fn jobs_at(&self, node: &str, gpu: Option<u32>) -> Vec<crate::model::EventJob> {
        let Some(n) = self.nodes.iter().find(|n| n.name == node) else {
            return Vec::new();
        };
        let ids: Vec<String> = match gpu {
            Some(i) => n
                .gpus
                .iter()
                .filter(|g| g.index == i)
                .filter_map(|g| g.job.clone())
                .collect(),
            None => self
                .jobs
                .iter()
                .filter(|j| j.job.state.holds_resources() && j.job.nodes.iter().any(|x| x == node))
                .map(|j| j.job.id.clone())
                .collect(),
        };
        ids.into_iter()
            .filter_map(|id| self.jobs.iter().find(|j| j.job.id == id))
            .map(|j| crate::model::EventJob {
                id: j.job.id.clone(),
                state: j.job.state,
            })
            .collect()
    }

    /// Gives `gpus` of node `n`'s free GPUs, lowest index first, to job `id`.
    pub(crate) fn allocate(&mut self, n: usize, id: &str, gpus: u32) {
        for g in Arc::make_mut(&mut self.nodes[n])
            .gpus
            .iter_mut()
            .filter(|g| g.job.is_none())
            .take(gpus as usize)
        {
            g.job = Some(id.to_string());
        }
    }

    /// Ends a job: frees its GPUs and records the final state.
    pub(crate) fn end_job(&mut self, idx: usize, state: JobState) {
        let now = self.now;
        let job = &mut self.jobs[idx];
        job.job_mut().state = state;
        job.job_mut().end_time = Some(now).into();
        job.hung = false;
        let id = job.job.id.clone();
        let nodes = job.job.nodes.clone();
        for name in &nodes {
            if let Some(node) = self.nodes.iter_mut().find(|n| &n.name == name) {
                for g in Arc::make_mut(node)
                    .gpus
                    .iter_mut()
                    .filter(|g| g.job.as_deref() == Some(id.as_str()))
                {
                    g.job = None;
                }
            }
        }
        self.sched_dirty = true;
    }

    fn finish_jobs(&mut self) {
        for i in 0..self.jobs.len() {
            let j = &self.jobs[i];
            if j.job.state != JobState::Running || j.hung {
                continue;
            }
            let elapsed = j.job.elapsed_s(self.now).unwrap_or(0);
            if elapsed >= j.duration_s as i64 {
                self.end_job(i, JobState::Completed);
            }
        }
    }

    fn checkpoint_jobs(&mut self) {
        let now = self.now;
        for j in self.jobs.iter_mut() {
            if j.job.state != JobState::Running || j.hung {
                continue;
            }
            let ck = &j.job.checkpoint;
            if let (Some(every), Some(last)) = (
                ck.interval_s.get(),
                ck.last.get().or(j.job.start_time.get()),
            ) && now - last >= every as i64
            {
                j.job_mut().checkpoint.last = Some(now).into();
            }
        }
    }

    /// The technician's round: reboots drained, empty nodes whose GPUs
    /// show trouble, `REPAIR_S` after they were drained.
    fn repair_drained(&mut self) {
        let now = self.now;
        for n in 0..self.nodes.len() {
            let node = &self.nodes[n];
            if node.state != crate::model::NodeState::Drain
                || node.reason_time.is_none_or(|t| now - t < REPAIR_S)
            {
                continue;
            }
            let troubled = node.gpus.iter().any(|g| {
                g.last_xid.is_some()
                    || g.ecc.dbe_volatile.unwrap_or(0) > 0
                    || g.row_remap_pending == Some(true)
                    || g.recovery_action
                        .is_some_and(|r| r != crate::model::RecoveryAction::None)
            });
            let name = node.name.clone();
            let busy = self
                .jobs
                .iter()
                .any(|j| j.job.state.holds_resources() && j.job.nodes.contains(&name));
            if !troubled || busy {
                continue;
            }
            let node = Arc::make_mut(&mut self.nodes[n]);
            node.boot_time = Some(now);
            for g in &mut node.gpus {
                g.last_xid = None;
                // The volatile counters a reading knows start again at 0.
                for count in [&mut g.ecc.dbe_volatile, &mut g.ecc.sbe_volatile] {
                    if count.get().is_some() {
                        *count = crate::model::Count::of(0);
                    }
                }
                // The reset applied the pending remap.
                if g.row_remap_pending == Some(true) {
                    g.row_remap_pending = Some(false);
                }
                g.recovery_action = g
                    .recovery_action
                    .map(|_| crate::model::RecoveryAction::None);
            }
            tracing::info!("sim: technician rebooted {name}");
        }
    }

    fn prune(&mut self) {
        let now = self.now;
        self.jobs.retain(|j| {
            j.job
                .end_time
                .get()
                .is_none_or(|t| now - t < KEEP_FINISHED_S)
        });
        if self.events.len() > KEEP_EVENTS {
            let cut = self.events.len() - KEEP_EVENTS;
            self.events.drain(..cut);
        }
    }
}

#[cfg(test)]
mod tests;
