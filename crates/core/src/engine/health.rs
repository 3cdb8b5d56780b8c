//! Health verdicts for GPUs and nodes: what is wrong, what to do, and the
//! evidence (counters and events) behind it.
//!
//! Rules: each Xid seen on the GPU (its last Xid and its Xid events in the
//! window) maps to an action through the catalog; a secondary Xid (45)
//! counts only when alone. An uncorrectable (DBE) error or a failed row
//! remap → drain and reset; a pending remap → reset at the next drain; a
//! correctable (SBE) rate above the site threshold → watch. The driver's
//! recovery action, when known, can raise the verdict (node reboot → drain
//! and reboot). The most drastic action wins.

use super::SiteParams;
use super::xid::{ActionClass, XidCatalog};
use crate::model::{Cluster, Event, EventKind, FaultReport, Gpu, RecoveryAction};
use crate::text;
use serde::Serialize;
use std::collections::HashMap;

mod rates;
#[cfg(test)]
pub(crate) use rates::assert_same_rates;
pub use rates::{EccBaseline, Rates};

/// Events older than this no longer drive a verdict.
pub const XID_WINDOW_S: i64 = 24 * 3600;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub action: ActionClass,
    /// One line: the action and its main reason.
    pub summary: String,
    pub evidence: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuVerdict {
    pub node: String,
    pub gpu: u32,
    #[serde(flatten)]
    pub verdict: Verdict,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeVerdict {
    pub node: String,
    #[serde(flatten)]
    pub verdict: Verdict,
    /// The GPUs with anything to say, most drastic first.
    pub gpus: Vec<GpuVerdict>,
}

/// The verdict for one GPU from its counters, its events, and (when known)
/// its correctable-error rate per hour.
pub fn gpu_verdict(
    gpu: &Gpu,
    events: &[&Event],
    sbe_per_hour: Option<f64>,
    cat: &XidCatalog,
    site: &SiteParams,
) -> Verdict {
    let rates = Rates {
        sbe_per_hour,
        ..Rates::default()
    };
    gpu_verdict_with(gpu, events, &[], rates, cat, site)
}

/// What a fault the cluster reports (a condition, a taint) calls for, and
/// the evidence line: an Xid through the catalog, else drain and look.
fn reported(r: &FaultReport, cat: &XidCatalog) -> (ActionClass, String) {
    let since = r
        .since
        .map_or(String::new(), |t| format!(" since {}", text::clock(t)));
    match r.xid {
        Some(code) => (
            cat.action_of(code, Some(&r.message)),
            format!(
                "Xid {code} ({}{}) reported by {}{since}: still set",
                cat.name(code),
                worded(cat, code, Some(&r.message)),
                r.source
            ),
        ),
        None => (
            ActionClass::DrainInvestigate,
            format!("GPU fault reported by {}{since}: {}", r.source, r.message),
        ),
    }
}

/// ", fatal" or ", nonfatal" after an Xid's name, where its message's word
/// decided its action.
fn worded(cat: &XidCatalog, code: u32, message: Option<&str>) -> String {
    cat.worded(code, message)
        .map_or(String::new(), |w| format!(", {}", w.as_str()))
}

/// [`gpu_verdict`] with the faults the cluster reports about the GPU: each
/// is current evidence while it is set, however old.
pub fn gpu_verdict_with(
    gpu: &Gpu,
    events: &[&Event],
    reports: &[&FaultReport],
    rates: Rates,
    cat: &XidCatalog,
    site: &SiteParams,
) -> Verdict {
    let mut found: Vec<(ActionClass, String)> = Vec::new();
    for r in reports {
        found.push(reported(r, cat));
    }
    let mut xids: Vec<(u32, Option<i64>, Option<&str>)> = events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Xid { code } => Some((code, Some(e.time), Some(e.message.as_str()))),
            _ => None,
        })
        .collect();
    if let Some(x) = &gpu.last_xid
        && !xids
            .iter()
            .any(|(c, t, _)| *c == x.code && (*t == x.time || x.time.is_none()))
    {
        xids.push((x.code, x.time, x.message.as_deref()));
    }
    // An Xid a report says is still set is said once, by the report.
    xids.retain(|(c, _, _)| !reports.iter().any(|r| r.xid == Some(*c)));
    let primary = xids.iter().any(|(c, _, _)| !cat.is_secondary(*c))
        || reports
            .iter()
            .any(|r| r.xid.is_some_and(|c| !cat.is_secondary(c)));
    for (code, time, message) in &xids {
        if primary && cat.is_secondary(*code) {
            continue;
        }
        let at = time.map_or(String::new(), |t| format!(" at {}", text::clock(t)));
        found.push((
            cat.action_of(*code, *message),
            format!(
                "Xid {code} ({}{}){at}",
                cat.name(*code),
                worded(cat, *code, *message)
            ),
        ));
    }
    for e in events {
        if let EventKind::NvLink { .. } = e.kind {
            found.push((
                ActionClass::DrainInvestigate,
                format!("{} at {}", e.message, text::clock(e.time)),
            ));
        }
    }
    let ecc = &gpu.ecc;
    if let Some(d) = ecc.dbe_volatile.get().filter(|&d| d > 0) {
        found.push((
            ActionClass::DrainResetGpu,
            format!(
                "uncorrectable ECC errors: {d} volatile, {} aggregate",
                text::opt(ecc.dbe_aggregate.get())
            ),
        ));
    }
    if gpu.row_remap_failed == Some(true) {
        found.push((
            ActionClass::DrainResetGpu,
            "row remap failed: the GPU has no spare rows left (replace it)".into(),
        ));
    }
    if gpu.row_remap_pending == Some(true) {
        found.push((
            ActionClass::ResetNextDrain,
            "row remap pending: takes effect at the next GPU reset".into(),
        ));
    }
    if let Some(rate) = rates.sbe_per_hour.filter(|&r| r > site.sbe_watch_per_hour) {
        found.push((
            ActionClass::Watch,
            format!(
                "correctable ECC rate {rate:.0}/h above {:.0}/h",
                site.sbe_watch_per_hour
            ),
        ));
    }
    found.extend(nvlink_finding(gpu, rates, site));
    match gpu.recovery_action {
        Some(RecoveryAction::NodeReboot) => found.push((
            ActionClass::DrainReboot,
            "driver recovery action: node reboot".into(),
        )),
        Some(RecoveryAction::GpuReset) => found.push((
            ActionClass::DrainResetGpu,
            "driver recovery action: GPU reset".into(),
        )),
        Some(RecoveryAction::DrainAndReset) => found.push((
            ActionClass::DrainResetGpu,
            "driver recovery action: drain and reset".into(),
        )),
        Some(RecoveryAction::DrainP2p) => found.push((
            ActionClass::DrainInvestigate,
            "driver recovery action: drain peer-to-peer".into(),
        )),
        Some(RecoveryAction::None) | None => {}
    }
    // The first of the most drastic: an Xid before the counters it explains.
    let Some((action, main)) = found.iter().rev().max_by_key(|(a, _)| *a).cloned() else {
        return Verdict {
            action: ActionClass::None,
            summary: "healthy".into(),
            evidence: Vec::new(),
        };
    };
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    Verdict {
        action,
        summary: format!("{}: {main}", action.advice()),
        evidence: found.into_iter().map(|(_, e)| e).collect(),
    }
}

