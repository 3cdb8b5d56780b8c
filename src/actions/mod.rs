//! Guarded actions: every change to the cluster goes through one guard —
//! preview → confirm → execute → verify → audit — for the TUI and the CLI
//! alike. Each backend only supplies an executor.

pub mod audit;
pub mod cli;
pub mod executor;
pub mod guard;
pub mod policy;
pub mod runner;

use crate::engine::blast::Target;
use crate::model::Cluster;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
    /// Stop new work and end the node's jobs, whole gangs: requeued or killed.
    Drain {
        node: String,
        reason: String,
        requeue: bool,
    },
    Requeue {
        job: String,
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
            Action::Drain { .. } => "drain",
            Action::Requeue { .. } => "requeue",
            Action::Priority { .. } => "priority",
            Action::Hold { .. } => "hold",
            Action::Release { .. } => "release",
        }
    }

    /// The node or job acted on.
    pub fn target(&self) -> &str {
        match self {
            Action::Cordon { node, .. } | Action::Resume { node } | Action::Drain { node, .. } => {
                node
            }
            Action::Requeue { job }
            | Action::Priority { job, .. }
            | Action::Hold { job }
            | Action::Release { job } => job,
        }
    }

    pub fn reason(&self) -> Option<&str> {
        match self {
            Action::Cordon { reason, .. } | Action::Drain { reason, .. } => Some(reason),
            _ => None,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Action::Cordon { node, reason } => {
                format!("cordon {node} (reason `{reason}`): no new work, running jobs continue")
            }
            Action::Resume { node } => format!("resume {node}: back in service"),
            Action::Drain {
                node,
                reason,
                requeue: true,
            } => format!("drain {node} with reason `{reason}` and requeue its jobs"),
            Action::Drain {
                node,
                reason,
                requeue: false,
            } => format!("drain {node} with reason `{reason}` and KILL its jobs"),
            Action::Requeue { job } => format!("requeue job {job} (and its gang)"),
            Action::Priority { job, value } => format!("set job {job}'s priority to {value}"),
            Action::Hold { job } => format!("hold job {job}"),
            Action::Release { job } => format!("release job {job}"),
        }
    }

    /// Destructive actions kill running work: they need the target typed.
    pub fn is_destructive(&self) -> bool {
        matches!(self, Action::Drain { .. } | Action::Requeue { .. })
    }

    /// What must be typed to confirm; `None`: a `y` will do.
    pub fn confirm_token(&self) -> Option<&str> {
        self.is_destructive().then(|| self.target())
    }

    /// The node this takes out of service, for the circuit breaker.
    pub fn takes_out(&self) -> Option<&str> {
        match self {
            Action::Cordon { node, .. } | Action::Drain { node, .. } => Some(node),
            _ => None,
        }
    }

    /// What the engine previews as its blast radius.
    pub fn blast_target(&self) -> Option<Target> {
        match self {
            Action::Drain { node, requeue, .. } => Some(Target::Drain {
                node: node.clone(),
                requeue: *requeue,
            }),
            Action::Requeue { job } => Some(Target::Requeue { job: job.clone() }),
            Action::Priority { job, value } => Some(Target::Priority {
                job: job.clone(),
                value: *value,
            }),
            _ => None,
        }
    }

    /// The action that undoes this one, where there is one.
    pub fn undo(&self, before: &Cluster) -> Option<String> {
        match self {
            Action::Cordon { node, .. } | Action::Drain { node, .. } => {
                Some(format!("resume {node}"))
            }
            Action::Resume { node } => Some(format!("cordon {node}")),
            Action::Priority { job, .. } => before
                .job(job)
                .and_then(|j| j.priority)
                .map(|p| format!("priority {job} {p}")),
            Action::Hold { job } => Some(format!("release {job}")),
            Action::Release { job } => Some(format!("hold {job}")),
            Action::Requeue { .. } => None,
        }
    }

    /// Whether it would change nothing (draining a drained node).
    pub fn is_no_op(&self, c: &Cluster) -> bool {
        use crate::model::NodeState;
        match self {
            Action::Cordon { node, .. } => c.node(node).is_some_and(|n| n.state != NodeState::Up),
            Action::Drain { node, reason, .. } => c.node(node).is_some_and(|n| {
                n.state == NodeState::Drain
                    && n.reason.as_deref() == Some(reason.as_str())
                    && c.jobs_on_node(node).next().is_none()
            }),
            Action::Resume { node } => c.node(node).is_some_and(|n| n.state == NodeState::Up),
            Action::Priority { job, value } => {
                c.job(job).is_some_and(|j| j.priority == Some(*value))
            }
            _ => false,
        }
    }
}

/// "Top of its partition": one above the highest pending priority there.
pub fn top_priority(c: &Cluster, job: &str) -> Result<u64, String> {
    let j = c
        .job(job)
        .ok_or_else(|| format!("no job {job} in the current data"))?;
    let max = c
        .jobs
        .iter()
        .filter(|x| x.state.is_pending() && x.partition == j.partition && x.id != j.id)
        .filter_map(|x| x.priority)
        .max()
        .unwrap_or(0);
    Ok(max.saturating_add(1).max(j.priority.unwrap_or(0)))
}

#[cfg(test)]
mod tests;
