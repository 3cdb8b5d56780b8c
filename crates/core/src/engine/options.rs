//! Options, not one answer: the sensible remediations for a node (or a
//! job someone wants to preempt), side by side with the same measured
//! terms — GPU-hours lost, time until the jobs run again, capacity out of
//! service and for how long, queued jobs that move, what is unknown — and
//! one of them recommended, with the reason in one line.
//!
//! The terms come from the blast radius (who dies, restore times, moves);
//! waiting for a checkpoint, a GPU reset and a grace period change them as
//! docs/decision-engine.md ("Remediation options") works through.

use super::SiteParams;
use super::base::Base;
use super::blast::{Blast, blast};
use super::error::EngineError;
use super::xid::ActionClass;
use crate::model::{Action, Cluster, Timestamp};
use crate::text;
use serde::Serialize;
use std::collections::BTreeMap;

/// What the options are for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Subject {
    /// `node` or `job`.
    pub kind: &'static str,
    pub name: String,
    /// The catalog's class for what is wrong (`none` when healthy).
    pub action: ActionClass,
    /// One line: what is wrong, or what is asked.
    pub problem: String,
    /// Jobs that lose work if it is acted on (whole gangs).
    pub jobs: Vec<String>,
    /// Of those, the ones that make no progress (stalled).
    pub hung: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CapacityOut {
    pub gpus: u32,
    /// For how long, seconds from now; `None` when unknown.
    pub for_s: Option<i64>,
    pub note: String,
}

/// One way to go, with its costs. `None` in a term is unknown, never a
/// guess; `unknowns` says why.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Choice {
    /// `drain_now`, `wait_checkpoint`, `reset_gpu`, `drain_reboot`,
    /// `soft_preempt`, `hard_preempt`, `do_nothing`.
    pub name: &'static str,
    pub title: String,
    /// The calls, in order. The engine writes them as nightshift commands;
    /// the command line and the console show the backend's exact calls.
    pub actions: Vec<String>,
    /// What nightshift sends, in order: the first is what the option's key
    /// opens (behind the guard); later ones follow when the note says.
    #[serde(skip)]
    pub steps: Vec<Action>,
    /// Steps for a person on the node (nightshift resets and reboots
    /// nothing).
    pub manual: Vec<String>,
    pub gpu_hours_lost: Option<f64>,
    /// Seconds until the jobs run again (0: nothing stops).
    pub resume_in_s: Option<i64>,
    pub capacity_out: CapacityOut,
    pub queue_moves: Option<usize>,
    /// Seconds it waits before it acts (a checkpoint); `None` when it does
    /// not wait, or the wait is unknown (then `unknowns` says so).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_s: Option<i64>,
    pub unknowns: Vec<String>,
    /// What this option risks.
    pub risk: Option<String>,
    pub recommended: bool,
    /// One line: for the recommended option, why; for the others, what
    /// speaks against them.
    pub why: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Options {
    pub target: Subject,
    pub time: Timestamp,
    pub options: Vec<Choice>,
}

impl Options {
    pub fn recommended(&self) -> Option<&Choice> {
        self.options.iter().find(|o| o.recommended)
    }
}

/// The jobs a blast kills that are hung, with what each burns per hour.
pub(super) fn hung_in(base: &Base, b: &Blast) -> BTreeMap<String, f64> {
    base.stalls
        .iter()
        .filter(|s| b.killed.iter().any(|k| k.id == s.job))
        .map(|s| (s.job.clone(), s.burning_gpu_hours_per_hour))
        .collect()
}

