//! What the guard refuses before anything is sent, from the action, the
//! snapshot and its analysis alone: one set of checks for the guard's
//! preview (`--dry-run` runs them) and for the options, so an option the
//! guard would refuse is shown as unavailable with the guard's reason and
//! is never the recommendation (issue 58).
//!
//! The guard adds what the engine cannot know: the site's policies
//! (read-only, the data's age, the circuit breaker's count in the audit
//! log) and the backend's own refusals. docs/decision-engine.md ("What is
//! available, recommended, refused") says which check is where.

use super::base::Base;
use super::error::EngineError;
use super::incidents::IncidentKind;
use crate::model::{Action, Cluster};

/// Why the guard refuses an action on this snapshot, in the guard's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// It changes nothing (already so; a job that holds nothing): nothing
    /// is sent and nothing is audited.
    Nothing(String),
    /// The scheduler would refuse it, or it cannot do what it says.
    Cannot(String),
    /// The breaker's rule of a failing domain: draining its nodes one by
    /// one takes good GPUs out and fixes nothing (`--force` overrides).
    FailingDomain(String),
}

impl std::fmt::Display for Refused {
    /// In the guard's words (its `Refusal`'s, unforced).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Nothing(s) => write!(f, "nothing to do: {s}"),
            Refused::Cannot(s) => write!(f, "{s}"),
            Refused::FailingDomain(s) => write!(
                f,
                "circuit breaker: {s} (override: --force on the command line, type `force NODE` in the console)"
            ),
        }
    }
}

impl Refused {
    /// The reason, as the guard prints it after its own prefix.
    pub fn reason(&self) -> &str {
        match self {
            Refused::Nothing(s) | Refused::Cannot(s) | Refused::FailingDomain(s) => s,
        }
    }
}

/// Why `a` ends no job when asked to: a job submitted with --no-requeue
/// (Slurm refuses its requeue: "Requested operation is presently
/// disabled") or a bare pod (no Kueue workload or Volcano group to requeue
/// through). nightshift's preempt is a requeue on every backend, so both
/// are refused alike.
pub fn cannot_requeue(c: &Cluster, a: &Action) -> Option<EngineError> {
    let (Action::Requeue { job } | Action::Preempt { job, .. }) = a else {
        return None;
    };
    let j = c.job(job)?;
    if j.requeueable != Some(false) || !j.state.holds_resources() {
        return None;
    }
    Some(if j.pods.is_empty() {
        EngineError::NoRequeue(job.clone())
    } else {
        EngineError::BarePod(job.clone())
    })
}

/// It would change nothing, or the scheduler refuses the requeue it is.
pub fn nothing(a: &Action, c: &Cluster) -> Option<String> {
    a.no_op_reason(c)
        .or_else(|| cannot_requeue(c, a).map(|e| e.to_string()))
}

/// A check needs the whole node: a validation of a node that still runs
/// work is refused — the check would queue behind it, time out, and leave
/// a healthy node out as "validation failed". Says which jobs hold it and
/// when it is empty at the latest (their time limits), and what to do
/// instead.
pub fn still_runs_work(a: &Action, c: &Cluster) -> Option<String> {
    let Action::Validate { node, .. } = a else {
        return None;
    };
    let running: Vec<&crate::model::Job> = c
        .jobs_on_node(node)
        .filter(|j| j.state.holds_resources())
        .collect();
    if running.is_empty() {
        return None;
    }
    let ids: Vec<&str> = running.iter().take(5).map(|j| j.id.as_str()).collect();
    Some(format!(
        "{node} still runs job{} {}{}: the check needs the whole node — {}; or drain it first (`nightshift drain {node} --requeue`), then validate",
        if running.len() == 1 { "" } else { "s" },
        ids.join(", "),
        if running.len() > 5 { ", …" } else { "" },
        match super::validate::busy_until(c, node).flatten() {
            Some(t) => format!(
                "it is empty by {} at the latest (their time limits)",
                crate::text::moment(t, c.time)
            ),
            None => "when it will be empty is not known (a job has no time limit)".into(),
        }
    ))
}

/// The breaker's refusal of a drain whose node's only trouble is its
/// failing domain (a switch flapping under several nodes).
pub fn failing_domain_drain(a: &Action, base: &Base) -> Option<String> {
    let Action::Drain { node, .. } = a else {
        return None;
    };
    let d = base
        .incidents
        .iter()
        .find(|i| i.kind == IncidentKind::Domain && i.is_failing() && i.nodes.contains(node))?;
    let only_fabric = base
        .node_verdict(node)
        .is_none_or(|v| v.verdict.action <= super::xid::ActionClass::CordonDomain);
    only_fabric.then(|| {
        format!(
            "{node} is one of the {} nodes of {} failing at once ({}): the fabric, not this node's GPUs; draining them takes good GPUs out and fixes nothing — cordon the domain's nodes for new multi-node work instead",
            d.nodes.len(),
            d.node,
            d.id
        )
    })
}

/// Its node or job is not in the data.
pub fn missing_target(a: &Action, c: &Cluster) -> Option<String> {
    if a.on_node() && c.node(a.target()).is_none() {
        return Some(format!("no node {} in the current data", a.target()));
    }
    if !a.on_node() && c.job(a.target()).is_none() {
        return Some(format!("no job {} in the current data", a.target()));
    }
    None
}

/// Every check the engine can make, in the guard's order: what the guard's
/// preview of `a` would refuse on this snapshot and base, unforced.
pub fn refusal(a: &Action, c: &Cluster, base: &Base) -> Option<Refused> {
    if let Some(why) = missing_target(a, c) {
        return Some(Refused::Cannot(why));
    }
    nothing(a, c)
        .map(Refused::Nothing)
        .or_else(|| still_runs_work(a, c).map(Refused::Cannot))
        .or_else(|| failing_domain_drain(a, base).map(Refused::FailingDomain))
}
