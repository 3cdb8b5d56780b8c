use super::*;
use crate::engine::SiteParams;
use crate::engine::analysis::Base;
use crate::engine::incidents::IncidentKind;
use crate::engine::why::why;
use crate::model::Action;
use crate::sim::{REPAIR_S, Sim, SimConfig};

fn base(s: &Sim) -> (Cluster, Base) {
    let c = s.snapshot();
    let b = Base::compute(&c, None, &SiteParams::default(), &XidCatalog::default());
    (c, b)
}

fn xid79(b: &Base) -> &Incident {
    b.incidents
        .iter()
        .find(|i| i.label == "XID 79")
        .expect("the Xid 79 incident")
}

/// No pending job's advice may point at a node with critical health.
fn no_advice_points_at(c: &Cluster, b: &Base, node: &str) {
    for (j, job) in c.jobs.iter().enumerate() {
        if !job.state.is_pending() {
            continue;
        }
        let w = why(c, j, b).expect("why");
        for s in &w.suggestions {
            assert!(!s.contains(node), "job {}: {s}", job.id);
        }
        if let Some(crate::engine::plan::Estimate::Starts { nodes, .. }) = &w.estimate {
            assert!(
                !nodes.iter().any(|n| n == node),
                "job {} planned on {node}",
                job.id
            );
        }
    }
}

#[test]
fn the_xid_79_goes_from_open_to_resolved_and_names_its_gang_throughout() {
    let mut s = Sim::new(SimConfig::default()).expect("sim");
    let (c, b) = base(&s);
    let i = xid79(&b);
    assert_eq!(
        (i.stage, i.node.as_str(), i.gpu),
        (Stage::Open, "h100-03", Some(3))
    );
    assert!(
        i.status
            .starts_with("drain the node, then reboot it; its gang burns 32 GPU-hours per hour"),
        "{}",
        i.status
    );
    assert_eq!(i.jobs.len(), 1);
    assert_eq!(i.jobs[0].id, "4700");
    assert_eq!(i.jobs[0].state_then, Some(JobState::Running));
    // The stall it caused is its evidence, not a second incident.
    assert_eq!(i.burning_gpu_hours_per_hour, Some(32.0));
    assert!(i.evidence.iter().any(|e| e.contains("the gang stalled")));
    assert!(b.incident("stall-4700").is_none());
    assert!(!b.incidents.iter().any(|x| x.kind == IncidentKind::Stall));
    assert!(b.unusable.contains("h100-03"));
    no_advice_points_at(&c, &b, "h100-03");

    // Drained: awaiting the reboot; the gang is requeued, no longer stalled.
    s.apply(&Action::Drain {
        node: "h100-03".into(),
        reason: "xid79 GPU3".into(),
        requeue: true,
    })
    .expect("drain");
    let (c, b) = base(&s);
    let i = xid79(&b);
    assert_eq!(i.stage, Stage::AwaitingRemedy, "{}", i.status);
    // Drained already: its node's options keep it out for the reboot (not
    // "drain now and requeue"), and the incident says just that.
    let o = crate::engine::options::node_options(&c, &b, "h100-03", &SiteParams::default())
        .expect("options");
    let w = o.options.iter().find(|x| x.recommended).expect("one");
    assert_eq!(w.name, "keep_out");
    assert!(o.options.iter().all(|x| x.name != "drain_now"));
    assert!(
        i.status
            .ends_with("; keep it out: reboot the node, then validate")
            && i.status.ends_with(&w.title),
        "{} vs {}",
        i.status,
        w.title
    );
    assert_eq!(i.drained_by, Some(crate::host::os_user()), "the operator");
    assert_eq!(i.jobs[0].state_then, Some(JobState::Running));
    assert_eq!(i.jobs[0].state_now, Some(JobState::Pending));
    assert_eq!(
        i.burning_gpu_hours_per_hour, None,
        "requeued: no longer stalled"
    );
    // The operator's drain is this incident's stage, not a new incident.
    assert!(
        !b.incidents
            .iter()
            .any(|x| x.kind == IncidentKind::Node && x.node == "h100-03"),
        "{:?}",
        b.incidents.iter().map(|x| &x.label).collect::<Vec<_>>()
    );
    assert!(
        i.evidence.iter().any(|e| e.contains("node drain")),
        "{:?}",
        i.evidence
    );
    no_advice_points_at(&c, &b, "h100-03");

    // The technician reboots it: clean health, still drained.
    s.advance(REPAIR_S as u64 + 1);
    let (c, b) = base(&s);
    let i = xid79(&b);
    assert_eq!(i.stage, Stage::Remedied, "{}", i.status);
    assert!(!b.unusable.contains("h100-03"));
    // One recommendation (issue 39): the incident's line says what the
    // node's options recommend.
    let o = crate::engine::options::node_options(&c, &b, "h100-03", &SiteParams::default())
        .expect("options");
    let winner = o.options.iter().find(|x| x.recommended).expect("one");
    assert_eq!(winner.title, "validate (DCGM level 2), then resume");
    assert!(
        i.status.ends_with(&format!(": {}", winner.title)),
        "{} vs {}",
        i.status,
        winner.title
    );

    s.apply(&Action::Resume {
        node: "h100-03".into(),
    })
    .expect("resume");
    let (_, b) = base(&s);
    assert_eq!(xid79(&b).stage, Stage::Resolved);
}