/// GPU-hours lost and seconds until back, over the jobs a blast kills.
pub(super) fn kill_terms(c: &Cluster, b: &Blast) -> (Option<f64>, Option<i64>, Vec<String>) {
    let mut unknowns = Vec::new();
    let mut lost = Some(0.0);
    let mut back: Option<i64> = Some(0);
    for id in &b.keep_running {
        unknowns.push(format!(
            "job {id} refuses a requeue (submitted with --no-requeue): it keeps running and the node stays draining until it ends"
        ));
    }
    for k in &b.killed {
        // Submitted with --no-requeue: the scheduler refuses the requeue,
        // and nothing brings it back but its owner.
        if k.requeued && c.job(&k.id).is_some_and(|j| j.requeueable == Some(false)) {
            back = None;
            let pod = c.job(&k.id).is_some_and(|j| !j.pods.is_empty());
            unknowns.push(if pod {
                format!(
                    "job {} has no Kueue workload or Volcano group: evicted, it runs again only when its owner recreates it",
                    k.id
                )
            } else {
                format!(
                    "job {} refuses a requeue (submitted with --no-requeue): it ends, and runs again only when its owner resubmits it",
                    k.id
                )
            });
            if let Some(h) = k.restore.lost_gpu_hours.value {
                lost = lost.map(|l| l + h);
            }
            continue;
        }
        match k.restore.lost_gpu_hours.value {
            Some(h) => lost = lost.map(|l| l + h),
            None => {
                lost = None;
                unknowns.push(format!(
                    "GPU-hours lost by job {}: {}",
                    k.id, k.restore.lost_gpu_hours.note
                ));
            }
        }
        match k.restore.total_s.value {
            Some(t) => back = back.map(|b| b.max(t.ceil() as i64)),
            None => {
                back = None;
                unknowns.push(format!(
                    "when job {} runs again: {}",
                    k.id, k.restore.total_s.note
                ));
            }
        }
    }
    (lost, back, unknowns)
}

/// Why a job's next checkpoint is not known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoCheckpoint {
    #[error("job {0} is hung: it will not checkpoint")]
    Hung(String),
    #[error("job {0} is gone from the data")]
    Gone(String),
    #[error("job {0} reports no checkpoint interval (comment ckpt_every=…)")]
    NoInterval(String),
    #[error("job {job}'s checkpoint is overdue by {}: it may have stopped checkpointing", text::duration(*by_s))]
    Overdue { job: String, by_s: i64 },
}

/// Seconds until a running job's next checkpoint, or why that is unknown.
fn next_checkpoint(
    c: &Cluster,
    id: &str,
    hung: &BTreeMap<String, f64>,
) -> Result<i64, NoCheckpoint> {
    if hung.contains_key(id) {
        return Err(NoCheckpoint::Hung(id.to_string()));
    }
    let Some(j) = c.job(id) else {
        return Err(NoCheckpoint::Gone(id.to_string()));
    };
    let (Some(every), Some(last)) = (j.checkpoint.interval_s, j.checkpoint.last.or(j.start_time))
    else {
        return Err(NoCheckpoint::NoInterval(id.to_string()));
    };
    let next = last + every as i64;
    if next < c.time - 60 {
        return Err(NoCheckpoint::Overdue {
            job: id.to_string(),
            by_s: c.time - next,
        });
    }
    Ok((next - c.time).max(0))
}

