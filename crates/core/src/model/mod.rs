//! Plain data describing one snapshot of a GPU cluster. No I/O lives here.
//!
//! Every value a source did not supply is `None` (serialised as JSON `null`),
//! never a made-up zero: an exporter with profiling turned off has *unknown*
//! SM occupancy, not an idle GPU.

mod action;
mod armed;
pub mod audit;
pub mod autopilot;
mod backfill;
mod compact;
mod event;
mod fabric;
mod gpu;
mod history;
mod job;
mod node;
mod summary;

pub use action::{Action, Outcome, PLAIN_REASON, Refused, Step, VALIDATION_FAILED};
pub use armed::{AFTER_CHECKPOINT, Armed, JobMark, Trigger};
pub use audit::Phase;
pub use autopilot::{AutopilotPaused, AutopilotRound, AutopilotStatus};
pub use backfill::{Backfill, GpuBackfill, HISTORY_SLOTS, HISTORY_STEP, XidSeen};
pub use compact::{Count, Names, When};
pub use event::{Event, EventJob, EventKind};
pub use fabric::{Domain, IB_PHYS_LINK_UP, IB_STATE_ACTIVE, IB_STATE_DOWN, IbPort};
pub use gpu::{
    EccCounts, Gpu, GpuHealth, GpuSummary, LastXid, MetricNames, NvLinkErrors, RecoveryAction,
};
pub use history::{Fault, PastFault};
pub use job::{Checkpoint, Job, JobState, TimeLimit};
pub use node::{ENDPOINT_ONLY, FaultReport, Node, NodeState};
pub use summary::Summary;

use serde::{Deserialize, Serialize};

/// Seconds since the Unix epoch, UTC. The clock is the source's (the sim's own
/// clock for the simulated cluster), so all times in one snapshot agree.
pub type Timestamp = i64;

/// A scheduler partition (Slurm) or queue (Kueue ClusterQueue, Volcano queue).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Partition {
    pub name: String,
    /// Names of the nodes in this partition.
    pub nodes: Vec<String>,
    /// The GPU model of the partition's nodes when they agree.
    pub gpu_model: Option<String>,
    /// Longest time limit a job may ask for, when the scheduler reports one.
    pub max_time_s: Option<u64>,
}

/// A team's (Slurm account's) GPU quota.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Quota {
    pub account: String,
    /// GPUs the account may hold at once; `None` when no limit is known.
    pub gpu_limit: Option<u32>,
    /// GPUs its running jobs hold now.
    pub gpus_in_use: u32,
}

/// One consistent picture of the cluster as a source saw it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    /// Cluster name as the source reports it.
    pub name: String,
    /// Which backend produced this snapshot (`sim`, `slurm`, …).
    pub source: String,
    /// The source's clock when the snapshot was taken.
    pub time: Timestamp,
    pub partitions: Vec<Partition>,
    pub nodes: Vec<std::sync::Arc<Node>>,
    pub jobs: Vec<std::sync::Arc<Job>>,
    /// Xid, ECC and node-state events, oldest first.
    pub events: Vec<Event>,
    pub quotas: Vec<Quota>,
    /// Hardware faults from before the events (a source's history, such as
    /// Prometheus's last 30 days), oldest first; the engine counts them
    /// with the events' to find the nodes that keep failing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<PastFault>,
    /// The scheduler has no way to ask a running job to checkpoint (a
    /// signal): Kubernetes. A soft preemption ("signal, then requeue after
    /// its checkpoint or the grace") is then neither offered nor sent;
    /// "preempt after its next checkpoint" is.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_job_signal: bool,
    /// Reservations that have not started yet (a maintenance window made
    /// with `scontrol create reservation … starttime=now+20minutes`): no
    /// job outside one starts on its nodes if its time limit runs into
    /// it. One that has started holds its nodes (`NodeState::Reserved`,
    /// `Node::back_at`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reservations: Vec<Reservation>,
}

/// A reservation ahead: its nodes, from when, until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    pub name: String,
    pub nodes: Vec<String>,
    pub start: Timestamp,
    /// `None`: no end.
    pub end: Option<Timestamp>,
}

impl Cluster {
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.name == name).map(|n| &**n)
    }

    pub fn job(&self, id: &str) -> Option<&Job> {
        self.jobs.iter().find(|j| j.id == id).map(|j| &**j)
    }

    /// The jobs that hold GPUs on `node`, in job-list order.
    pub fn jobs_on_node<'a>(&'a self, node: &'a str) -> impl Iterator<Item = &'a Job> + 'a {
        self.jobs
            .iter()
            .filter(move |j| j.state.holds_resources() && j.nodes.iter().any(|n| n == node))
            .map(|j| &**j)
    }

    /// The jobs holding resources on each node (indices into `jobs`), in
    /// one pass over the jobs: what asking `jobs_on_node` per node would
    /// cost nodes × jobs.
    pub fn jobs_by_node(&self) -> rustc_hash::FxHashMap<String, Vec<usize>> {
        let mut out: rustc_hash::FxHashMap<String, Vec<usize>> = rustc_hash::FxHashMap::default();
        out.reserve(self.nodes.len());
        for (i, j) in self.jobs.iter().enumerate() {
            if j.state.holds_resources() {
                for n in &j.nodes {
                    // A node's name is copied once, not once per job.
                    match out.get_mut(n.as_str()) {
                        Some(v) => v.push(i),
                        None => {
                            out.insert(n.clone(), vec![i]);
                        }
                    }
                }
            }
        }
        out
    }

    /// Who an event on `node` (and GPU `gpu`) hits now: the job holding that
    /// GPU; when the scheduler does not say which GPU a job holds on the
    /// node, or the event is the node's, every job holding the node.
    pub fn jobs_at(&self, node: &str, gpu: Option<u32>) -> Vec<EventJob> {
        let Some(n) = self.node(node) else {
            return Vec::new();
        };
        let per_gpu_known = n.gpus.iter().any(|g| g.job.is_some());
        let ids: Vec<&str> = match gpu {
            Some(i) if per_gpu_known => n
                .gpus
                .iter()
                .filter(|g| g.index == i)
                .filter_map(|g| g.job.as_deref())
                .collect(),
            _ => self.jobs_on_node(node).map(|j| j.id.as_str()).collect(),
        };
        ids.into_iter()
            .filter_map(|id| self.job(id))
            .map(|j| EventJob {
                id: j.id.clone(),
                state: j.state,
            })
            .collect()
    }

    /// Every GPU in node order, with its node.
    pub fn gpus(&self) -> impl Iterator<Item = (&Node, &Gpu)> {
        self.nodes
            .iter()
            .flat_map(|n| n.gpus.iter().map(move |g| (&**n, g)))
    }

    pub fn summary(&self) -> Summary {
        Summary::of(self)
    }
}
