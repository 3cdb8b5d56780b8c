//! Domain incidents: the fabric events of several nodes of one failure
//! domain (see [`super::fabric`]) told as one incident of the domain, with
//! the nodes' incidents as its evidence.

use super::SiteParams;
use super::fabric::{Candidate, QUIET_S, group, what_failed};
use super::incidents::{Incident, IncidentJob, Stage};
use super::xid::ActionClass;
use crate::engine::incidents::IncidentKind;
use crate::model::{Cluster, Domain, EventKind, GpuHealth, NodeState, Timestamp};
use crate::text;
use std::collections::BTreeSet;

/// Whether an incident can be part of a domain's: a node's network link,
/// a node gone down (read from its event, not from its label).
fn is_candidate(c: &Cluster, i: &Incident) -> bool {
    match i.kind {
        IncidentKind::Link => true,
        IncidentKind::Node => c.events.iter().any(|e| {
            Some(e.seq) == i.seq
                && matches!(&e.kind, EventKind::NodeState { to, .. } if to == NodeState::Down.as_str())
        }),
        _ => false,
    }
}

/// `incidents` with the ones that are one domain's failure replaced by
/// that domain's incident.
pub fn gather(
    c: &Cluster,
    incidents: Vec<Incident>,
    site: &SiteParams,
    own_remedy: &super::plan::Unusable,
) -> Vec<Incident> {
    // One candidate per fabric event of each node's incident, not one at
    // the incident's start: a node whose run of events began earlier in
    // the hour still joins the others' failure by its newest events, so
    // the grouping is a function of the events alone, the same in every
    // process (issue 39).
    let mut candidates: Vec<Candidate> = Vec::new();
    for (index, i) in incidents
        .iter()
        .enumerate()
        .filter(|(_, i)| is_candidate(c, i))
    {
        let down = i.kind == IncidentKind::Node;
        let before = candidates.len();
        for e in c
            .events
            .iter()
            .filter(|e| e.node == i.node && e.time >= i.time)
        {
            let fabric = match &e.kind {
                EventKind::Link { down: lost, .. } => !down && *lost,
                EventKind::NodeState { to, .. } => down && to == "down",
                _ => false,
            };
            if fabric {
                candidates.push(Candidate {
                    index,
                    node: i.node.as_str(),
                    time: e.time,
                    down,
                });
            }
        }
        if candidates.len() == before {
            candidates.push(Candidate {
                index,
                node: i.node.as_str(),
                time: i.time,
                down,
            });
        }
    }
    let groups = group(
        c,
        &candidates,
        site.domain_window_s as i64,
        site.domain_min_nodes as usize,
    );
    if groups.is_empty() {
        return incidents;
    }
    let absorbed: BTreeSet<usize> = groups
        .iter()
        .flat_map(|(_, m, _)| m.iter().copied())
        .collect();
    let mut out: Vec<Incident> = groups
        .iter()
        .map(|(d, members, span)| {
            let ms: Vec<&Incident> = members.iter().filter_map(|&i| incidents.get(i)).collect();
            domain_incident(c, d, &ms, *span, own_remedy)
        })
        .collect();
    out.extend(
        incidents
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !absorbed.contains(i))
            .map(|(_, x)| x),
    );
    out
}

/// Whether a node's links are still failing: a port down now, or a link
/// lost in the last [`QUIET_S`]; for a node-down failure, the node still
/// down.
fn still_failing(c: &Cluster, node: &str) -> bool {
    let Some(n) = c.node(node) else {
        return false;
    };
    n.state == NodeState::Down
        || n.ib_ports.iter().any(|p| p.is_down() == Some(true))
        || c.events.iter().any(|e| {
            e.node == node && matches!(e.kind, EventKind::Link { .. }) && c.time - e.time < QUIET_S
        })
}

/// The domain's incident: `span` the first and last time of the events
/// that made it one (a member's own run may have begun earlier).
fn domain_incident(
    c: &Cluster,
    d: &Domain,
    members: &[&Incident],
    (first, last_start): (Timestamp, Timestamp),
    own_remedy: &super::plan::Unusable,
) -> Incident {
    let mut nodes: Vec<String> = members.iter().map(|m| m.node.clone()).collect();
    nodes.sort();
    nodes.dedup();
    let links = members.iter().any(|m| m.kind == IncidentKind::Link);
    let still = nodes.iter().any(|n| still_failing(c, n));
    let what = what_failed(&d.level);
    let lost = if links {
        "lost their network link"
    } else {
        "went down"
    };
    let message = format!(
        "{} {}: {} nodes {lost} within {} ({}): the {what}, not the GPUs",
        d.level,
        d.name,
        nodes.len(),
        text::duration(last_start - first),
        nodes.join(", ")
    );
    let mut related: Vec<String> = Vec::new();
    for m in members {
        if !related.contains(&m.label) {
            related.push(m.label.clone());
        }
    }
    let jobs = jobs_hurt(c, members);
    let evidence = evidence_of(members);
    let burning: f64 = members
        .iter()
        .filter_map(|m| m.burning_gpu_hours_per_hour)
        .sum();
    let (stage, status) = stage_of(c, &nodes, still, burning, own_remedy);
    Incident {
        id: format!(
            "dom-{}-{}",
            d.name,
            members.first().map_or(String::new(), |m| m.id.clone())
        ),
        kind: IncidentKind::Domain,
        seq: None,
        time: first,
        node: d.name.clone(),
        gpu: None,
        // One label for the incident's whole life, the grid's word for its
        // domain (issue 39: LEAF DOWN while its ports were down, LEAF FLAP
        // once they were back, so a console and a report disagreed); the
        // status says where it stands now.
        label: format!("{} FAILING", d.level.to_uppercase()),
        related,
        xid: None,
        message,
        severity: GpuHealth::Critical,
        action: ActionClass::CordonDomain,
        stage,
        status,
        drained_by: None,
        drained_at: None,
        jobs,
        evidence,
        burning_gpu_hours_per_hour: (burning > 0.0).then_some(burning),
        domain: Some(d.clone()),
        nodes,
        absorbed: members.iter().map(|m| m.id.clone()).collect(),
    }
}

