//! The fabric: a node's network ports in its verdict, and the failure
//! domains that fail together.
//!
//! Rules (docs/decision-engine.md, "The fabric"):
//! - a node's port that is down now, or that lost its link in the last
//!   [`QUIET_S`], is the node's finding: drain and investigate (reseat the
//!   cable, look at the HCA);
//! - fabric events (an IB link lost, a node down) on at least
//!   `domain_min_nodes` nodes of one failure domain, starting within
//!   `domain_window_s` of the first, are one incident of the narrowest
//!   domain that holds them all: the switch (or rack, or feed), not the
//!   nodes. Its remedy is the domain's: keep the GPUs, cordon the domain's
//!   nodes for new multi-node work, page the network owner. Draining its
//!   nodes takes good GPUs out and fixes nothing.

use super::xid::ActionClass;
use crate::model::{Cluster, Domain, Event, EventKind, Node, Timestamp};
use crate::text;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// A link quiet this long after its last loss is history.
pub const QUIET_S: i64 = 900;

/// Events of one GPU (or one port) closer in time than this belong to one
/// failure (the Xid, the ECC counters it moved, the remap it left pending;
/// a link's repeated losses).
pub const GROUP_GAP_S: i64 = 3600;

/// A node's ports' finding: the action, its line, the evidence.
pub type PortFinding = (ActionClass, String, Vec<String>);

/// A node's ports' verdict: a port down now, a link lost recently. In a
/// failing domain (`failing`), the domain's remedy, not the node's.
pub fn port_verdict(n: &Node, links: &[&Event], failing: Option<&Domain>) -> Option<PortFinding> {
    let mut evidence = Vec::new();
    for p in n.ib_ports.iter().filter(|p| p.is_down() == Some(true)) {
        evidence.push(format!(
            "IB port {} is {} (physical {}){}",
            p.name(),
            p.state_word(),
            p.physical_word(),
            p.link_downed
                .map_or(String::new(), |d| format!(", link downed {d} times"))
        ));
    }
    let mut lost: BTreeMap<&str, (usize, Timestamp)> = BTreeMap::new();
    for e in links {
        if let EventKind::Link { port, .. } = &e.kind {
            let x = lost.entry(port.as_str()).or_insert((0, e.time));
            x.0 += 1;
            x.1 = x.1.max(e.time);
        }
    }
    for (port, (times, last)) in lost {
        let up = n
            .ib_ports
            .iter()
            .find(|p| p.name() == port)
            .is_none_or(|p| p.is_down() != Some(true));
        if up {
            evidence.push(format!(
                "IB port {port} lost its link {times} time(s), last at {}: flapping (quiet for {} clears it)",
                text::clock(last),
                text::duration(QUIET_S)
            ));
        }
    }
    if evidence.is_empty() {
        return None;
    }
    if let Some(d) = failing {
        let action = ActionClass::CordonDomain;
        let summary = format!(
            "{} {} is failing under several nodes at once: {}",
            d.level,
            d.name,
            action.advice()
        );
        return Some((action, summary, evidence));
    }
    let action = ActionClass::DrainInvestigate;
    let summary = format!(
        "{}: {} (reseat the cable, check the HCA and its switch port)",
        action.advice(),
        evidence[0]
    );
    Some((action, summary, evidence))
}

/// A failure domain as the console's domain line shows it: the health of
/// its nodes, summed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DomainView {
    pub level: String,
    pub name: String,
    /// Nodes in it.
    pub nodes: u32,
    pub gpus_total: u32,
    pub gpus_free: u32,
    /// Nodes out of service (drained, down, cordoned).
    pub nodes_out: u32,
    /// Nodes with a port down now.
    pub ports_down: u32,
}

