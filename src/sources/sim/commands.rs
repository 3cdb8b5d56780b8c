//! What the guarded actions can do to the simulated cluster: the sim's
//! executor side. Each command changes the sim's state at once; the next
//! snapshot shows it.

use super::Sim;
use crate::model::{EventKind, JobState, NodeState};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimCommand {
    Cordon {
        node: String,
    },
    /// Stop new work and end the jobs on the node (and their gangs):
    /// requeued, or cancelled.
    Drain {
        node: String,
        reason: String,
        requeue: bool,
    },
    Resume {
        node: String,
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

impl Sim {
    fn node_mut(&mut self, name: &str) -> Result<usize, String> {
        self.nodes
            .iter()
            .position(|n| n.name == name)
            .ok_or_else(|| format!("no node {name}"))
    }

    fn job_ix(&self, id: &str) -> Result<usize, String> {
        self.jobs
            .iter()
            .position(|j| j.job.id == id)
            .ok_or_else(|| format!("Invalid job id specified: {id}"))
    }

    /// Requeues (or cancels) job `i` and every job of its gang.
    fn end_with_gang(&mut self, i: usize, requeue: bool) {
        let gang = self.jobs[i].job.gang.clone();
        let members: Vec<usize> = (0..self.jobs.len())
            .filter(|&k| {
                k == i
                    || (gang.is_some()
                        && self.jobs[k].job.gang == gang
                        && self.jobs[k].job.state.holds_resources())
            })
            .collect();
        for k in members {
            if !self.jobs[k].job.state.holds_resources() {
                continue;
            }
            self.end_job(
                k,
                if requeue {
                    JobState::Pending
                } else {
                    JobState::Cancelled
                },
            );
            if requeue {
                let j = &mut self.jobs[k].job;
                j.end_time = None;
                j.start_time = None;
                j.nodes.clear();
                j.reason = Some("BeginTime".into());
                j.restarts = Some(j.restarts.unwrap_or(0) + 1);
            }
        }
    }

    fn set_node_state(&mut self, n: usize, to: NodeState, reason: Option<String>) {
        let from = self.nodes[n].state;
        if from == to && self.nodes[n].reason == reason {
            return;
        }
        let now = self.now;
        let node = &mut self.nodes[n];
        node.state = to;
        node.reason_set_by = reason.as_ref().map(|_| "nightshift".to_string());
        node.reason_time = reason.as_ref().map(|_| now);
        node.reason = reason.clone();
        let name = node.name.clone();
        let kind = EventKind::NodeState {
            from: from.as_str().into(),
            to: to.as_str().into(),
        };
        self.push_event(&name, None, kind, reason.as_deref().unwrap_or(""));
        self.sched_dirty = true;
    }

    /// Applies a command, then reads the sim's state back and says what it
    /// sees, as a scheduler would be re-read after a call.
    pub fn apply(&mut self, cmd: &SimCommand) -> Result<(bool, String), String> {
        let before: Vec<(String, JobState, u32)> = self
            .jobs
            .iter()
            .map(|j| (j.job.id.clone(), j.job.state, j.job.restarts.unwrap_or(0)))
            .collect();
        self.apply_only(cmd)?;
        let (ok, mut seen) = self.observe(cmd);
        // Requeued jobs count a restart (and may already run again); killed
        // ones are cancelled.
        let ended: Vec<String> = before
            .iter()
            .filter(|(id, was, restarts)| {
                self.jobs.iter().any(|j| {
                    &j.job.id == id
                        && (j.job.restarts.unwrap_or(0) > *restarts
                            || (was.holds_resources() && j.job.state == JobState::Cancelled))
                })
            })
            .map(|(id, _, _)| id.clone())
            .collect();
        if !ended.is_empty() {
            let how = if matches!(cmd, SimCommand::Drain { requeue: false, .. }) {
                "cancelled"
            } else {
                "requeued"
            };
            seen.push_str(&format!("; {how}: {}", ended.join(", ")));
        }
        Ok((ok, seen))
    }

    fn observe(&self, cmd: &SimCommand) -> (bool, String) {
        let node = |name: &str| self.nodes.iter().find(|n| n.name == name);
        let job = |id: &str| self.jobs.iter().find(|j| j.job.id == id).map(|j| &j.job);
        let show_node = |n: &crate::model::Node| {
            format!(
                "{} is {} (reason: {})",
                n.name,
                n.state.as_str(),
                n.reason.as_deref().unwrap_or("-")
            )
        };
        let show_job = |j: &crate::model::Job| {
            format!(
                "job {} is {} (priority {}, reason {})",
                j.id,
                j.state.as_str(),
                j.priority.map_or("-".into(), |p| p.to_string()),
                j.reason.as_deref().unwrap_or("-")
            )
        };
        match cmd {
            SimCommand::Cordon { node: n } => node(n)
                .map_or((false, format!("no node {n}")), |x| {
                    (x.state != NodeState::Up, show_node(x))
                }),
            SimCommand::Drain {
                node: n, reason, ..
            } => node(n).map_or((false, format!("no node {n}")), |x| {
                let jobs_left = self
                    .jobs
                    .iter()
                    .any(|j| j.job.state.holds_resources() && j.job.nodes.contains(n));
                (
                    x.state == NodeState::Drain && x.reason.as_ref() == Some(reason) && !jobs_left,
                    show_node(x),
                )
            }),
            SimCommand::Resume { node: n } => node(n)
                .map_or((false, format!("no node {n}")), |x| {
                    (x.state == NodeState::Up, show_node(x))
                }),
            SimCommand::Requeue { job: id } => {
                job(id).map_or((false, format!("no job {id}")), |j| {
                    (
                        j.state.is_pending()
                            || j.state.holds_resources() && j.restarts.unwrap_or(0) > 0,
                        show_job(j),
                    )
                })
            }
            SimCommand::Priority { job: id, value } => job(id)
                .map_or((false, format!("no job {id}")), |j| {
                    (j.priority == Some(*value), show_job(j))
                }),
            SimCommand::Hold { job: id } => job(id).map_or((false, format!("no job {id}")), |j| {
                (j.reason.as_deref() == Some("JobHeldAdmin"), show_job(j))
            }),
            SimCommand::Release { job: id } => {
                job(id).map_or((false, format!("no job {id}")), |j| {
                    (
                        !j.reason
                            .as_deref()
                            .is_some_and(|r| r.starts_with("JobHeld")),
                        show_job(j),
                    )
                })
            }
        }
    }

    fn apply_only(&mut self, cmd: &SimCommand) -> Result<(), String> {
        match cmd {
            SimCommand::Cordon { node } => {
                let n = self.node_mut(node)?;
                if self.nodes[n].state == NodeState::Up {
                    self.set_node_state(n, NodeState::Cordoned, Some("cordoned".into()));
                }
            }
            SimCommand::Drain {
                node,
                reason,
                requeue,
            } => {
                let n = self.node_mut(node)?;
                let on_node: Vec<usize> = (0..self.jobs.len())
                    .filter(|&k| {
                        self.jobs[k].job.state.holds_resources()
                            && self.jobs[k].job.nodes.iter().any(|x| x == node)
                    })
                    .collect();
                for k in on_node {
                    self.end_with_gang(k, *requeue);
                }
                self.set_node_state(n, NodeState::Drain, Some(reason.clone()));
            }
            SimCommand::Resume { node } => {
                let n = self.node_mut(node)?;
                self.set_node_state(n, NodeState::Up, None);
            }
            SimCommand::Requeue { job } => {
                let i = self.job_ix(job)?;
                if !self.jobs[i].job.state.holds_resources() {
                    return Err(format!(
                        "job {job} is {}: only running jobs can be requeued",
                        self.jobs[i].job.state.as_str()
                    ));
                }
                self.end_with_gang(i, true);
            }
            SimCommand::Priority { job, value } => {
                let i = self.job_ix(job)?;
                self.jobs[i].job.priority = Some(*value);
                self.sched_dirty = true;
            }
            SimCommand::Hold { job } => {
                let i = self.job_ix(job)?;
                if !self.jobs[i].job.state.is_pending() {
                    return Err(format!(
                        "job {job} is {}: only pending jobs can be held",
                        self.jobs[i].job.state.as_str()
                    ));
                }
                self.jobs[i].blocked = true;
                self.jobs[i].job.reason = Some("JobHeldAdmin".into());
            }
            SimCommand::Release { job } => {
                let i = self.job_ix(job)?;
                if self.jobs[i]
                    .job
                    .reason
                    .as_deref()
                    .is_some_and(|r| r.starts_with("JobHeld"))
                {
                    self.jobs[i].blocked = false;
                    self.jobs[i].job.reason = None;
                    self.sched_dirty = true;
                }
            }
        }
        // Requeued jobs wait for their begin time like Slurm's, then compete.
        if self.sched_dirty {
            super::scheduler::schedule(self);
        }
        Ok(())
    }
}
