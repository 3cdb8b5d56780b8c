//! What the guarded actions can do to the simulated cluster: the sim's
//! executor side. Each call changes the sim's state at once and is read
//! back, as a scheduler would be re-read after a call; a drain is one
//! step for the node and one per job, so that a requeue the "scheduler"
//! refuses (a job submitted with `--no-requeue`) is reported as exactly
//! that.

use super::Sim;
use crate::model::{Action, Job, JobState, Node, NodeState, Refused, Step};
use std::sync::Arc;

/// What Slurm answers when asked to requeue a job submitted with
/// `--no-requeue` (`scontrol requeue`: ESLURM_DISABLED), before ` for job N`;
/// seen on the live lab: "Requested operation is presently disabled for job 3".
pub const NO_REQUEUE: &str = "Requested operation is presently disabled";

use crate::model::VALIDATION_FAILED;

fn show_node(n: &Node) -> String {
    format!(
        "{} is {} (reason: {})",
        n.name,
        n.state.as_str(),
        n.reason.as_deref().unwrap_or("-")
    )
}

fn show_job(j: &Job) -> String {
    format!(
        "job {} is {} (priority {}, reason {})",
        j.id,
        j.state.as_str(),
        j.priority.get().map_or("-".into(), |p| p.to_string()),
        j.reason.as_deref().unwrap_or("-")
    )
}

fn step(what: String, verified: bool, observed: String) -> Step {
    Step {
        what,
        ok: true,
        verified,
        observed,
        error: None,
        unchanged: false,
        refused: None,
    }
}

fn failed(what: String, error: String, observed: String) -> Step {
    Step {
        what,
        ok: false,
        verified: false,
        observed,
        error: Some(error),
        unchanged: false,
        refused: None,
    }
}

/// An action the simulated scheduler cannot apply at all, in its words
/// (a job's as Slurm's: "Invalid job id specified").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    #[error("no node {0}")]
    NoNode(String),
    #[error("Invalid job id specified: {0}")]
    NoJob(String),
    #[error("the simulated cluster needs at least {min} nodes (asked for {asked})")]
    TooFewNodes { min: usize, asked: usize },
}

impl From<SimError> for String {
    fn from(e: SimError) -> String {
        e.to_string()
    }
}

impl Sim {
    fn node_ix(&self, name: &str) -> Result<usize, SimError> {
        self.nodes
            .iter()
            .position(|n| n.name == name)
            .ok_or_else(|| SimError::NoNode(name.to_string()))
    }

    fn job_ix(&self, id: &str) -> Result<usize, SimError> {
        self.jobs
            .iter()
            .position(|j| j.job.id == id)
            .ok_or_else(|| SimError::NoJob(id.to_string()))
    }

    /// Job `i` and every running job of its gang.
    fn gang_of(&self, i: usize) -> Vec<usize> {
        let gang = self.jobs[i].job.gang.clone();
        (0..self.jobs.len())
            .filter(|&k| {
                k == i
                    || (gang.is_some()
                        && self.jobs[k].job.gang == gang
                        && self.jobs[k].job.state.holds_resources())
            })
            .collect()
    }

    /// Requeues (or cancels) one running job, as the scheduler would.
    fn end_one(&mut self, k: usize, requeue: bool) -> Result<(), Refused> {
        if !self.jobs[k].job.state.holds_resources() {
            return Ok(());
        }
        if requeue && self.jobs[k].job.requeueable == Some(false) {
            return Err(Refused::NoRequeue);
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
            let j = self.jobs[k].job_mut();
            j.end_time = crate::model::When::UNKNOWN;
            j.start_time = crate::model::When::UNKNOWN;
            // It waits again from now.
            j.eligible_time = Some(self.now).into();
            j.nodes.clear();
            j.reason = Some("BeginTime".into());
            j.restarts = Some(j.restarts.unwrap_or(0) + 1);
        }
        Ok(())
    }