/// NVLink errors at a rate above the site's: watch the links.
fn nvlink_finding(gpu: &Gpu, rates: Rates, site: &SiteParams) -> Option<(ActionClass, String)> {
    let rate = rates
        .nvlink_per_hour
        .filter(|&r| r > site.nvlink_watch_per_hour)?;
    let n = &gpu.nvlink;
    let (action, limit) = if rate > site.nvlink_drain_per_hour {
        (ActionClass::DrainInvestigate, site.nvlink_drain_per_hour)
    } else {
        (ActionClass::Watch, site.nvlink_watch_per_hour)
    };
    Some((
        action,
        format!(
            "NVLink errors {rate:.0}/h above {limit:.0}/h (CRC flit {}, CRC data {}, replay {}, recovery {} in all): a link or its NVSwitch, not the GPU's memory; drain and investigate the fabric if it persists",
            text::opt(n.crc_flit.get()),
            text::opt(n.crc_data.get()),
            text::opt(n.replay.get()),
            text::opt(n.recovery.get())
        ),
    ))
}

/// Errors per hour between two readings of a counter (`now`, `then`).
/// Verdicts for every node with something to say, most drastic first.
/// `prev` (an earlier snapshot's counters) gives correctable-error rates.
pub fn verdicts(
    c: &Cluster,
    prev: Option<&EccBaseline>,
    cat: &XidCatalog,
    site: &SiteParams,
) -> Vec<NodeVerdict> {
    let (by_gpu, by_node, links) = current_events(c, cat);
    // The rates as of each GPU's newest reading (see `EccBaseline`).
    let now = prev.map(|p| EccBaseline::advance(Some(p), c));
    let failing = super::fabric::failing_domains(c, site);
    let mut out = Vec::new();
    for n in &c.nodes {
        let boot = n.boot_time;
        let mut gpus: Vec<GpuVerdict> = n
            .gpus
            .iter()
            .map(|g| {
                // A last Xid from before the node's last boot was cleared
                // by it; one a freshly booted node raises is its noise.
                let cleared;
                let g = match (&g.last_xid, boot) {
                    (Some(x), Some(b))
                        if x.time
                            .is_some_and(|t| t <= b || cat.boot_noise(x.code, t, Some(b))) =>
                    {
                        cleared = Gpu {
                            last_xid: None,
                            ..g.clone()
                        };
                        &cleared
                    }
                    _ => g,
                };
                let events = by_gpu
                    .get(&(n.name.as_str(), g.index))
                    .map_or(&[][..], Vec::as_slice);
                let rates = now
                    .as_ref()
                    .map_or(Rates::default(), |p| p.rates(&n.name, g.index));
                let reports: Vec<&FaultReport> = n
                    .fault_reports
                    .iter()
                    .filter(|r| r.gpu == Some(g.index))
                    .collect();
                GpuVerdict {
                    node: n.name.clone(),
                    gpu: g.index,
                    verdict: gpu_verdict_with(g, events, &reports, rates, cat, site),
                }
            })
            .filter(|v| v.verdict.action != ActionClass::None)
            .collect();
        gpus.sort_by(|a, b| {
            b.verdict
                .action
                .cmp(&a.verdict.action)
                .then(a.gpu.cmp(&b.gpu))
        });
        // Reports naming no GPU the node has (or none at all) are the node's.
        let unplaced: Vec<&FaultReport> = n
            .fault_reports
            .iter()
            .filter(|r| r.gpu.is_none_or(|g| !n.gpus.iter().any(|x| x.index == g)))
            .collect();
        let events = by_node.get(n.name.as_str()).map_or(&[][..], Vec::as_slice);
        let node_level = (!events.is_empty() || !unplaced.is_empty())
            .then(|| {
                gpu_verdict_with(
                    &Gpu::unknown(&n.name, 0),
                    events,
                    &unplaced,
                    Rates::default(),
                    cat,
                    site,
                )
            })
            .filter(|v| v.action != ActionClass::None);
        let links = links.get(n.name.as_str()).map_or(&[][..], Vec::as_slice);
        let fabric = super::fabric::port_verdict(n, links, failing.get(n.name.as_str())).map(
            |(action, summary, evidence)| Verdict {
                action,
                summary,
                evidence,
            },
        );
        out.extend(node_verdict(n, gpus, node_level, fabric));
    }
    out.sort_by(|a, b| {
        b.verdict
            .action
            .cmp(&a.verdict.action)
            .then(a.node.cmp(&b.node))
    });
    out
}