#[test]
fn one_failure_is_one_incident_with_its_events_as_evidence() {
    let mut s = Sim::new(SimConfig::default()).expect("sim");
    // Watched: the storm and the flap are derived from the readings.
    let m = &mut crate::engine::memory::Memory::default();
    let (_, b) = crate::engine::fixture::watch(&mut s, m, 1800);
    let on =
        |node: &str| -> Vec<&Incident> { b.incidents.iter().filter(|i| i.node == node).collect() };
    // h100-06 GPU 5: the Xid 48, the DBE it counted and the remap it
    // left pending (Xid 63 a minute later) are one failure.
    let h6 = on("h100-06");
    assert_eq!(h6.len(), 1, "{h6:?}");
    assert_eq!(h6[0].label, "XID 48");
    assert_eq!(h6[0].related, vec!["ECC DBE", "XID 63"]);
    assert_eq!(h6[0].action, ActionClass::DrainResetGpu, "the most drastic");
    assert_eq!(h6[0].evidence.len(), 3);
    assert_eq!(h6[0].short_label(), "XID 48 +2");
    // h100-05 GPU 1: the remap event and its ECC counters.
    let h5 = on("h100-05");
    assert_eq!(h5.len(), 1, "{h5:?}");
    assert_eq!(h5[0].related, vec!["ECC"]);
    // h100-03 GPU 3: the Xid 79 and the stall of its gang.
    assert_eq!(on("h100-03").len(), 1);
    // Four GPU failures by then (79, 13, 63, 48), the NVLink storm on
    // a100-03, the leaf switch's flap (its four nodes' links: one
    // incident, see engine::domains) and the node drained before the
    // night began.
    assert_eq!(
        b.incidents.len(),
        7,
        "{:?}",
        b.incidents
            .iter()
            .map(|i| (&i.node, &i.label))
            .collect::<Vec<_>>()
    );
}

#[test]
fn the_xid_13_names_the_job_it_killed() {
    let mut s = Sim::new(SimConfig::default()).expect("sim");
    s.advance(45);
    let (_, b) = base(&s);
    let i = b
        .incidents
        .iter()
        .find(|i| i.label == "XID 13")
        .expect("Xid 13");
    assert_eq!(i.jobs.len(), 1, "{:?}", i.jobs);
    assert_eq!(i.jobs[0].state_then, Some(JobState::Running));
    assert_eq!(i.jobs[0].state_now, Some(JobState::Failed));
    assert_eq!(i.action, ActionClass::RestartJob);
}