    /// One step per job: requeue (or cancel) each of `jobs`.
    fn end_jobs_steps(&mut self, jobs: &[usize], requeue: bool) -> Vec<Step> {
        let verb = if requeue { "requeue" } else { "cancel" };
        let mut steps = Vec::new();
        for &k in jobs {
            let id = self.jobs[k].job.id.clone();
            let restarts = self.jobs[k].job.restarts.unwrap_or(0);
            let what = format!("{verb} {id}");
            match self.end_one(k, requeue) {
                Ok(()) => {
                    let j = &self.jobs[k].job;
                    let seen = if requeue {
                        j.restarts.unwrap_or(0) > restarts
                    } else {
                        j.state == JobState::Cancelled
                    };
                    steps.push(step(what, seen, show_job(j)));
                }
                Err(why) => steps.push(
                    failed(
                        what,
                        format!("{NO_REQUEUE} for job {id}"),
                        show_job(&self.jobs[k].job),
                    )
                    .refused_for(Some(why)),
                ),
            }
        }
        steps
    }

    fn set_node_state(&mut self, n: usize, to: NodeState, reason: Option<String>) {
        let from = self.nodes[n].state;
        if from == to && self.nodes[n].reason == reason {
            return;
        }
        let now = self.now;
        let node = Arc::make_mut(&mut self.nodes[n]);
        node.state = to;
        // Who acted, as a scheduler records it: the operator.
        node.reason_set_by = reason.as_ref().map(|_| crate::host::os_user());
        node.reason_time = reason.as_ref().map(|_| now);
        node.reason = reason.clone();
        // The state alone, as a scheduler keeps it: the event is the
        // deriver's (`engine::derive`).
        self.sched_dirty = true;
    }

    fn jobs_on(&self, node: &str) -> Vec<usize> {
        (0..self.jobs.len())
            .filter(|&k| {
                self.jobs[k].job.state.holds_resources()
                    && self.jobs[k].job.nodes.iter().any(|x| x == node)
            })
            .collect()
    }

    /// Applies an action, step by step, and reads each step back. An error
    /// means the action was not applicable at all (no such node or job).
    pub fn apply(&mut self, cmd: &Action) -> Result<Vec<Step>, SimError> {
        let steps = self.apply_steps(cmd)?;
        // Requeued jobs wait for their begin time like Slurm's, then compete.
        if self.sched_dirty {
            super::scheduler::schedule(self);
        }
        Ok(steps)
    }

    /// The sim's calls for `a`, each said by `who` (the simulated
    /// scheduler, or a recording that sends nothing).
    pub fn calls_as(who: &str, a: &Action, jobs: &[String]) -> Vec<String> {
        Sim::calls(a, jobs)
            .into_iter()
            .map(|c| match c.split_once(": ") {
                Some((cond, rest)) if cond.starts_with("on a ") => format!("{cond}: {who} {rest}"),
                _ => format!("{who} {c}"),
            })
            .collect()
    }

    /// The steps `apply` will take for `cmd`, in the words of their
    /// `what`, before anything is applied: what the preview says will be
    /// sent. `jobs` are the jobs the action ends (the blast radius's: a
    /// drain's, a requeue's whole gang). A step's line may go on after
    /// its `what` with what it sets (a reason, a priority).
    pub fn calls(cmd: &Action, jobs: &[String]) -> Vec<String> {
        let detail = match cmd {
            Action::Cordon { reason, .. }
            | Action::Drain { reason, .. }
            | Action::SetReason { reason, .. } => format!(" (reason `{reason}`)"),
            Action::Priority { value, .. } => format!(" to {value}"),
            _ => String::new(),
        };
        let what = format!("{} {}{detail}", cmd.verb(), cmd.target());
        let ended = |verb: &'static str| jobs.iter().map(move |j| format!("{verb} {j}"));
        match cmd {
            Action::Drain { requeue, .. } => std::iter::once(what)
                .chain(ended(if *requeue { "requeue" } else { "cancel" }))
                .collect(),
            Action::Preempt {
                grace_s: Some(_), ..
            } => jobs
                .iter()
                .map(|j| format!("signal {j} SIGUSR1"))
                .chain(ended("requeue"))
                .collect(),
            Action::Requeue { .. } | Action::Preempt { .. } => ended("requeue").collect(),
            Action::Validate { node, level } => {
                let reservation = format!("nightshift-validate-{node}");
                vec![
                    format!("reserve {node} ({reservation})"),
                    format!("check {node} (dcgmi diag -r {level} -j)"),
                    format!("on a pass: end {reservation}: {node} back in service"),
                    format!("on a failure: end {reservation}: {node} kept out"),
                ]
            }
            _ => vec![what],
        }
    }

