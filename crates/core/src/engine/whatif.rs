//! Snapshots as they would be after an action, for before/after answers.
//! Pure transformations: the input snapshot is not touched.

use crate::model::{Cluster, JobState, NodeState};
use std::collections::BTreeSet;

/// The job ids that die with `seeds`: every job sharing a gang with one of
/// them, transitively, and only jobs that hold resources.
pub fn gang_closure(c: &Cluster, seeds: &[usize]) -> Vec<usize> {
    let mut gangs: BTreeSet<&str> = BTreeSet::new();
    let mut out: BTreeSet<usize> = seeds
        .iter()
        .copied()
        .filter(|&i| i < c.jobs.len())
        .collect();
    loop {
        let before = (out.len(), gangs.len());
        for &i in &out {
            if let Some(g) = c.jobs[i].gang.as_deref() {
                gangs.insert(g);
            }
        }
        for (i, j) in c.jobs.iter().enumerate() {
            if j.state.holds_resources() && j.gang.as_deref().is_some_and(|g| gangs.contains(g)) {
                out.insert(i);
            }
        }
        if (out.len(), gangs.len()) == before {
            return out.into_iter().collect();
        }
    }
}

/// Running jobs with GPUs or an allocation on `node`.
pub fn jobs_on_node(c: &Cluster, node: &str) -> Vec<usize> {
    c.jobs
        .iter()
        .enumerate()
        .filter(|(_, j)| j.state.holds_resources() && j.nodes.iter().any(|n| n == node))
        .map(|(i, _)| i)
        .collect()
}

/// Ends `jobs`: their GPUs are freed; requeued ones go back to the queue
/// with their priority (and keep their submit time, as Slurm does),
/// the others are cancelled.
pub fn end_jobs(c: &mut Cluster, jobs: &[usize], requeue: bool) {
    let ids: BTreeSet<String> = jobs
        .iter()
        .filter_map(|&i| c.jobs.get(i))
        .map(|j| j.id.clone())
        .collect();
    // Only the nodes that change are copied (the snapshot shares the rest).
    for n in c.nodes.iter_mut().filter(|n| {
        n.gpus
            .iter()
            .any(|g| g.job.as_ref().is_some_and(|id| ids.contains(id)))
    }) {
        for g in std::sync::Arc::make_mut(n).gpus.iter_mut() {
            if g.job.as_ref().is_some_and(|id| ids.contains(id)) {
                g.job = None;
            }
        }
    }
    for &i in jobs {
        let Some(j) = c.jobs.get_mut(i).map(std::sync::Arc::make_mut) else {
            continue;
        };
        j.nodes.clear();
        if requeue {
            j.state = JobState::Pending;
            j.start_time = crate::model::When::UNKNOWN;
            j.reason = None;
        } else {
            j.state = JobState::Cancelled;
            j.end_time = Some(c.time).into();
        }
    }
    for q in c.quotas.iter_mut() {
        q.gpus_in_use = c
            .jobs
            .iter()
            .filter(|j| {
                j.state.holds_resources() && j.account.as_deref() == Some(q.account.as_str())
            })
            .filter_map(|j| j.gpus_requested())
            .sum();
    }
}

/// The snapshot with `node` drained and its jobs (and their gangs) ended,
/// as the scheduler carries it out: with `requeue`, a job
/// submitted with --no-requeue refuses its requeue and keeps running (the
/// node stays draining until it ends). Returns the snapshot after, the
/// jobs ended, and the jobs that keep running.
pub fn drain_keeping(c: &Cluster, node: &str, requeue: bool) -> (Cluster, Vec<usize>, Vec<usize>) {
    let mut after = c.clone();
    let hit = gang_closure(c, &jobs_on_node(c, node));
    let (kept, killed): (Vec<usize>, Vec<usize>) = hit
        .into_iter()
        // Slurm refuses the requeue and the job keeps running; a pod (no
        // Kueue workload or Volcano group) is evicted by the drain all the
        // same: it dies.
        .partition(|&i| {
            requeue && c.jobs[i].requeueable == Some(false) && c.jobs[i].pods.is_empty()
        });
    end_jobs(&mut after, &killed, requeue);
    let on_node = kept
        .iter()
        .any(|&i| c.jobs[i].nodes.iter().any(|n| n == node));
    if let Some(n) = after.nodes.iter_mut().find(|n| n.name == node) {
        std::sync::Arc::make_mut(n).state = if on_node {
            NodeState::Draining
        } else {
            NodeState::Drain
        };
    }
    (after, killed, kept)
}

/// The snapshot with `job` (and its gang) ended, requeued or not.
pub fn end_job(c: &Cluster, job: usize, requeue: bool) -> (Cluster, Vec<usize>) {
    let mut after = c.clone();
    let killed = gang_closure(c, &[job]);
    end_jobs(&mut after, &killed, requeue);
    (after, killed)
}

/// The snapshot with `job`'s priority set to `value`.
pub fn reprioritize(c: &Cluster, job: usize, value: u64) -> Cluster {
    let mut after = c.clone();
    if let Some(j) = after.jobs.get_mut(job).map(std::sync::Arc::make_mut) {
        j.priority = Some(value).into();
        // The scheduler's reason was for the old order.
        if j.reason.as_deref() == Some("Priority") {
            j.reason = None;
        }
    }
    after
}
