//! The options for a node: drain now, wait for the checkpoint, reset the
//! GPU only, drain and reboot, drain the node that broke the gang, or do
//! nothing — and which one, why.

use super::{
    CapacityOut, Choice, Options, Subject, burning, cheapest, do_nothing, finish, hours, hung_in,
    index_of, kill_terms, wait_terms,
};
use crate::engine::SiteParams;
use crate::engine::base::Base;
use crate::engine::blast::{Blast, blast};
use crate::engine::error::EngineError;
use crate::engine::incidents::IncidentKind;
use crate::engine::xid::ActionClass;
use crate::model::{Action, Cluster, NodeState};
use crate::text;
use std::collections::BTreeMap;

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
    let drained = matches!(case.n.state, NodeState::Drain | NodeState::Down);
    let mut options = vec![if drained {
        case.keep_out()
    } else {
        case.drain_now()
    }];
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
    if let Some(choice) = case.repair() {
        options.insert(0, choice);
    }
    if let Some(choice) = case.validate_resume() {
        options.insert(0, choice);
    }
    options.push(do_nothing(&case.hung, case.class));
    let mut o = Options {
        target: case.subject(),
        time: c.time,
        options,
    };
    recommend_for_node(&mut o, &case.hung, site);
    if let Some(r) = index_of(&o, "repair")
        && (case.class.needs_drain() || !case.n.state.schedulable())
    {
        // A node that keeps failing goes to repair, not through another
        // reboot: the history is the reason.
        let line = case.history_line().unwrap_or_default();
        let why = format!("{line}: another reboot or reset brings it back to fail again");
        finish(&mut o, Some(r), why);
        for c in &mut o.options {
            if [
                "drain_now",
                "wait_checkpoint",
                "reset_gpu",
                "drain_reboot",
                "validate_resume",
            ]
            .contains(&c.name)
            {
                c.why = format!("puts back in service a node that keeps failing ({line})");
            }
        }
    } else if let Some(v) = index_of(&o, "validate_resume")
        && case.class == ActionClass::None
        && !case.last_check_failed()
    {
        let why = format!(
            "{}: check it before jobs land on it; it is resumed only on a pass",
            case.back_words()
        );
        finish(&mut o, Some(v), why);
    } else if case.last_check_failed()
        && !case.n.state.schedulable()
        && let Some(k) = index_of(&o, "do_nothing")
    {
        // Its GPUs read healthy, but its own check said otherwise: not
        // "healthy: nothing to do" (issue 39).
        let why = format!(
            "its last check failed ({}): keep it out of service, fix what the check found, then validate it again",
            case.n.reason.as_deref().unwrap_or_default()
        );
        finish(&mut o, Some(k), why);
    }
    failing_domain_rule(&mut o, c, base, node, case.class);
    Ok(o)
}