/// Blackwell's NVLink Xids 144–150 are catalogued by their unit and the
/// word in the driver's message (issue 38): `Fatal` drains and resets the
/// GPU, `Nonfatal` is watched, a bare code (an exporter's) is looked at —
/// never "unknown Xid". An NVLink link down (Xid 155) in the first minutes
/// after a node's boot is no incident on its own; the same later is.
#[test]
fn blackwell_nvlink_xids_are_told_by_their_word_and_link_down_at_boot_is_quiet() {
    use crate::engine::fixture::{NOW, add_node, cluster};
    use crate::model::{Event, EventKind, GpuHealth};
    let xid = |node: &str, gpu: u32, code: u32, time: i64, message: &str| Event {
        seq: 0,
        time,
        node: node.into(),
        gpu: Some(gpu),
        kind: EventKind::Xid { code },
        message: message.into(),
        jobs: Vec::new(),
    };
    let mut c = cluster();
    for n in ["gb-1", "gb-2", "gb-3", "gb-4", "gb-5"] {
        add_node(&mut c, n, "gb200", 4);
    }
    for n in ["gb-4", "gb-5"] {
        std::sync::Arc::make_mut(c.nodes.iter_mut().find(|x| x.name == n).expect("node"))
            .boot_time = Some(NOW - 1800);
    }
    c.events = vec![
        xid(
            "gb-1",
            0,
            149,
            NOW - 60,
            "NVRM: Xid (PCI:0008:01:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 14 (0x004d8000)",
        ),
        xid(
            "gb-2",
            1,
            145,
            NOW - 60,
            "NVRM: Xid (PCI:0009:01:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 04 (0x004d8000)",
        ),
        xid("gb-3", 2, 147, NOW - 60, ""),
        // Two minutes after gb-4's boot; twenty after gb-5's.
        xid("gb-4", 0, 155, NOW - 1680, "NVRM: Xid 155, link down"),
        xid("gb-5", 0, 155, NOW - 600, "NVRM: Xid 155, link down"),
    ];
    for (i, e) in c.events.iter_mut().enumerate() {
        e.seq = i as u64 + 1;
    }
    let b = Base::compute(&c, None, &SiteParams::default(), &XidCatalog::default());
    let action = |node: &str| b.node_verdict(node).map(|v| v.verdict.action);
    let incident = |node: &str| b.incidents.iter().find(|i| i.node == node);
    assert_eq!(action("gb-1"), Some(ActionClass::DrainResetGpu));
    let fatal = incident("gb-1").expect("the fatal one's incident");
    assert_eq!(fatal.severity, GpuHealth::Critical);
    let gpu = &b.node_verdict("gb-1").expect("verdict").gpus[0].verdict;
    assert!(
        gpu.evidence
            .iter()
            .any(|r| r.contains("Xid 149 (NVLink NETIR unit error, fatal)")),
        "{:?}",
        gpu.evidence
    );
    assert_eq!(action("gb-2"), Some(ActionClass::Watch));
    assert!(incident("gb-2").is_none_or(|i| i.severity != GpuHealth::Critical));
    assert_eq!(action("gb-3"), Some(ActionClass::Investigate));
    assert!(
        !b.incidents
            .iter()
            .any(|i| i.message.contains("unknown Xid"))
    );
    assert!(incident("gb-4").is_none(), "link down at boot: no incident");
    assert!(action("gb-4").is_none_or(|a| a == ActionClass::None));
    assert_eq!(action("gb-5"), Some(ActionClass::DrainInvestigate));
    assert!(incident("gb-5").is_some());
}

/// The NVLink storm's incident says "drain the node and investigate"; its
/// node's recommended option is the drain its catalog remedy names, not a
/// reboot (issue 39: the options recommended "drain now, reboot the
/// node", a guess the incident never made).
#[test]
fn the_nvlink_storms_recommended_option_is_its_incidents_remedy() {
    let mut s = Sim::new(SimConfig::default()).expect("sim");
    let m = &mut crate::engine::memory::Memory::default();
    let (c, b) = crate::engine::fixture::watch(&mut s, m, 2400);
    let i = b
        .incidents
        .iter()
        .find(|i| i.node == "a100-03" && i.label.starts_with("NVLINK"))
        .expect("the NVLink incident");
    assert_eq!(i.action, ActionClass::DrainInvestigate);
    let o = crate::engine::options::node_options(&c, &b, "a100-03", &SiteParams::default())
        .expect("options");
    let winner = o.options.iter().find(|x| x.recommended).expect("one");
    assert_eq!(winner.name, "drain_now", "{}", winner.title);
    assert!(
        winner.manual.iter().any(|m| m.starts_with("investigate")),
        "{:?}",
        winner.manual
    );
}
