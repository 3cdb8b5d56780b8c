//! A failure domain's incident: one for several nodes' fabric failures, and
//! one answer for its quiet switch.
use super::*;
use crate::engine::analysis::Base;
use crate::engine::fixture::watch;
use crate::engine::memory::Memory;
use crate::engine::xid::XidCatalog;
use crate::model::{Event, IB_STATE_DOWN, JobState};
use crate::sim::{Sim, SimConfig};
use std::sync::Arc;

fn base(c: &Cluster) -> Base {
    Base::compute(c, None, &SiteParams::default(), &XidCatalog::default())
}

const LEAF_NODES: [&str; 4] = ["h100-05", "h100-06", "h100-07", "h100-08"];

#[test]
fn the_leaf_flap_is_one_domain_incident_naming_its_nodes_and_gangs() {
    let mut s = Sim::new(SimConfig::default()).expect("sim");
    // Watched as a console does: the ports' going down is derived from
    // their states, second by second.
    let mut m = Memory::default();
    let (_, b) = watch(&mut s, &mut m, 1230);
    let dom: Vec<&Incident> = b
        .incidents
        .iter()
        .filter(|i| i.kind == IncidentKind::Domain)
        .collect();
    assert_eq!(dom.len(), 1, "{:?}", b.incidents);
    let d = dom[0];
    assert_eq!(d.node, "ib-leaf-2");
    assert_eq!(d.nodes, LEAF_NODES);
    assert_eq!(d.action, ActionClass::CordonDomain);
    assert_eq!(d.stage, Stage::Open);
    assert!(
        d.message
            .contains("4 nodes lost their network link within 15s"),
        "{}",
        d.message
    );
    assert!(
        d.message.contains("the switch, not the GPUs"),
        "{}",
        d.message
    );
    assert!(
        d.status.contains("cordon the domain's nodes"),
        "{}",
        d.status
    );
    // Not four node incidents asking for four drains.
    assert!(
        !b.incidents.iter().any(|i| i.kind == IncidentKind::Link),
        "{:?}",
        b.incidents
    );
    // The two gangs under it, stalled; no single-node job.
    let names: Vec<&str> = d.jobs.iter().filter_map(|j| j.name.as_deref()).collect();
    assert!(
        names.contains(&"megatron-moe-2n") && names.contains(&"dist-eval-2n"),
        "{names:?}"
    );
    assert_eq!(d.jobs.len(), 2, "{:?}", d.jobs);
    assert_eq!(
        d.burning_gpu_hours_per_hour,
        Some(8.0),
        "two gangs of 4 GPUs"
    );
    assert!(
        d.evidence
            .iter()
            .any(|e| e.contains("lost its network link")),
        "{:?}",
        d.evidence
    );
    // Its nodes' verdicts say the domain's remedy, not a drain, and
    // their GPUs stay capacity.
    let v = b.node_verdict("h100-07").expect("verdict");
    assert_eq!(
        v.verdict.action,
        ActionClass::CordonDomain,
        "{}",
        v.verdict.summary
    );
    assert!(
        v.verdict.summary.contains("leaf ib-leaf-2 is failing"),
        "{}",
        v.verdict.summary
    );
    assert!(!b.unusable.contains("h100-07") && !b.unusable.contains("h100-08"));

    // The collective timeout: the gangs fail; the second flap joins
    // the same incident.
    let (_, b) = watch(&mut s, &mut m, 600);
    let d = b
        .incidents
        .iter()
        .find(|i| i.kind == IncidentKind::Domain)
        .expect("domain");
    assert_eq!(
        b.incidents
            .iter()
            .filter(|i| i.kind == IncidentKind::Domain)
            .count(),
        1
    );
    assert!(
        d.jobs.iter().all(|j| j.state_now == Some(JobState::Failed)),
        "{:?}",
        d.jobs
    );
    // Quiet for 15 minutes after the second flap: resolved.
    let (_, b) = watch(&mut s, &mut m, 900);
    let d = b
        .incidents
        .iter()
        .find(|i| i.kind == IncidentKind::Domain)
        .expect("domain");
    assert_eq!(d.stage, Stage::Resolved, "{}", d.status);
    assert!(
        b.node_verdict("h100-07")
            .is_none_or(|v| v.verdict.action < ActionClass::CordonDomain)
    );
}

