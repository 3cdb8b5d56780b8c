//! The night's scripted incidents after start-up.

use super::{START_TIME, Sim};
use crate::model::{Count, EventKind, JobState, LastXid, RecoveryAction, Timestamp};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Incident {
    /// An application fault: the job on the GPU dies, the GPU is fine.
    Xid13,
    /// Uncorrectable ECC error: Xid 48, DBE counters up, row remap pending.
    Xid48Dbe,
    /// The driver records the row remap: Xid 63.
    Xid63Remap,
    /// A burst of correctable errors on a GPU whose job keeps running:
    /// Xid 63, a row remap pending until the next reset. Warning-level.
    SbeRemap,
    /// NVLink CRC errors on one GPU's links, fast, for `STORM_S`: no Xid,
    /// the job on it runs on (slower).
    NvLinkStorm,
    /// The node's leaf switch flaps: every node under it loses its IB link
    /// within seconds, for a while, then gets it back. Multi-node jobs with
    /// a rank there hang in their collectives, then fail on the timeout.
    LeafFlap,
}

/// The link the NVLink storm is on.
const STORM_LINK: u32 = 3;
/// How long the NVLink storm lasts.
pub(crate) const STORM_S: i64 = 1500;
/// A hung collective gives up (NCCL's timeout) this long after the flap.
pub(crate) const COLLECTIVE_TIMEOUT_S: i64 = 600;

#[derive(Debug, Clone, Default)]
pub(crate) struct Timeline {
    fired: usize,
    /// (node, GPU, started) of the NVLink storm going on.
    storm: Option<(usize, u32, Timestamp)>,
    /// Whether the leaf has flapped before (the first flap is longer and
    /// hangs the gangs there).
    flapped: bool,
    /// Port changes to come: (time, node, down).
    ports: Vec<(Timestamp, usize, bool)>,
    /// Hung gangs' jobs and when their collective times out.
    timeouts: Vec<(Timestamp, String)>,
}

/// (seconds after start, node by partition and position, GPU, incident)
const SCRIPT: [(i64, usize, usize, u32, Incident); 7] = [
    (40, 1, 6, 6, Incident::Xid13),
    (70, 0, 4, 1, Incident::SbeRemap),
    (100, 0, 5, 5, Incident::Xid48Dbe),
    (160, 0, 5, 5, Incident::Xid63Remap),
    (900, 1, 2, 1, Incident::NvLinkStorm),
    (1200, 0, 4, 0, Incident::LeafFlap),
    (1500, 0, 4, 0, Incident::LeafFlap),
];

/// A leaf flap's nodes lose their links this many seconds apart, and stay
/// down this long (the first flap; the second is shorter).
const FLAP_OFFSETS_S: [i64; 4] = [0, 4, 9, 15];
const FLAP_DOWN_S: [i64; 2] = [45, 30];

pub(crate) fn fire_due(sim: &mut Sim) {
    while let Some(&(at, part, pos, gpu, incident)) = SCRIPT.get(sim.timeline.fired) {
        if START_TIME + at > sim.now {
            return;
        }
        sim.timeline.fired += 1;
        let node = sim.partitions[part].nodes[pos];
        match incident {
            Incident::NvLinkStorm => start_storm(sim, node, gpu),
            Incident::LeafFlap => flap(sim, node),
            _ => fire(sim, node, gpu, incident, START_TIME + at),
        }
    }
}