/// Waiting for every killed job's next checkpoint before acting: the wait,
/// the GPU-hours still lost (each job's work between its checkpoint and
/// the last one's), or why it cannot be known.
pub(super) fn wait_terms(
    c: &Cluster,
    b: &Blast,
    hung: &BTreeMap<String, f64>,
) -> Result<(i64, f64), Vec<String>> {
    let mut next = Vec::new();
    let mut errs = Vec::new();
    for k in &b.killed {
        match next_checkpoint(c, &k.id, hung) {
            Ok(s) => next.push((s, k.gpus)),
            Err(e) => errs.push(e.to_string()),
        }
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    let wait = next.iter().map(|(s, _)| *s).max().unwrap_or(0);
    let mut lost = 0.0;
    for (s, gpus) in next {
        match gpus {
            Some(g) => lost += (wait - s) as f64 / 3600.0 * f64::from(g),
            None => return Err(vec!["a job's GPU count is unknown".into()]),
        }
    }
    Ok((wait, lost))
}

pub(super) fn hours(h: Option<f64>) -> String {
    h.map_or("?".into(), |h| format!("{h:.1}"))
}

/// The options for a node: from its health verdict and its jobs.
pub fn node_options(
    c: &Cluster,
    base: &Base,
    node: &str,
    site: &SiteParams,
) -> Result<Options, EngineError> {
    let drain = Action::Drain {
        node: node.to_string(),
        reason: String::new(),
        requeue: true,
    };
    let b = blast(c, base, &drain, site)?;
    node_options_with(c, base, node, site, b)
}

/// The same, given the blast radius of draining it (the console has it).
pub fn node_options_with(
    c: &Cluster,
    base: &Base,
    node: &str,
    site: &SiteParams,
    b: Blast,
) -> Result<Options, EngineError> {
    let case = NodeCase::new(c, base, node, site, b)?;
    let mut options = vec![case.drain_now()];
    if let Some(choice) = case.wait_checkpoint() {
        options.push(choice);
    }
    if let Some(choice) = case.reset_gpu()? {
        options.push(choice);
    }
    if let Some(choice) = case.drain_reboot() {
        options.push(choice);
    }
    if let Some(choice) = drain_broken(c, base, node, case.class, &case.hung, site)? {
        options.insert(0, choice);
    }
    options.push(do_nothing(&case.hung, case.class));
    let mut o = Options {
        target: case.subject(),
        time: c.time,
        options,
    };
    recommend_for_node(&mut o, &case.hung, site);
    Ok(o)
}

/// What every option for one node reads: the node, its verdict, the blast
/// radius of draining it and what that costs.
struct NodeCase<'a> {
    c: &'a Cluster,
    base: &'a Base,
    n: &'a crate::model::Node,
    node: &'a str,
    site: &'a SiteParams,
    b: Blast,
    class: ActionClass,
    problem: String,
    reason: String,
    drain: Action,
    hung: BTreeMap<String, f64>,
    /// The GPUs a drain takes out of service (none when it is out already).
    node_gpus: u32,
    /// The GPUs whose own remedy is a reset.
    problem_gpus: Vec<u32>,
    remap_failed: bool,
    /// What draining costs: GPU-hours lost, time back, what is unknown.
    lost: Option<f64>,
    back: Option<i64>,
    unknowns: Vec<String>,
}