    /// A drain: the node, then its jobs' gangs requeued (or cancelled);
    /// a requeue the scheduler would refuse is not sent.
    fn drain_steps(
        &mut self,
        what: String,
        node: &str,
        reason: &str,
        requeue: bool,
    ) -> Result<Vec<Step>, SimError> {
        let n = self.node_ix(node)?;
        self.set_node_state(n, NodeState::Drain, Some(reason.to_string()));
        let mut victims: Vec<usize> = Vec::new();
        for k in self.jobs_on(node) {
            for g in self.gang_of(k) {
                if !victims.contains(&g) {
                    victims.push(g);
                }
            }
        }
        // A requeue the scheduler would refuse is not sent.
        let (refusing, victims): (Vec<usize>, Vec<usize>) = victims
            .into_iter()
            .partition(|&k| requeue && self.jobs[k].job.requeueable == Some(false));
        let mut job_steps = self.end_jobs_steps(&victims, requeue);
        job_steps.extend(
            refusing
                .iter()
                .map(|&k| Step::refuses_requeue(&self.jobs[k].job.id, node)),
        );
        // Jobs that would not go keep running: the node is draining.
        if !self.jobs_on(node).is_empty() {
            Arc::make_mut(&mut self.nodes[n]).state = NodeState::Draining;
        }
        let x = &self.nodes[n];
        let seen = matches!(x.state, NodeState::Drain | NodeState::Draining)
            && x.reason.as_deref() == Some(reason);
        Ok(std::iter::once(step(what, seen, show_node(x)))
            .chain(job_steps)
            .collect())
    }

    /// A requeue or a preemption of a running job's gang; a soft
    /// preemption signals it first, and a job that can checkpoint writes
    /// one within the grace period.
    fn requeue_steps(
        &mut self,
        what: String,
        cmd: &Action,
        job: &str,
    ) -> Result<Vec<Step>, SimError> {
        let i = self.job_ix(job)?;
        if !self.jobs[i].job.state.holds_resources() {
            return Ok(vec![failed(
                what,
                format!(
                    "job {job} is {}: only running jobs can be requeued",
                    self.jobs[i].job.state.as_str()
                ),
                show_job(&self.jobs[i].job),
            )]);
        }
        let gang = self.gang_of(i);
        let mut steps = Vec::new();
        if let Action::Preempt {
            grace_s: Some(g), ..
        } = cmd
        {
            // The sim models soft preemption: a job that can
            // checkpoint (not hung, with a checkpoint it reports)
            // writes one on the signal, within the grace period.
            let site = crate::engine::SiteParams::default();
            let now = self.now;
            for &k in &gang {
                let j = &self.jobs[k];
                let write = crate::engine::restore::write_time(&j.job, &site).value;
                let id = j.job.id.clone();
                let fits = write.is_some_and(|w| w <= *g as f64);
                let seen = if j.hung {
                    format!("job {id} is hung: no checkpoint")
                } else if fits && j.job.checkpoint.interval_s.is_some() {
                    self.jobs[k].job_mut().checkpoint.last = Some(now).into();
                    format!("job {id} wrote its checkpoint")
                } else {
                    format!("job {id} wrote no checkpoint within the grace period")
                };
                steps.push(step(format!("signal {id} SIGUSR1"), true, seen));
            }
        }
        steps.extend(self.end_jobs_steps(&gang, true));
        Ok(steps)
    }