/// The fabric's second by second: the storm's counters, ports going down
/// and up, hung collectives timing out.
pub(crate) fn fabric_step(sim: &mut Sim) {
    let now = sim.now;
    if let Some((node, gpu, started)) = sim.timeline.storm {
        if now - started >= STORM_S {
            sim.timeline.storm = None;
        } else {
            let g = &mut Arc::make_mut(&mut sim.nodes[node]).gpus[gpu as usize];
            let add = |x: &mut Count, n: u64| *x = Count::of(x.unwrap_or(0) + n);
            // One link (L3) storms; the GPU's totals are its links' sum.
            let l = g.nvlink_links.entry(STORM_LINK).or_default();
            add(&mut l.crc_flit, 37);
            add(&mut l.crc_data, 5);
            add(&mut l.replay, 2);
            if (now - started) % 60 == 0 {
                add(&mut l.recovery, 1);
            }
            g.nvlink = crate::model::NvLinkErrors::sum(g.nvlink_links.values());
            // Counters only: that they rise fast is the deriver's to
            // tell (`engine::derive`), as it is on a real source.
        }
    }
    let due: Vec<(Timestamp, usize, bool)> = sim
        .timeline
        .ports
        .iter()
        .filter(|(t, _, _)| *t <= now)
        .copied()
        .collect();
    sim.timeline.ports.retain(|(t, _, _)| *t > now);
    for (_, node, down) in due {
        set_port(sim, node, down);
    }
    let timed_out: Vec<String> = sim
        .timeline
        .timeouts
        .iter()
        .filter(|(t, _)| *t <= now)
        .map(|(_, id)| id.clone())
        .collect();
    sim.timeline.timeouts.retain(|(t, _)| *t > now);
    for id in timed_out {
        if let Some(idx) = sim
            .jobs
            .iter()
            .position(|j| j.job.id == id && j.hung && j.job.state == JobState::Running)
        {
            sim.jobs[idx].set_reason(Some("collective timeout (NCCL watchdog)"));
            sim.end_job(idx, JobState::Failed);
        }
    }
}

fn start_storm(sim: &mut Sim, node: usize, gpu: u32) {
    let now = sim.now;
    // The GPU reports its links one by one from now: all clean but L3.
    let g = &mut Arc::make_mut(&mut sim.nodes[node]).gpus[gpu as usize];
    for l in 0..18 {
        g.nvlink_links.insert(
            l,
            crate::model::NvLinkErrors {
                crc_flit: Some(0).into(),
                crc_data: Some(0).into(),
                replay: Some(0).into(),
                recovery: Some(0).into(),
            },
        );
    }
    sim.timeline.storm = Some((node, gpu, now));
}

/// The leaf switch of `node` flaps: its nodes' ports go down a few seconds
/// apart and come back; the first flap hangs the multi-node jobs there.
fn flap(sim: &mut Sim, node: usize) {
    let now = sim.now;
    let Some(leaf) = sim.nodes[node].domain("leaf").cloned() else {
        return;
    };
    let first = !sim.timeline.flapped;
    sim.timeline.flapped = true;
    let down_s = FLAP_DOWN_S[usize::from(!first)];
    let under: Vec<usize> = (0..sim.nodes.len())
        .filter(|&i| sim.nodes[i].domains.contains(&leaf))
        .collect();
    for (k, &n) in under.iter().enumerate() {
        let at = now + FLAP_OFFSETS_S.get(k).copied().unwrap_or(15);
        sim.timeline.ports.push((at, n, true));
        sim.timeline.ports.push((at + down_s, n, false));
    }
    sim.timeline.ports.sort_by_key(|(t, n, _)| (*t, *n));
    if !first {
        return;
    }
    let names: Vec<&str> = under.iter().map(|&n| sim.nodes[n].name.as_str()).collect();
    let mut hung = Vec::new();
    for j in sim.jobs.iter_mut().filter(|j| {
        j.job.state == JobState::Running
            && j.job.nodes.len() > 1
            && j.job.nodes.iter().any(|n| names.contains(&n.as_str()))
    }) {
        j.hung = true;
        hung.push((now + COLLECTIVE_TIMEOUT_S, j.job.id.clone()));
    }
    sim.timeline.timeouts.extend(hung);
}

