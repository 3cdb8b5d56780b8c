use super::{Domain, Gpu, IbPort, Timestamp};

use serde::{Deserialize, Serialize};

/// The label of a node only a node endpoint knows (no scheduler has it).
pub const ENDPOINT_ONLY: &str = "nightshift.io/endpoint-only";
use std::collections::BTreeMap;
use std::sync::Arc;

/// Scheduling state of a node, as the on-call thinks of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeState {
    /// Accepting work (idle, mixed or allocated).
    Up,
    /// Cordoned: no new work, running work continues, not being emptied.
    Cordoned,
    /// Being drained: no new work, jobs still running on it.
    Draining,
    /// Drained: no new work and no jobs left.
    Drain,
    /// Down or not responding.
    Down,
    /// Held back by the scheduler itself, not by a drain: in a maintenance
    /// or other reservation, registered with an invalid configuration,
    /// being powered down. No new work from the queue; running work (a
    /// reservation's `ignore_jobs`) continues. Never free capacity.
    Reserved,
    /// The source could not say.
    Unknown,
}

impl NodeState {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Up => "up",
            NodeState::Cordoned => "cordoned",
            NodeState::Draining => "draining",
            NodeState::Drain => "drain",
            NodeState::Down => "down",
            NodeState::Reserved => "reserved",
            NodeState::Unknown => "unknown",
        }
    }

    /// At most six characters, for the node grid.
    pub fn short(self) -> &'static str {
        match self {
            NodeState::Up => "up",
            NodeState::Cordoned => "cordon",
            NodeState::Draining => "drning",
            NodeState::Drain => "drain",
            NodeState::Down => "down",
            NodeState::Reserved => "resv",
            NodeState::Unknown => "unknwn",
        }
    }

    /// Whether the scheduler may place new work here.
    pub fn schedulable(self) -> bool {
        matches!(self, NodeState::Up)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub name: String,
    /// Shared by the node's copies, as its domains and labels are.
    pub partitions: Arc<[String]>,
    pub state: NodeState,
    /// Why the node is drained/down/cordoned, as the scheduler recorded it.
    pub reason: Option<String>,
    /// Who set the reason (Slurm's `reason_set_by_user`).
    pub reason_set_by: Option<String>,
    /// When the reason was set.
    pub reason_time: Option<Timestamp>,
    /// When the scheduler gives a node it holds back (reserved) to the
    /// queue again: its reservation's end. Capacity from then, not before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub back_at: Option<Timestamp>,
    /// When the node last booted: GPU events from before it were cleared
    /// by the reboot (the driver reloaded, the GPUs were reset).
    #[serde(default)]
    pub boot_time: Option<Timestamp>,
    pub gpu_model: Option<String>,
    /// The failure domains it shares with other nodes, narrowest first
    /// (its leaf switch before the spine, its NVLink domain, rack, power).
    /// Shared by the node's copies: a reading re-makes a node about every
    /// ten seconds and its domains and labels do not change with it.
    #[serde(default, skip_serializing_if = "<[Domain]>::is_empty")]
    pub domains: Arc<[Domain]>,
    /// Its network (InfiniBand/RoCE) ports, where a source reports them.
    /// Shared by the node's copies until a port's reading changes.
    #[serde(default, skip_serializing_if = "<[IbPort]>::is_empty")]
    pub ib_ports: Arc<[IbPort]>,
    /// Its GPUs in aggregate, where a fleet's Prometheus gave only that
    /// (see `GpuSummary`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_summary: Option<super::GpuSummary>,
    pub labels: Arc<BTreeMap<String, String>>,
    /// GPUs the scheduler says the node has; `gpus` may hold fewer when an
    /// endpoint reports fewer (a GPU fallen off the bus).
    pub gpu_count: u32,
    pub gpus: Vec<Gpu>,
    /// GPU faults the cluster itself reports on the node (a Kubernetes
    /// condition or taint): current evidence for as long as they are there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fault_reports: Vec<FaultReport>,
}

/// A GPU fault reported by the cluster about a node (node-problem-detector's
/// condition, the GPU operator's taint), not read from the GPU itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultReport {
    /// Where it was read: `condition GpuXidError`, `taint nvidia.com/gpu-xid=79:NoSchedule`.
    pub source: String,
    /// The GPU, when the report names it.
    pub gpu: Option<u32>,
    /// The Xid, when the report names one.
    pub xid: Option<u32>,
    pub message: String,
    /// Since when it has been reported.
    pub since: Option<Timestamp>,
}

impl Node {
    /// Its narrowest failure domain's name (the group the node grid and
    /// `why` count free GPUs by).
    pub fn topology(&self) -> Option<&str> {
        self.domains.first().map(|d| d.name.as_str())
    }

    /// Its domain at `level`, if it has one.
    pub fn domain(&self, level: &str) -> Option<&Domain> {
        self.domains.iter().find(|d| d.level == level)
    }

    /// Whether it is in the domain `name` (at any level).
    pub fn in_domain(&self, name: &str) -> bool {
        self.domains.iter().any(|d| d.name == name)
    }

    /// Whether only a node endpoint knows it (no scheduler says what runs
    /// on it: its allocation is unknown, not zero).
    pub fn endpoint_only(&self) -> bool {
        self.labels.contains_key(ENDPOINT_ONLY)
    }

    /// GPUs held by jobs on this node, counted from the per-GPU allocation.
    pub fn gpus_allocated(&self) -> u32 {
        self.gpus.iter().filter(|g| g.job.is_some()).count() as u32
    }

    /// GPUs free for new work: 0 on a node that takes no new work.
    pub fn gpus_free(&self) -> u32 {
        if !self.state.schedulable() {
            return 0;
        }
        self.gpu_count.saturating_sub(self.gpus_allocated())
    }

    /// Mean SM occupancy over the GPUs that report it.
    /// Where no GPU reports it alone, the node's aggregate says it.
    pub fn mean_sm_occupancy(&self) -> Option<f64> {
        let known: Vec<f64> = self.gpus.iter().filter_map(|g| g.sm_occupancy).collect();
        if known.is_empty() {
            self.gpu_summary.as_ref().and_then(|s| s.sm_occupancy)
        } else {
            Some(known.iter().sum::<f64>() / known.len() as f64)
        }
    }

    /// The most recent Xid on any of the node's GPUs.
    pub fn last_xid(&self) -> Option<(u32, &super::LastXid)> {
        self.gpus
            .iter()
            .filter_map(|g| g.last_xid.as_deref().map(|x| (g.index, x)))
            .max_by_key(|(_, x)| x.time)
    }
}
