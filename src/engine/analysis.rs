//! Everything the console shows from the engine for one snapshot: the queue
//! plan, health verdicts, and the answers for what the on-call is looking
//! at (why and restore for a job, the drain blast radius for a node).

use super::SiteParams;
use super::blast::{Blast, Target, blast};
use super::health::{EccBaseline, GpuVerdict, NodeVerdict, critical_nodes, verdicts};
use super::incidents::{Incident, incidents};
use super::options::{Options, job_options_with, node_options_with};
use super::plan::{Plan, Unusable, plan};
use super::restore::{Restore, restore};
use super::stall::{Stall, StallHistory, stalls};
use super::why::{Why, why};
use super::xid::{ActionClass, XidCatalog};
use crate::model::{Cluster, GpuHealth, Timestamp};
use std::collections::HashMap;
use std::sync::Arc;

/// What the screen is focused on, for the answers that cost a what-if.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Focus {
    #[default]
    None,
    Job(String),
    Node(String),
}

#[derive(Debug, Clone)]
pub enum FocusAnswer {
    Job {
        id: String,
        why: Option<Box<Why>>,
        restore: Option<Box<Restore>>,
        /// Its preemption options, when it runs.
        options: Option<Box<Options>>,
    },
    Node {
        name: String,
        drain: Result<Box<Blast>, String>,
        /// The remediation options, side by side.
        options: Option<Box<Options>>,
    },
}

/// What depends on the snapshot alone: computed once per snapshot, and the
/// one input of every answer (why, restore, blast, incidents) in the TUI and
/// the command line alike, so that they cannot disagree.
#[derive(Debug, Clone, Default)]
pub struct Base {
    /// The snapshot time this answers for.
    pub time: Timestamp,
    /// The queue plan, on capacity that is in service and healthy.
    pub plan: Plan,
    /// Each pending job's place in `plan.estimates`, by id: the console
    /// shows estimates on newer snapshots than the one planned (the
    /// analyst does not plan every snapshot of a big cluster), where a
    /// job's position may have moved.
    pub estimate_of_job: rustc_hash::FxHashMap<String, usize>,
    pub verdicts: Vec<NodeVerdict>,
    pub verdict_of_node: HashMap<String, usize>,
    /// Nodes whose health says drain them: not capacity anywhere.
    pub unusable: Unusable,
    /// Running jobs that make no progress (whole gangs).
    pub stalls: Vec<Stall>,
    /// Every incident with its victims and lifecycle, newest first.
    pub incidents: Vec<Incident>,
}

impl Base {
    /// The base of a single snapshot (the command line): stalls are found
    /// by their hardware Xid only, the sustained signature needs history.
    pub fn compute(
        c: &Cluster,
        prev: Option<&Cluster>,
        site: &SiteParams,
        cat: &XidCatalog,
    ) -> Base {
        let prev = prev.map(EccBaseline::of);
        Base::compute_on(c, prev.as_ref(), site, cat, &StallHistory::default())
    }

    /// The base with what the analyst keeps across snapshots: the last
    /// analysed snapshot's error counters and the stall history.
    pub fn compute_on(
        c: &Cluster,
        prev: Option<&EccBaseline>,
        site: &SiteParams,
        cat: &XidCatalog,
        history: &StallHistory,
    ) -> Base {
        let verdicts = verdicts(c, prev, cat, site);
        let unusable = critical_nodes(&verdicts);
        let plan = plan(c, site, &unusable);
        let estimate_of_job = c
            .jobs
            .iter()
            .enumerate()
            .filter(|(i, _)| plan.estimate(*i).is_some())
            .map(|(i, j)| (j.id.clone(), i))
            .collect();
        let by_node: HashMap<&str, &NodeVerdict> =
            verdicts.iter().map(|v| (v.node.as_str(), v)).collect();
        let stalls = stalls(c, &by_node, history, cat, site);
        let incidents = incidents(c, &by_node, &unusable, &stalls, cat);
        drop(by_node);
        let verdict_of_node = verdicts
            .iter()
            .enumerate()
            .map(|(i, v)| (v.node.clone(), i))
            .collect();
        Base {
            time: c.time,
            plan,
            estimate_of_job,
            verdicts,
            verdict_of_node,
            unusable,
            stalls,
            incidents,
        }
    }

    /// The newest open incident on `node` that asks for a drain: where the
    /// node stands in its repair.
    /// The node's open incident that needs a drain: the most drastic, the
    /// earliest of equals (an Xid 48 with its DBE, not the Xid 63 that the
    /// remap left after it).
    pub fn node_incident(&self, node: &str) -> Option<&Incident> {
        self.incidents
            .iter()
            .filter(|i| i.node == node && i.is_open() && i.action.needs_drain())
            // The first of equals in the list's order (an Xid before the
            // stall it caused).
            .min_by(|a, b| b.action.cmp(&a.action).then(a.time.cmp(&b.time)))
    }

    /// The reason a drain (or cordon) of `node` is given, whichever way it
    /// is asked for (`D` on an incident, a node or a GPU, `O`, the command
    /// line): the node's drain-worthy incident's, else its verdict's; none
    /// for a healthy node (the action says its own default).
    pub fn drain_reason(&self, node: &str) -> Option<String> {
        match self.node_incident(node) {
            Some(i) => Some(i.drain_reason()),
            None => match self.node_verdict(node).map(|v| v.verdict.action) {
                None | Some(ActionClass::None) => None,
                Some(c) => Some(format!("nightshift: {}", c.short())),
            },
        }
    }