/// A node's verdict from its GPUs' (most drastic first), the node-level
/// reports' and its ports': the worst says what to do, every one's
/// evidence is listed. `None` when none has anything to say.
fn node_verdict(
    n: &crate::model::Node,
    gpus: Vec<GpuVerdict>,
    node_level: Option<Verdict>,
    fabric: Option<Verdict>,
) -> Option<NodeVerdict> {
    let mut worst: Option<(String, &Verdict)> =
        gpus.first().map(|g| (format!("GPU {}", g.gpu), &g.verdict));
    for (which, v) in [
        ("a GPU (the report does not say which)", node_level.as_ref()),
        ("its network", fabric.as_ref()),
    ] {
        if let Some(v) = v
            && worst.as_ref().is_none_or(|(_, w)| v.action > w.action)
        {
            worst = Some((which.to_string(), v));
        }
    }
    let (which, worst) = worst?;
    let verdict = Verdict {
        action: worst.action,
        summary: node_summary(n, &which, worst),
        evidence: fabric
            .iter()
            .flat_map(|v| v.evidence.iter().cloned())
            .chain(
                node_level
                    .iter()
                    .flat_map(|v| v.evidence.iter().map(|e| format!("GPU unknown: {e}"))),
            )
            .chain(gpus.iter().flat_map(|g| {
                g.verdict
                    .evidence
                    .iter()
                    .map(move |e| format!("GPU {}: {e}", g.gpu))
            }))
            .collect(),
    };
    Some(NodeVerdict {
        node: n.name.clone(),
        verdict,
        gpus,
    })
}

