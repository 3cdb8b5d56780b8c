//! GPU telemetry: what dcgm-exporter would report.
//!
//! Every node's readings change every second on a cluster of up to
//! `EVERY_SECOND_UP_TO` nodes. On a bigger one each node is read every
//! `BIG_CLUSTER_PERIOD_S` seconds, staggered across the nodes, as
//! exporters polled on their own clocks are (dcgm-exporter collects every
//! 30 s by default): a snapshot then shares the nodes that did not change
//! with the one before, where copying 80,000 GPUs a second was most of the
//! sim's cost at 10,000 nodes (issue 14).

use super::Sim;
use rand::Rng;
use std::sync::Arc;

/// Clusters up to this many nodes get new readings on every node each second.
pub const EVERY_SECOND_UP_TO: usize = 1000;
/// Seconds between two readings of one node on a bigger cluster.
pub const BIG_CLUSTER_PERIOD_S: i64 = 10;

/// Whether node `i` of `nodes` is read at sim time `now`.
pub(crate) fn due(i: usize, nodes: usize, now: i64) -> bool {
    nodes <= EVERY_SECOND_UP_TO || (now + i as i64).rem_euclid(BIG_CLUSTER_PERIOD_S) == 0
}

/// The nodes due now (see the module's note).
pub(crate) fn update(sim: &mut Sim) {
    read(sim, false);
}

/// Every node: at start-up, so that none starts without readings.
pub(crate) fn update_all(sim: &mut Sim) {
    read(sim, true);
}

fn read(sim: &mut Sim, all: bool) {
    // Per-job behaviour, looked up by id once per step.
    let jobs: rustc_hash::FxHashMap<&str, (f64, f64, bool)> = sim
        .jobs
        .iter()
        .filter(|j| j.job.state.holds_resources())
        .map(|j| (j.job.id.as_str(), (j.base_occ, j.mem_frac, j.hung)))
        .collect();
    let rng = &mut sim.rng;
    let now = sim.now;
    let count = sim.nodes.len();
    for (i, node) in sim.nodes.iter_mut().enumerate() {
        if !all && !due(i, count, now) {
            continue;
        }
        let node = Arc::make_mut(node);
        let (idle_w, max_w) = if node
            .gpu_model
            .as_deref()
            .is_some_and(|m| m.contains("H100"))
        {
            (70.0, 700.0)
        } else {
            (55.0, 400.0)
        };
        for gpu in node.gpus.iter_mut() {
            if gpu.reading_source.as_deref() != Some("sim") {
                gpu.reading_source = Some("sim".into());
            }
            gpu.reading_time = Some(now);
            // A GPU that fell off the bus reports nothing at all.
            if gpu.last_xid.as_ref().is_some_and(|x| x.code == 79) {
                gpu.sm_occupancy = None;
                gpu.sm_active = None;
                gpu.utilization = None;
                gpu.temperature_c = None;
                gpu.power_w = None;
                gpu.memory_used_mib = None;
                continue;
            }
            let noise: f64 = rng.random_range(-0.04..0.04);
            let behaviour = gpu.job.as_deref().and_then(|id| jobs.get(id)).copied();
            let (occ, mem, util) = match behaviour {
                // NCCL spinning in a collective that will never finish:
                // "100% utilised", nothing occupied.
                Some((_, mem, true)) => (0.01, mem, 1.0),
                Some((base, mem, false)) => {
                    let occ = (base + noise).clamp(0.02, 0.98);
                    (occ, mem, (occ + 0.15).min(1.0))
                }
                None => (0.0, 0.0, 0.0),
            };
            gpu.sm_occupancy = Some(round3(occ));
            gpu.sm_active = Some(round3((occ * 1.1).min(1.0)));
            gpu.utilization = Some(round3(util));
            let total = gpu.memory_total_mib.unwrap_or(0) as f64;
            gpu.memory_used_mib = Some((total * mem) as u64);
            let target_t = 32.0 + 45.0 * occ;
            let t = gpu.temperature_c.unwrap_or(target_t);
            gpu.temperature_c = Some(round1(t + (target_t - t) * 0.2 + noise * 5.0));
            gpu.power_w = Some(round1(
                idle_w + (max_w - idle_w) * (occ * 1.1).min(1.0) + noise * 40.0,
            ));
        }
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}