impl<'a> NodeCase<'a> {
    fn new(
        c: &'a Cluster,
        base: &'a Base,
        node: &'a str,
        site: &'a SiteParams,
        b: Blast,
    ) -> Result<NodeCase<'a>, EngineError> {
        let n = c
            .node(node)
            .ok_or_else(|| EngineError::NoNode(node.to_string()))?;
        let verdict = base.node_verdict(node);
        let class = verdict.map_or(ActionClass::None, |v| v.verdict.action);
        let problem = verdict.map_or_else(|| "healthy".to_string(), |v| v.verdict.summary.clone());
        let reason = base
            .drain_reason(node)
            .unwrap_or_else(|| "drained via nightshift".to_string());
        let drain = Action::Drain {
            node: node.to_string(),
            reason: reason.clone(),
            requeue: true,
        };
        let hung = hung_in(base, &b);
        let node_gpus = if n.state.schedulable() {
            n.gpu_count
        } else {
            0
        };
        let problem_gpus: Vec<u32> = verdict
            .map(|v| {
                v.gpus
                    .iter()
                    .filter(|g| {
                        matches!(
                            g.verdict.action,
                            ActionClass::DrainResetGpu | ActionClass::ResetNextDrain
                        )
                    })
                    .map(|g| g.gpu)
                    .collect()
            })
            .unwrap_or_default();
        let remap_failed = n
            .gpus
            .iter()
            .any(|g| problem_gpus.contains(&g.index) && g.row_remap_failed == Some(true));
        let (lost, back, unknowns) = kill_terms(c, &b);
        Ok(NodeCase {
            c,
            base,
            n,
            node,
            site,
            b,
            class,
            problem,
            reason,
            drain,
            hung,
            node_gpus,
            problem_gpus,
            remap_failed,
            lost,
            back,
            unknowns,
        })
    }

    fn subject(&self) -> Subject {
        Subject {
            kind: "node",
            name: self.node.to_string(),
            action: self.class,
            problem: self.problem.clone(),
            jobs: self.b.killed.iter().map(|k| k.id.clone()).collect(),
            hung: self.hung.keys().cloned().collect(),
        }
    }

    /// How long a remedy of `class` keeps the node out.
    fn remedy_s(&self, class: ActionClass) -> Option<i64> {
        match class {
            ActionClass::DrainReboot => Some(self.site.node_reboot_s as i64),
            ActionClass::DrainResetGpu | ActionClass::ResetNextDrain => {
                Some(self.site.gpu_reset_s as i64)
            }
            _ => None,
        }
    }

    /// The remedy of `class`, as the operator's steps by hand.
    fn remedy_steps(&self, class: ActionClass) -> Vec<String> {
        let node = self.node;
        let gpus: Vec<String> = self.problem_gpus.iter().map(u32::to_string).collect();
        match class {
            ActionClass::DrainReboot => vec![format!("reboot {node}")],
            ActionClass::DrainResetGpu | ActionClass::ResetNextDrain if !gpus.is_empty() => {
                vec![format!(
                    "on {node}: nvidia-smi --gpu-reset -i {}",
                    gpus.join(",")
                )]
            }
            ActionClass::DrainInvestigate => vec![format!("investigate {node} (NVLink, fabric)")],
            _ => Vec::new(),
        }
    }

    /// How long the node is out after a drain, in words too.
    fn out_for(&self, class: ActionClass) -> (Option<i64>, String) {
        match self.remedy_s(class) {
            Some(s) => (
                Some(s),
                format!("until the remedy ({}) and a resume", class.remedy()),
            ),
            None => (None, "until someone resumes it".to_string()),
        }
    }

    /// Drain now and requeue (the catalog's remedy after).
    fn drain_now(&self) -> Choice {
        let (for_s, note) = self.out_for(self.class);
        let mut manual = self.remedy_steps(self.class);
        if self.class.needs_drain() || !manual.is_empty() {
            manual.push(format!("resume {} once fixed", self.node));
        }
        Choice {
            name: "drain_now",
            title: "drain now and requeue".into(),
            actions: vec![self.drain.command_line()],
            steps: vec![self.drain.clone()],
            manual,
            gpu_hours_lost: self.lost,
            resume_in_s: self.back,
            capacity_out: CapacityOut {
                gpus: self.node_gpus,
                for_s: if self.node_gpus == 0 { Some(0) } else { for_s },
                note,
            },
            queue_moves: Some(self.b.moved.len()),
            unknowns: self.unknowns.clone(),
            ..Choice::default()
        }
    }

    /// Cordon, wait for the next checkpoint(s), then drain: when jobs run.
    fn wait_checkpoint(&self) -> Option<Choice> {
        if self.b.killed.is_empty() {
            return None;
        }
        let c = self.c;
        let cordon = Action::Cordon {
            node: self.node.to_string(),
            reason: format!("{}: drain after checkpoint", self.reason),
        };
        let (wait, lost_w, unknowns_w) = match wait_terms(c, &self.b, &self.hung) {
            Ok((w, l)) => (Some(w), Some(l), self.unknowns.clone()),
            Err(e) => (None, None, e),
        };
        let title = match wait {
            Some(w) => format!(
                "cordon, drain after the next checkpoint (in {}, {})",
                text::duration(w),
                text::clock(c.time + w)
            ),
            None => "cordon, drain after the next checkpoint".into(),
        };
        let (for_s, _) = self.out_for(self.class);
        Some(Choice {
            name: "wait_checkpoint",
            title,
            actions: vec![cordon.command_line(), self.drain.command_line()],
            steps: vec![cordon, self.drain.clone()],
            manual: self.remedy_steps(self.class),
            gpu_hours_lost: lost_w,
            resume_in_s: wait.zip(self.back).map(|(w, b)| w + b),
            capacity_out: CapacityOut {
                gpus: self.node_gpus,
                for_s: wait.zip(for_s).map(|(w, f)| w + f),
                note: "cordoned now, drained at the checkpoint".into(),
            },
            queue_moves: Some(self.b.moved.len()),
            wait_s: wait,
            unknowns: unknowns_w,
            risk: Some(self.class.running_on().to_string()),
            ..Choice::default()
        })
    }

    /// Reset the GPU only: its jobs die, the node's others keep running.
    /// Not offered when a job on the GPU refuses a requeue (--no-requeue):
    /// the reset would have to cancel it.
    fn reset_gpu(&self) -> Result<Option<Choice>, EngineError> {
        let (c, node, site) = (self.c, self.node, self.site);
        let on_gpus: Vec<String> = {
            let mut v: Vec<String> = self
                .n
                .gpus
                .iter()
                .filter(|g| self.problem_gpus.contains(&g.index))
                .filter_map(|g| g.job.clone())
                .collect();
            v.sort();
            v.dedup();
            v
        };
        let requeueable = on_gpus
            .iter()
            .all(|id| c.job(id).is_none_or(|j| j.requeueable != Some(false)));
        if self.problem_gpus.is_empty()
            || self.remap_failed
            || self.class > ActionClass::DrainResetGpu
            || !requeueable
        {
            return Ok(None);
        }
        let mut blasts = Vec::new();
        for id in &on_gpus {
            blasts.push(blast(
                c,
                self.base,
                &Action::Requeue { job: id.clone() },
                site,
            )?);
        }
        let (mut lost_r, mut back_r, mut unknowns_r) = (Some(0.0), Some(0), Vec::new());
        let mut moves = std::collections::BTreeSet::new();
        let mut seen = std::collections::BTreeSet::new();
        for rb in &blasts {
            let mut once = rb.clone();
            once.killed.retain(|k| seen.insert(k.id.clone()));
            let (l, bk, u) = kill_terms(c, &once);
            lost_r = lost_r.zip(l).map(|(a, b)| a + b);
            back_r = back_r.zip(bk).map(|(a, b)| a.max(b));
            unknowns_r.extend(u);
            moves.extend(rb.moved.iter().map(|m| m.id.clone()));
        }
        let cordon = Action::Cordon {
            node: node.to_string(),
            reason: format!("{}: GPU reset", self.reason),
        };
        let mut steps = vec![cordon];
        steps.extend(on_gpus.iter().map(|id| Action::Requeue { job: id.clone() }));
        steps.push(Action::Resume {
            node: node.to_string(),
        });
        let gpus: Vec<String> = self.problem_gpus.iter().map(u32::to_string).collect();
        Ok(Some(Choice {
            name: "reset_gpu",
            title: format!("reset GPU {} only", gpus.join(",")),
            actions: steps.iter().map(Action::command_line).collect(),
            steps,
            manual: self.remedy_steps(ActionClass::DrainResetGpu),
            gpu_hours_lost: lost_r,
            resume_in_s: back_r.map(|b| b.max(site.gpu_reset_s as i64)),
            capacity_out: CapacityOut {
                gpus: self.problem_gpus.len() as u32,
                for_s: Some(site.gpu_reset_s as i64),
                note: format!(
                    "the GPU during its reset (the node cordoned meanwhile); {} other job(s) keep running",
                    self.b.killed.len().saturating_sub(seen.len())
                ),
            },
            queue_moves: Some(moves.len()),
            unknowns: unknowns_r,
            ..Choice::default()
        }))
    }

    /// Drain and reboot, where the catalog's remedy is something lighter.
    fn drain_reboot(&self) -> Option<Choice> {
        if !matches!(
            self.class,
            ActionClass::ResetNextDrain
                | ActionClass::DrainResetGpu
                | ActionClass::DrainInvestigate
        ) {
            return None;
        }
        let node = self.node;
        Some(Choice {
            name: "drain_reboot",
            title: "drain now, reboot the node".into(),
            actions: vec![self.drain.command_line()],
            steps: vec![self.drain.clone()],
            manual: vec![
                format!("reboot {node}"),
                format!("resume {node} once it is back"),
            ],
            gpu_hours_lost: self.lost,
            resume_in_s: self.back,
            capacity_out: CapacityOut {
                gpus: self.node_gpus,
                for_s: if self.node_gpus == 0 {
                    Some(0)
                } else {
                    Some(self.site.node_reboot_s as i64)
                },
                note: "until the reboot and a resume".into(),
            },
            queue_moves: Some(self.b.moved.len()),
            unknowns: self.unknowns.clone(),
            ..Choice::default()
        })
    }
}

