use serde::{Deserialize, Serialize};

/// What came of one call of an action: a drain is the node update, then
/// one requeue per job. Plain data shared by the executors (the sim's
/// and Slurm's) and the audit log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    /// `drain h100-03`, `requeue 4700`.
    pub what: String,
    pub ok: bool,
    /// The change is visible in the scheduler's state.
    pub verified: bool,
    pub observed: String,
    /// The scheduler's own text when it failed.
    pub error: Option<String>,
    /// It was already so (another operator's cordon): nothing was changed,
    /// so there is nothing of this action's to undo.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unchanged: bool,
    /// The scheduler refused it for a reason nightshift knows (read from
    /// its answer by the backend): what to do next depends on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<Refused>,
}

/// Why a scheduler refused a call, where nightshift knows the reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Refused {
    /// A requeue of a job submitted with --no-requeue (Slurm: "Requested
    /// operation is presently disabled").
    NoRequeue,
}

/// What re-reading the scheduler showed after a change was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The change is visible in the scheduler's state.
    pub verified: bool,
    /// What was seen when checking.
    pub observed: String,
}

impl Step {
    /// A call that was sent and answered, with what re-reading showed.
    pub fn sent(what: String, o: Outcome) -> Step {
        Step {
            what,
            ok: true,
            verified: o.verified,
            observed: o.observed,
            error: None,
            unchanged: false,
            refused: None,
        }
    }

    /// A call that failed, or could not be sent at all.
    pub fn failed(what: String, error: String) -> Step {
        Step {
            what,
            ok: false,
            verified: false,
            observed: String::new(),
            error: Some(error),
            unchanged: false,
            refused: None,
        }
    }

    /// The same step, refused by the scheduler for this reason.
    pub fn refused_for(self, why: Option<Refused>) -> Step {
        Step {
            refused: why,
            ..self
        }
    }

    /// A requeue not sent: the job was submitted with --no-requeue and the
    /// scheduler would refuse it. It keeps running; nothing to undo.
    pub fn refuses_requeue(job: &str, node: &str) -> Step {
        Step {
            what: format!("requeue {job}"),
            ok: true,
            verified: true,
            observed: format!(
                "job {job} was submitted with --no-requeue; it keeps running and {node} stays draining until it ends (cancel it to empty {node} now)"
            ),
            error: None,
            unchanged: true,
            refused: None,
        }
    }

    /// A step from a call's result.
    pub fn of<E: std::fmt::Display>(what: String, r: Result<Outcome, E>) -> Step {
        match r {
            Ok(o) => Step::sent(what, o),
            Err(e) => Step::failed(what, e.to_string()),
        }
    }
}

/// The reason a node that failed its check before going back to service
/// keeps (`Action::Validate`), before the check's own words.
pub const VALIDATION_FAILED: &str = "nightshift validation failed";

/// The reason a cordon or drain goes with when no incident gives one: one
/// text for both (a cordon read "drained via nightshift").
pub const PLAIN_REASON: &str = "taken out of service via nightshift";

/// Something the on-call can do to the cluster: one plain verb shared by
/// the guard (src/actions), the simulated cluster's executor and the
/// engine's blast radius. Plain data; what it costs and how it is sent
/// live with the engine and the actions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// Stop new work on a node; running jobs continue.
    Cordon {
        node: String,
        reason: String,
    },
    /// Put a cordoned or drained node back in service.
    Resume {
        node: String,
    },
    /// Check a node whose remedy is done before it takes work again: the
    /// site's check (`[validate] command`, DCGM diagnostics at `level`)
    /// runs on it through the scheduler while nothing else can land
    /// there; it is resumed on a pass and stays out with the check's
    /// failure as its reason otherwise.
    Validate {
        node: String,
        level: u8,
    },
    /// Stop new work and end the node's jobs, whole gangs: requeued or killed.
    Drain {
        node: String,
        reason: String,
        requeue: bool,
    },
    /// Change the recorded reason of a node that is out of service.
    SetReason {
        node: String,
        reason: String,
    },
    /// End a running job (and its gang); it goes back to the queue.
    Requeue {
        job: String,
    },
    /// End a running job (and its gang) to make room: requeued or cancelled
    /// as the site's preemption mode says.
    Preempt {
        job: String,
        /// Soft preemption: the job is signalled to checkpoint and stopped
        /// this many seconds later (or once its checkpoint is seen).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        grace_s: Option<u64>,
    },
    Priority {
        job: String,
        value: u64,
    },
    Hold {
        job: String,
    },
    Release {
        job: String,
    },
}

impl Action {
    pub fn verb(&self) -> &'static str {
        match self {
            Action::Cordon { .. } => "cordon",
            Action::Resume { .. } => "resume",
            Action::Validate { .. } => "validate",
            Action::Drain { .. } => "drain",
            Action::SetReason { .. } => "reason",
            Action::Requeue { .. } => "requeue",
            Action::Preempt { .. } => "preempt",
            Action::Priority { .. } => "priority",
            Action::Hold { .. } => "hold",
            Action::Release { .. } => "release",
        }
    }

    /// The node or job acted on.
    pub fn target(&self) -> &str {
        match self {
            Action::Cordon { node, .. }
            | Action::Resume { node }
            | Action::Validate { node, .. }
            | Action::Drain { node, .. }
            | Action::SetReason { node, .. } => node,
            Action::Requeue { job }
            | Action::Preempt { job, .. }
            | Action::Priority { job, .. }
            | Action::Hold { job }
            | Action::Release { job } => job,
        }
    }

    /// Whether it acts on a node (else on a job).
    pub fn on_node(&self) -> bool {
        matches!(
            self,
            Action::Cordon { .. }
                | Action::Resume { .. }
                | Action::Validate { .. }
                | Action::Drain { .. }
                | Action::SetReason { .. }
        )
    }

    pub fn reason(&self) -> Option<&str> {
        match self {
            Action::Cordon { reason, .. }
            | Action::Drain { reason, .. }
            | Action::SetReason { reason, .. } => Some(reason),
            _ => None,
        }
    }
}