/// Issue 58, seen on a sim recording at 03:34: the leaf quiet again,
/// its four nodes cordoned. The incident said "resume them" of
/// h100-06, whose GPU 5 has an open Xid 48; h100-07's options said
/// "keep it out until ib-leaf-2 is fixed — ib-leaf-2 is failing"; the
/// switch's options recommended the cordon already done. One state of
/// the switch, one answer: each healthy node back through its check,
/// the others kept out for their own GPUs, everywhere.
#[test]
fn a_quiet_switch_gets_one_answer_from_its_incident_its_nodes_and_itself() {
    use crate::engine::options::{domain_options, node_options};
    let mut s = Sim::new(SimConfig::default()).expect("sim");
    let mut m = Memory::default();
    watch(&mut s, &mut m, 1230);
    for n in LEAF_NODES {
        s.apply(&crate::model::Action::Cordon {
            node: n.into(),
            reason: "ib-leaf-2 failing".into(),
        })
        .expect("cordon");
    }
    // Past the second flap and 15 quiet minutes after it.
    let (c, b) = watch(&mut s, &mut m, 600 + 960);
    let d = b
        .incidents
        .iter()
        .find(|i| i.kind == IncidentKind::Domain)
        .expect("domain");
    assert_eq!(d.stage, Stage::Remedied, "{}", d.status);
    assert!(!d.status.contains("resume them"), "{}", d.status);
    let site = SiteParams::default();
    let own = |n: &str| {
        b.node_verdict(n)
            .is_some_and(|v| crate::engine::validate::own_remedy_pending(v.verdict.action))
    };
    assert!(own("h100-06"), "h100-06's DBE");
    let back: Vec<&str> = LEAF_NODES
        .iter()
        .copied()
        .filter(|n| !own(n) && c.node(n).is_some_and(|x| !x.state.schedulable()))
        .collect();
    assert!(!back.is_empty());
    assert!(
        d.status
            .contains(&format!("validate and resume {}", back.join(", "))),
        "{}",
        d.status
    );
    assert!(d.status.contains("h100-06"), "{}", d.status);
    assert!(!d.status.contains("resume h100-06"), "{}", d.status);
    // Each healthy node: back through its check, never "ib-leaf-2 is
    // failing".
    for n in &back {
        let o = node_options(&c, &b, n, &site).expect("options");
        let r = o.recommended().expect("one");
        assert_eq!(r.name, "validate_resume", "{n}: {o:#?}");
        assert!(!r.why.contains("is failing"), "{n}: {}", r.why);
    }
    // h100-06: its own GPU's drain, never put back.
    let o = node_options(&c, &b, "h100-06", &site).expect("options");
    assert_ne!(o.recommended().expect("one").name, "validate_resume");
    // The switch: the same checks, not the cordon already done.
    let o = domain_options(&c, &b, "ib-leaf-2", &site).expect("options");
    let r = o.recommended().expect("one");
    assert_eq!(r.name, "validate_resume", "{o:#?}");
    assert!(
        r.manual.iter().any(|m| m.starts_with("h100-06 stays out")),
        "{r:#?}"
    );
    let cordon = o
        .options
        .iter()
        .find(|x| x.name == "cordon_domain")
        .expect("cordon");
    assert!(!cordon.recommended);
}

/// Issue 58: the leaf plan's row and the preview of its requeue step,
/// taken after its cordons, are one number ("5m30s" in the plan,
/// "1d00h" at step 6 was seen): the row's requeue terms are computed on
/// the cluster its cordons leave, as the step's preview then is.
#[test]
fn the_leaf_plans_requeue_step_costs_what_its_row_said() {
    use crate::engine::blast::blast;
    use crate::engine::options::{domain_options, kill_terms_of};
    use crate::model::Action;
    let site = SiteParams::default();
    let mut s = Sim::new(SimConfig::default()).expect("sim");
    s.advance(1230);
    let c = s.snapshot();
    let b = base(&c);
    let o = domain_options(&c, &b, "ib-leaf-2", &site).expect("options");
    let row = o
        .options
        .iter()
        .find(|x| x.name == "cordon_domain")
        .expect("the plan");
    let requeues: Vec<&Action> = row
        .steps
        .iter()
        .filter(|a| matches!(a, Action::Requeue { .. }))
        .collect();
    assert!(!requeues.is_empty(), "{row:#?}");
    for a in row
        .steps
        .iter()
        .filter(|a| matches!(a, Action::Cordon { .. }))
    {
        s.apply(a).expect("cordon");
    }
    let after = s.snapshot();
    let ab = base(&after);
    let mut back = Some(0);
    for a in requeues {
        let bl = blast(&after, &ab, a, &site).expect("blast");
        let (_, r, _) = kill_terms_of(&after, &bl);
        back = back.zip(r).map(|(x, y): (i64, i64)| x.max(y));
    }
    assert_eq!(back, row.resume_in_s, "{row:#?}");
}