/// For a healthy node carrying ranks of a gang hung by another node's
/// broken GPU: the option to drain that node, named.
fn drain_broken(
    c: &Cluster,
    base: &Base,
    node: &str,
    class: ActionClass,
    hung: &BTreeMap<String, f64>,
    site: &SiteParams,
) -> Result<Option<Choice>, EngineError> {
    // A healthy node carrying ranks of a gang hung by another node's broken
    // GPU: the remedy is that node's. Draining this one takes healthy
    // capacity out for nothing.
    let broken: Option<String> = (!class.needs_drain())
        .then(|| {
            base.stalls
                .iter()
                .filter(|s| hung.contains_key(&s.job) && s.node != node)
                .map(|s| s.node.clone())
                .find(|x| base.unusable.contains(x.as_str()))
        })
        .flatten();
    let Some(broken) = &broken else {
        return Ok(None);
    };
    let there = Action::Drain {
        node: broken.clone(),
        reason: base
            .drain_reason(broken)
            .unwrap_or_else(|| "drained via nightshift".to_string()),
        requeue: true,
    };
    let bb = blast(c, base, &there, site)?;
    let (l, bk, u) = kill_terms(c, &bb);
    let what = base
        .node_verdict(broken)
        .map_or_else(String::new, |v| format!(": {}", v.verdict.summary));
    Ok(Some(Choice {
        name: "drain_broken",
        title: format!("drain {broken}, the gang's broken node"),
        actions: vec![there.command_line()],
        steps: vec![there.clone()],
        manual: vec![format!("{broken}{what}")],
        gpu_hours_lost: l,
        resume_in_s: bk,
        capacity_out: CapacityOut {
            gpus: c
                .node(broken)
                .filter(|n| n.state.schedulable())
                .map_or(0, |n| n.gpu_count),
            for_s: None,
            note: format!("{broken}, until its remedy and a resume; {node} keeps running"),
        },
        queue_moves: Some(bb.moved.len()),
        unknowns: u,
        ..Choice::default()
    }))
}

