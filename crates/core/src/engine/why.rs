//! Why is my job waiting? The causes, each with its numbers, an estimated
//! start from the queue plan, and what would make it start sooner.

use super::base::Base;
use super::plan::{Estimate, Plan, Unusable, shape, usable};
use crate::model::{Cluster, Job, NodeState, Timestamp};
use crate::text;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Cause {
    /// The scheduler's own reason, in plain language.
    SchedulerReason { reason: String, meaning: String },
    /// Held or waiting on something capacity does not resolve.
    Blocked { reason: String },
    /// Not enough free GPUs in the partition.
    Capacity {
        free: u32,
        needed: u32,
        partition_gpus: u32,
    },
    /// Enough GPUs free in total, but not in the job's shape.
    Fragmentation {
        free: u32,
        max_free_on_a_node: u32,
        nodes_that_fit: u32,
        nodes_needed: u32,
        gpus_per_node: u32,
        /// Free GPUs per topology group (NVLink domain, rack).
        free_by_group: BTreeMap<String, u32>,
    },
    /// Nodes out of service that would fit the job's shape.
    DrainedCapacity {
        nodes: Vec<String>,
        gpus: u32,
        would_fit: bool,
    },
    /// Nodes the scheduler may still use whose health says drain them:
    /// their free GPUs are not counted.
    UnhealthyCapacity { nodes: Vec<String>, gpus_free: u32 },
    /// Pending jobs ahead of it in the partition.
    Priority {
        ahead: u32,
        ahead_gpus: u32,
        first_ahead: Vec<String>,
    },
    /// It must run under one failure domain (Slurm `--switches=1`, Kueue's
    /// required topology) and none has room for it.
    Topology {
        level: String,
        nodes_needed: u32,
        gpus_per_node: u32,
        /// Per domain at that level: (free GPUs, nodes with room for its shape).
        free_by_domain: BTreeMap<String, (u32, u32)>,
    },
    /// Its team is at its GPU quota.
    Quota {
        account: String,
        in_use: u32,
        limit: u32,
        needed: u32,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reason {
    pub message: String,
    #[serde(flatten)]
    pub cause: Cause,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Why {
    pub job: String,
    pub state: String,
    pub causes: Vec<Reason>,
    pub estimate: Option<Estimate>,
    /// Seconds from now to the estimated start.
    pub eta_s: Option<i64>,
    /// The estimate in one sentence.
    pub estimate_note: Option<String>,
    /// What would help it start.
    pub suggestions: Vec<String>,
}

/// Slurm's pending reasons in the words of the on-call.
pub fn explain_reason(reason: &str) -> String {
    let r = reason.trim();
    if let Some(k) = super::schedmsg::explain(r) {
        return k;
    }
    let known = match r {
        "Resources" => "not enough free GPUs of the right shape yet",
        "Priority" => "jobs of higher priority are ahead of it in the partition",
        "Dependency" => "it waits for another job to finish (dependency)",
        "DependencyNeverSatisfied" => "its dependency can never be satisfied: fix or cancel it",
        "BeginTime" => "its requested start time is in the future",
        "JobHeldUser" => "held by its user (scontrol release)",
        "JobHeldAdmin" => "held by an administrator",
        "ReqNodeNotAvail" => "a node it needs is unavailable: down, drained or reserved",
        "PartitionTimeLimit" => "its time limit is longer than the partition allows",
        "PartitionNodeLimit" => "it asks for more nodes than the partition allows",
        "PartitionDown" => "its partition is down",
        "PartitionInactive" => "its partition is inactive",
        "Reservation" => "it waits for its advance reservation",
        "NodeDown" => "a node it needs is down",
        "BadConstraints" => "its constraints cannot be met",
        "Licenses" => "it waits for licenses",
        "InvalidAccount" => "its account is invalid",
        "InvalidQOS" => "its QOS is invalid",
        "launch failed requeued held" => "its launch failed; it was requeued and held",
        "None" => "no reason given yet (the scheduler has not looked at it)",
        _ => "",
    };
    if !known.is_empty() {
        return known.to_string();
    }
    if r.starts_with("AssocGrp") {
        return format!("its account (team) is at a group limit ({r})");
    }
    if r.starts_with("AssocMax") {
        return format!("it exceeds a per-job limit of its account ({r})");
    }
    if r.starts_with("QOSGrp") {
        return format!("its QOS is at a group limit ({r})");
    }
    if r.starts_with("QOSMax") {
        return format!("it exceeds a per-job limit of its QOS ({r})");
    }
    format!("the scheduler says {r:?}")
}

struct PartitionView<'a> {
    nodes: Vec<&'a crate::model::Node>,
    max_gpus_per_node: u32,
}

fn partition_nodes<'a>(c: &'a Cluster, name: &str) -> PartitionView<'a> {
    let nodes: Vec<&crate::model::Node> = c
        .nodes
        .iter()
        .map(|n| &**n)
        .filter(|n| n.partitions.iter().any(|p| p == name))
        .collect();
    let max_gpus_per_node = nodes.iter().map(|n| n.gpu_count).max().unwrap_or(0);
    PartitionView {
        nodes,
        max_gpus_per_node,
    }
}