/// The failure domains of `level` in the snapshot, by name. Built for
/// every snapshot the console shows: one pass over the nodes, summing in
/// place (no node's name is copied; other levels are passed over).
pub fn domains_at(c: &Cluster, level: &str) -> Vec<DomainView> {
    let mut at: rustc_hash::FxHashMap<&str, usize> = rustc_hash::FxHashMap::default();
    let mut out: Vec<DomainView> = Vec::new();
    for n in &c.nodes {
        for d in n.domains.iter().filter(|d| d.level == level) {
            let k = *at.entry(d.name.as_str()).or_insert_with(|| {
                out.push(DomainView {
                    level: d.level.clone(),
                    name: d.name.clone(),
                    nodes: 0,
                    gpus_total: 0,
                    gpus_free: 0,
                    nodes_out: 0,
                    ports_down: 0,
                });
                out.len() - 1
            });
            let v = &mut out[k];
            v.nodes += 1;
            v.gpus_total += n.gpu_count;
            v.gpus_free += n.gpus_free();
            v.nodes_out += u32::from(!n.state.schedulable());
            v.ports_down += u32::from(n.ib_ports.iter().any(|p| p.is_down() == Some(true)));
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The nodes of domain `name` (at any level).
pub fn domain_nodes<'c>(c: &'c Cluster, name: &str) -> Vec<&'c Node> {
    c.nodes
        .iter()
        .filter(|n| n.in_domain(name))
        .map(|n| &**n)
        .collect()
}

/// What the grouping reads of an incident: its node, first time, whether
/// it is a fabric event that can be a domain's.
pub struct Candidate<'a> {
    pub index: usize,
    pub node: &'a str,
    pub time: Timestamp,
    /// The node went down (power, a rack), not only its network link.
    pub down: bool,
}

/// Levels that are the network's: a group of nodes that went down (not
/// only their links) is given to a rack or feed of the same size first.
pub fn is_network(level: &str) -> bool {
    let l = level.to_ascii_lowercase();
    [
        "leaf", "spine", "core", "switch", "network", "block", "fabric",
    ]
    .iter()
    .any(|w| l.contains(w))
}

/// Who to page about a failing domain of `level`, and what they check:
/// the network's levels (a Kubernetes `network-block` too) to the network
/// owner; a rack, row, room or power feed to the datacenter; any other to
/// whoever owns what its nodes share (issue 39: `network-block` was paged
/// to "the datacenter: check its power and cooling").
pub fn owner_of(level: &str) -> (&'static str, String) {
    let l = level.to_ascii_lowercase();
    if is_network(level) {
        (
            "the network owner",
            "check the switch and its cables".into(),
        )
    } else if l.contains("nvlink") {
        ("the hardware owner", "check its NVLink switches".into())
    } else if [
        "rack",
        "row",
        "room",
        "power",
        "pdu",
        "zone",
        "hall",
        "datacenter",
    ]
    .iter()
    .any(|w| l.contains(w))
    {
        ("the datacenter", "check its power and cooling".into())
    } else {
        (
            "the owner of what its nodes share",
            format!("check what the nodes of this {level} share"),
        )
    }
}

/// The groups of candidates that are one domain's failure: (the domain,
/// the candidates' indices, the first and last time of the events that
/// made it), by the rule in the module's note.
pub fn group(
    c: &Cluster,
    candidates: &[Candidate<'_>],
    window_s: i64,
    min_nodes: usize,
) -> Vec<(Domain, Vec<usize>, (Timestamp, Timestamp))> {
    // The common case, at any size: nothing to group.
    if candidates.len() < min_nodes.max(2) {
        return Vec::new();
    }
    let node_domains: BTreeMap<&str, &[Domain]> = c
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), &n.domains[..]))
        .collect();
    let size: BTreeMap<&Domain, usize> =
        c.nodes
            .iter()
            .flat_map(|n| n.domains.iter())
            .fold(BTreeMap::new(), |mut m, d| {
                *m.entry(d).or_insert(0) += 1;
                m
            });
    // Widest domains first: a group found in a spine is given to the
    // narrowest domain that holds all its nodes.
    let mut order: Vec<(&Domain, usize)> = size.iter().map(|(d, n)| (*d, *n)).collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let mut taken: BTreeSet<usize> = BTreeSet::new();
    let mut out: Vec<(Domain, Vec<usize>, (Timestamp, Timestamp))> = Vec::new();
    for (d, _) in order {
        let mut inside: Vec<&Candidate> = candidates
            .iter()
            .filter(|k| !taken.contains(&k.index))
            .filter(|k| node_domains.get(k.node).is_some_and(|ds| ds.contains(d)))
            .collect();
        inside.sort_by_key(|k| (k.time, k.index));
        let mut i = 0;
        while i < inside.len() {
            // A candidate may be one of several events of one incident:
            // once its incident is in a group, its other events are too.
            if taken.contains(&inside[i].index) {
                i += 1;
                continue;
            }
            let start = inside[i].time;
            let run: Vec<&Candidate> = inside[i..]
                .iter()
                .filter(|k| !taken.contains(&k.index))
                .take_while(|k| k.time - start <= window_s)
                .copied()
                .collect();
            let nodes: BTreeSet<&str> = run.iter().map(|k| k.node).collect();
            let down = run.iter().all(|k| k.down);
            let home = (nodes.len() >= min_nodes.max(2))
                .then(|| narrowest_common(&nodes, &node_domains, &size, down).unwrap_or(d))
                .filter(|home| evidence_below(home, &nodes, &node_domains));
            if let Some(home) = home {
                // In the order of their first event (the domain incident's
                // id is its first member's).
                let mut members: Vec<usize> = Vec::new();
                for k in &run {
                    if !members.contains(&k.index) {
                        members.push(k.index);
                    }
                }
                taken.extend(members.iter().copied());
                let last = run.last().map_or(start, |k| k.time);
                out.push((home.clone(), members, (start, last)));
                i += 1;
            } else {
                i += 1;
            }
        }
    }
    out
}

