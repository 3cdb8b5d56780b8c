//! The night's scripted incidents after start-up.

use super::{START_TIME, Sim};
use crate::model::{EventKind, JobState, LastXid, RecoveryAction, Timestamp};
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
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Timeline {
    fired: usize,
}

/// (seconds after start, node by partition and position, GPU, incident)
const SCRIPT: [(i64, usize, usize, u32, Incident); 4] = [
    (40, 0, 6, 2, Incident::Xid13),
    (70, 0, 4, 1, Incident::SbeRemap),
    (100, 0, 5, 5, Incident::Xid48Dbe),
    (160, 0, 5, 5, Incident::Xid63Remap),
];

pub(crate) fn fire_due(sim: &mut Sim) {
    while let Some(&(at, part, pos, gpu, incident)) = SCRIPT.get(sim.timeline.fired) {
        if START_TIME + at > sim.now {
            return;
        }
        sim.timeline.fired += 1;
        let node = sim.partitions[part].nodes[pos];
        fire(sim, node, gpu, incident, START_TIME + at);
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
    };
    Arc::make_mut(&mut sim.nodes[node]).gpus[g].last_xid = Some(LastXid {
        code,
        time: Some(at),
    });
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
        Incident::Xid63Remap => {}
    }
}

/// Adds (uncorrectable, correctable) errors to a GPU's ECC counters, marks
/// a row remap pending, and records the ECC event.
fn ecc_errors(sim: &mut Sim, node: usize, gpu: u32, (dbe, sbe): (u64, u64), message: &str) {
    let name = sim.nodes[node].name.clone();
    let hit = &mut Arc::make_mut(&mut sim.nodes[node]).gpus[gpu as usize];
    let add = |x: Option<u64>, n: u64| Some(x.unwrap_or(0) + n);
    hit.ecc.dbe_volatile = add(hit.ecc.dbe_volatile, dbe);
    hit.ecc.dbe_aggregate = add(hit.ecc.dbe_aggregate, dbe);
    hit.ecc.sbe_volatile = add(hit.ecc.sbe_volatile, sbe);
    hit.ecc.sbe_aggregate = add(hit.ecc.sbe_aggregate, sbe);
    hit.row_remap_pending = Some(true);
    let kind = EventKind::Ecc {
        dbe: Some(dbe),
        sbe: Some(sbe),
        remap_pending: Some(true),
        remap_failed: Some(false),
    };
    sim.push_event(&name, Some(gpu), kind, message);
}
