//! What an action means, read against the cluster: its words for the
//! operator, its command line, its undo, and whether it would change
//! anything at all. The guard (in the backends) and the engine's options
//! both read these.

use crate::model::{Action, Cluster, NodeState};

impl Action {
    /// In the operator's words.
    pub fn describe(&self) -> String {
        match self {
            Action::Cordon { node, reason } => {
                format!("cordon {node} (reason `{reason}`): no new work, running jobs continue")
            }
            Action::Resume { node } => format!("resume {node}: back in service"),
            Action::Validate { node, level } => format!(
                "validate {node}: run the site's check (level {level}) on it with nothing else allowed there, resume it on a pass, keep it out with the failure as its reason"
            ),
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
            Action::SetReason { node, reason } => {
                format!("set {node}'s reason to `{reason}`")
            }
            Action::Requeue { job } => format!("requeue job {job} (and its gang)"),
            Action::Preempt {
                job,
                grace_s: Some(g),
            } => format!(
                "signal job {job} (and its gang) to checkpoint, then requeue it after its checkpoint or {}",
                crate::text::duration(*g as i64)
            ),
            Action::Preempt { job, .. } => format!("preempt job {job} (and its gang)"),
            Action::Priority { job, value } => format!("set job {job}'s priority to {value}"),
            Action::Hold { job } => format!("hold job {job}"),
            Action::Release { job } => format!("release job {job}"),
        }
    }

    /// The same action as a nightshift command line, for undo hints.
    /// [`Action::command_line`] for the cluster `cluster` of several
    /// (`nightshift --context NAME …`): pasted, it acts there, not on the
    /// default cluster.
    pub fn command_line_in(&self, cluster: Option<&str>) -> String {
        let line = self.command_line();
        match cluster {
            Some(c) => {
                let c = if c
                    .chars()
                    .all(|x| x.is_ascii_alphanumeric() || "-_./:".contains(x))
                {
                    c.to_string()
                } else {
                    format!("'{}'", c.replace('\'', "'\\''"))
                };
                line.replacen("nightshift ", &format!("nightshift --context {c} "), 1)
            }
            None => line,
        }
    }

    pub fn command_line(&self) -> String {
        let q = |s: &str| {
            if s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./:".contains(c))
            {
                s.to_string()
            } else {
                format!("'{}'", s.replace('\'', "'\\''"))
            }
        };
        match self {
            Action::Cordon { node, reason } => {
                format!("nightshift cordon {node} --reason {}", q(reason))
            }
            Action::Resume { node } => format!("nightshift resume {node}"),
            Action::Validate { node, level } => {
                format!("nightshift validate {node} --level {level}")
            }
            Action::Drain {
                node,
                reason,
                requeue,
            } => format!(
                "nightshift drain {node} --reason {} {}",
                q(reason),
                if *requeue { "--requeue" } else { "--kill" }
            ),
            Action::SetReason { node, reason } => {
                format!("nightshift reason {node} {}", q(reason))
            }
            Action::Requeue { job } => format!("nightshift requeue {job}"),
            Action::Preempt {
                job,
                grace_s: Some(g),
            } => format!("nightshift preempt {job} --grace {g}s"),
            Action::Preempt { job, .. } => format!("nightshift preempt {job}"),
            Action::Priority { job, value } => format!("nightshift priority {job} {value}"),
            Action::Hold { job } => format!("nightshift hold {job}"),
            Action::Release { job } => format!("nightshift release {job}"),
        }
    }

    /// Destructive actions kill running work: they need the target typed.
    pub fn is_destructive(&self) -> bool {
        matches!(
            self,
            Action::Drain { .. } | Action::Requeue { .. } | Action::Preempt { .. }
        )
    }

    /// The node this takes out of service, for the circuit breaker.
    pub fn takes_out(&self) -> Option<&str> {
        match self {
            Action::Cordon { node, .. } | Action::Drain { node, .. } => Some(node),
            _ => None,
        }
    }

    /// The action that undoes this one, from the state before it; `None`
    /// when nothing can (a requeued job cannot be un-requeued).
    pub fn undo(&self, before: &Cluster) -> Option<Action> {
        match self {
            // Back in service only when it was in service before: a drain
            // of a node someone else had cordoned is not undone by a resume.
            Action::Cordon { node, .. } | Action::Drain { node, .. } => before
                .node(node)
                .is_none_or(|n| n.state.schedulable())
                .then(|| Action::Resume { node: node.clone() }),
            // Back out of service as it was, with its old reason.
            Action::Resume { node } | Action::Validate { node, .. } => {
                before.node(node).and_then(|n| {
                    let reason = n.reason.clone().unwrap_or_else(|| "undo resume".into());
                    match n.state {
                        // Draining still ran jobs: out of service again
                        // without ending them (a drain would kill them).
                        NodeState::Cordoned | NodeState::Draining => Some(Action::Cordon {
                            node: node.clone(),
                            reason,
                        }),
                        NodeState::Drain | NodeState::Down => Some(Action::Drain {
                            node: node.clone(),
                            reason,
                            requeue: true,
                        }),
                        NodeState::Up | NodeState::Unknown | NodeState::Reserved => None,
                    }
                })
            }
            Action::SetReason { node, .. } => {
                before
                    .node(node)
                    .and_then(|n| n.reason.clone())
                    .map(|reason| Action::SetReason {
                        node: node.clone(),
                        reason,
                    })
            }
            Action::Priority { job, .. } => {
                before
                    .job(job)
                    .and_then(|j| j.priority.get())
                    .map(|p| Action::Priority {
                        job: job.clone(),
                        value: p,
                    })
            }
            Action::Hold { job } => Some(Action::Release { job: job.clone() }),
            Action::Release { job } => Some(Action::Hold { job: job.clone() }),
            Action::Requeue { .. } | Action::Preempt { .. } => None,
        }
    }

