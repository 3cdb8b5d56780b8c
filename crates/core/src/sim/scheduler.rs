//! A small priority scheduler with backfill, and the arrival of new work.
//!
//! Per partition, pending jobs are taken in priority order. The first one that
//! does not fit is pending on `Resources`, the ones behind it on `Priority`,
//! unless a smaller one fits now (backfill). A job whose team would exceed its
//! GPU quota pends on `AssocGrpGRES`, as Slurm says it.

use super::Sim;
use super::layout::{random_spec, submit, with_nodes};
use crate::model::JobState;
use rand::Rng;

/// Free GPUs per node, 0 on nodes that take no new work.
fn free_gpus(sim: &Sim, node: usize) -> u32 {
    sim.nodes[node].gpus_free()
}

/// Up to this many nodes the sim schedules as soon as something changed.
pub const EVERY_SECOND_UP_TO: usize = 1000;
/// Seconds between scheduling passes on a bigger cluster: Slurm's own main
/// loop runs every `sched_interval` (60 s by default) and its backfill
/// every `bf_interval` (30 s); a pass over a 40,000-job queue every second
/// was most of the sim's cost at 10,000 nodes (issue 14). An action taken
/// from the console is still scheduled at once (`Sim::apply`).
pub const BIG_CLUSTER_PASS_S: i64 = 10;

/// Whether a scheduling pass is due at `now` on a cluster of `nodes`.
pub(crate) fn pass_due(nodes: usize, now: i64) -> bool {
    nodes <= EVERY_SECOND_UP_TO || now.rem_euclid(BIG_CLUSTER_PASS_S) == 0
}

pub(crate) fn schedule(sim: &mut Sim) {
    sim.sched_dirty = false;
    // Keys first, then one sort of plain tuples: sorting indices with a
    // key that reads each job was a sixth of a step at 100,000 jobs.
    let mut keyed: Vec<(std::cmp::Reverse<u64>, i64, usize)> = sim
        .jobs
        .iter()
        .enumerate()
        .filter(|(_, j)| j.job.state == JobState::Pending && !j.blocked)
        .map(|(i, j)| {
            (
                std::cmp::Reverse(j.job.priority.unwrap_or(0)),
                j.job.submit_time.unwrap_or(0),
                i,
            )
        })
        .collect();
    keyed.sort_unstable();
    let pending: Vec<usize> = keyed.into_iter().map(|(_, _, i)| i).collect();
    // GPUs each team with a quota holds (by position in `sim.quotas`),
    // kept as jobs start: asking for every pending job made a pass
    // quadratic in the queue at 100,000 jobs.
    let mut in_use: Vec<u32> = sim.quotas.iter().map(|(a, _)| sim.gpus_in_use(a)).collect();
    // The pending jobs of each partition, in order.
    let mut by_partition: Vec<Vec<usize>> = vec![Vec::new(); sim.partitions.len()];
    for &i in &pending {
        let part = sim.jobs[i].job.partition.as_str();
        if let Some(p) = sim.partitions.iter().position(|p| p.partition.name == part) {
            by_partition[p].push(i);
        }
    }
    for (p, mine) in by_partition.into_iter().enumerate() {
        let mut free: Vec<u32> = sim.partitions[p]
            .nodes
            .iter()
            .map(|&n| free_gpus(sim, n))
            .collect();
        // avail[k]: nodes with at least k GPUs free, so that a job that
        // cannot fit is turned away without a scan of the partition.
        let mut avail = [0u32; 9];
        for &f in &free {
            for slot in avail.iter_mut().take(f.min(8) as usize + 1).skip(1) {
                *slot += 1;
            }
        }
        let mut blocked_by_resources = false;
        for i in mine {
            let (per_node, count, quota) = {
                let j = &sim.jobs[i].job;
                (
                    j.gpus_per_node.unwrap_or(1),
                    j.node_count.unwrap_or(1),
                    j.account
                        .as_deref()
                        .and_then(|acc| sim.quotas.iter().position(|(a, _)| a == acc)),
                )
            };
            if let Some(q) = quota
                && in_use[q] + per_node * count > sim.quotas[q].1
            {
                sim.jobs[i].set_reason(Some("AssocGrpGRES"));
                continue;
            }
            let fits = avail.get(per_node as usize).is_some_and(|&a| a >= count);
            let placed = if fits {
                place(&free, per_node, count)
            } else {
                None
            };
            match placed {
                Some(chosen) => {
                    let nodes: Vec<usize> =
                        chosen.iter().map(|&k| sim.partitions[p].nodes[k]).collect();
                    for &k in &chosen {
                        let old = free[k];
                        free[k] -= per_node;
                        for slot in avail
                            .iter_mut()
                            .take(old.min(8) as usize + 1)
                            .skip(free[k] as usize + 1)
                        {
                            *slot -= 1;
                        }
                    }
                    start_on(sim, i, &nodes, per_node);
                    if let Some(q) = quota {
                        in_use[q] += per_node * count;
                    }
                }
                None => {
                    let reason = if blocked_by_resources {
                        "Priority"
                    } else {
                        "Resources"
                    };
                    sim.jobs[i].set_reason(Some(reason));
                    blocked_by_resources = true;
                }
            }
        }
    }
}

