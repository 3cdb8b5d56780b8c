//! Node records: their states (what holds a node back, what the deriver
//! makes of a change), reservations and partitions.

use super::super::wire;
use super::{clean, parse};

/// Slurm's node records carry states, not events: the engine's deriver
/// tells a node already draining at the first read (dated by its reason),
/// its drain once it is drained, and nothing while it stays so.
#[test]
fn node_state_changes_become_incidents() {
    let site = crate::engine::SiteParams::default();
    let drained = parse(fixture!("slurm-22.05/v0.0.38_nodes_draining.json"));
    let mut m = crate::engine::memory::Memory::default();
    let first = clean("lab", 1_796_009_600, &drained.nodes, &[], &[]);
    assert!(first.events.is_empty(), "the source gives no node events");
    m.observe(&first, &site);
    let told = m.derived_events();
    assert_eq!(told.len(), 1, "gpu01 was already draining");
    assert_eq!(told[0].node, "gpu01");
    assert_eq!(told[0].message, "xid79");
    let after = parse(fixture!("slurm-22.05/v0.0.38_nodes_drained.json"));
    let second = clean("lab", 1_796_009_700, &after.nodes, &[], &[]);
    m.observe(&second, &site);
    let last = m.derived_events().last().expect("event");
    assert_eq!(last.label(), "NODE DRAIN");
    assert_eq!(last.time, 1_796_009_700);
    let third = clean("lab", 1_796_009_800, &after.nodes, &[], &[]);
    m.observe(&third, &site);
    assert_eq!(m.derived_events().len(), 2, "no change, no incident");
}

/// slurmd answering late for two seconds after `scontrol update
/// state=resume` (slurmctld: ALLOCATED+NOT_RESPONDING, then "now
/// responding", never DOWN) opens nothing (issue 60: it opened NODE DOWN
/// incidents); a node DOWN and NOT_RESPONDING for longer than the hold
/// is one, dated when it was first read so; a node DOWN at the first read
/// is one at once.
#[test]
fn a_not_responding_flicker_after_resume_opens_nothing_and_a_lasting_down_does() {
    use crate::engine::incidents::IncidentKind;
    let (site, cat) = (
        crate::engine::SiteParams::default(),
        crate::engine::xid::XidCatalog::default(),
    );
    let text = fixture!("slurm-22.05/v0.0.38_nodes_drained.json");
    let with = |state: &str, flags: &[&str], reason: Option<&str>| {
        let mut env: serde_json::Value = serde_json::from_str(text).expect("fixture");
        if let Some(n) = env["nodes"].as_array_mut().and_then(|n| n.get_mut(1)) {
            n["state"] = state.into();
            n["state_flags"] = serde_json::json!(flags);
            n["reason"] = reason.unwrap_or("").into();
        }
        parse(&env.to_string()).nodes
    };
    let name = parse(text).nodes[1].name.clone();
    let node_incidents = |m: &crate::engine::memory::Memory, c: &crate::model::Cluster| {
        m.base(c, &site, &cat)
            .incidents
            .into_iter()
            .filter(|i| i.kind == IncidentKind::Node && i.node == name && i.is_open())
            .collect::<Vec<_>>()
    };
    let t0 = 1_796_009_600;
    let mut m = crate::engine::memory::Memory::default();
    let steps: [(i64, &str, &[&str]); 4] = [
        (0, "allocated", &[]),
        (2, "allocated", &["NOT_RESPONDING"]),
        (4, "allocated", &["NOT_RESPONDING"]),
        (6, "allocated", &[]),
    ];
    let mut last = None;
    for (dt, state, flags) in steps {
        let c = clean("lab", t0 + dt, &with(state, flags, None), &[], &[]);
        m.observe(&c, &site);
        assert!(node_incidents(&m, &c).is_empty(), "at +{dt}s");
        last = Some(c);
    }
    assert!(last.is_some());
    // Down and not responding, and staying so.
    let down = t0 + 100;
    for dt in (0..=40).step_by(2) {
        let nodes = with("down", &["NOT_RESPONDING"], Some("Not responding"));
        let c = clean("lab", down + dt, &nodes, &[], &[]);
        m.observe(&c, &site);
        let open = node_incidents(&m, &c);
        if dt < crate::engine::derive::DOWN_HOLD_S {
            assert!(open.is_empty(), "at +{dt}s: {open:?}");
        } else {
            assert_eq!(open.len(), 1, "at +{dt}s");
            assert_eq!(open[0].label, "NODE DOWN");
            assert_eq!(open[0].time, down);
        }
    }
    // A process that reads it only now (a one-shot `get incidents`).
    let nodes = with("down", &["NOT_RESPONDING"], Some("Not responding"));
    let c = clean("lab", down + 600, &nodes, &[], &[]);
    let b = crate::engine::memory::base_of_one(&c, &site, &cat);
    assert!(
        b.incidents
            .iter()
            .any(|i| i.kind == IncidentKind::Node && i.node == name && i.label == "NODE DOWN"),
        "{:?}",
        b.incidents
    );
}