/// Why `job` waits, given the snapshot's base (its queue plan and health).
pub fn why(c: &Cluster, job: usize, base: &Base) -> Option<Why> {
    let plan = &base.plan;
    let unusable = &base.unusable;
    let j = c.jobs.get(job)?;
    let mut causes = Vec::new();
    let mut suggestions = Vec::new();
    let estimate = plan.estimate(job).cloned();
    let eta_s = estimate
        .as_ref()
        .and_then(Estimate::start)
        .map(|s| (s - c.time).max(0));
    if !j.state.is_pending() {
        return Some(Why {
            job: j.id.clone(),
            state: j.state.as_str().into(),
            causes,
            estimate,
            eta_s,
            estimate_note: None,
            suggestions: vec![format!("job {} is {}, not waiting", j.id, j.state.as_str())],
        });
    }
    let begins = super::plan::begin_time(j);
    if let Some(r) = &j.reason {
        let meaning = match begins {
            Some(t) if j.restarts.unwrap_or(0) > 0 => format!(
                "requeued: the scheduler holds it back until {} (its begin time), then it competes for GPUs again",
                crate::text::clock(t)
            ),
            Some(t) => format!(
                "its begin time is {}: it cannot start before",
                crate::text::clock(t)
            ),
            None => explain_reason(r),
        };
        causes.push(Reason {
            message: format!("scheduler: {r} — {meaning}"),
            cause: Cause::SchedulerReason {
                reason: r.clone(),
                meaning,
            },
        });
        if super::plan::is_blocking_reason(r) && begins.is_none() {
            causes.push(Reason {
                message: format!("no capacity change starts it: {}", explain_reason(r)),
                cause: Cause::Blocked { reason: r.clone() },
            });
        }
    }

    let part = partition_nodes(c, &j.partition);
    let (k, g) = shape(j, part.max_gpus_per_node);
    let needed = j.gpus_requested().unwrap_or(k * g);
    quota_cause(c, j, needed, &mut causes, &mut suggestions);
    shape_causes(
        c,
        j,
        &part,
        (k, g, needed),
        unusable,
        &mut causes,
        &mut suggestions,
    );
    topology_cause(j, &part, (k, g), unusable, &mut causes);
    priority_cause(c, j, job, plan, &mut causes);

    // The estimate in words: its own field, not one of the suggestions
    // (a view shows the estimate apart and must not parse prose for it).
    let estimate_note = match &estimate {
        Some(Estimate::Starts { start, nodes }) if *start == c.time => Some(format!(
            "the model says it can start now on {}",
            nodes.join(",")
        )),
        Some(Estimate::Starts { start, nodes }) => {
            // Placed on a node the scheduler gives back then: its
            // reservation's end, said as such.
            let back = nodes.iter().find_map(|n| {
                let node = c.node(n)?;
                (node.back_at == Some(*start)).then(|| {
                    format!(
                        "when {n} comes back: {}",
                        node.reason.as_deref().unwrap_or("its reservation ends")
                    )
                })
            });
            Some(format!(
                "estimated start {} (in {}), {}",
                text::datetime(*start),
                text::duration(start - c.time),
                if begins == Some(*start) {
                    "at its begin time: GPUs for it are free by then".to_string()
                } else if let Some(b) = back {
                    b
                } else {
                    "when running jobs reach their time limits".to_string()
                }
            ))
        }
        Some(Estimate::NoFit {
            reason, waits_for, ..
        }) => Some(format!(
            "no estimate: {}",
            Estimate::no_fit_text(reason, waits_for, "start")
        )),
        Some(Estimate::Blocked { reason }) => Some(format!("no estimate while {reason}")),
        None => None,
    };
    Some(Why {
        job: j.id.clone(),
        state: j.state.as_str().into(),
        causes,
        estimate,
        eta_s,
        estimate_note,
        suggestions,
    })
}