pub(super) fn burning(hung: &BTreeMap<String, f64>) -> f64 {
    hung.values().sum()
}

pub(super) fn do_nothing(hung: &BTreeMap<String, f64>, class: ActionClass) -> Choice {
    let (lost, back, unknowns) = if hung.is_empty() {
        (Some(0.0), Some(0), Vec::new())
    } else {
        (
            None,
            None,
            vec![format!(
                "grows by {:.0} GPU-hours per hour while job(s) {} stay hung; they never resume by themselves",
                burning(hung),
                hung.keys().cloned().collect::<Vec<_>>().join(",")
            )],
        )
    };
    Choice {
        name: "do_nothing",
        title: "do nothing for now".into(),
        actions: Vec::new(),
        steps: Vec::new(),
        gpu_hours_lost: lost,
        resume_in_s: back,
        capacity_out: CapacityOut {
            gpus: 0,
            for_s: Some(0),
            note: "nothing taken out".into(),
        },
        queue_moves: Some(0),
        unknowns,
        risk: Some(class.running_on().to_string()),
        ..Choice::default()
    }
}

/// Lower is better: known lost work first, then less of it, then less
/// capacity × time out of service, then sooner back.
fn cost_key(o: &Choice) -> (bool, i64, bool, i64, i64) {
    let cap = o
        .capacity_out
        .for_s
        .map(|s| s.saturating_mul(i64::from(o.capacity_out.gpus)));
    (
        o.gpu_hours_lost.is_none(),
        o.gpu_hours_lost
            .map_or(i64::MAX, |h| (h * 1000.0).round() as i64),
        cap.is_none(),
        cap.unwrap_or(i64::MAX),
        o.resume_in_s.unwrap_or(i64::MAX),
    )
}

fn cheapest(o: &Options, names: &[&str]) -> Option<usize> {
    o.options
        .iter()
        .enumerate()
        .filter(|(_, c)| names.contains(&c.name))
        .min_by_key(|(_, c)| cost_key(c))
        .map(|(i, _)| i)
}

pub(super) fn index_of(o: &Options, name: &str) -> Option<usize> {
    o.options.iter().position(|c| c.name == name)
}

