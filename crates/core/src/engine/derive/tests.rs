use super::*;
use crate::engine::fixture;
use crate::model::{IbPort, NvLinkErrors};
use std::sync::Arc;

fn cluster(t: Timestamp) -> Cluster {
    let mut c = Cluster {
        name: "t".into(),
        source: "slurm".into(),
        time: t,
        ..Cluster::default()
    };
    fixture::add_node(&mut c, "dgx1", "p", 8);
    fixture::add_node(&mut c, "dgx2", "p", 8);
    fixture::add_node(&mut c, "dgx3", "p", 8);
    c
}

fn set_state(c: &mut Cluster, node: &str, s: NodeState, reason: Option<(&str, Timestamp)>) {
    if let Some(n) = c.nodes.iter_mut().find(|n| n.name == node) {
        let n = Arc::make_mut(n);
        n.state = s;
        n.reason = reason.map(|(r, _)| r.to_string());
        n.reason_time = reason.map(|(_, t)| t);
    }
}

fn node_events(d: &Deriver) -> Vec<(String, String, Timestamp)> {
    d.events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::NodeState { to, .. } => Some((e.node.clone(), to.clone(), e.time)),
            _ => None,
        })
        .collect()
}

/// slurmd answering again two seconds after a resume (`NOT_RESPONDING`,
/// read as down) is no event; a node down for longer than the hold is
/// one, dated when it went; a drain is one at once.
#[test]
fn a_node_down_is_an_event_once_it_lasts_and_a_flicker_is_none() {
    let site = SiteParams::default();
    let mut d = Deriver::default();
    let t0 = 1_796_000_000;
    d.observe(&cluster(t0), None, &site);
    // Flicker: down at +2 s, up at +4 s (slurmctld polled every 2 s).
    let mut c = cluster(t0 + 2);
    set_state(&mut c, "dgx1", NodeState::Down, None);
    d.observe(&c, None, &site);
    d.observe(&cluster(t0 + 4), None, &site);
    for t in (6..120).step_by(2) {
        d.observe(&cluster(t0 + t), None, &site);
    }
    assert!(node_events(&d).is_empty(), "{:?}", node_events(&d));
    // Down and staying down: told once the hold has passed, dated at the
    // first reading that saw it.
    let start = t0 + 200;
    for t in (0..=DOWN_HOLD_S + 4).step_by(2) {
        let mut c = cluster(start + t);
        set_state(
            &mut c,
            "dgx2",
            NodeState::Down,
            Some(("Not responding", start)),
        );
        d.observe(&c, None, &site);
        let told = node_events(&d);
        if t < DOWN_HOLD_S {
            assert!(told.is_empty(), "at +{t}: {told:?}");
        } else {
            assert_eq!(told, [("dgx2".into(), "down".into(), start)], "at +{t}");
        }
    }
    // A drain is told at the first reading.
    let mut c = cluster(start + 60);
    set_state(
        &mut c,
        "dgx2",
        NodeState::Down,
        Some(("Not responding", start)),
    );
    set_state(
        &mut c,
        "dgx3",
        NodeState::Drain,
        Some(("psu -- bob", start + 59)),
    );
    d.observe(&c, None, &site);
    assert_eq!(node_events(&d).len(), 2);
    assert_eq!(
        node_events(&d)[1],
        ("dgx3".into(), "drain".into(), start + 60)
    );
}

/// A node down when first read is an event at once, dated by its
/// reason's time — the same event (the same number) whoever reads it.
#[test]
fn a_node_down_at_the_first_reading_is_an_event_named_alike_everywhere() {
    let site = SiteParams::default();
    let t = 1_796_000_000;
    let mut c = cluster(t);
    set_state(
        &mut c,
        "dgx3",
        NodeState::Down,
        Some(("disk gone", t - 600)),
    );
    let mut a = Deriver::default();
    a.observe(&c, None, &site);
    assert_eq!(node_events(&a), [("dgx3".into(), "down".into(), t - 600)]);
    let mut later = c.clone();
    later.time += 3600;
    let mut b = Deriver::default();
    b.observe(&later, None, &site);
    assert_eq!(a.events()[0].seq, b.events()[0].seq);
    assert!(a.events()[0].seq >= SEQ_BASE);
    // Told by the source itself (a Kubernetes NodeNotReady): not again.
    let mut told = c.clone();
    told.events.push(Event {
        seq: 1,
        time: t - 600,
        node: "dgx3".into(),
        gpu: None,
        kind: EventKind::NodeState {
            from: "up".into(),
            to: "down".into(),
        },
        message: "NodeNotReady".into(),
        jobs: Vec::new(),
    });
    let mut k = Deriver::default();
    k.observe(&told, None, &site);
    assert!(node_events(&k).is_empty());
    // Down with no reason at the first read (slurmd late after a resume
    // cleared it): nothing yet; still down past the hold, an event.
    let mut flicker = cluster(t);
    set_state(&mut flicker, "dgx1", NodeState::Down, None);
    let mut f = Deriver::default();
    f.observe(&flicker, None, &site);
    assert!(node_events(&f).is_empty());
    flicker.time += DOWN_HOLD_S;
    f.observe(&flicker, None, &site);
    assert_eq!(node_events(&f), [("dgx1".into(), "down".into(), t)]);
}