/// The jobs a domain's failure hurts: those spanning nodes (a single-node
/// job keeps its GPUs and needs no switch), whole gangs. A job gone from
/// the data counts when two of the nodes' events named it.
fn jobs_hurt(c: &Cluster, members: &[&Incident]) -> Vec<IncidentJob> {
    let mut jobs: Vec<IncidentJob> = Vec::new();
    let named = |id: &str| {
        let mut on: Vec<&str> = members
            .iter()
            .filter(|m| m.jobs.iter().any(|j| j.id == id))
            .map(|m| m.node.as_str())
            .collect();
        on.dedup();
        on.len()
    };
    for m in members {
        for j in &m.jobs {
            let multi = match c.job(&j.id) {
                Some(x) => x.nodes.len() > 1,
                None => j.via_gang || named(&j.id) > 1,
            };
            if multi && !jobs.iter().any(|x| x.id == j.id) {
                jobs.push(j.clone());
            }
        }
    }
    jobs
}

/// The nodes' incidents' evidence, each line with its node, oldest first.
fn evidence_of(members: &[&Incident]) -> Vec<String> {
    let mut evidence: Vec<String> = Vec::new();
    let mut sorted: Vec<&&Incident> = members.iter().collect();
    sorted.sort_by_key(|m| (m.time, m.node.clone()));
    for m in sorted {
        evidence.extend(m.evidence.iter().map(|e| format!("{}: {e}", m.node)));
        if m.evidence.is_empty() {
            evidence.push(format!(
                "{}: {} {}: {}",
                m.node,
                text::clock(m.time),
                m.label,
                m.message
            ));
        }
    }
    evidence
}

/// Where a domain's incident stands, and its status line.
fn stage_of(
    c: &Cluster,
    nodes: &[String],
    still: bool,
    burning: f64,
    own_remedy: &super::plan::Unusable,
) -> (Stage, String) {
    let out_of_service: Vec<&String> = nodes
        .iter()
        .filter(|n| c.node(n).is_some_and(|x| !x.state.schedulable()))
        .collect();
    let action = ActionClass::CordonDomain;
    match (still, out_of_service.len() == nodes.len()) {
        (true, false) => (
            Stage::Open,
            format!(
                "{}{}",
                action.advice(),
                if burning > 0.0 {
                    format!(
                        "; its gangs burn {burning:.0} GPU-hours per hour: requeue them from their checkpoints"
                    )
                } else {
                    String::new()
                }
            ),
        ),
        (true, true) => (
            Stage::AwaitingRemedy,
            format!(
                "its {} nodes are out of new work; now {}, then resume them",
                nodes.len(),
                action.remedy()
            ),
        ),
        (false, _) if !out_of_service.is_empty() => (
            Stage::Remedied,
            format!(
                "links quiet for {}; {} of its nodes still out of service: {}",
                text::duration(QUIET_S),
                out_of_service.len(),
                back_to_service(&out_of_service, own_remedy)
            ),
        ),
        (false, _) => (
            Stage::Resolved,
            format!(
                "resolved: links quiet for {} and every node in service",
                text::duration(QUIET_S)
            ),
        ),
    }
}

/// What a quiet domain's nodes still out of service need, in the words
/// their own options say it: each back through its check, except a node
/// whose own GPUs still need their remedy (`own`) (issue 58: "resume them" named h100-06, whose
/// GPU 5 had an open Xid 48). One answer: the domain's options offer the
/// same checks (`options::domain`).
fn back_to_service(out: &[&String], own_remedy: &super::plan::Unusable) -> String {
    let (kept, back): (Vec<&String>, Vec<&String>) = out
        .iter()
        .copied()
        .partition(|n| own_remedy.contains(n.as_str()));
    let join = |v: &[&String]| v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
    match (back.is_empty(), kept.is_empty()) {
        (false, true) => format!("validate and resume {}", join(&back)),
        (false, false) => format!(
            "validate and resume {}; {} stay{} out for {} own GPUs (see {} incident{})",
            join(&back),
            join(&kept),
            if kept.len() == 1 { "s" } else { "" },
            if kept.len() == 1 { "its" } else { "their" },
            if kept.len() == 1 { "its" } else { "their" },
            if kept.len() == 1 { "" } else { "s" },
        ),
        (true, _) => format!(
            "{} stay{} out for {} own GPUs (see {} incident{})",
            join(&kept),
            if kept.len() == 1 { "s" } else { "" },
            if kept.len() == 1 { "its" } else { "their" },
            if kept.len() == 1 { "its" } else { "their" },
            if kept.len() == 1 { "" } else { "s" },
        ),
    }
}

#[cfg(test)]
mod tests;
