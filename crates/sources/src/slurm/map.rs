//! slurmrestd's wire types → nightshift's model.

use super::gres;
use super::hostlist;
use super::wire;
use crate::engine::units;
use crate::error::{Invalid, invalid};
use crate::model::{
    Checkpoint, Cluster, Gpu, Job, JobState, Node, NodeState, Partition, TimeLimit,
};
use std::collections::{BTreeMap, HashMap};

/// Node state from Slurm's base state and flags.
pub fn node_state(states: &[String], flags: &[String]) -> NodeState {
    let all: Vec<&str> = states.iter().chain(flags).map(String::as_str).collect();
    let has = |s: &str| all.contains(&s);
    let base = states.first().map(String::as_str).unwrap_or("");
    if has("DOWN") || has("NOT_RESPONDING") || has("FAIL") || base == "ERROR" {
        NodeState::Down
    } else if has("DRAIN") || has("DRAINING") || has("DRAINED") {
        if matches!(base, "MIXED" | "ALLOCATED" | "COMPLETING") || has("COMPLETING") {
            NodeState::Draining
        } else {
            NodeState::Drain
        }
    } else if held_back(&all).is_some() {
        NodeState::Reserved
    } else if matches!(
        base,
        "IDLE" | "MIXED" | "ALLOCATED" | "COMPLETING" | "PLANNED"
    ) {
        NodeState::Up
    } else if base == "FUTURE" || base == "UNKNOWN" || base.is_empty() {
        NodeState::Unknown
    } else {
        NodeState::Up
    }
}

/// Why the scheduler itself keeps a node from new work, by the state flag
/// that says so (sinfo's `maint`, `resv`, `inval`, `powering_down`,
/// `blocked`), in the operator's words; None for a node it may use. A
/// node Slurm powers down to save power (`POWERED_DOWN`) is not here: it
/// is woken for a job that needs it.
pub fn held_back(states: &[&str]) -> Option<&'static str> {
    // The most telling first: a maintenance reservation is a reservation.
    const WHY: [(&[&str], &str); 5] = [
        (&["MAINT", "MAINTENANCE"], "in a maintenance reservation"),
        (
            &["INVAL", "INVALID", "INVALID_REG"],
            "registered with an invalid configuration (slurm.conf and slurmd disagree)",
        ),
        (&["POWER_DOWN", "POWERING_DOWN"], "being powered down"),
        (&["BLOCKED"], "blocked by an exclusive topology job"),
        (&["RESERVED"], "in a reservation: only its jobs run there"),
    ];
    WHY.iter()
        .find(|(flags, _)| flags.iter().any(|f| states.contains(f)))
        .map(|(_, why)| *why)
}

pub fn job_state(states: &[String]) -> JobState {
    match states.first().map(String::as_str).unwrap_or("") {
        "PENDING" => JobState::Pending,
        "RUNNING" => JobState::Running,
        "COMPLETING" => JobState::Completing,
        "SUSPENDED" => JobState::Suspended,
        "COMPLETED" => JobState::Completed,
        "CANCELLED" => JobState::Cancelled,
        "FAILED" | "TIMEOUT" | "NODE_FAIL" | "BOOT_FAIL" | "DEADLINE" | "OUT_OF_MEMORY" => {
            JobState::Failed
        }
        "PREEMPTED" => JobState::Requeued,
        _ => JobState::Unknown,
    }
}

/// Checkpoint metadata from a job's comment, by nightshift's convention:
/// `ckpt_bytes=1.2TB ckpt_last=<epoch> ckpt_every=30m ckpt_params=70B`
/// (space- or comma-separated; other words are ignored).
pub fn checkpoint_from_comment(comment: &str) -> Checkpoint {
    let mut ck = Checkpoint::default();
    for word in comment.split([' ', ',', ';']) {
        let Some((k, v)) = word.split_once('=') else {
            continue;
        };
        match k.trim() {
            "ckpt_bytes" => ck.size_bytes = units::parse_bytes(v).ok().into(),
            "ckpt_last" => ck.last = v.trim().parse().ok().into(),
            "ckpt_every" => ck.interval_s = units::parse_duration(v).ok().into(),
            "ckpt_params" => ck.params = units::parse_count(v).ok().into(),
            _ => {}
        }
    }
    ck
}

/// The id squeue shows: `1234`, `1234_7` for an array task, `1234_[0-3]`
/// for an array's pending remainder. `None` when the record has no id: it
/// is not a job nightshift can name (never job "0").
pub fn job_id(j: &wire::Job) -> Option<String> {
    let id = j.job_id.get().filter(|i| *i > 0);
    let array = j.array_job_id.get().filter(|a| *a > 0);
    match (array, j.array_task_id.get()) {
        (Some(a), Some(t)) => Some(format!("{a}_{t}")),
        (Some(a), None) if !j.array_task_string.is_empty() => {
            Some(format!("{a}_[{}]", j.array_task_string))
        }
        _ => id.map(|i| i.to_string()),
    }
}