/// A port down is an event at the reading that shows it; a link-downed
/// count that moved between two readings of a port up is a flap; the
/// port coming back is none.
#[test]
fn a_port_down_or_flapped_is_an_event() {
    let site = SiteParams::default();
    let t = 1_796_000_000;
    let port = |state: u32, downed: u64| IbPort {
        device: "mlx5_0".into(),
        port: 1,
        state: Some(state),
        physical_state: Some(if state == 4 { 5 } else { 2 }),
        link_downed: Some(downed),
        ..IbPort::default()
    };
    let with = |t: Timestamp, p: IbPort| {
        let mut c = cluster(t);
        if let Some(n) = c.nodes.iter_mut().find(|n| n.name == "dgx1") {
            Arc::make_mut(n).ib_ports = vec![p].into();
        }
        c
    };
    let mut d = Deriver::default();
    d.observe(&with(t, port(4, 0)), None, &site);
    d.observe(&with(t + 15, port(1, 1)), None, &site);
    d.observe(&with(t + 30, port(4, 1)), None, &site);
    d.observe(&with(t + 45, port(4, 2)), None, &site);
    let links: Vec<(bool, Timestamp)> = d
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Link { down, .. } => Some((*down, e.time)),
            _ => None,
        })
        .collect();
    assert_eq!(links, [(true, t + 15), (false, t + 45)]);
}

/// An NVLink error rate above the drain limit for the hold is one event
/// of its GPU, dated when it first passed the limit; a rate that passes
/// it once and falls back is none.
#[test]
fn a_sustained_nvlink_rate_is_one_storm() {
    let site = SiteParams::default();
    let t = 1_796_000_000;
    let with = |t: Timestamp, flits: u64| {
        let mut c = cluster(t);
        if let Some(n) = c.nodes.iter_mut().find(|n| n.name == "dgx2") {
            let g = &mut Arc::make_mut(n).gpus[3];
            g.nvlink = NvLinkErrors {
                crc_flit: Some(flits).into(),
                ..NvLinkErrors::default()
            };
            g.reading_time = Some(t);
        }
        c
    };
    let mut m = crate::engine::memory::Memory::default();
    // A blip: 1,000 errors in 5 s once (720,000/h), then none.
    let mut flits = 0;
    for k in 0..6 {
        if k == 2 {
            flits += 1000;
        }
        m.observe(&with(t + 5 * k, flits), &site);
    }
    assert!(m.derived_events().is_empty());
    // ~300/s for a minute, read every 5 s.
    let start = t + 100;
    for k in 0..12 {
        flits += 1500;
        m.observe(&with(start + 5 * k, flits), &site);
    }
    let storms: Vec<&Event> = m
        .derived_events()
        .iter()
        .filter(|e| matches!(e.kind, EventKind::NvLink { .. }))
        .collect();
    assert_eq!(storms.len(), 1, "{storms:?}");
    assert_eq!((storms[0].node.as_str(), storms[0].gpu), ("dgx2", Some(3)));
    assert_eq!(storms[0].time, start, "dated when the rate first passed");
}

/// The sim gives what real sources give (issue 60): through its whole
/// night — the storm, both flaps, the operator's drains and resumes — its
/// snapshots carry no event of a derived kind (a node state, a port, an
/// NVLink storm); those are the deriver's alone, and it tells the storm,
/// the flaps and the drained node.
#[test]
fn the_sims_night_has_no_derived_event_kinds_and_the_deriver_tells_them() {
    use crate::sim::{Sim, SimConfig};
    let site = SiteParams::default();
    let mut s = Sim::new(SimConfig::default()).expect("sim");
    let mut m = crate::engine::memory::Memory::default();
    for k in 0..(3600 / 5) {
        if k == 200 {
            s.apply(&crate::model::Action::Cordon {
                node: "a100-02".into(),
                reason: "looked odd".into(),
            })
            .expect("cordon");
        }
        if k == 300 {
            s.apply(&crate::model::Action::Resume {
                node: "a100-02".into(),
            })
            .expect("resume");
        }
        let c = s.snapshot();
        let derived_kind = c.events.iter().find(|e| {
            matches!(
                e.kind,
                EventKind::NodeState { .. } | EventKind::Link { .. } | EventKind::NvLink { .. }
            )
        });
        assert!(derived_kind.is_none(), "at {}: {derived_kind:?}", c.time);
        m.observe(&c, &site);
        s.advance(5);
    }
    let told =
        |f: &dyn Fn(&EventKind) -> bool| m.derived_events().iter().filter(|e| f(&e.kind)).count();
    assert_eq!(
        told(&|k| matches!(k, EventKind::NvLink { .. })),
        1,
        "the storm"
    );
    assert!(
        told(&|k| matches!(k, EventKind::Link { down: true, .. })) >= 8,
        "two flaps of four ports"
    );
    assert!(
        m.derived_events().iter().any(|e| e.node == "a100-02"
            && matches!(&e.kind, EventKind::NodeState { to, .. } if to == "cordoned")),
        "the operator's cordon"
    );
    assert!(
        told(&|k| matches!(k, EventKind::NodeState { from, to } if from == "-" && to == "drain"))
            == 1,
        "the node drained before the night began"
    );
    // The memory, the deriver's state with it, is recorded as JSON.
    let text = serde_json::to_string(&m).expect("recorded");
    let back: crate::engine::memory::Memory = serde_json::from_str(&text).expect("read back");
    assert_eq!(back.derived_events(), m.derived_events());
}