    /// The simulated site's check: DCGM's diagnostics fail on a GPU that
    /// still shows a hardware fault (an Xid that takes it out, a DBE, a row
    /// remap pending or failed); the node is held for the check, resumed
    /// on a pass, drained with the failing test as its reason otherwise.
    fn validate_steps(&mut self, node: &str, level: u8) -> Result<Vec<Step>, SimError> {
        let n = self.node_ix(node)?;
        if self.nodes[n].state == NodeState::Up {
            return Ok(vec![failed(
                format!("validate {node}"),
                format!("{node} is in service: validate a node that is out"),
                show_node(&self.nodes[n]),
            )]);
        }
        let reservation = format!("nightshift-validate-{node}");
        let mut steps = vec![step(
            format!("reserve {node} ({reservation})"),
            true,
            format!("{reservation}: {node}, maintenance"),
        )];
        let failing = self.nodes[n].gpus.iter().find_map(|g| {
            let test = if g
                .last_xid
                .as_ref()
                .is_some_and(|x| matches!(x.code, 79 | 74 | 92 | 94 | 95 | 119 | 120))
            {
                "PCIe"
            } else if g.ecc.dbe_volatile.unwrap_or(0) > 0
                || g.row_remap_failed == Some(true)
                || g.row_remap_pending == Some(true)
                || g.last_xid
                    .as_ref()
                    .is_some_and(|x| matches!(x.code, 48 | 63 | 64))
            {
                "GPU Memory"
            } else {
                return None;
            };
            Some(format!("{test}: GPU {} failed", g.index))
        });
        let check = format!("check {node} (dcgmi diag -r {level} -j)");
        match failing {
            None => {
                self.set_node_state(n, NodeState::Up, None);
                steps.push(step(check, true, "all tests passed".into()));
                let x = &self.nodes[n];
                steps.push(step(
                    format!("end {reservation}: {node} back in service"),
                    x.state == NodeState::Up,
                    show_node(x),
                ));
            }
            Some(why) => {
                let reason = format!("{VALIDATION_FAILED}: {why}");
                self.set_node_state(n, NodeState::Drain, Some(reason.clone()));
                let x = &self.nodes[n];
                steps.push(failed(check, why, show_node(x)));
                steps.push(step(
                    format!("end {reservation}: {node} kept out"),
                    x.reason.as_deref() == Some(reason.as_str()),
                    show_node(x),
                ));
            }
        }
        Ok(steps)
    }

