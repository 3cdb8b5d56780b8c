//! Why the engine cannot answer a question about a node or a job: one line
//! for the user, naming what was asked.

/// A question the snapshot cannot answer, or an action it says cannot be
/// done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    #[error("no job {0} in the current data")]
    NoJob(String),
    #[error("no node {0} in the current data")]
    NoNode(String),
    #[error("no node or job {0} in the current data")]
    NoTarget(String),
    /// A Slurm job submitted with --no-requeue, asked to requeue.
    #[error(
        "job {0} was submitted with --no-requeue: the scheduler refuses its requeue, and nightshift's preempt is a requeue (nothing sent); to free its GPUs, cancel it (scancel), and its owner resubmits it"
    )]
    NoRequeue(String),
    /// A bare pod (no Kueue workload, no Volcano group), asked to requeue.
    #[error(
        "job {0} has no Kueue workload or Volcano group: it cannot be requeued, only evicted (drain its node; its owner recreates it)"
    )]
    BarePod(String),
    /// A job that holds nothing, asked to requeue or preempt.
    #[error("job {job} is {state}, not running: nothing to {verb}")]
    NotRunning {
        job: String,
        state: &'static str,
        verb: &'static str,
    },
    /// A job that holds nothing, whose options were asked.
    #[error("job {job} is {state}, not running: nothing to preempt (nightshift why {job})")]
    NoOptions { job: String, state: &'static str },
}

/// For the callers that still speak in strings.
impl From<EngineError> for String {
    fn from(e: EngineError) -> String {
        e.to_string()
    }
}