/// A count that must fit a u32, or the record is unreadable.
fn count(v: i64, what: &str) -> Result<u32, Invalid> {
    u32::try_from(v).map_err(|_| invalid!("{what} {v} is out of range"))
}

fn job(j: &wire::Job) -> Result<Job, Invalid> {
    let id = job_id(j).ok_or_else(|| {
        invalid!(
            "a job named {:?} with no job id",
            crate::text::one_line(&j.name, 40)
        )
    })?;
    let nodes = hostlist::expand(&j.nodes).map_err(|e| invalid!("job {id}: {e}"))?;
    let state = job_state(&j.job_state.0);
    let node_count = match j.node_count.positive() {
        Some(n) => Some(count(n, "node_count").map_err(|e| invalid!("job {id}: {e}"))?),
        None if nodes.is_empty() => None,
        None => Some(u32::try_from(nodes.len()).map_err(|_| invalid!("job {id}: too many nodes"))?),
    };
    let per_node = gres::tres_gpus(&j.tres_per_node);
    let per_job = gres::tres_gpus(&j.tres_per_job);
    let max = crate::limits::get().max_gpus_per_node;
    if per_node.is_some_and(|g| g > max) || per_job.is_some_and(|g| g > max.saturating_mul(65_536))
    {
        return Err(invalid!(
            "job {id}: asks for more GPUs than {max} per node (limits.max_gpus_per_node)"
        ));
    }
    let detail_total = j
        .gres_detail
        .iter()
        .filter_map(|d| gres::parse(d))
        .try_fold(0u32, |acc, g| acc.checked_add(g.count))
        .ok_or_else(|| invalid!("job {id}: GPU count in gres_detail out of range"))?;
    let per_node_total = match per_node {
        Some(g) => Some(
            g.checked_mul(node_count.unwrap_or(1))
                .ok_or_else(|| invalid!("job {id}: GPUs per node × nodes out of range"))?,
        ),
        None => None,
    };
    let gpus_total = per_job
        .or(per_node_total)
        .or((detail_total > 0).then_some(detail_total));
    let gpus_per_node = per_node.or_else(|| match (gpus_total, node_count) {
        (Some(t), Some(n)) if n > 0 && t % n == 0 => Some(t / n),
        _ => None,
    });
    let multi = node_count.unwrap_or(1) > 1;
    let limit = if j.time_limit.infinite {
        Some(TimeLimit::Unlimited)
    } else {
        match j.time_limit.get() {
            Some(m) if m > 0 => Some(TimeLimit::Seconds(
                u64::try_from(m)
                    .ok()
                    .and_then(|m| m.checked_mul(60))
                    .ok_or_else(|| invalid!("job {id}: time_limit {m} min out of range"))?,
            )),
            // null (no limit set: the partition's, here unlimited) and -1.
            _ => Some(TimeLimit::Unlimited),
        }
    };
    let reason = Some(j.state_reason.clone()).filter(|r| !r.is_empty() && r != "None");
    Ok(Job {
        id: id.clone(),
        name: j.name.clone(),
        user: j.user_name.clone(),
        account: Some(j.account.clone())
            .filter(|a| !a.is_empty())
            .map(Into::into),
        partition: j.partition.clone(),
        qos: Some(j.qos.clone())
            .filter(|q| !q.is_empty())
            .map(Into::into),
        priority: j.priority.get().and_then(|p| u64::try_from(p).ok()).into(),
        state,
        reason,
        gpus_per_node,
        node_count,
        gpus_total,
        nodes: if state.holds_resources() {
            nodes
        } else {
            Vec::new()
        },
        submit_time: j.submit_time.positive().into(),
        eligible_time: j.eligible_time.positive().into(),
        start_time: if state.holds_resources() || !state.is_pending() {
            j.start_time.positive().into()
        } else {
            crate::model::When::UNKNOWN
        },
        end_time: if state.holds_resources() || state.is_pending() {
            crate::model::When::UNKNOWN
        } else {
            j.end_time.positive().into()
        },
        time_limit: limit,
        gang: multi.then(|| format!("slurm-{id}").into()),
        checkpoint: checkpoint_from_comment(&j.comment),
        restarts: j
            .restart_cnt
            .get()
            .map(|n| u32::try_from(n.max(0)).unwrap_or(u32::MAX)),
        requeueable: j.requeue,
        // --switches=1: every node under one leaf switch.
        // (`required_switches` from v0.0.40, `minimum_switches` before).
        same_domain: ((j
            .required_switches
            .positive()
            .or(j.minimum_switches.positive())
            == Some(1))
        .then(|| "leaf".to_string()))
        .map(Into::into),
        required_nodes: (hostlist::expand(&j.required_nodes).unwrap_or_default()).into(),
        pods: Default::default(),
    })
}

