//! The base: what depends on the snapshot alone, computed once per
//! snapshot — health verdicts, stalls, the queue plan, incidents. Every
//! answer (why, restore, blast, options) reads it; it reads none of them,
//! so the engine's dependencies run one way: base ← answers ← analysis.

use super::SiteParams;
use super::health::{EccBaseline, GpuVerdict, NodeVerdict, critical_nodes, verdicts};
use super::incidents::{Incident, incidents};
use super::plan::{Plan, Unusable, plan};
use super::repeat::{NodeHistory, histories};
use super::stall::{Stall, StallHistory, stalls};
use super::xid::{ActionClass, XidCatalog};
use crate::engine::incidents::IncidentKind;
use crate::model::{Cluster, GpuHealth, Timestamp};
use std::collections::HashMap;

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
    /// Each node's hardware faults within `[engine] repeat_offender`'s
    /// window, by node (nodes with none are not here).
    pub histories: std::collections::BTreeMap<String, NodeHistory>,
}

/// What the base finds wrong in a snapshot, apart from its plan: the
/// base's and the post-mortem's looks' one computation of it.
struct Found {
    stalls: Vec<Stall>,
    histories: std::collections::BTreeMap<String, NodeHistory>,
    incidents: Vec<Incident>,
}

impl Found {
    fn on(
        c: &Cluster,
        verdicts: &[NodeVerdict],
        unusable: &Unusable,
        (site, cat, history): (&SiteParams, &XidCatalog, &StallHistory),
    ) -> Found {
        let by_node: HashMap<&str, &NodeVerdict> =
            verdicts.iter().map(|v| (v.node.as_str(), v)).collect();
        let stalls = stalls(c, &by_node, history, cat, site);
        let histories = histories(c, cat, &site.repeat_offender);
        let mut incidents = incidents(c, &by_node, unusable, &stalls, cat, &histories);
        // Several nodes' fabric events that are one domain's failure: its
        // incident instead of theirs, newest first still.
        if incidents
            .iter()
            .any(|i| i.kind == IncidentKind::Link || i.kind == IncidentKind::Node)
        {
            // The nodes whose own GPUs still need their remedy: a quiet
            // domain does not send them back through a check.
            let own: Unusable = verdicts
                .iter()
                .filter(|v| super::validate::own_remedy_pending(v.verdict.action))
                .map(|v| v.node.clone())
                .collect();
            incidents = super::domains::gather(c, incidents, site, &own);
            incidents.sort_by(|a, b| {
                b.time
                    .cmp(&a.time)
                    .then((a.kind == IncidentKind::Stall).cmp(&(b.kind == IncidentKind::Stall)))
                    .then(b.id.cmp(&a.id))
            });
        }
        Found {
            stalls,
            histories,
            incidents,
        }
    }
}

/// The base's incidents without its plan (the queue's estimates, the
/// largest part of a base at 10,000 nodes): what a post-mortem's look
/// keeps of a moment.
pub fn incidents_on(
    c: &Cluster,
    prev: Option<&EccBaseline>,
    site: &SiteParams,
    cat: &XidCatalog,
    history: &StallHistory,
) -> Vec<Incident> {
    let verdicts = verdicts(c, prev, cat, site);
    let unusable = critical_nodes(&verdicts);
    Found::on(c, &verdicts, &unusable, (site, cat, history)).incidents
}

impl Base {
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
        let Found {
            stalls,
            histories,
            incidents,
        } = Found::on(c, &verdicts, &unusable, (site, cat, history));
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
            histories,
        }
    }

    /// `node`'s hardware faults in the repeat-offender window.
    pub fn history(&self, node: &str) -> Option<&NodeHistory> {
        self.histories.get(node)
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