/// Marks one option recommended and says why in one line.
fn recommend_for_node(o: &mut Options, hung: &BTreeMap<String, f64>, site: &SiteParams) {
    let class = o.target.action;
    let drains = ["drain_now", "reset_gpu", "drain_reboot"];
    let wait = index_of(o, "wait_checkpoint").filter(|&w| o.options[w].gpu_hours_lost.is_some());
    let wait_in = wait.and_then(|w| o.options[w].wait_s).map(text::duration);
    let drain_lost = index_of(o, "drain_now").and_then(|i| o.options[i].gpu_hours_lost);
    let broken = index_of(o, "drain_broken");
    let (pick, why) = if let Some(i) = broken {
        (
            Some(i),
            format!(
                "{} is healthy: its job(s) {} hang because of a rank on a broken GPU elsewhere; {} (burning {:.0} GPU-hours per hour), not this node",
                o.target.name,
                hung.keys().cloned().collect::<Vec<_>>().join(","),
                o.options[i].title,
                burning(hung)
            ),
        )
    } else if !hung.is_empty() {
        (
            cheapest(o, &drains),
            format!(
                "job(s) {} already hung ({}): waiting for a checkpoint saves nothing, it burns {:.0} GPU-hours per hour",
                hung.keys().cloned().collect::<Vec<_>>().join(","),
                o.target.problem,
                burning(hung)
            ),
        )
    } else if class.needs_drain() {
        let mut why = format!("{}: do not run on it", o.target.problem);
        if let (Some(w), Some(dl)) = (wait, drain_lost)
            && let Some(wl) = o.options[w].gpu_hours_lost
            && wl < dl
        {
            why.push_str(&format!(
                "; waiting for the checkpoint in {} would save {:.1} GPU-hours but keeps running on it",
                wait_in.clone().unwrap_or_default(),
                dl - wl
            ));
        }
        (cheapest(o, &drains), why)
    } else if class == ActionClass::ResetNextDrain {
        let due = wait.filter(|&w| {
            o.options[w]
                .wait_s
                .is_some_and(|s| s <= site.checkpoint_wait_max_s as i64)
        });
        match due {
            Some(w) => {
                let l = o.options[w].gpu_hours_lost;
                (
                    Some(w),
                    format!(
                        "next checkpoint in {}: draining right after it loses {} GPU-hours instead of {} now",
                        wait_in.unwrap_or_default(),
                        hours(l),
                        hours(drain_lost),
                    ),
                )
            }
            None => (
                index_of(o, "do_nothing"),
                format!(
                    "no checkpoint due within {}: keep running, {}",
                    text::duration(site.checkpoint_wait_max_s as i64),
                    class.advice()
                ),
            ),
        }
    } else {
        (
            index_of(o, "do_nothing"),
            match class {
                ActionClass::None => "healthy: nothing to do".to_string(),
                c => format!("{}: {}", o.target.problem, c.advice()),
            },
        )
    };
    finish(o, pick, why);
}

/// Marks `pick` recommended with `why`, saying so when its terms are
/// unknown while another option's are known; the others get the line that
/// speaks against them.
pub(super) fn finish(o: &mut Options, pick: Option<usize>, mut why: String) {
    let Some(p) = pick else {
        return;
    };
    let known_elsewhere = o
        .options
        .iter()
        .enumerate()
        .any(|(i, c)| i != p && c.unknowns.is_empty());
    if !o.options[p].unknowns.is_empty() && known_elsewhere {
        why.push_str(&format!(
            " (though some of its terms are unknown: {})",
            o.options[p].unknowns.join("; ")
        ));
    }
    let pick_lost = o.options[p].gpu_hours_lost;
    for (i, c) in o.options.iter_mut().enumerate() {
        if i == p {
            c.recommended = true;
            c.why = why.clone();
            continue;
        }
        c.why = if let Some(u) = c.unknowns.first() {
            format!("terms unknown: {u}")
        } else if let Some(w) = c.wait_s.filter(|&w| w > 0) {
            format!("acts only in {}", text::duration(w))
        } else if let (Some(a), Some(b)) = (c.gpu_hours_lost, pick_lost)
            && a > b + 0.05
        {
            format!("loses {:.1} GPU-hours more", a - b)
        } else if let Some(r) = &c.risk {
            format!("risks: {r}")
        } else {
            "more capacity out of service, or for longer".to_string()
        };
    }
}

/// The options for `target`: a node by name, else a job by id.
pub fn options(
    c: &Cluster,
    base: &Base,
    target: &str,
    grace_s: Option<u64>,
    site: &SiteParams,
) -> Result<Options, EngineError> {
    if c.node(target).is_some() {
        node_options(c, base, target, site)
    } else if c.job(target).is_some() {
        job_options(c, base, target, grace_s, site)
    } else {
        Err(EngineError::NoTarget(target.to_string()))
    }
}

mod job;
pub use job::{job_options, job_options_with};

#[cfg(test)]
mod tests;