fn node(n: &wire::Node, partitions: &HashMap<String, Vec<String>>) -> Result<Node, Invalid> {
    if n.name.is_empty() {
        return Err("a node without a name".into());
    }
    let g = gres::parse(&n.gres).unwrap_or_default();
    let max = crate::limits::get().max_gpus_per_node;
    if g.count > max {
        return Err(invalid!(
            "node {}: gres {:?} claims {} GPUs, more than {max} (limits.max_gpus_per_node)",
            n.name,
            crate::text::one_line(&n.gres, 40),
            g.count
        ));
    }
    let model: Option<std::sync::Arc<str>> = g.model.as_ref().map(|m| m.to_uppercase().into());
    let name: std::sync::Arc<str> = n.name.as_str().into();
    let gpus = (0..g.count)
        .map(|i| {
            let mut gpu = Gpu::unknown_on(&name, i);
            gpu.model = model.clone();
            gpu
        })
        .collect();
    // The partitions' own node lists first: they are right on every
    // version, where a node's own list is not (slurmrestd 22.05's
    // `/node/NAME` names the first partition for every node).
    let node_parts = partitions
        .get(&n.name)
        .cloned()
        .unwrap_or_else(|| n.partitions.clone());
    let mut flags = n.state_flags.clone();
    flags.extend(n.state.0.iter().skip(1).cloned());
    let all: Vec<&str> = n.state.0.iter().chain(&flags).map(String::as_str).collect();
    // A node held back by the scheduler says why, though no one gave it a
    // reason (a maintenance reservation has none of its own).
    let reason = Some(n.reason.clone())
        .filter(|r| !r.is_empty())
        .or_else(|| held_back(&all).map(str::to_string));
    let mut labels = BTreeMap::new();
    if !n.features.is_empty() {
        labels.insert("slurm.features".into(), n.features.join(","));
    }
    Ok(Node {
        name: n.name.clone(),
        partitions: node_parts.into(),
        state: node_state(&n.state.0, &flags),
        reason_set_by: Some(n.reason_set_by_user.clone())
            .filter(|r| !r.is_empty() && reason.is_some()),
        reason_time: n.reason_changed_at.positive().filter(|_| reason.is_some()),
        boot_time: n.boot_time.positive(),
        fault_reports: Vec::new(),
        back_at: None,
        reason,
        gpu_model: model.as_deref().map(str::to_string),
        domains: Default::default(),
        ib_ports: Default::default(),
        gpu_summary: None,
        labels: labels.into(),
        gpu_count: g.count,
        gpus,
    })
}

/// The nodes of the reservations active at `now`: per node, the words for
/// it ("in maintenance reservation maint3 until 13:28") and the
/// reservation's end (None: it has none).
fn reserved_until(
    reservations: &[wire::Reservation],
    now: i64,
    warnings: &mut Vec<String>,
) -> HashMap<String, (String, Option<i64>)> {
    let mut out = HashMap::new();
    for r in reservations {
        let started = r.start_time.positive().is_none_or(|s| s <= now);
        let end = if r.end_time.infinite {
            None
        } else {
            r.end_time.positive()
        };
        if !started || end.is_some_and(|e| e <= now) || r.node_list.is_empty() {
            continue;
        }
        let members = match hostlist::expand(&r.node_list) {
            Ok(m) => m,
            Err(e) => {
                warnings.push(format!("reservation {}: {e}", r.name));
                continue;
            }
        };
        let kind = if r.flags.0.iter().any(|f| f == "MAINT" || f == "MAINTENANCE") {
            "maintenance reservation"
        } else {
            "reservation"
        };
        let until = end.map_or("with no end".to_string(), |e| {
            format!("until {}", crate::text::moment(e, now))
        });
        let why = format!("in {kind} {} {until}", r.name);
        for m in members {
            out.insert(m, (why.clone(), end));
        }
    }
    out
}

/// The reservations that have not started yet, with their nodes: the
/// plan starts no job there whose time limit runs into one (issue 58: a
/// job bound to a node with a maintenance window in 20 minutes was said
/// to "start now"; Slurm starts it after the window).
fn ahead(
    reservations: &[wire::Reservation],
    now: i64,
    warnings: &mut Vec<String>,
) -> Vec<crate::model::Reservation> {
    let mut out = Vec::new();
    for r in reservations {
        let Some(start) = r.start_time.positive().filter(|&s| s > now) else {
            continue;
        };
        if r.node_list.is_empty() {
            continue;
        }
        let nodes = match hostlist::expand(&r.node_list) {
            Ok(m) => m,
            Err(e) => {
                warnings.push(format!("reservation {}: {e}", r.name));
                continue;
            }
        };
        out.push(crate::model::Reservation {
            name: r.name.clone(),
            nodes,
            start,
            end: if r.end_time.infinite {
                None
            } else {
                r.end_time.positive()
            },
        });
    }
    out
}