    fn apply_steps(&mut self, cmd: &Action) -> Result<Vec<Step>, SimError> {
        let what = format!("{} {}", cmd.verb(), cmd.target());
        Ok(match cmd {
            Action::Cordon { node, reason } => {
                let n = self.node_ix(node)?;
                if self.nodes[n].state == NodeState::Up {
                    self.set_node_state(n, NodeState::Cordoned, Some(reason.clone()));
                }
                let x = &self.nodes[n];
                vec![step(what, x.state != NodeState::Up, show_node(x))]
            }
            Action::Drain {
                node,
                reason,
                requeue,
            } => self.drain_steps(what, node, reason, *requeue)?,
            Action::Resume { node } => {
                let n = self.node_ix(node)?;
                self.set_node_state(n, NodeState::Up, None);
                let x = &self.nodes[n];
                vec![step(what, x.state == NodeState::Up, show_node(x))]
            }
            Action::Validate { node, level } => self.validate_steps(node, *level)?,
            Action::SetReason { node, reason } => {
                let n = self.node_ix(node)?;
                if self.nodes[n].state == NodeState::Up {
                    return Ok(vec![failed(
                        what,
                        format!("{node} is in service: a reason belongs to a node out of service"),
                        show_node(&self.nodes[n]),
                    )]);
                }
                let now = self.now;
                let x = Arc::make_mut(&mut self.nodes[n]);
                x.reason = Some(reason.clone());
                x.reason_set_by = Some(crate::host::os_user());
                x.reason_time = Some(now);
                vec![step(what, true, show_node(x))]
            }
            Action::Requeue { job } | Action::Preempt { job, .. } => {
                self.requeue_steps(what, cmd, job)?
            }
            Action::Priority { job, value } => {
                let i = self.job_ix(job)?;
                self.jobs[i].job_mut().priority = Some(*value).into();
                self.sched_dirty = true;
                let j = &self.jobs[i].job;
                vec![step(what, j.priority == Some(*value), show_job(j))]
            }
            Action::Hold { job } => {
                let i = self.job_ix(job)?;
                if !self.jobs[i].job.state.is_pending() {
                    return Ok(vec![failed(
                        what,
                        format!(
                            "job {job} is {}: only pending jobs can be held",
                            self.jobs[i].job.state.as_str()
                        ),
                        show_job(&self.jobs[i].job),
                    )]);
                }
                self.jobs[i].blocked = true;
                self.jobs[i].job_mut().reason = Some("JobHeldAdmin".into());
                vec![step(what, true, show_job(&self.jobs[i].job))]
            }
            Action::Release { job } => {
                let i = self.job_ix(job)?;
                if self.jobs[i]
                    .job
                    .reason
                    .as_deref()
                    .is_some_and(|r| r.starts_with("JobHeld"))
                {
                    self.jobs[i].blocked = false;
                    self.jobs[i].job_mut().reason = None;
                    self.sched_dirty = true;
                }
                let j = &self.jobs[i].job;
                let held = j
                    .reason
                    .as_deref()
                    .is_some_and(|r| r.starts_with("JobHeld"));
                vec![step(what, !held, show_job(j))]
            }
        })
    }

    /// Reads the state an action should have left, without changing
    /// anything: (whether it is so, what is seen).
    pub fn observe(&self, cmd: &Action) -> (bool, String) {
        let node = |name: &str| self.nodes.iter().find(|n| n.name == name);
        let job = |id: &str| self.jobs.iter().find(|j| j.job.id == id).map(|j| &j.job);
        let missing = |what: &str| (false, format!("no {what} {}", cmd.target()));
        match cmd {
            Action::Cordon { node: n, .. } => node(n).map_or(missing("node"), |x| {
                (x.state != NodeState::Up, show_node(x))
            }),
            Action::Drain {
                node: n, reason, ..
            }
            | Action::SetReason { node: n, reason } => node(n).map_or(missing("node"), |x| {
                (
                    x.state != NodeState::Up && x.reason.as_ref() == Some(reason),
                    show_node(x),
                )
            }),
            Action::Resume { node: n } => node(n).map_or(missing("node"), |x| {
                (x.state == NodeState::Up, show_node(x))
            }),
            // Passed and resumed, or failed and kept out with its reason:
            // either way the check's end is visible.
            Action::Validate { node: n, .. } => node(n).map_or(missing("node"), |x| {
                (
                    x.state == NodeState::Up
                        || x.reason
                            .as_deref()
                            .is_some_and(|r| r.starts_with(VALIDATION_FAILED)),
                    show_node(x),
                )
            }),
            Action::Requeue { job: id } | Action::Preempt { job: id, .. } => {
                job(id).map_or(missing("job"), |j| {
                    (
                        j.restarts.unwrap_or(0) > 0 || j.state.is_pending(),
                        show_job(j),
                    )
                })
            }
            Action::Priority { job: id, value } => job(id).map_or(missing("job"), |j| {
                (j.priority == Some(*value), show_job(j))
            }),
            Action::Hold { job: id } => job(id).map_or(missing("job"), |j| {
                (j.reason.as_deref() == Some("JobHeldAdmin"), show_job(j))
            }),
            Action::Release { job: id } => job(id).map_or(missing("job"), |j| {
                (
                    !j.reason
                        .as_deref()
                        .is_some_and(|r| r.starts_with("JobHeld")),
                    show_job(j),
                )
            }),
        }
    }
}