    /// Whether it would change nothing (draining a drained node).
    /// Why the action would change nothing, in words, when it would not:
    /// already so, or nothing there for it to act on.
    pub fn no_op_reason(&self, c: &Cluster) -> Option<String> {
        // Slurm's holds, and a Kueue workload made inactive.
        let held = |j: &crate::model::Job| {
            j.reason
                .as_deref()
                .is_some_and(|r| r.starts_with("JobHeld") || r == "WorkloadInactive")
        };
        match self {
            Action::Hold { job } => c
                .job(job)
                .filter(|j| held(j))
                .map(|_| format!("job {job} is held already")),
            Action::Release { job } => c.job(job).filter(|j| !held(j)).map(|j| {
                format!(
                    "job {job} is not held ({}): nothing to release",
                    j.state.as_str()
                )
            }),
            // Nothing placed and no pods: a gang whose pods exist (Volcano)
            // can be restarted by evicting them.
            Action::Requeue { job } | Action::Preempt { job, .. } => c
                .job(job)
                .filter(|j| !j.state.holds_resources() && j.nodes.is_empty() && j.pods.is_empty())
                .map(|j| {
                    format!(
                        "job {job} is {}, not running: nothing to {}",
                        j.state.as_str(),
                        self.verb()
                    )
                }),
            Action::Priority { job, value } => c
                .job(job)
                .filter(|j| j.priority == Some(*value))
                .map(|_| format!("job {job}'s priority is {value} already")),
            Action::Resume { node } | Action::Validate { node, .. } => c
                .node(node)
                .filter(|n| n.state == NodeState::Up)
                .map(|_| format!("{node} is in service already")),
            _ if self.is_no_op(c) => Some(format!(
                "{} is {} already{}",
                self.target(),
                c.node(self.target()).map_or("so", |n| n.state.as_str()),
                c.node(self.target())
                    .and_then(|n| n.reason.as_deref())
                    .map_or(String::new(), |r| format!(" ({r})"))
            )),
            _ => None,
        }
    }

    pub fn is_no_op(&self, c: &Cluster) -> bool {
        match self {
            Action::Cordon { node, .. } => c.node(node).is_some_and(|n| n.state != NodeState::Up),
            // Drained (or draining) for this reason already, and nothing on
            // it that another drain would end: only jobs that refuse a
            // requeue are left, and a requeue asks them again in vain
            // (issue 58: h100-06 was recommended the same drain each
            // minute while 4702, --no-requeue, ran on).
            Action::Drain {
                node,
                reason,
                requeue,
            } => c.node(node).is_some_and(|n| {
                matches!(n.state, NodeState::Drain | NodeState::Draining)
                    && n.reason.as_deref() == Some(reason.as_str())
                    && c.jobs_on_node(node).all(|j| {
                        *requeue && j.requeueable == Some(false) && j.state.holds_resources()
                    })
            }),
            Action::SetReason { node, reason } => c
                .node(node)
                .is_some_and(|n| n.reason.as_deref() == Some(reason.as_str())),
            Action::Resume { node } | Action::Validate { node, .. } => {
                c.node(node).is_some_and(|n| n.state == NodeState::Up)
            }
            Action::Priority { job, value } => {
                c.job(job).is_some_and(|j| j.priority == Some(*value))
            }
            _ => false,
        }
    }
}

/// "Top of its partition": one above the highest pending priority there.
pub fn top_priority(
    c: &crate::model::Cluster,
    job: &str,
) -> Result<u64, crate::engine::error::EngineError> {
    let j = c
        .job(job)
        .ok_or_else(|| crate::engine::error::EngineError::NoJob(job.to_string()))?;
    let max = c
        .jobs
        .iter()
        .filter(|x| x.state.is_pending() && x.partition == j.partition && x.id != j.id)
        .filter_map(|x| x.priority.get())
        .max()
        .unwrap_or(0);
    Ok(max.saturating_add(1).max(j.priority.unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fixture::{add_node, cluster};

    /// Resuming a node takes it out again as it was: a draining node (jobs
    /// still on it) is cordoned — a drain would kill the jobs that kept
    /// running (issue 39); a cordoned one cordoned, a drained one drained.
    #[test]
    fn the_undo_of_a_resume_keeps_the_jobs_a_draining_node_still_ran() {
        let mut before = cluster();
        for n in ["a", "b", "c"] {
            add_node(&mut before, n, "p", 8);
        }
        for (n, s) in [
            ("a", NodeState::Draining),
            ("b", NodeState::Cordoned),
            ("c", NodeState::Drain),
        ] {
            let node = before.nodes.iter_mut().find(|x| x.name == n).expect("node");
            let node = std::sync::Arc::make_mut(node);
            node.state = s;
            node.reason = Some(format!("{n}'s reason"));
        }
        let undo = |n: &str| Action::Resume { node: n.into() }.undo(&before);
        assert_eq!(
            undo("a"),
            Some(Action::Cordon {
                node: "a".into(),
                reason: "a's reason".into()
            })
        );
        assert!(matches!(undo("b"), Some(Action::Cordon { .. })));
        assert!(matches!(
            undo("c"),
            Some(Action::Drain { requeue: true, .. })
        ));
    }
}
