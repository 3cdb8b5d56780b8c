//! The blast radius of an action: who dies, what it costs, who moves.

use super::base::Base;
use super::error::EngineError;
use super::plan::{Estimate, Plan};
use super::restore::{Restore, plan_after, restore_after, with_grace};
use super::{SiteParams, whatif};
use crate::model::{Action, Cluster, NodeState, Timestamp};
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};

/// "At once": a pending job planned to start within this many seconds of
/// a resume starts on the resumed node as soon as the scheduler sees it.
const AT_ONCE_S: i64 = 300;

/// What the on-call wants to know the consequences of: the shared verb.
pub type Target = Action;

/// A short description for a blast summary.
fn describe(t: &Target) -> String {
    match t {
        Action::Drain {
            node,
            requeue: true,
            ..
        } => format!("drain {node} and requeue its jobs"),
        Action::Drain {
            node,
            requeue: false,
            ..
        } => format!("drain {node} and kill its jobs"),
        Action::Cordon { node, .. } => format!("cordon {node}"),
        Action::Resume { node } => format!("resume {node}"),
        Action::Validate { node, .. } => format!("validate {node}, then resume it"),
        Action::SetReason { node, .. } => format!("change {node}'s reason"),
        Action::Requeue { job } => format!("requeue job {job}"),
        Action::Preempt {
            job,
            grace_s: Some(g),
        } => format!(
            "preempt job {job} with a {} grace period",
            crate::text::duration(*g as i64)
        ),
        Action::Preempt { job, .. } => format!("preempt job {job}"),
        Action::Priority { job, value } => format!("set job {job}'s priority to {value}"),
        Action::Hold { job } => format!("hold job {job}"),
        Action::Release { job } => format!("release job {job}"),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KilledJob {
    pub id: String,
    pub name: String,
    pub user: String,
    pub account: Option<String>,
    pub gpus: Option<u32>,
    pub nodes: Vec<String>,
    pub gang: Option<String>,
    /// Killed because another rank of its gang was.
    pub via_gang: bool,
    pub requeued: bool,
    pub restore: Restore,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Capacity {
    pub name: String,
    pub gpus_removed: u32,
    pub gpus_total: u32,
    pub share: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Moved {
    pub id: String,
    pub name: String,
    pub user: String,
    pub account: Option<String>,
    pub before: Option<Timestamp>,
    pub after: Option<Timestamp>,
    /// Seconds later (positive) or sooner (negative); `None` when it went
    /// from an estimate to none or back.
    pub delta_s: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Blast {
    pub target: Target,
    pub summary: String,
    /// Nothing would change (e.g. draining a node already drained).
    pub no_op: bool,
    pub killed: Vec<KilledJob>,
    pub gpus_freed: u32,
    pub gpus_out_of_service: u32,
    pub partition: Option<Capacity>,
    pub cluster: Capacity,
    pub lost_gpu_hours: f64,
    pub moved: Vec<Moved>,
    /// For a priority change: the pending jobs it overtakes.
    pub jumped: Vec<String>,
    /// For a priority lowered: the pending jobs it falls behind (issue 58:
    /// a lowered priority was said as a jump over them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub falls_behind: Vec<String>,
    /// For a drain with requeue: the jobs submitted with --no-requeue, whose
    /// requeue the scheduler refuses: they keep running, the node stays
    /// draining until they end.
    pub keep_running: Vec<String>,
    /// For a resume: the GPUs it puts back in service.
    pub gpus_back_in_service: u32,
    /// For a resume of a node with critical health: the pending jobs the
    /// scheduler would start on it at once (it does not know the health).
    pub start_on_broken: Vec<String>,
    pub users: Vec<String>,
    pub teams: Vec<String>,
}

/// The blast radius of `target` on snapshot `c`, whose base (plan and
/// health) is `base`: the plan before is the base's, the plan after counts
/// the same health.
pub fn blast(
    c: &Cluster,
    base: &Base,
    target: &Target,
    site: &SiteParams,
) -> Result<Blast, EngineError> {
    if let Action::Preempt {
        job,
        grace_s: Some(g),
    } = target
    {
        let hard = Action::Preempt {
            job: job.clone(),
            grace_s: None,
        };
        return Ok(with_grace_period(
            &blast(c, base, &hard, site)?,
            c,
            base,
            *g,
            site,
        ));
    }
    let s = scenario(c, target, site)?;
    Ok(finish(c, base, target, s, site))
}

/// The blast radius of taking a failure domain's nodes out at once (a
/// switch, a rack: `name` at any level): every gang with a rank under it
/// dies (requeued when `requeue`), its nodes' GPUs leave service, the
/// queue moves. What draining a failing switch's nodes one by one costs.
pub fn blast_domain(
    c: &Cluster,
    base: &Base,
    name: &str,
    requeue: bool,
    site: &SiteParams,
) -> Result<Blast, EngineError> {
    let nodes: Vec<&str> = c
        .nodes
        .iter()
        .filter(|n| n.in_domain(name))
        .map(|n| n.name.as_str())
        .collect();
    if nodes.is_empty() {
        return Err(EngineError::NoNode(name.to_string()));
    }
    let mut after = c.clone();
    let (mut killed, mut seeds, mut kept) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    let mut out_of_service = 0;
    for n in &nodes {
        seeds.extend(whatif::jobs_on_node(&after, n));
        let (a, k, kp) = whatif::drain_keeping(&after, n, requeue);
        killed.extend(k);
        kept.extend(kp);
        after = a;
        out_of_service += c
            .node(n)
            .filter(|x| x.state.schedulable())
            .map_or(0, |x| x.gpu_count);
    }
    let s = Scenario {
        after,
        killed: killed.into_iter().collect(),
        seeds: seeds.into_iter().collect(),
        requeue,
        out_of_service,
        // The partition that loses the most GPUs (a domain's nodes may
        // be in several: dgx3's H100s under an A100 leaf).
        partition: {
            let mut by: std::collections::BTreeMap<&str, u32> = Default::default();
            for n in nodes.iter().filter_map(|n| c.node(n)) {
                if let Some(p) = n.partitions.first() {
                    *by.entry(p.as_str()).or_insert(0) += n.gpu_count;
                }
            }
            by.into_iter()
                .max_by_key(|(p, g)| (*g, std::cmp::Reverse(*p)))
                .map(|(p, _)| p.to_string())
        },
        keep_running: kept.iter().map(|&i| c.jobs[i].id.clone()).collect(),
    };
    let target = Action::Drain {
        node: name.to_string(),
        reason: String::new(),
        requeue,
    };
    let mut b = finish(c, base, &target, s, site);
    b.summary = format!(
        "take {name} out ({} nodes: {}){}",
        nodes.len(),
        nodes.join(", "),
        b.summary
            .split_once(':')
            .map_or(String::new(), |(_, rest)| format!(":{rest}"))
    );
    Ok(b)
}

/// The blast of a scenario already played out on the snapshot.
fn finish(c: &Cluster, base: &Base, target: &Target, s: Scenario, site: &SiteParams) -> Blast {
    let plan_before = &base.plan;
    let (plan_after, start_on_broken) = plan_after_for(c, base, target, &s.after, site);
    let gpus_back_in_service = match target {
        Action::Resume { node } => c
            .node(node)
            .filter(|n| !n.state.schedulable())
            .map_or(0, |n| n.gpu_count),
        _ => 0,
    };
    let killed_jobs = killed_jobs(c, &s, &plan_after, site);
    let gpus_freed = killed_jobs.iter().filter_map(|k| k.gpus).sum();
    let lost_gpu_hours = killed_jobs
        .iter()
        .filter_map(|k| k.restore.lost_gpu_hours.value)
        .sum();
    let (partition, cluster) = capacity(c, &s.after, s.partition.as_deref(), s.out_of_service);
    let killed_ids: BTreeSet<&str> = killed_jobs.iter().map(|k| k.id.as_str()).collect();
    let moved = moved_jobs(c, plan_before, &s.after, &plan_after, &killed_ids);
    let (jumped, falls_behind) = match target {
        Action::Priority { job, .. } => jumped_jobs(c, plan_before, &s.after, &plan_after, job),
        _ => Default::default(),
    };
    let (users, teams) = who_is_hit(&killed_jobs, &moved);
    let no_op = killed_jobs.is_empty()
        && s.out_of_service == 0
        && moved.is_empty()
        && jumped.is_empty()
        && falls_behind.is_empty()
        && gpus_back_in_service == 0;
    let mut b = Blast {
        target: target.clone(),
        summary: String::new(),
        no_op,
        killed: killed_jobs,
        gpus_freed,
        gpus_out_of_service: s.out_of_service,
        partition,
        cluster,
        lost_gpu_hours,
        moved,
        jumped,
        falls_behind,
        keep_running: s.keep_running,
        gpus_back_in_service,
        start_on_broken,
        users,
        teams,
    };
    b.summary = summary(&b);
    b
}

/// The snapshot as it would be after the action, and what it does.
struct Scenario {
    after: Cluster,
    /// Indexes of the jobs it ends (whole gangs).
    killed: Vec<usize>,
    /// The jobs it ends directly (the others die with their gang).
    seeds: Vec<usize>,
    requeue: bool,
    out_of_service: u32,
    partition: Option<String>,
    /// Jobs submitted with --no-requeue that a drain's requeue leaves running.
    keep_running: Vec<String>,
}

impl Scenario {
    fn of(after: Cluster, out_of_service: u32, partition: Option<String>) -> Scenario {
        Scenario {
            after,
            killed: Vec::new(),
            seeds: Vec::new(),
            requeue: false,
            out_of_service,
            partition,
            keep_running: Vec::new(),
        }
    }
}

/// The what-if of `target` on `c`.
fn scenario(c: &Cluster, target: &Target, site: &SiteParams) -> Result<Scenario, EngineError> {
    let find_job = |id: &str| {
        c.jobs
            .iter()
            .position(|j| j.id == id)
            .ok_or_else(|| EngineError::NoJob(id.to_string()))
    };
    let node_of = |name: &str| {
        c.node(name)
            .ok_or_else(|| EngineError::NoNode(name.to_string()))
    };
    Ok(match target {
        Action::Drain { node, requeue, .. } => {
            let n = node_of(node)?;
            let (after, killed, kept) = whatif::drain_keeping(c, node, *requeue);
            Scenario {
                after,
                killed,
                seeds: whatif::jobs_on_node(c, node),
                requeue: *requeue,
                out_of_service: if n.state.schedulable() {
                    n.gpu_count
                } else {
                    0
                },
                partition: n.partitions.first().cloned(),
                keep_running: kept.iter().map(|&i| c.jobs[i].id.clone()).collect(),
            }
        }
        Action::Cordon { node, .. }
        | Action::Resume { node }
        | Action::Validate { node, .. }
        | Action::SetReason { node, .. } => {
            let n = node_of(node)?;
            let mut after = c.clone();
            let (state, oos) = match target {
                Action::Cordon { .. } if n.state == NodeState::Up => {
                    (NodeState::Cordoned, n.gpu_count)
                }
                // A check that passes puts it back like a resume.
                Action::Resume { .. } | Action::Validate { .. } => (NodeState::Up, 0),
                _ => (n.state, 0),
            };
            if let Some(x) = after.nodes.iter_mut().find(|x| &x.name == node) {
                std::sync::Arc::make_mut(x).state = state;
            }
            Scenario::of(after, oos, n.partitions.first().cloned())
        }
        Action::Requeue { job } | Action::Preempt { job, .. } => {
            let j = find_job(job)?;
            ends(c, target, j)?;
            let requeue = matches!(target, Action::Requeue { .. }) || site.preempt_requeues;
            let (after, killed) = whatif::end_job(c, j, requeue);
            Scenario {
                killed,
                seeds: vec![j],
                requeue,
                ..Scenario::of(after, 0, Some(c.jobs[j].partition.clone()))
            }
        }
        Action::Priority { job, value } => {
            let j = find_job(job)?;
            Scenario::of(
                whatif::reprioritize(c, j, *value),
                0,
                Some(c.jobs[j].partition.clone()),
            )
        }
        Action::Hold { job } | Action::Release { job } => {
            let j = find_job(job)?;
            let mut after = c.clone();
            std::sync::Arc::make_mut(&mut after.jobs[j]).reason = match target {
                Action::Hold { .. } => Some("JobHeldAdmin".into()),
                _ => None,
            };
            Scenario::of(after, 0, Some(c.jobs[j].partition.clone()))
        }
    })
}

/// Why job `j` cannot be ended by `target` (requeued or preempted), if it
/// cannot.
fn ends(c: &Cluster, target: &Target, j: usize) -> Result<(), EngineError> {
    let job = &c.jobs[j].id;
    // A pod with no Kueue workload or Volcano group (Kubernetes), or a
    // Slurm job submitted with --no-requeue: a requeue and a preempt (a
    // requeue on every backend) are refused alike.
    if let Some(e) = super::admit::cannot_requeue(c, target) {
        return Err(e);
    }
    if !c.jobs[j].state.holds_resources() {
        return Err(EngineError::NotRunning {
            job: job.clone(),
            state: c.jobs[j].state.as_str(),
            verb: if matches!(target, Action::Requeue { .. }) {
                "requeue"
            } else {
                "preempt"
            },
        });
    }
    Ok(())
}

/// The plan after the action, and (a resume of a node with critical
/// health) the pending jobs the scheduler would start on it at once: it
/// does not know the node's health and places work there as soon as it is
/// back.
fn plan_after_for(
    c: &Cluster,
    base: &Base,
    target: &Target,
    after: &Cluster,
    site: &SiteParams,
) -> (Plan, Vec<String>) {
    let resumed_broken = match target {
        Action::Resume { node } if base.unusable.contains(node) => Some(node.as_str()),
        _ => None,
    };
    let Some(node) = resumed_broken else {
        return (plan_after(after, base, site), Vec::new());
    };
    let mut unusable = base.unusable.clone();
    unusable.remove(node);
    let plan = super::plan::plan(after, site, &unusable);
    let starts: Vec<String> = after
        .jobs
        .iter()
        .enumerate()
        .filter(|(i, j)| {
            j.state.is_pending()
                && matches!(plan.estimate(*i), Some(Estimate::Starts { start, nodes })
                    if *start <= c.time + AT_ONCE_S && nodes.iter().any(|n| n == node))
        })
        .map(|(_, j)| j.id.clone())
        .collect();
    (plan, starts)
}

/// The jobs the action ends, each with its restore after it.
fn killed_jobs(c: &Cluster, s: &Scenario, plan_after: &Plan, site: &SiteParams) -> Vec<KilledJob> {
    s.killed
        .iter()
        .map(|&i| {
            let j = &c.jobs[i];
            let restore = restore_after(j, c.time, &s.after, plan_after, site);
            KilledJob {
                id: j.id.clone(),
                name: j.name.clone(),
                user: j.user.clone(),
                account: j.account.as_deref().map(str::to_string),
                gpus: j.gpus_requested(),
                nodes: j.nodes.clone(),
                gang: j.gang.as_deref().map(str::to_string),
                via_gang: !s.seeds.contains(&i),
                requeued: s.requeue,
                restore,
            }
        })
        .collect()
}

/// The capacity taken out, of the partition and of the cluster: of the
/// partition, the GPUs of its own nodes that `after` takes out of service
/// (issue 39: a domain's drain counted every node's GPUs against the first
/// node's partition, "200.0% of partition a100 (16 of 8)").
fn capacity(
    c: &Cluster,
    after: &Cluster,
    partition: Option<&str>,
    out: u32,
) -> (Option<Capacity>, Capacity) {
    let share = |removed: u32, total: u32| {
        if total == 0 {
            0.0
        } else {
            f64::from(removed) / f64::from(total)
        }
    };
    let part = partition
        .and_then(|name| c.partitions.iter().find(|p| p.name == name))
        .map(|p| {
            let members = || c.nodes.iter().filter(|n| n.partitions.contains(&p.name));
            let total = members().map(|n| n.gpu_count).sum();
            let removed: u32 = members()
                .filter(|n| n.state.schedulable())
                .filter(|n| after.node(&n.name).is_some_and(|a| !a.state.schedulable()))
                .map(|n| n.gpu_count)
                .sum();
            Capacity {
                name: p.name.clone(),
                gpus_removed: removed,
                gpus_total: total,
                // Its own GPUs' share, never the domain's whole count
                // (issue 58: "200.0% of partition a100 (8 of 8)").
                share: share(removed, total),
            }
        });
    let cluster_total: u32 = c.nodes.iter().map(|n| n.gpu_count).sum();
    let cluster = Capacity {
        name: c.name.clone(),
        gpus_removed: out,
        gpus_total: cluster_total,
        share: share(out, cluster_total),
    };
    (part, cluster)
}

/// The users and teams whose jobs die or move.
fn who_is_hit(killed: &[KilledJob], moved: &[Moved]) -> (Vec<String>, Vec<String>) {
    let mut users = BTreeSet::new();
    let mut teams = BTreeSet::new();
    for k in killed {
        users.insert(k.user.clone());
        teams.extend(k.account.clone());
    }
    for m in moved {
        users.insert(m.user.clone());
        if let Some(a) = &m.account {
            teams.insert(a.clone());
        }
    }
    (users.into_iter().collect(), teams.into_iter().collect())
}

/// One line: the action and what it costs.
fn summary(b: &Blast) -> String {
    if b.no_op {
        return format!("{}: nothing changes", describe(&b.target));
    }
    if let Action::Resume { .. } = &b.target {
        let sooner = b
            .moved
            .iter()
            .filter(|m| m.delta_s.is_some_and(|d| d < 0))
            .count();
        return format!(
            "{}: {} GPUs back in service, {} queued job(s) start sooner{}",
            describe(&b.target),
            b.gpus_back_in_service,
            sooner,
            if b.start_on_broken.is_empty() {
                String::new()
            } else {
                format!(
                    ", {} at once on its broken GPU(s): {}",
                    b.start_on_broken.len(),
                    b.start_on_broken.join(", ")
                )
            }
        );
    }
    let under_grace = b.killed.iter().any(|k| {
        k.restore
            .grace
            .as_ref()
            .is_some_and(|g| g.fits == Some(true))
    });
    let kept = if b.keep_running.is_empty() {
        String::new()
    } else {
        format!(
            "; job(s) {} refuse a requeue (--no-requeue) and keep running: the node stays draining until they end",
            b.keep_running.join(", ")
        )
    };
    format!(
        "{}: {} job(s) die ({} GPUs, {} GPU-hours {}), {} GPUs out of service, {} queued job(s) move{kept}",
        describe(&b.target),
        b.killed.len(),
        b.gpus_freed,
        crate::text::tenths(b.lost_gpu_hours),
        if under_grace {
            "lost: checkpoint writes under the grace period"
        } else {
            "since their checkpoints"
        },
        b.gpus_out_of_service,
        b.moved.len()
    )
}

/// A preemption's blast with a grace period of `grace_s`, from the hard
/// one: the same jobs end and the same queue moves; only what each loses
/// (and when it is back) changes. No second plan.
pub fn with_grace_period(
    hard: &Blast,
    c: &Cluster,
    base: &Base,
    grace_s: u64,
    site: &SiteParams,
) -> Blast {
    let mut b = hard.clone();
    if let Action::Preempt { grace_s: g, .. } = &mut b.target {
        *g = Some(grace_s);
    }
    for k in &mut b.killed {
        if let Some(j) = c.job(&k.id) {
            let hung = base.stalls.iter().any(|s| s.job == k.id);
            k.restore = with_grace(k.restore.clone(), j, grace_s, hung, site);
        }
    }
    b.lost_gpu_hours = b
        .killed
        .iter()
        .filter_map(|k| k.restore.lost_gpu_hours.value)
        .sum();
    b.summary = summary(&b);
    b
}

fn moved_jobs(
    c: &Cluster,
    before: &Plan,
    after: &Cluster,
    plan_after: &Plan,
    killed: &BTreeSet<&str>,
) -> Vec<Moved> {
    let after_ix: HashMap<&str, usize> = after
        .jobs
        .iter()
        .enumerate()
        .map(|(i, j)| (j.id.as_str(), i))
        .collect();
    let mut out = Vec::new();
    for &i in &before.order {
        let j = &c.jobs[i];
        if killed.contains(j.id.as_str()) {
            continue;
        }
        let b = before.estimate(i).and_then(Estimate::start);
        let a = after_ix
            .get(j.id.as_str())
            .and_then(|&k| plan_after.estimate(k))
            .and_then(Estimate::start);
        if a != b {
            out.push(Moved {
                id: j.id.clone(),
                name: j.name.clone(),
                user: j.user.clone(),
                account: j.account.as_deref().map(str::to_string),
                before: b,
                after: a,
                delta_s: a.zip(b).map(|(a, b)| a - b),
            });
        }
    }
    out
}

/// Pending jobs of the same partition whose order relative to `job` flips.
fn jumped_jobs(
    c: &Cluster,
    before: &Plan,
    after: &Cluster,
    plan_after: &Plan,
    job: &str,
) -> (Vec<String>, Vec<String>) {
    let rank =
        |order: &[usize], jobs: &[std::sync::Arc<crate::model::Job>]| -> HashMap<String, usize> {
            order
                .iter()
                .enumerate()
                .map(|(r, &i)| (jobs[i].id.clone(), r))
                .collect()
        };
    let (rb, ra) = (
        rank(&before.order, &c.jobs),
        rank(&plan_after.order, &after.jobs),
    );
    let (Some(&jb), Some(&ja)) = (rb.get(job), ra.get(job)) else {
        return Default::default();
    };
    let part = c
        .jobs
        .iter()
        .find(|j| j.id == job)
        .map(|j| j.partition.clone())
        .unwrap_or_default();
    // Ahead before and behind after: jumped; behind before and ahead
    // after: it falls behind them.
    let (mut jumped, mut behind) = (Vec::new(), Vec::new());
    for j in before
        .order
        .iter()
        .map(|&i| &c.jobs[i])
        .filter(|j| j.id != job && j.partition == part)
    {
        if let (Some(&ob), Some(&oa)) = (rb.get(&j.id), ra.get(&j.id)) {
            if ob < jb && oa > ja {
                jumped.push(j.id.clone());
            } else if ob > jb && oa < ja {
                behind.push(j.id.clone());
            }
        }
    }
    (jumped, behind)
}

#[cfg(test)]
mod tests;
