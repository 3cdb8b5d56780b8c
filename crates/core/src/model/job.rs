use super::{Count, Timestamp, When};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Pending,
    Running,
    /// Completing: ending, still holding its nodes.
    Completing,
    Suspended,
    Completed,
    Failed,
    Cancelled,
    Requeued,
    Unknown,
}

impl JobState {
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::Running => "running",
            JobState::Completing => "completing",
            JobState::Suspended => "suspended",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
            JobState::Requeued => "requeued",
            JobState::Unknown => "unknown",
        }
    }

    /// Whether jobs in this state hold GPUs.
    pub fn holds_resources(self) -> bool {
        matches!(
            self,
            JobState::Running | JobState::Completing | JobState::Suspended
        )
    }

    pub fn is_pending(self) -> bool {
        matches!(self, JobState::Pending | JobState::Requeued)
    }
}

/// A job's time limit: a number of seconds or none at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeLimit {
    Seconds(u64),
    Unlimited,
}

/// What is known about a job's checkpoints. Each field may be unknown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub last: When,
    pub interval_s: Count,
    pub size_bytes: Count,
    /// Model parameters, when the size is not known but the model is.
    pub params: Count,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// Scheduler job id (Slurm `1234` or `1234_7` for an array task).
    pub id: String,
    pub name: String,
    pub user: String,
    /// Account or team.
    pub account: Option<Arc<str>>,
    pub partition: String,
    pub qos: Option<Arc<str>>,
    pub priority: Count,
    pub state: JobState,
    /// The scheduler's own reason for a pending (or held) job, verbatim.
    pub reason: Option<String>,
    /// GPUs asked for on each node, when the job asks per node.
    pub gpus_per_node: Option<u32>,
    pub node_count: Option<u32>,
    /// GPUs in total, when known.
    pub gpus_total: Option<u32>,
    /// Nodes allocated (empty while pending).
    pub nodes: Vec<String>,
    pub submit_time: When,
    /// When it could last begin to wait for a start: its requeue (Slurm's
    /// `eligible_time`), later than its submission once it ran; `None`
    /// when not known or not different.
    #[serde(default)]
    pub eligible_time: When,
    pub start_time: When,
    /// When the job ended, for finished jobs.
    pub end_time: When,
    pub time_limit: Option<TimeLimit>,
    /// Jobs with the same gang id live and die together (a multi-node job's
    /// ranks, a PodGroup's pods). A multi-node Slurm job is its own gang.
    pub gang: Option<Box<str>>,
    pub checkpoint: Checkpoint,
    /// Times the scheduler restarted or requeued it, when it says.
    pub restarts: Option<u32>,
    /// Whether the scheduler lets it be requeued (Slurm `--no-requeue`
    /// jobs cannot be); `None` when it does not say.
    #[serde(default)]
    pub requeueable: Option<bool>,
    /// The failure-domain level all its nodes must share (Slurm
    /// `--switches=1`: `leaf`; Kueue's required topology: that level).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_domain: Option<Box<str>>,
    /// The nodes it must run on (Slurm `--nodelist`/`-w`): the plan places
    /// it there or nowhere.
    #[serde(default, skip_serializing_if = "<[String]>::is_empty")]
    pub required_nodes: Box<[String]>,
    /// Kubernetes: the job's pods, `NAMESPACE/NAME` (for linking a GPU
    /// reading that names its pod). Empty elsewhere.
    #[serde(default, skip_serializing_if = "<[String]>::is_empty")]
    pub pods: Box<[String]>,
}

impl Job {
    /// When its present wait began: its submission, or its requeue when
    /// it ran before (the later of the two).
    pub fn waiting_since(&self) -> Option<Timestamp> {
        match (self.submit_time.get(), self.eligible_time.get()) {
            (Some(s), Some(e)) => Some(s.max(e)),
            (s, e) => s.or(e),
        }
    }

    /// GPUs the job asks for in total, from whichever shape is known.
    pub fn gpus_requested(&self) -> Option<u32> {
        self.gpus_total.or_else(|| {
            self.gpus_per_node
                .map(|g| g.saturating_mul(self.node_count.unwrap_or(1).max(1)))
        })
    }

    /// Seconds waited so far (pending) or waited before starting.
    pub fn wait_s(&self, now: Timestamp) -> Option<i64> {
        let submit = self.waiting_since()?;
        let end = self.start_time.unwrap_or(now);
        Some((end - submit).max(0))
    }

    pub fn elapsed_s(&self, now: Timestamp) -> Option<i64> {
        if !self.state.holds_resources() {
            return None;
        }
        self.start_time.get().map(|s| (now - s).max(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> Job {
        Job {
            id: "1".into(),
            name: "j".into(),
            user: "u".into(),
            account: None,
            partition: "p".into(),
            qos: None,
            priority: Count::UNKNOWN,
            state: JobState::Pending,
            reason: None,
            gpus_per_node: Some(8),
            node_count: Some(4),
            gpus_total: None,
            nodes: vec![],
            submit_time: Some(100).into(),
            eligible_time: When::UNKNOWN,
            start_time: When::UNKNOWN,
            end_time: When::UNKNOWN,
            time_limit: None,
            gang: None,
            checkpoint: Checkpoint::default(),
            restarts: None,
            requeueable: None,
            same_domain: None,
            required_nodes: Default::default(),
            pods: Default::default(),
        }
    }

    #[test]
    fn gpus_requested_from_shape() {
        let mut j = job();
        assert_eq!(j.gpus_requested(), Some(32));
        j.gpus_total = Some(12);
        assert_eq!(j.gpus_requested(), Some(12));
        j.gpus_total = None;
        j.gpus_per_node = None;
        assert_eq!(j.gpus_requested(), None);
    }

    #[test]
    fn wait_counts_until_start_or_now() {
        let mut j = job();
        assert_eq!(j.wait_s(160), Some(60));
        j.start_time = Some(130).into();
        assert_eq!(j.wait_s(500), Some(30));
        j.submit_time = When::UNKNOWN;
        assert_eq!(j.wait_s(500), None);
    }

    /// Requeued 18 h after its submission, a job has waited since its
    /// requeue (the longest wait jumped to its submission: 18h10m).
    #[test]
    fn a_requeued_job_waits_from_its_requeue() {
        let mut j = job();
        j.submit_time = Some(0).into();
        j.eligible_time = Some(18 * 3600).into();
        assert_eq!(j.wait_s(18 * 3600 + 600), Some(600));
        let c = crate::model::Cluster {
            jobs: vec![std::sync::Arc::new(j)],
            ..Default::default()
        };
        let s = crate::model::summary::Summary::of(&c);
        assert_eq!(s.longest_wait_s(18 * 3600 + 600), Some(600));
    }
}
/// A job and its `Arc`'s two counts fit mimalloc's 384-byte class (at 488
/// bytes they took 512): 100,000 jobs at 10,000 nodes, ~13 MB of the 10k
/// console's memory (issue 42). A new field that needs room goes in a
/// `Count`, a `When` or a box, or this fails.
#[cfg(test)]
#[test]
fn a_job_stays_within_its_size_class() {
    assert!(
        std::mem::size_of::<Job>() + 16 <= 384,
        "{}",
        std::mem::size_of::<Job>()
    );
}