/// Whether a switch wider than a leaf (a spine) has its evidence in more
/// than one of the switches below it: at least two of them each with two
/// or more of `nodes` (issue 39: one stray flap under another leaf, 41 s
/// before three nodes of one leaf lost their links, made a spine
/// incident that asked to cordon all four). Nodes whose narrowest network
/// domain is `home` itself, and domains that are not the network's, are
/// not held to it.
fn evidence_below(
    home: &Domain,
    nodes: &BTreeSet<&str>,
    node_domains: &BTreeMap<&str, &[Domain]>,
) -> bool {
    if !is_network(&home.level) {
        return true;
    }
    let mut below: BTreeMap<&Domain, usize> = BTreeMap::new();
    for n in nodes {
        let Some(ds) = node_domains.get(n) else {
            continue;
        };
        let Some(at) = ds.iter().position(|d| d == home) else {
            continue;
        };
        if let Some(child) = ds[..at].iter().rev().find(|d| is_network(&d.level)) {
            *below.entry(child).or_insert(0) += 1;
        }
    }
    below.is_empty() || below.values().filter(|&&n| n >= 2).count() >= 2
}

/// The domain with the fewest nodes that all of `nodes` share; on a tie
/// the one their first node lists first (its leaf before its rack) — for
/// nodes that went down, a rack or feed before a switch.
fn narrowest_common<'d>(
    nodes: &BTreeSet<&str>,
    node_domains: &BTreeMap<&str, &'d [Domain]>,
    size: &BTreeMap<&Domain, usize>,
    down: bool,
) -> Option<&'d Domain> {
    let first = nodes.iter().next()?;
    let theirs = node_domains.get(first)?;
    theirs
        .iter()
        .enumerate()
        .filter(|(_, d)| {
            nodes
                .iter()
                .all(|n| node_domains.get(n).is_some_and(|ds| ds.contains(d)))
        })
        .min_by_key(|(i, d)| {
            (
                size.get(d).copied().unwrap_or(usize::MAX),
                down && is_network(&d.level),
                *i,
            )
        })
        .map(|(_, d)| d)
}

/// Whether `e` is a fabric event a domain's failure is made of: a network
/// link lost, a node gone down.
pub fn is_domain_event(e: &Event) -> bool {
    match &e.kind {
        EventKind::Link { .. } => true,
        EventKind::NodeState { to, .. } => to == "down",
        _ => false,
    }
}