/// Best fit: single-node jobs go to the node with the fewest free GPUs that
/// still fits, keeping whole nodes free for big jobs. Multi-node jobs take
/// the first `count` nodes with enough free.
fn place(free: &[u32], per_node: u32, count: u32) -> Option<Vec<usize>> {
    if count <= 1 {
        return free
            .iter()
            .enumerate()
            .filter(|(_, f)| **f >= per_node)
            .min_by_key(|(k, f)| (**f, *k))
            .map(|(k, _)| vec![k]);
    }
    let chosen: Vec<usize> = free
        .iter()
        .enumerate()
        .filter(|(_, f)| **f >= per_node)
        .map(|(k, _)| k)
        .take(count as usize)
        .collect();
    (chosen.len() == count as usize).then_some(chosen)
}

fn start_on(sim: &mut Sim, i: usize, nodes: &[usize], per_node: u32) {
    let now = sim.now;
    let id = sim.jobs[i].job.id.clone();
    let mut names = Vec::with_capacity(nodes.len());
    for &n in nodes {
        names.push(sim.nodes[n].name.clone());
        sim.allocate(n, &id, per_node);
    }
    let job = sim.jobs[i].job_mut();
    job.state = JobState::Running;
    job.reason = None;
    job.start_time = Some(now).into();
    job.nodes = names;
    if job.checkpoint.interval_s.is_some() {
        job.checkpoint.last = Some(now).into();
    }
}

/// Mean GPUs and run time of an arriving job (sizes 1, 2, 4, 8; 3–15 min).
const MEAN_GPUS: f64 = 3.75;
const MEAN_RUN_S: f64 = 540.0;

/// New work arrives in the H100 partition at random, at a rate that keeps
/// its background nodes about 85% busy; one in ten is a 2-node gang.
pub(crate) fn arrivals(sim: &mut Sim) {
    let background_gpus = (sim.partitions[0].nodes.len().saturating_sub(6) * 8) as f64;
    let rate = background_gpus * 0.85 / (MEAN_GPUS * MEAN_RUN_S);
    if !sim.rng.random_bool(rate.clamp(0.0, 1.0)) {
        return;
    }
    let gang = sim.rng.random_bool(0.1);
    let gpus = if gang {
        8
    } else {
        [1u32, 2, 4, 8][sim.rng.random_range(0..4)]
    };
    let spec = random_spec(sim, "h100", gpus);
    let spec = if gang { with_nodes(spec, 2) } else { spec };
    let duration = sim.rng.random_range(3 * 60..15 * 60);
    submit(sim, &spec, duration);
}