/// Takes node `n`'s port down (its state, its link-downed counter up) or
/// brings it back up: readings only, the deriver tells the event.
fn set_port(sim: &mut Sim, n: usize, down: bool) {
    let node = Arc::make_mut(&mut sim.nodes[n]);
    let Some(port) = Arc::make_mut(&mut node.ib_ports).first_mut() else {
        return;
    };
    if down {
        port.state = Some(crate::model::IB_STATE_DOWN);
        port.physical_state = Some(2);
        port.link_downed = Some(port.link_downed.unwrap_or(0) + 1);
        port.symbol_errors = Some(port.symbol_errors.unwrap_or(0) + 17);
    } else {
        port.state = Some(crate::model::IB_STATE_ACTIVE);
        port.physical_state = Some(crate::model::IB_PHYS_LINK_UP);
    }
}

fn fire(sim: &mut Sim, node: usize, gpu: u32, incident: Incident, at: Timestamp) {
    let name = sim.nodes[node].name.clone();
    let g = gpu as usize;
    let (code, message) = match incident {
        Incident::Xid13 => (
            13,
            "Graphics Engine Exception: illegal address in user kernel",
        ),
        Incident::Xid48Dbe => (48, "DBE (double bit error) ECC error"),
        Incident::Xid63Remap => (
            63,
            "Row remapping event: remap pending until the GPU is reset",
        ),
        Incident::SbeRemap => (
            63,
            "Row remapping event: correctable errors, remap pending until the GPU is reset",
        ),
        // Not Xids: told by fire_due to their own functions.
        Incident::NvLinkStorm | Incident::LeafFlap => return,
    };
    Arc::make_mut(&mut sim.nodes[node]).gpus[g].last_xid = Some(Box::new(LastXid {
        code,
        time: Some(at),
        message: None,
    }));
    sim.push_event(&name, Some(gpu), EventKind::Xid { code }, message);
    match incident {
        Incident::Xid13 => {
            let job = sim.nodes[node].gpus[g].job.clone();
            if let Some(idx) = job.and_then(|id| sim.jobs.iter().position(|j| j.job.id == id)) {
                sim.end_job(idx, JobState::Failed);
            }
        }
        Incident::Xid48Dbe => {
            Arc::make_mut(&mut sim.nodes[node]).gpus[g].recovery_action =
                Some(RecoveryAction::GpuReset);
            ecc_errors(
                sim,
                node,
                gpu,
                (1, 3),
                "uncorrectable ECC error; row remap pending",
            );
        }
        Incident::SbeRemap => ecc_errors(
            sim,
            node,
            gpu,
            (0, 120),
            "correctable ECC errors; row remap pending",
        ),
        Incident::Xid63Remap | Incident::NvLinkStorm | Incident::LeafFlap => {}
    }
}

/// Adds (uncorrectable, correctable) errors to a GPU's ECC counters, marks
/// a row remap pending, and records the ECC event.
fn ecc_errors(sim: &mut Sim, node: usize, gpu: u32, (dbe, sbe): (u64, u64), message: &str) {
    let name = sim.nodes[node].name.clone();
    let hit = &mut Arc::make_mut(&mut sim.nodes[node]).gpus[gpu as usize];
    hit.ecc.dbe_volatile = Count::of(hit.ecc.dbe_volatile.unwrap_or(0) + dbe);
    hit.ecc.dbe_aggregate = Count::of(hit.ecc.dbe_aggregate.unwrap_or(0) + dbe);
    hit.ecc.sbe_volatile = Count::of(hit.ecc.sbe_volatile.unwrap_or(0) + sbe);
    hit.ecc.sbe_aggregate = Count::of(hit.ecc.sbe_aggregate.unwrap_or(0) + sbe);
    hit.row_remap_pending = Some(true);
    let kind = EventKind::Ecc {
        dbe: Some(dbe),
        sbe: Some(sbe),
        remap_pending: Some(true),
        remap_failed: Some(false),
    };
    sim.push_event(&name, Some(gpu), kind, message);
}