/// The sim at start with `down` nodes' links lost `apart` seconds apart.
fn with_links_lost(down: &[&str], apart: i64) -> Cluster {
    let mut c = Sim::new(SimConfig::default()).expect("sim").snapshot();
    let last = c.events.iter().map(|e| e.seq).max().unwrap_or(0);
    for (seq, (k, name)) in (last + 1..).zip(down.iter().enumerate()) {
        let n = c.nodes.iter_mut().find(|n| n.name == *name).expect("node");
        let n = Arc::make_mut(n);
        Arc::make_mut(&mut n.ib_ports)[0].state = Some(IB_STATE_DOWN);
        c.events.push(Event {
            seq,
            time: c.time - 30 + k as i64 * apart,
            node: name.to_string(),
            gpu: None,
            kind: EventKind::Link {
                port: "mlx5_0/1".into(),
                down: true,
            },
            message: "IB port mlx5_0/1 went DOWN".into(),
            jobs: Vec::new(),
        });
    }
    c
}

#[test]
fn one_nodes_port_is_that_nodes_incident_and_asks_for_its_drain() {
    let c = with_links_lost(&["h100-07"], 0);
    let b = base(&c);
    let i = b
        .incidents
        .iter()
        .find(|i| i.kind == IncidentKind::Link)
        .expect("link incident");
    assert_eq!((i.node.as_str(), i.label.as_str()), ("h100-07", "IB DOWN"));
    assert_eq!(i.action, ActionClass::DrainInvestigate);
    assert!(!b.incidents.iter().any(|i| i.kind == IncidentKind::Domain));
    let v = b.node_verdict("h100-07").expect("verdict");
    assert_eq!(v.verdict.action, ActionClass::DrainInvestigate);
    assert!(
        v.verdict.summary.contains("IB port mlx5_0/1 is DOWN"),
        "{}",
        v.verdict.summary
    );
    // Two nodes are not a domain's failure (domain_min_nodes is 3).
    let b = base(&with_links_lost(&["h100-07", "h100-08"], 5));
    assert_eq!(
        b.incidents
            .iter()
            .filter(|i| i.kind == IncidentKind::Link)
            .count(),
        2
    );
}

#[test]
fn links_lost_under_two_leaves_at_once_are_the_spines_and_far_apart_are_not_one() {
    let all = ["h100-01", "h100-02", "h100-05", "h100-06", "h100-07"];
    let b = base(&with_links_lost(&all, 3));
    let d: Vec<&Incident> = b
        .incidents
        .iter()
        .filter(|i| i.kind == IncidentKind::Domain)
        .collect();
    assert_eq!(d.len(), 1, "{:?}", b.incidents);
    assert_eq!(d[0].node, "ib-spine-1");
    assert_eq!(d[0].nodes.len(), 5);
    // The same losses a minute apart each: no window holds three.
    let b = base(&with_links_lost(&all, 61));
    assert!(
        !b.incidents.iter().any(|i| i.kind == IncidentKind::Domain),
        "{:?}",
        b.incidents
    );
    assert_eq!(
        b.incidents
            .iter()
            .filter(|i| i.kind == IncidentKind::Link)
            .count(),
        5
    );
}

/// One stray flap under another leaf does not make a spine's incident
/// (issue 39): h100-01 (ib-leaf-1) loses its link, then three nodes of
/// ib-leaf-2 within seconds: the leaf's incident, and h100-01's own.
#[test]
fn a_stray_flap_under_another_leaf_does_not_make_the_spines_incident() {
    let b = base(&with_links_lost(
        &["h100-01", "h100-05", "h100-06", "h100-07"],
        9,
    ));
    let d: Vec<&Incident> = b
        .incidents
        .iter()
        .filter(|i| i.kind == IncidentKind::Domain)
        .collect();
    assert_eq!(d.len(), 1, "{:?}", b.incidents);
    assert_eq!(d[0].node, "ib-leaf-2");
    assert_eq!(d[0].nodes, ["h100-05", "h100-06", "h100-07"]);
    assert!(
        b.incidents
            .iter()
            .any(|i| i.kind == IncidentKind::Link && i.node == "h100-01"),
        "{:?}",
        b.incidents
    );
}

/// Grouping reads the events, not where each node's run of them began
/// (issue 39: a node with an earlier flap in the hour was not grouped
/// again, so two consoles on the same events disagreed): h100-05
/// flapped half an hour ago and loses its link again with h100-06 and
/// h100-07 — the three are the leaf's incident, told over the seconds
/// they failed together.
#[test]
fn a_node_that_flapped_earlier_in_the_hour_joins_its_leafs_failure() {
    let mut c = with_links_lost(&["h100-05", "h100-06", "h100-07"], 4);
    let last = c.events.iter().map(|e| e.seq).max().unwrap_or(0);
    for (k, back) in [(1, 1800), (2, 1790)] {
        c.events.push(Event {
            seq: last + k,
            time: c.time - back,
            node: "h100-05".into(),
            gpu: None,
            kind: EventKind::Link {
                port: "mlx5_0/1".into(),
                down: k == 1,
            },
            message: "IB port mlx5_0/1 flapped".into(),
            jobs: Vec::new(),
        });
    }
    let b = base(&c);
    let d: Vec<&Incident> = b
        .incidents
        .iter()
        .filter(|i| i.kind == IncidentKind::Domain)
        .collect();
    assert_eq!(d.len(), 1, "{:?}", b.incidents);
    assert_eq!(d[0].node, "ib-leaf-2");
    assert_eq!(d[0].nodes, ["h100-05", "h100-06", "h100-07"]);
    assert!(d[0].message.contains("within 8s"), "{}", d[0].message);
    // The node's own verdicts say the same domain is failing.
    let v = b.node_verdict("h100-05").expect("verdict");
    assert!(
        v.verdict.summary.contains("ib-leaf-2"),
        "{}",
        v.verdict.summary
    );
}

