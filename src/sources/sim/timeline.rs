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
            let ecc = &mut Arc::make_mut(&mut sim.nodes[node]).gpus[g].ecc;
            ecc.dbe_volatile = Some(ecc.dbe_volatile.unwrap_or(0) + 1);
            ecc.dbe_aggregate = Some(ecc.dbe_aggregate.unwrap_or(0) + 1);
            ecc.sbe_volatile = Some(ecc.sbe_volatile.unwrap_or(0) + 3);
            ecc.sbe_aggregate = Some(ecc.sbe_aggregate.unwrap_or(0) + 3);
            Arc::make_mut(&mut sim.nodes[node]).gpus[g].row_remap_pending = Some(true);
            Arc::make_mut(&mut sim.nodes[node]).gpus[g].recovery_action =
                Some(RecoveryAction::GpuReset);
            let kind = EventKind::Ecc {
                dbe: Some(1),
                sbe: Some(3),
                remap_pending: Some(true),
                remap_failed: Some(false),
            };
            sim.push_event(
                &name,
                Some(gpu),
                kind,
                "uncorrectable ECC error; row remap pending",
            );
        }
        Incident::SbeRemap => {
            let hit = &mut Arc::make_mut(&mut sim.nodes[node]).gpus[g];
            hit.ecc.sbe_volatile = Some(hit.ecc.sbe_volatile.unwrap_or(0) + 120);
            hit.ecc.sbe_aggregate = Some(hit.ecc.sbe_aggregate.unwrap_or(0) + 120);
            hit.row_remap_pending = Some(true);
            let kind = EventKind::Ecc {
                dbe: Some(0),
                sbe: Some(120),
                remap_pending: Some(true),
                remap_failed: Some(false),
            };
            sim.push_event(
                &name,
                Some(gpu),
                kind,
                "correctable ECC errors; row remap pending",
            );
        }
        Incident::Xid63Remap => {}
    }
}