/// The domains failing now, by node: fabric events of the last
/// [`QUIET_S`] grouped as incidents are (each node's first such event
/// since it was last quiet for [`GROUP_GAP_S`]).
pub fn failing_domains(
    c: &Cluster,
    site: &super::SiteParams,
) -> rustc_hash::FxHashMap<String, Domain> {
    let mut firsts: BTreeMap<&str, (Timestamp, Timestamp)> = BTreeMap::new();
    let mut events: Vec<&Event> = c.events.iter().filter(|e| is_domain_event(e)).collect();
    events.sort_by_key(|e| (e.time, e.seq));
    for e in &events {
        let f = firsts.entry(e.node.as_str()).or_insert((e.time, e.time));
        if e.time - f.1 > GROUP_GAP_S {
            *f = (e.time, e.time);
        } else {
            f.1 = e.time;
        }
    }
    let recent: Vec<(&str, Timestamp)> = firsts
        .into_iter()
        .filter(|(_, (_, last))| c.time - last < QUIET_S)
        .map(|(n, (first, _))| (n, first))
        .collect();
    // One candidate per event of each node's current run, as the domain
    // incidents are grouped (`domains::gather`): one rule for both.
    let candidates: Vec<Candidate> = recent
        .iter()
        .enumerate()
        .flat_map(|(index, (node, first))| {
            events
                .iter()
                .filter(move |e| e.node == *node && e.time >= *first)
                .map(move |e| Candidate {
                    index,
                    node,
                    time: e.time,
                    down: false,
                })
        })
        .collect();
    let mut out = rustc_hash::FxHashMap::default();
    for (d, members, _) in group(
        c,
        &candidates,
        site.domain_window_s as i64,
        site.domain_min_nodes as usize,
    ) {
        for i in members {
            out.insert(recent[i].0.to_string(), d.clone());
        }
    }
    out
}

/// A failing domain's word for what failed: the switch, the rack.
pub fn what_failed(level: &str) -> &str {
    match level {
        "leaf" | "spine" | "core" | "switch" => "switch",
        "nvlink" => "NVLink domain",
        "power" | "pdu" => "power feed",
        other => other,
    }
}

#[cfg(test)]
mod owner_tests {
    use super::owner_of;

    /// A Kubernetes level named after its label is paged to its owner: a
    /// network block to the network's, a rack to the datacenter, anything
    /// else to whoever owns what its nodes share (issue 39).
    #[test]
    fn a_domain_is_paged_to_its_owner_by_its_levels_name() {
        assert_eq!(owner_of("leaf").0, "the network owner");
        assert_eq!(owner_of("network-block").0, "the network owner");
        assert_eq!(
            owner_of("cloud.google.com/gce-topology-block").0,
            "the network owner"
        );
        assert_eq!(owner_of("rack").0, "the datacenter");
        assert_eq!(owner_of("power").0, "the datacenter");
        let (who, check) = owner_of("gpu-generation");
        assert_eq!(who, "the owner of what its nodes share");
        assert!(check.contains("gpu-generation"), "{check}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fixture::{add_node, cluster};
    use crate::model::{Domain, NodeState};
    use std::sync::Arc;

    /// The domain line's sums, at one level: each node counted in its own
    /// domain of that level only, the domains by name, other levels left out.
    #[test]
    fn domains_at_a_level_sum_their_nodes_by_name() {
        let mut c = cluster();
        for (name, leaf, rack) in [
            ("n1", "leaf-b", "r1"),
            ("n2", "leaf-a", "r1"),
            ("n3", "leaf-b", "r2"),
        ] {
            add_node(&mut c, name, "gpu", 8);
            let n = Arc::make_mut(c.nodes.last_mut().expect("node"));
            n.domains = vec![Domain::new("leaf", leaf), Domain::new("rack", rack)].into();
        }
        Arc::make_mut(&mut c.nodes[2]).state = NodeState::Drain;
        let leaves = domains_at(&c, "leaf");
        let names: Vec<&str> = leaves.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["leaf-a", "leaf-b"]);
        let b = &leaves[1];
        assert_eq!((b.nodes, b.gpus_total, b.nodes_out), (2, 16, 1), "{b:?}");
        assert!(leaves.iter().all(|d| d.level == "leaf"));
        let racks = domains_at(&c, "rack");
        assert_eq!(racks.iter().map(|d| d.nodes).collect::<Vec<_>>(), [2, 1]);
        assert!(domains_at(&c, "spine").is_empty());
    }
}