/// Node state flags the scheduler uses to keep a node from new work
/// (issue 38: a maintenance reservation read as free capacity): the node
/// is reserved, never up, with the flag's meaning as its reason when it
/// has none; a drain still wins; a powered-down node (woken for a job)
/// stays capacity.
#[test]
fn node_state_flags_that_hold_a_node_back_are_not_capacity() {
    use super::map::{held_back, node_state};
    use crate::model::NodeState;
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    for flags in [
        &["MAINTENANCE"][..],
        &["RESERVED"],
        &["MAINTENANCE", "RESERVED"],
        &["INVALID_REG"],
        &["POWERING_DOWN"],
        &["BLOCKED"],
    ] {
        assert_eq!(
            node_state(&s(&["IDLE"]), &s(flags)),
            NodeState::Reserved,
            "{flags:?}"
        );
        assert!(!node_state(&s(&["IDLE"]), &s(flags)).schedulable());
    }
    // v0.0.38 puts the flags after the base state in one list.
    assert_eq!(
        node_state(&s(&["IDLE", "MAINTENANCE"]), &[]),
        NodeState::Reserved
    );
    assert_eq!(
        node_state(&s(&["IDLE"]), &s(&["DRAIN", "MAINTENANCE"])),
        NodeState::Drain
    );
    assert_eq!(
        node_state(&s(&["IDLE"]), &s(&["POWERED_DOWN"])),
        NodeState::Up
    );
    assert_eq!(
        held_back(&["IDLE", "MAINTENANCE"]),
        Some("in a maintenance reservation")
    );
}

/// A maintenance reservation's nodes say which reservation holds them and
/// until when, and come back (`back_at`) at its end; a reservation not yet
/// begun or already over holds nothing (issue 38).
#[test]
fn a_reservation_names_its_held_nodes_and_when_they_come_back() {
    use super::map::cluster_with;
    use super::wire::{Node, Reservation};
    let now = 1_796_297_295;
    let node = |name: &str| -> Node {
        serde_json::from_value(
            serde_json::json!({"name": name, "state": ["IDLE", "MAINTENANCE", "RESERVED"],
            "gres": "gpu:h100:8"}),
        )
        .expect("node")
    };
    let resv = |name: &str, nodes: &str, start: i64, end: i64| -> Reservation {
        serde_json::from_value(serde_json::json!({"name": name, "node_list": nodes,
            "flags": ["MAINT", "IGNORE_JOBS"],
            "start_time": {"set": true, "infinite": false, "number": start},
            "end_time": {"set": true, "infinite": false, "number": end}}))
        .expect("reservation")
    };
    let nodes = [node("gpu03"), node("gpu04")];
    let m = cluster_with(
        "lab",
        now,
        &nodes,
        &[],
        &[],
        &[
            resv("maint3", "gpu03", now - 60, now + 3600),
            resv("later", "gpu04", now + 600, now + 7200),
        ],
    );
    let n3 = m.cluster.node("gpu03").expect("gpu03");
    assert_eq!(n3.back_at, Some(now + 3600));
    assert!(
        n3.reason
            .as_deref()
            .is_some_and(|r| r.starts_with("in maintenance reservation maint3 until ")),
        "{:?}",
        n3.reason
    );
    let n4 = m.cluster.node("gpu04").expect("gpu04");
    assert_eq!(n4.back_at, None);
    assert_eq!(n4.reason.as_deref(), Some("in a maintenance reservation"));
}

/// slurmrestd 22.05's `/node/dgx2` names the first partition ("a100")
/// for every node; the partitions' own node lists say dgx2 is in h100.
/// Those lists win, so validate's `--partition` is the node's own (issue
/// 58: sbatch refused "Requested node configuration is not available"
/// and the node was left drained with that error as its reason).
#[test]
fn a_nodes_partitions_come_from_the_partitions_node_lists() {
    let nodes = serde_json::json!({"nodes": [
        {"name": "dgx1", "state": "idle", "gres": "gpu:a100:8", "partitions": ["a100"]},
        {"name": "dgx2", "state": "drain", "gres": "gpu:h100:8", "partitions": ["a100"]}
    ]});
    let parts = serde_json::json!({"partitions": [
        {"name": "a100", "nodes": "dgx1"},
        {"name": "h100", "nodes": "dgx2"}
    ]});
    let (nodes, _): (Vec<wire::Node>, _) = wire::list(nodes, "nodes", "node").expect("nodes");
    let (parts, _): (Vec<wire::Partition>, _) =
        wire::list(parts, "partitions", "partition").expect("partitions");
    let c = clean("lab", 0, &nodes, &[], &parts);
    let of = |n: &str| c.node(n).expect("node").partitions.to_vec();
    assert_eq!(of("dgx1"), ["a100"]);
    assert_eq!(of("dgx2"), ["h100"]);
    // Without the partitions' lists, the node's own record is all there is.
    let c = clean("lab", 0, &nodes, &[], &[]);
    assert_eq!(c.node("dgx2").expect("node").partitions.to_vec(), ["a100"]);
}