/// Whether the job's team quota refuses it now: the quota holds fewer
/// unused GPUs than it needs.
fn over_quota(c: &Cluster, j: &Job, needed: u32) -> bool {
    j.account.as_deref().is_some_and(|a| {
        c.quotas
            .iter()
            .any(|q| q.account == a && q.gpu_limit.is_some_and(|l| q.gpus_in_use + needed > l))
    })
}

/// The team quota's share of the wait, stated as the scheduler does: how
/// many GPUs more than the quota leaves unused; and when enough of it
/// frees, counting every job that ends at the same moment.
fn quota_cause(
    c: &Cluster,
    j: &Job,
    needed: u32,
    causes: &mut Vec<Reason>,
    suggestions: &mut Vec<String>,
) {
    let Some(account) = j.account.as_deref() else {
        return;
    };
    let Some(q) = c.quotas.iter().find(|q| q.account == account) else {
        return;
    };
    let Some(limit) = q.gpu_limit else { return };
    if q.gpus_in_use + needed <= limit {
        return;
    }
    let short = q.gpus_in_use + needed - limit;
    causes.push(Reason {
        message: format!(
            "team {account} uses {} of its {limit} GPUs: {short} more needed for this job's {needed}",
            q.gpus_in_use
        ),
        cause: Cause::Quota {
            account: account.to_string(),
            in_use: q.gpus_in_use,
            limit,
            needed,
        },
    });
    if needed > limit {
        suggestions.push(format!(
            "team {account}'s quota ({limit} GPUs) is smaller than the {needed} this job needs: it never starts under it"
        ));
        return;
    }
    // The team's running jobs by the time they reach their limits; those
    // ending at the same moment free their GPUs together.
    let mut ends: Vec<(Timestamp, &Job)> = c
        .jobs
        .iter()
        .map(|x| &**x)
        .filter(|x| x.state.holds_resources() && x.account.as_deref() == Some(account))
        .filter_map(|x| match (x.start_time.get(), x.time_limit) {
            (Some(s), Some(crate::model::TimeLimit::Seconds(l))) => Some((s + l as i64, x)),
            _ => None,
        })
        .collect();
    ends.sort_by_key(|(t, x)| (*t, x.id.clone()));
    let mut freed = 0u32;
    let mut names: Vec<&str> = Vec::new();
    for (k, (t, x)) in ends.iter().enumerate() {
        freed += x.gpus_requested().unwrap_or(0);
        names.push(&x.id);
        let same_moment = ends.get(k + 1).is_some_and(|(next, _)| next == t);
        if freed >= short && !same_moment {
            suggestions.push(format!(
                "team {account}'s quota frees {freed} GPUs by {} when job(s) {} reach their limits: enough for this job",
                text::datetime(*t),
                names.join(", ")
            ));
            return;
        }
    }
}

/// Free GPUs on a node as the engine counts them: none on a node whose
/// health says drain it.
fn free_on(n: &crate::model::Node, unusable: &Unusable) -> u32 {
    if usable(n, unusable) {
        n.gpus_free()
    } else {
        0
    }
}

