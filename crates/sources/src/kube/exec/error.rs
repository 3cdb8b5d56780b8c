//! What can go wrong acting on Kubernetes, as types: the API server's
//! answers, the ids nightshift cannot resolve, and the actions Kubernetes
//! has no way to take.

/// A call to the API server, or what it names that is not there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// Connecting (the kubeconfig, the server), in its words.
    #[error("{0}")]
    Connect(String),
    /// The API server's answer (`HTTP 403: …`) or the transport's error,
    /// in one line.
    #[error("{0}")]
    Api(String),
    #[error("{0:?} is not a Kubernetes job id (NAMESPACE/NAME)")]
    NotAJobId(String),
    #[error("no Kueue workload, Volcano group or pod {0}")]
    NoJob(String),
    #[error("{0} is not a Kueue workload")]
    NotAWorkload(String),
}

impl From<CallError> for String {
    fn from(e: CallError) -> String {
        e.to_string()
    }
}

/// Why an action cannot be taken on Kubernetes, found while preparing it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Cannot {
    #[error(transparent)]
    Call(#[from] CallError),
    #[error("the pods on {0} were not read")]
    PodsNotRead(String),
    #[error("{0} is a bare pod: it cannot be requeued, only evicted (drain its node)")]
    BarePod(String),
    #[error(
        "{0} has no Kueue workload or Volcano group to requeue it through: evicting its pods leaves the restart to its controller"
    )]
    NoRequeuePath(String),
    #[error("{0} is not a Kueue workload: only those can be held (spec.active)")]
    NotHoldable(String),
    #[error(
        "{0}'s priority comes from its pods' PriorityClass, and a pod's priority is immutable: give its workload a WorkloadPriorityClass"
    )]
    PriorityFromClass(String),
    #[error("a pod's priority is immutable; {0} has no Kueue workload whose priority could change")]
    PodPriority(String),
    #[error(
        "Kubernetes has no signal to ask {0} to checkpoint, so a preemption with a grace period would end its pods at once: use `preempt {0} --after-checkpoint` (it waits for the pods' checkpoint annotation to move)"
    )]
    NoSoftPreempt(String),
}