/// A node whose failure domain has an open incident (a leaf switch
/// flapping under it): it is not put back, nor left as it is — its GPU
/// check does not test the fabric (issue 37). Validate-then-resume is not
/// offered; the domain's remedy is ("cordon it", or "keep it out until the
/// domain is fixed" when it is out already), and recommended unless the
/// node's own GPUs need more (a drain).
fn failing_domain_rule(o: &mut Options, c: &Cluster, base: &Base, node: &str, class: ActionClass) {
    let Some(d) = base.incidents.iter().find(|i| {
        i.kind == IncidentKind::Domain && i.is_open() && i.nodes.iter().any(|n| n == node)
    }) else {
        return;
    };
    o.options.retain(|c| c.name != "validate_resume");
    let in_service = c.node(node).is_some_and(|n| n.state.schedulable());
    let why = format!(
        "{} is failing ({}): {node} stays out of new multi-node work until it is fixed; its GPU check does not test the fabric",
        d.node, d.id
    );
    let choice = if in_service {
        let step = Action::Cordon {
            node: node.to_string(),
            reason: format!("{} failing ({})", d.node, d.id),
        };
        Choice {
            name: "domain_remedy",
            title: format!("cordon it: {} is failing (the domain's remedy)", d.node),
            actions: vec![step.command_line()],
            steps: vec![step],
            manual: vec![format!("the network owner fixes {}", d.node)],
            gpu_hours_lost: Some(0.0),
            queue_moves: Some(0),
            ..Choice::default()
        }
    } else {
        Choice {
            name: "domain_remedy",
            title: format!("keep it out until {} is fixed", d.node),
            manual: vec![
                format!("the network owner fixes {}", d.node),
                format!("then validate {node} and resume it"),
            ],
            gpu_hours_lost: Some(0.0),
            queue_moves: Some(0),
            ..Choice::default()
        }
    };
    o.options.insert(0, choice);
    let picked = o.options.iter().position(|c| c.recommended);
    let own_drain = class.needs_drain()
        && picked.is_some_and(|p| !["do_nothing", "domain_remedy"].contains(&o.options[p].name));
    if !own_drain {
        finish(o, Some(0), why);
    }
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
            .unwrap_or_else(|| crate::model::PLAIN_REASON.to_string());
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

    /// A node drained already (or down), nothing running: not "drain now
    /// and requeue" (issue 39), but keep it out for its remedy, then back
    /// through its check. Nothing to send now.
    fn keep_out(&self) -> Choice {
        let node = self.node;
        let (for_s, note) = self.out_for(self.class);
        let mut manual = self.remedy_steps(self.class);
        manual.push(format!("validate {node}, then resume it"));
        Choice {
            name: "keep_out",
            title: if self.class.needs_drain() {
                format!("keep it out: {}, then validate", self.class.remedy())
            } else {
                "keep it out of service".into()
            },
            actions: Vec::new(),
            steps: Vec::new(),
            manual,
            gpu_hours_lost: Some(0.0),
            resume_in_s: for_s,
            capacity_out: CapacityOut {
                gpus: 0,
                for_s: Some(0),
                note,
            },
            queue_moves: Some(0),
            ..Choice::default()
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
            reason: format!("{}{}", self.reason, crate::model::AFTER_CHECKPOINT),
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
            armed_step: Some(1),
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

    /// Its reason says its last check failed.
    fn last_check_failed(&self) -> bool {
        self.n
            .reason
            .as_deref()
            .is_some_and(|r| r.starts_with(crate::model::VALIDATION_FAILED))
    }

    /// Why it may go back: rebooted since it was taken out, and its GPUs
    /// read healthy.
    fn back_words(&self) -> String {
        let rebooted = self
            .n
            .boot_time
            .filter(|&b| self.n.reason_time.is_none_or(|r| b > r));
        match rebooted {
            Some(b) => format!(
                "rebooted at {} since it was taken out, its GPUs read healthy",
                text::clock(b)
            ),
            None => "out of service, its GPUs read healthy".into(),
        }
    }

    /// The diagnostics level its last hardware fault calls for: a GPU
    /// reset's remedy is checked at level 1 (seconds), a reboot's or an
    /// uncorrectable error's at level 2 (about two minutes).
    fn check_level(&self) -> u8 {
        crate::engine::repeat::check_level(self.base.history(self.node))
    }

    /// Validate and resume: a node out of service whose GPUs read healthy
    /// (its remedy done) goes back through the site's check.
    fn validate_resume(&self) -> Option<Choice> {
        if self.n.state.schedulable() || self.class.needs_drain() {
            return None;
        }
        let node = self.node;
        let level = self.check_level();
        let step = Action::Validate {
            node: node.to_string(),
            level,
        };
        Some(Choice {
            name: "validate_resume",
            title: format!("validate (DCGM level {level}), then resume"),
            actions: vec![step.command_line()],
            steps: vec![step],
            manual: Vec::new(),
            gpu_hours_lost: Some(0.0),
            resume_in_s: Some(0),
            capacity_out: CapacityOut {
                gpus: 0,
                for_s: Some(0),
                note: format!(
                    "{} GPUs back in service on a pass (level {level}: {})",
                    self.n.gpu_count,
                    if level == 1 {
                        "seconds"
                    } else {
                        "about two minutes"
                    }
                ),
            },
            queue_moves: Some(0),
            unknowns: if self.last_check_failed() {
                vec![format!(
                    "its last check failed ({}): fix that first",
                    self.n.reason.as_deref().unwrap_or_default()
                )]
            } else {
                Vec::new()
            },
            ..Choice::default()
        })
    }

    /// The node's history when it makes it a repeat offender.
    fn history_line(&self) -> Option<String> {
        self.base
            .history(self.node)
            .filter(|h| h.is_repeat_offender())
            .map(|h| h.line.clone())
    }

    /// Take it out for repair (RMA): a repeat offender's. Drained with the
    /// history as the reason (its reason set, if it is out already).
    fn repair(&self) -> Option<Choice> {
        let line = self.history_line()?;
        let node = self.node;
        let reason = format!("RMA: {line}");
        let step = if self.n.state.schedulable() {
            Action::Drain {
                node: node.to_string(),
                reason,
                requeue: true,
            }
        } else {
            Action::SetReason {
                node: node.to_string(),
                reason,
            }
        };
        let running = self.n.state.schedulable();
        Some(Choice {
            name: "repair",
            title: "take out for repair (RMA)".into(),
            actions: vec![step.command_line()],
            steps: vec![step],
            manual: vec![
                format!("open a repair (RMA) case for {node}: {line}"),
                format!("resume {node} only after the repair"),
            ],
            gpu_hours_lost: if running { self.lost } else { Some(0.0) },
            resume_in_s: if running { self.back } else { Some(0) },
            capacity_out: CapacityOut {
                gpus: self.node_gpus,
                for_s: if self.node_gpus == 0 { Some(0) } else { None },
                note: "until the repair".into(),
            },
            queue_moves: Some(if running { self.b.moved.len() } else { 0 }),
            unknowns: if running {
                self.unknowns.clone()
            } else {
                Vec::new()
            },
            risk: None,
            ..Choice::default()
        })
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
            .unwrap_or_else(|| crate::model::PLAIN_REASON.to_string()),
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

/// Marks one option recommended and says why in one line.
fn recommend_for_node(o: &mut Options, hung: &BTreeMap<String, f64>, site: &SiteParams) {
    let class = o.target.action;
    // The catalog's remedy (drain and reset, drain and look) before a
    // reboot, which is offered where the remedy is lighter and is a guess
    // there: an NVLink storm's incident says "drain+look", and so does its
    // recommended option (issue 39).
    let drains = ["drain_now", "keep_out", "reset_gpu"];
    let pick_drain = |o: &Options| cheapest(o, &drains).or_else(|| cheapest(o, &["drain_reboot"]));
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
            pick_drain(o),
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
        (pick_drain(o), why)
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