/// A job that must run under one domain of a level: each domain's free
/// GPUs and nodes with room, when none has room for the whole job.
fn topology_cause(
    j: &Job,
    part: &PartitionView,
    (k, g): (u32, u32),
    unusable: &Unusable,
    causes: &mut Vec<Reason>,
) {
    // One node is always under one domain: the node's causes say it all.
    let Some(level) = j.same_domain.as_deref().filter(|_| k > 1) else {
        return;
    };
    let mut by: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    for n in &part.nodes {
        if let Some(d) = n.domain(level) {
            let free = free_on(n, unusable);
            let e = by.entry(d.name.clone()).or_default();
            e.0 += free;
            e.1 += u32::from(free >= g);
        }
    }
    if by.is_empty() || by.values().any(|(_, fit)| *fit >= k) {
        return;
    }
    let mut each: Vec<(&String, &(u32, u32))> = by.iter().collect();
    each.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let listed: Vec<String> = each
        .iter()
        .map(|(d, (free, _))| format!("{} {free}", crate::text::sanitize(d)))
        .collect();
    let first = listed
        .first()
        .map_or(String::new(), |f| f.replacen(' ', " has ", 1) + " free");
    let rest = if listed.len() > 1 {
        format!(", {}", listed[1..].join(", "))
    } else {
        String::new()
    };
    causes.push(Reason {
        message: format!(
            "needs {} under one {level} ({k} × {g}): {first}{rest}",
            k * g
        ),
        cause: Cause::Topology {
            level: level.to_string(),
            nodes_needed: k,
            gpus_per_node: g,
            free_by_domain: by,
        },
    });
}

fn shape_causes(
    c: &Cluster,
    j: &Job,
    part: &PartitionView,
    (k, g, needed): (u32, u32, u32),
    unusable: &Unusable,
    causes: &mut Vec<Reason>,
    suggestions: &mut Vec<String>,
) {
    let free_per_node: Vec<u32> = part.nodes.iter().map(|n| free_on(n, unusable)).collect();
    let free: u32 = free_per_node.iter().sum();
    let max_free = free_per_node.iter().copied().max().unwrap_or(0);
    let fit_nodes = free_per_node.iter().filter(|&&f| f >= g).count() as u32;
    let partition_gpus: u32 = part.nodes.iter().map(|n| n.gpu_count).sum();
    let fits_now = fit_nodes >= k;
    if free < needed {
        causes.push(Reason {
            message: format!(
                "{free} GPUs free in partition {} of {partition_gpus}; it needs {needed}",
                j.partition
            ),
            cause: Cause::Capacity {
                free,
                needed,
                partition_gpus,
            },
        });
    } else if !fits_now {
        let mut by_group: BTreeMap<String, u32> = BTreeMap::new();
        for n in &part.nodes {
            if let Some(t) = n.topology() {
                *by_group.entry(t.to_string()).or_default() += free_on(n, unusable);
            }
        }
        let per = if k == 1 {
            format!("needs {g} on one node")
        } else {
            format!("needs {g} on each of {k} nodes")
        };
        causes.push(Reason {
            message: format!("{free} GPUs free, but at most {max_free} on any node; {per}"),
            cause: Cause::Fragmentation {
                free,
                max_free_on_a_node: max_free,
                nodes_that_fit: fit_nodes,
                nodes_needed: k,
                gpus_per_node: g,
                free_by_group: by_group,
            },
        });
        // Other shapes of the same total that fit now — never while the
        // team's quota refuses the total whatever its shape.
        let quota_refuses = over_quota(c, j, needed);
        for per_node in (1..g).rev().filter(|_| !quota_refuses) {
            if !needed.is_multiple_of(per_node) {
                continue;
            }
            let count = needed / per_node;
            let can = free_per_node.iter().filter(|&&f| f >= per_node).count() as u32;
            if can >= count {
                suggestions.push(format!("as {count} × {per_node} GPUs it could start now"));
                break;
            }
        }
    }
    causes.extend(unhealthy_capacity(part, unusable));
    if !fits_now {
        drained_capacity(part, (k, g), fit_nodes, unusable, causes, suggestions);
    }
    // Other partitions with room for its shape now.
    if !fits_now {
        other_partitions(c, j, (k, g), unusable, suggestions);
    }
}

/// Nodes in service whose health says drain them: their free GPUs would
/// only start a job on a broken GPU.
fn unhealthy_capacity(part: &PartitionView, unusable: &Unusable) -> Option<Reason> {
    let sick: Vec<&&crate::model::Node> = part
        .nodes
        .iter()
        .filter(|n| n.state.schedulable() && unusable.contains(&n.name) && n.gpus_free() > 0)
        .collect();
    if sick.is_empty() {
        return None;
    }
    let gpus_free = sick.iter().map(|n| n.gpus_free()).sum();
    let names: Vec<String> = sick.iter().map(|n| n.name.clone()).collect();
    Some(Reason {
        message: format!(
            "{gpus_free} free GPUs not counted: their node's health says drain it ({})",
            names.join(", ")
        ),
        cause: Cause::UnhealthyCapacity {
            nodes: names,
            gpus_free,
        },
    })
}