/// A snapshot and the records that could not be read (skipped, named).
#[derive(Debug, Clone, Default)]
pub struct Mapped {
    pub cluster: Cluster,
    pub warnings: Vec<String>,
}

/// A cluster snapshot from the three lists, at `now`. A record that cannot
/// be read is skipped with a warning that names it; the rest stands.
pub fn cluster(
    name: &str,
    now: i64,
    nodes: &[wire::Node],
    jobs: &[wire::Job],
    parts: &[wire::Partition],
) -> Mapped {
    cluster_with(name, now, nodes, jobs, parts, &[])
}

/// [`cluster`] with the reservations: a node the scheduler holds back for
/// a reservation says which, and until when (its `back_at`).
pub fn cluster_with(
    name: &str,
    now: i64,
    nodes: &[wire::Node],
    jobs: &[wire::Job],
    parts: &[wire::Partition],
    reservations: &[wire::Reservation],
) -> Mapped {
    let mut warnings = Vec::new();
    let mut member_of: HashMap<String, Vec<String>> = HashMap::new();
    let partitions: Vec<Partition> = parts
        .iter()
        .map(|p| {
            let members = hostlist::expand(&p.nodes.0).unwrap_or_else(|e| {
                warnings.push(format!("partition {}: {e}", p.name));
                Vec::new()
            });
            for m in &members {
                member_of.entry(m.clone()).or_default().push(p.name.clone());
            }
            let max = if p.maximums.time.value.is_some() || p.maximums.time.infinite {
                p.maximums.time
            } else {
                p.max_time_limit
            };
            Partition {
                name: p.name.clone(),
                nodes: members,
                gpu_model: None,
                // Minutes; a value too large to be seconds is no limit.
                max_time_s: max
                    .positive()
                    .and_then(|m| u64::try_from(m).ok()?.checked_mul(60)),
            }
        })
        .collect();
    let mut model_nodes: Vec<Node> = Vec::with_capacity(nodes.len());
    let held = reserved_until(reservations, now, &mut warnings);
    for n in nodes {
        match node(n, &member_of) {
            Ok(mut x) => {
                if x.state == NodeState::Reserved
                    && let Some((why, end)) = held.get(&x.name)
                {
                    x.reason = Some(why.clone());
                    x.back_at = *end;
                }
                model_nodes.push(x)
            }
            Err(e) => warnings.push(format!("skipped {e}")),
        }
    }
    let mut kept: Vec<&wire::Job> = Vec::with_capacity(jobs.len());
    let mut model_jobs: Vec<Job> = Vec::with_capacity(jobs.len());
    for w in jobs {
        match job(w) {
            Ok(j) => {
                kept.push(w);
                model_jobs.push(j);
            }
            Err(e) => warnings.push(format!("skipped {e}")),
        }
    }
    let jobs = kept;
    let ix: HashMap<String, usize> = model_nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.clone(), i))
        .collect();
    for (w, j) in jobs.iter().copied().zip(&model_jobs) {
        if !j.state.holds_resources() {
            continue;
        }
        for (k, name) in j.nodes.iter().enumerate() {
            let Some(&n) = ix.get(name) else { continue };
            let node = &mut model_nodes[n];
            // gres_detail has one entry per allocated node, in hostlist order.
            let indices = w
                .gres_detail
                .get(k)
                .and_then(|d| gres::parse(d))
                .and_then(|g| g.indices);
            match indices {
                Some(idx) => {
                    for i in idx {
                        if let Some(g) = node.gpus.iter_mut().find(|g| g.index == i) {
                            g.job = Some(j.id.clone());
                        }
                    }
                }
                None => {
                    // No index list: take the job's count of free GPUs.
                    let want = j.gpus_per_node.unwrap_or(0) as usize;
                    for g in node.gpus.iter_mut().filter(|g| g.job.is_none()).take(want) {
                        g.job = Some(j.id.clone());
                    }
                }
            }
        }
    }
    Mapped {
        cluster: Cluster {
            history: Vec::new(),
            no_job_signal: false,
            reservations: ahead(reservations, now, &mut warnings),
            name: name.to_string(),
            source: "slurm".into(),
            time: now,
            partitions,
            nodes: model_nodes.into_iter().map(std::sync::Arc::new).collect(),
            jobs: model_jobs.into_iter().map(std::sync::Arc::new).collect(),
            events: Vec::new(),
            quotas: Vec::new(),
        },
        warnings,
    }
}