/// Nodes of one rack that go down together (a power feed, a rack's
/// switch and PDU): one incident of the rack, not of its leaf switch
/// (the same nodes here), and "went down".
#[test]
fn nodes_down_together_are_their_racks_incident() {
    let mut c = Sim::new(SimConfig::default()).expect("sim").snapshot();
    let last = c.events.iter().map(|e| e.seq).max().unwrap_or(0);
    let down = ["h100-05", "h100-06", "h100-07"];
    for (seq, (k, name)) in (last + 1..).zip(down.iter().enumerate()) {
        let n = c.nodes.iter_mut().find(|n| n.name == *name).expect("node");
        Arc::make_mut(n).state = crate::model::NodeState::Down;
        c.events.push(Event {
            seq,
            time: c.time - 20 + k as i64 * 2,
            node: name.to_string(),
            gpu: None,
            kind: EventKind::NodeState {
                from: "up".into(),
                to: "down".into(),
            },
            message: "Not responding".into(),
            jobs: Vec::new(),
        });
    }
    let b = base(&c);
    let d: Vec<&Incident> = b
        .incidents
        .iter()
        .filter(|i| i.kind == IncidentKind::Domain)
        .collect();
    assert_eq!(d.len(), 1, "{:?}", b.incidents);
    assert_eq!(
        (d[0].node.as_str(), d[0].label.as_str()),
        ("rack-h100-2", "RACK FAILING")
    );
    assert!(
        d[0].message.contains("3 nodes went down within 4s"),
        "{}",
        d[0].message
    );
    assert!(
        !b.incidents.iter().any(|i| i.label == "NODE DOWN"),
        "{:?}",
        b.incidents
    );
}

/// The leaf's incident has one label for its whole life (issue 39: it
/// read LEAF DOWN while its ports were down and LEAF FLAP once they
/// came back, so a console and the report named it differently).
#[test]
fn a_domains_incident_keeps_its_label_as_its_ports_come_back() {
    let mut s = Sim::new(SimConfig::default()).expect("sim");
    let mut labels = Vec::new();
    // Ports down (+20m30s), then back (+23m).
    let mut now = 0;
    let mut m = Memory::default();
    for at in [1230, 1380] {
        let (_, b) = watch(&mut s, &mut m, at - now);
        now = at;
        let i = b
            .incidents
            .iter()
            .find(|i| i.kind == IncidentKind::Domain)
            .expect("the leaf's incident");
        labels.push((i.id.clone(), i.label.clone()));
    }
    assert_eq!(labels[0], labels[1]);
    assert_eq!(labels[0].1, "LEAF FAILING");
}

#[test]
fn the_nvlink_storm_is_an_incident_of_its_gpu() {
    let mut s = Sim::new(SimConfig::default()).expect("sim");
    // The sim gives the counters only: the storm is the deriver's, from
    // the rate they rise at (engine::derive), as on a real source.
    let (c, b) = watch(&mut s, &mut Memory::default(), 1020);
    assert!(
        !c.events
            .iter()
            .any(|e| matches!(e.kind, crate::model::EventKind::NvLink { .. })),
        "the sim tells no storm itself"
    );
    let i = b
        .incidents
        .iter()
        .find(|i| i.kind == IncidentKind::Nvlink)
        .expect("nvlink incident");
    assert_eq!((i.node.as_str(), i.gpu), ("a100-03", Some(1)));
    assert_eq!(i.action, ActionClass::DrainInvestigate);
    assert!(!i.jobs.is_empty(), "the job on the GPU");
    let g = b.gpu_verdict("a100-03", 1).expect("GPU verdict");
    assert_eq!(g.verdict.action, ActionClass::DrainInvestigate);
    // The rate between the two snapshots is the storm's: 44 a second.
    assert!(
        g.verdict
            .evidence
            .iter()
            .any(|e| e.contains("NVLink errors 15") && e.contains("/h above 3600/h")),
        "{:?}",
        g.verdict.evidence
    );
}