/// The events since each node's last boot, within the Xid window: by GPU,
/// and — reports that name the node but not the GPU (Kubernetes' node
/// problem events, a driver message with only a PCI address) — by node.
/// And its network ports' events ([`super::fabric::QUIET_S`]: a link
/// quiet that long is history).
#[allow(clippy::type_complexity)]
fn current_events<'a>(
    c: &'a Cluster,
    cat: &XidCatalog,
) -> (
    HashMap<(&'a str, u32), Vec<&'a Event>>,
    HashMap<&'a str, Vec<&'a Event>>,
    HashMap<&'a str, Vec<&'a Event>>,
) {
    let boots: HashMap<&str, i64> = c
        .nodes
        .iter()
        .filter_map(|n| n.boot_time.map(|b| (n.name.as_str(), b)))
        .collect();
    let mut by_gpu: HashMap<(&str, u32), Vec<&Event>> = HashMap::new();
    // Reports that name the node but not the GPU (Kubernetes' node
    // problem events, a driver message with only a PCI address).
    let mut by_node: HashMap<&str, Vec<&Event>> = HashMap::new();
    // Events from before a node's last boot were cleared by the reboot;
    // a freshly booted node's link noise is no fault on its own.
    let current = |e: &&Event| {
        let boot = boots.get(e.node.as_str()).copied();
        e.time > c.time - XID_WINDOW_S
            && boot.is_none_or(|b| e.time > b)
            && !super::xid::boot_noise(e, boot, cat)
    };
    let mut links: HashMap<&str, Vec<&Event>> = HashMap::new();
    for e in c.events.iter().filter(current) {
        let fabric = e.is_link();
        if fabric && e.time <= c.time - super::fabric::QUIET_S {
            continue;
        }
        if let EventKind::Link { .. } = e.kind {
            links.entry(e.node.as_str()).or_default().push(e);
            continue;
        }
        match e.gpu {
            Some(g) => by_gpu.entry((e.node.as_str(), g)).or_default().push(e),
            None if matches!(e.kind, EventKind::Xid { .. }) => {
                by_node.entry(e.node.as_str()).or_default().push(e)
            }
            None => {}
        }
    }
    (by_gpu, by_node, links)
}

/// A node's verdict in a line. A node already out of service needs its
/// remedy, not a drain.
fn node_summary(n: &crate::model::Node, which: &str, worst: &Verdict) -> String {
    if !n.state.schedulable() && worst.action.needs_drain() {
        format!(
            "{which}: {} already; now {}, then resume it: {}",
            match n.state {
                crate::model::NodeState::Cordoned => "cordoned (jobs still run: drain it)",
                crate::model::NodeState::Draining => "draining",
                _ => "out of service",
            },
            worst.action.remedy(),
            worst.evidence.first().map_or("", String::as_str)
        )
    } else {
        format!("{which}: {}", worst.summary)
    }
}

/// Nodes whose health says they must be drained: their GPUs are not
/// capacity anywhere in the engine (the queue plan, restore, why), and no
/// suggestion points at them.
pub fn critical_nodes(verdicts: &[NodeVerdict]) -> rustc_hash::FxHashSet<String> {
    verdicts
        .iter()
        .filter(|v| v.verdict.action.needs_drain())
        .map(|v| v.node.clone())
        .collect()
}

/// How loudly to show an event: from the catalog's action for it; a node
/// going down is critical.
pub fn event_severity(e: &Event, cat: &XidCatalog) -> crate::model::GpuHealth {
    match &e.kind {
        EventKind::NodeState { to, .. } if to == "down" => crate::model::GpuHealth::Critical,
        _ => event_action(e, cat).severity(),
    }
}

/// The action an incident calls for, by itself.
pub fn event_action(e: &Event, cat: &XidCatalog) -> ActionClass {
    match &e.kind {
        EventKind::Xid { code } => cat.action_of(*code, Some(&e.message)),
        EventKind::Ecc {
            dbe,
            remap_failed,
            remap_pending,
            ..
        } => {
            if dbe.unwrap_or(0) > 0 || *remap_failed == Some(true) {
                ActionClass::DrainResetGpu
            } else if *remap_pending == Some(true) {
                ActionClass::ResetNextDrain
            } else {
                ActionClass::Watch
            }
        }
        EventKind::NodeState { to, .. } if to == "down" => ActionClass::Investigate,
        EventKind::NodeState { .. } => ActionClass::None,
        // A node's own port or a GPU's links: drain it and look (reseat
        // the cable, check the HCA); a domain's is grouped elsewhere.
        EventKind::Link { .. } | EventKind::NvLink { .. } => ActionClass::DrainInvestigate,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LastXid;
    use crate::sim::{Sim, SimConfig};

    fn verdict(g: &Gpu) -> Verdict {
        gpu_verdict(g, &[], None, &XidCatalog::default(), &SiteParams::default())
    }

    #[test]
    fn counters_and_xids_give_actions_with_evidence() {
        let mut g = Gpu::unknown("n", 0);
        assert_eq!(verdict(&g).action, ActionClass::None);
        g.row_remap_pending = Some(true);
        assert_eq!(verdict(&g).action, ActionClass::ResetNextDrain);
        g.ecc.dbe_volatile = Some(2).into();
        let v = verdict(&g);
        assert_eq!(v.action, ActionClass::DrainResetGpu);
        assert!(
            v.evidence
                .iter()
                .any(|e| e.contains("uncorrectable ECC errors: 2"))
        );
        assert!(v.evidence.iter().any(|e| e.contains("row remap pending")));
        g.last_xid = Some(Box::new(LastXid {
            code: 79,
            time: Some(0),
            message: None,
        }));
        assert_eq!(verdict(&g).action, ActionClass::DrainReboot);
    }

    #[test]
    fn unknown_xids_are_investigated_and_xid45_alone_restarts() {
        let mut g = Gpu::unknown("n", 0);
        g.last_xid = Some(Box::new(LastXid {
            code: 4242,
            time: None,
            message: None,
        }));
        let v = verdict(&g);
        assert_eq!(v.action, ActionClass::Investigate);
        assert!(v.summary.contains("unknown Xid"));
        g.last_xid = Some(Box::new(LastXid {
            code: 45,
            time: None,
            message: None,
        }));
        assert_eq!(verdict(&g).action, ActionClass::RestartJob);
    }

    #[test]
    fn recovery_action_node_reboot_means_drain_and_reboot() {
        let mut g = Gpu::unknown("n", 0);
        g.recovery_action = Some(RecoveryAction::NodeReboot);
        assert_eq!(verdict(&g).action, ActionClass::DrainReboot);
    }

    #[test]
    fn a_high_sbe_rate_is_watched() {
        let mut g = Gpu::unknown("n", 0);
        let cat = XidCatalog::default();
        let site = SiteParams::default();
        g.ecc.sbe_aggregate = Some(10).into();
        let mut later = g.clone();
        later.ecc.sbe_aggregate = Some(510).into();
        let rate = rates::rate(
            later.ecc.sbe_aggregate.get(),
            g.ecc.sbe_aggregate.get(),
            3600,
        );
        assert_eq!(rate, Some(500.0));
        assert_eq!(
            gpu_verdict(&later, &[], rate, &cat, &site).action,
            ActionClass::Watch
        );
        assert_eq!(
            gpu_verdict(&later, &[], Some(5.0), &cat, &site).action,
            ActionClass::None
        );
    }

    /// NVLink errors: the rate between two snapshots decides, not the
    /// total — a link with 5,000 errors from last week that stands still is
    /// history; 200 more in ten minutes is a failing link.
    #[test]
    fn a_rising_nvlink_error_count_is_watched_and_a_still_one_is_not() {
        use crate::engine::fixture::{add_node, cluster};
        let mut c = cluster();
        add_node(&mut c, "gpu01", "p", 8);
        let set = |c: &mut Cluster, flit: u64, replay: u64| {
            let n = std::sync::Arc::make_mut(&mut c.nodes[0]);
            n.gpus[3].nvlink = crate::model::NvLinkErrors {
                crc_flit: Some(flit).into(),
                crc_data: Some(0).into(),
                replay: Some(replay).into(),
                recovery: crate::model::Count::UNKNOWN,
            };
        };
        set(&mut c, 4000, 1000);
        let cat = XidCatalog::default();
        let site = SiteParams::default();
        let before = EccBaseline::of(&c);
        let mut later = c.clone();
        later.time += 600;
        assert!(
            verdicts(&later, Some(&before), &cat, &site).is_empty(),
            "a high total that stands still is no verdict"
        );
        set(&mut later, 4150, 1050);
        let v = verdicts(&later, Some(&before), &cat, &site);
        let gpu = v
            .iter()
            .find(|n| n.node == "gpu01")
            .and_then(|n| n.gpus.iter().find(|g| g.gpu == 3))
            .expect("GPU 3 has a verdict");
        assert_eq!(gpu.verdict.action, ActionClass::Watch);
        let said = gpu.verdict.evidence.join(" | ");
        assert!(
            said.contains("NVLink errors 1200/h above 60/h")
                && said.contains("CRC flit 4150")
                && said.contains("replay 1050")
                && said.contains("recovery -"),
            "{said}"
        );
        // Without an earlier snapshot there is no rate, whatever the total.
        assert!(verdicts(&later, None, &cat, &site).is_empty());
    }

    /// A counter's rate is taken over its own readings' times (issue 37):
    /// the scheduler's snapshots (every 2 s) outnumber dcgm-exporter's
    /// readings (every 5 s), and a snapshot that brings no new reading
    /// keeps the last rate — an NVLink storm does not read healthy three
    /// samples in four. A counter that goes down is a reset: no rate.
    #[test]
    fn a_rate_is_taken_over_the_counters_own_readings() {
        use crate::engine::fixture::{add_node, cluster};
        let mut c = cluster();
        add_node(&mut c, "dgx2", "p", 8);
        let t0 = c.time;
        let read = |c: &mut Cluster, at: i64, flit: u64| {
            let n = std::sync::Arc::make_mut(&mut c.nodes[0]);
            n.gpus[3].reading_time = Some(at);
            n.gpus[3].nvlink = crate::model::NvLinkErrors {
                crc_flit: Some(flit).into(),
                crc_data: Some(0).into(),
                replay: Some(0).into(),
                recovery: Some(0).into(),
            };
        };
        let (cat, site) = (XidCatalog::default(), SiteParams::default());
        let action = |c: &Cluster, b: &EccBaseline| {
            verdicts(c, Some(b), &cat, &site)
                .iter()
                .find(|n| n.node == "dgx2")
                .and_then(|n| n.gpus.iter().find(|g| g.gpu == 3))
                .map(|g| g.verdict.action)
        };
        // ~300 errors a second, read every 5 s; snapshots every 2 s.
        read(&mut c, t0, 0);
        let mut base = EccBaseline::of(&c);
        let mut seen = Vec::new();
        for step in 1..=10i64 {
            let now = t0 + 2 * step;
            c.time = now;
            let reading = now - now % 5;
            read(&mut c, reading, 300 * (reading - t0) as u64);
            if reading > t0 {
                seen.push(action(&c, &base));
            }
            base = EccBaseline::advance(Some(&base), &c);
        }
        assert!(
            seen.iter()
                .all(|a| *a == Some(ActionClass::DrainInvestigate)),
            "{seen:?}"
        );
        // A reset: the counter back near 0 gives no rate, not a negative one.
        c.time += 5;
        let at = c.time;
        read(&mut c, at, 10);
        assert_eq!(action(&c, &base), None);
    }

    #[test]
    fn the_sim_night_gets_the_right_verdicts() {
        let mut s = Sim::new(SimConfig::default()).expect("sim");
        s.advance(200);
        let c = s.snapshot();
        let v = verdicts(&c, None, &XidCatalog::default(), &SiteParams::default());
        let of = |n: &str| v.iter().find(|x| x.node == n).map(|x| x.verdict.action);
        assert_eq!(of("h100-03"), Some(ActionClass::DrainReboot));
        assert_eq!(
            of("h100-06"),
            Some(ActionClass::DrainResetGpu),
            "Xid 48 + DBE + remap pending"
        );
        assert_eq!(of("a100-07"), Some(ActionClass::RestartJob), "Xid 13");
        assert_eq!(v[0].node, "h100-03", "most drastic first");
        let n6 = v.iter().find(|x| x.node == "h100-06").expect("h100-06");
        assert!(n6.verdict.evidence.iter().any(|e| e.contains("Xid 48")));
        assert!(n6.verdict.evidence.iter().any(|e| e.contains("Xid 63")));
    }
}