    /// The plan's estimate for pending job `id` (looked up by id, so an
    /// analysis of an earlier snapshot answers for the same job).
    pub fn estimate_for(&self, id: &str) -> Option<&super::plan::Estimate> {
        self.estimate_of_job
            .get(id)
            .and_then(|&i| self.plan.estimate(i))
    }

    pub fn incident(&self, id: &str) -> Option<&Incident> {
        self.incidents.iter().find(|i| i.id == id)
    }

    pub fn node_verdict(&self, node: &str) -> Option<&NodeVerdict> {
        self.verdict_of_node
            .get(node)
            .and_then(|&i| self.verdicts.get(i))
    }

    /// A GPU's verdict; `None` when it is healthy.
    pub fn gpu_verdict(&self, node: &str, gpu: u32) -> Option<&GpuVerdict> {
        self.node_verdict(node)
            .and_then(|v| v.gpus.iter().find(|g| g.gpu == gpu))
    }

    pub fn gpu_severity(&self, node: &str, gpu: u32) -> GpuHealth {
        self.gpu_verdict(node, gpu)
            .map_or(GpuHealth::Ok, |v| v.verdict.action.severity())
    }

    pub fn node_severity(&self, node: &str) -> GpuHealth {
        self.node_verdict(node)
            .map_or(GpuHealth::Ok, |v| v.verdict.action.severity())
    }
}

#[derive(Debug, Clone, Default)]
pub struct Analysis {
    /// Shared between the analyses of one snapshot: a new focus reuses it.
    pub base: Arc<Base>,
    pub focus: Option<FocusAnswer>,
}

impl Analysis {
    pub fn compute(
        c: &Cluster,
        prev: Option<&Cluster>,
        focus: &Focus,
        site: &SiteParams,
        cat: &XidCatalog,
    ) -> Analysis {
        Analysis::with_base(Arc::new(Base::compute(c, prev, site, cat)), c, focus, site)
    }

    /// The answers for `focus`, on a base already computed for `c`.
    pub fn with_base(base: Arc<Base>, c: &Cluster, focus: &Focus, site: &SiteParams) -> Analysis {
        let focus = match focus {
            Focus::None => None,
            Focus::Job(id) => c
                .jobs
                .iter()
                .position(|j| &j.id == id)
                .map(|j| (j, running_answers(c, &base, j, site)))
                .map(|(j, running)| FocusAnswer::Job {
                    id: id.clone(),
                    why: if c.jobs[j].state.is_pending() {
                        why(c, j, &base).map(Box::new)
                    } else {
                        None
                    },
                    restore: running.as_ref().and_then(|(r, _)| r.clone()).map(Box::new),
                    options: running.and_then(|(_, o)| o).map(Box::new),
                }),
            Focus::Node(name) => {
                let drain = blast(
                    c,
                    &base,
                    &Target::Drain {
                        reason: String::new(),
                        node: name.clone(),
                        requeue: true,
                    },
                    site,
                );
                let options = drain
                    .as_ref()
                    .ok()
                    .and_then(|b| node_options_with(c, &base, name, site, b.clone()).ok())
                    .map(Box::new);
                Some(FocusAnswer::Node {
                    name: name.clone(),
                    drain: drain.map(Box::new),
                    options,
                })
            }
        };
        Analysis { base, focus }
    }

    pub fn node_verdict(&self, node: &str) -> Option<&NodeVerdict> {
        self.base.node_verdict(node)
    }
}

/// A running job's restore if restarted now and its preemption options,
/// from one what-if: where preempted jobs are requeued, preempting it is
/// requeueing it, and the blast's restore of it is the restore.
fn running_answers(
    c: &Cluster,
    base: &Base,
    j: usize,
    site: &SiteParams,
) -> Option<(Option<Restore>, Option<Options>)> {
    let job = c.jobs.get(j)?;
    if !job.state.holds_resources() {
        return None;
    }
    let hard = Target::Preempt {
        job: job.id.clone(),
        grace_s: None,
    };
    let Ok(b) = blast(c, base, &hard, site) else {
        return Some((restore(c, base, j, site), None));
    };
    let r = if site.preempt_requeues {
        b.killed
            .iter()
            .find(|k| k.id == job.id)
            .map(|k| k.restore.clone())
    } else {
        restore(c, base, j, site)
    };
    let o = job_options_with(c, base, &job.id, None, site, b).ok();
    Some((r, o))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::sim::{Sim, SimConfig};

    #[test]
    fn a_new_focus_reuses_the_snapshots_plan_and_verdicts() {
        let c = Sim::new(SimConfig::default()).expect("sim").snapshot();
        let (site, cat) = (SiteParams::default(), XidCatalog::default());
        let first = Analysis::compute(&c, None, &Focus::Node("h100-03".into()), &site, &cat);
        let second = Analysis::with_base(first.base.clone(), &c, &Focus::Job("4722".into()), &site);
        assert!(Arc::ptr_eq(&first.base, &second.base));
        assert!(
            matches!(&first.focus, Some(FocusAnswer::Node { drain: Ok(b), .. }) if b.killed.len() == 1)
        );
        assert!(matches!(
            &second.focus,
            Some(FocusAnswer::Job { why: Some(_), .. })
        ));
        assert!(second.node_verdict("h100-03").is_some());
    }
}