/// Drained capacity that would fit the job (only healthy nodes would let it
/// start if they came back).
fn drained_capacity(
    part: &PartitionView,
    (k, g): (u32, u32),
    fit_nodes: u32,
    unusable: &Unusable,
    causes: &mut Vec<Reason>,
    suggestions: &mut Vec<String>,
) {
    let out: Vec<&&crate::model::Node> = part
        .nodes
        .iter()
        .filter(|n| {
            matches!(
                n.state,
                NodeState::Drain | NodeState::Draining | NodeState::Down | NodeState::Cordoned
            )
        })
        .collect();
    if !out.is_empty() {
        // Only healthy nodes would let it start if they came back.
        let fitting: Vec<&&crate::model::Node> = out
            .iter()
            .copied()
            .filter(|n| !unusable.contains(&n.name))
            .filter(|n| n.gpu_count.saturating_sub(n.gpus_allocated()) >= g)
            .collect();
        let gpus = out.iter().map(|n| n.gpu_count).sum();
        let would_fit = fit_nodes + fitting.len() as u32 >= k;
        let names: Vec<String> = out.iter().map(|n| n.name.clone()).collect();
        let detail: Vec<String> = out
            .iter()
            .map(|n| {
                format!(
                    "{} ({}{}{})",
                    n.name,
                    n.state.as_str(),
                    n.reason
                        .as_ref()
                        .map_or(String::new(), |r| format!(": {r}")),
                    if unusable.contains(&n.name) {
                        "; health unresolved, not counted"
                    } else {
                        ""
                    }
                )
            })
            .collect();
        causes.push(Reason {
            message: format!(
                "{gpus} GPUs out of service on {}{}",
                detail.join(", "),
                if would_fit {
                    "; with them back it would fit"
                } else {
                    ""
                }
            ),
            cause: Cause::DrainedCapacity {
                nodes: names,
                gpus,
                would_fit,
            },
        });
        if would_fit && let Some(n) = fitting.first() {
            suggestions.push(format!("resuming {} would let it start", n.name));
        }
    }
}

/// Other partitions with room for the job's shape now.
fn other_partitions(
    c: &Cluster,
    j: &Job,
    (k, g): (u32, u32),
    unusable: &Unusable,
    suggestions: &mut Vec<String>,
) {
    for p in c.partitions.iter().filter(|p| p.name != j.partition) {
        let other = partition_nodes(c, &p.name);
        let fit = other
            .nodes
            .iter()
            .filter(|n| free_on(n, unusable) >= g)
            .count() as u32;
        if fit >= k {
            let what = if k == 1 {
                format!(
                    "{} free on one node",
                    other
                        .nodes
                        .iter()
                        .map(|n| free_on(n, unusable))
                        .max()
                        .unwrap_or(0)
                )
            } else {
                format!("{fit} nodes with {g} free")
            };
            suggestions.push(format!("partition {} has {what}", p.name));
        }
    }
}

fn priority_cause(c: &Cluster, j: &Job, job: usize, plan: &Plan, causes: &mut Vec<Reason>) {
    let Some(&(count, gpus)) = plan.ahead.get(job) else {
        return;
    };
    if count == 0 {
        return;
    }
    let first: Vec<String> = plan
        .first_in_partition
        .get(&(j.partition.clone(), super::plan::queue_of(j)))
        .map(|v| {
            v.iter()
                .filter(|&&i| i != job)
                // The list is in queue order: those ahead come first.
                .take(count as usize)
                .map(|&i| c.jobs[i].id.clone())
                .collect()
        })
        .unwrap_or_default();
    causes.push(Reason {
        message: format!(
            "{count} job(s) ahead of it in {} ask for {gpus} GPUs (first: {})",
            j.partition,
            first.join(", ")
        ),
        cause: Cause::Priority {
            ahead: count,
            ahead_gpus: gpus,
            first_ahead: first,
        },
    });
}

#[cfg(test)]
mod tests;
