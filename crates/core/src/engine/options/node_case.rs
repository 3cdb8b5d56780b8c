//! One node's options, worked out: the node, its blast radius, what
//! draining it costs, and each choice (keep out, drain now, wait for the
//! checkpoint, reset the GPU, validate and resume, repair, drain and
//! reboot) as the node's case makes it.

use super::{CapacityOut, Choice, Subject, hung_in, kill_terms, wait_terms};
use crate::engine::SiteParams;
use crate::engine::base::Base;
use crate::engine::blast::{Blast, blast};
use crate::engine::error::EngineError;
use crate::engine::xid::ActionClass;
use crate::model::{Action, Cluster};
use crate::text;
use std::collections::BTreeMap;

pub(super) struct NodeCase<'a> {
    pub(super) c: &'a Cluster,
    pub(super) base: &'a Base,
    pub(super) n: &'a crate::model::Node,
    pub(super) node: &'a str,
    pub(super) site: &'a SiteParams,
    pub(super) b: Blast,
    pub(super) class: ActionClass,
    pub(super) problem: String,
    pub(super) reason: String,
    pub(super) drain: Action,
    pub(super) hung: BTreeMap<String, f64>,
    /// The GPUs a drain takes out of service (none when it is out already).
    pub(super) node_gpus: u32,
    /// The GPUs whose own remedy is a reset.
    pub(super) problem_gpus: Vec<u32>,
    pub(super) remap_failed: bool,
    /// What draining costs: GPU-hours lost, time back, what is unknown.
    pub(super) lost: Option<f64>,
    pub(super) back: Option<i64>,
    pub(super) unknowns: Vec<String>,
}

impl<'a> NodeCase<'a> {
    pub(super) fn new(
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

    pub(super) fn subject(&self) -> Subject {
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
    pub(super) fn remedy_s(&self, class: ActionClass) -> Option<i64> {
        match class {
            ActionClass::DrainReboot => Some(self.site.node_reboot_s as i64),
            ActionClass::DrainResetGpu | ActionClass::ResetNextDrain => {
                Some(self.site.gpu_reset_s as i64)
            }
            _ => None,
        }
    }

    /// The remedy of `class`, as the operator's steps by hand.
    pub(super) fn remedy_steps(&self, class: ActionClass) -> Vec<String> {
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
    pub(super) fn out_for(&self, class: ActionClass) -> (Option<i64>, String) {
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
    pub(super) fn keep_out(&self) -> Choice {
        let node = self.node;
        let (for_s, note) = self.out_for(self.class);
        let mut manual = Vec::new();
        if !self.b.keep_running.is_empty() {
            manual.push(format!(
                "job(s) {} refuse a requeue (--no-requeue): they run on until they end; cancel them to empty {node} now (their owner resubmits)",
                self.b.keep_running.join(", ")
            ));
        }
        manual.extend(self.remedy_steps(self.class));
        manual.push(format!("validate {node}, then resume it"));
        Choice {
            name: "keep_out",
            title: if self.class.needs_drain() || self.class == ActionClass::ResetNextDrain {
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
    pub(super) fn drain_now(&self) -> Choice {
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

    /// Whether it was cordoned for a drain armed after the checkpoint (its
    /// reason says so, on every backend): the plan is under way.
    pub(super) fn plan_armed(&self) -> bool {
        self.n.state == crate::model::NodeState::Cordoned
            && self
                .n
                .reason
                .as_deref()
                .is_some_and(|r| r.ends_with(crate::model::AFTER_CHECKPOINT))
    }

    /// Cordon, wait for the next checkpoint(s), then drain: when jobs run.
    /// Under way already (cordoned for it): the plan as armed, with
    /// nothing to send — choosing it again would arm a second drain.
    pub(super) fn wait_checkpoint(&self) -> Option<Choice> {
        if self.b.killed.is_empty() {
            return None;
        }
        let choice = self.plan_after_checkpoint()?;
        if !self.plan_armed() {
            return Some(choice);
        }
        Some(Choice {
            title: format!("as armed: {}", choice.title),
            actions: Vec::new(),
            steps: Vec::new(),
            armed_step: None,
            manual: std::iter::once(
                "its drain is armed: sent when the checkpoint is seen (nightshift armed lists it; disarm cancels)".to_string(),
            )
            .chain(choice.manual)
            .collect(),
            capacity_out: CapacityOut {
                note: "cordoned, drained at the checkpoint".into(),
                ..choice.capacity_out
            },
            ..choice
        })
    }

    fn plan_after_checkpoint(&self) -> Option<Choice> {
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
    pub(super) fn reset_gpu(&self) -> Result<Option<Choice>, EngineError> {
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
    pub(super) fn last_check_failed(&self) -> bool {
        self.n
            .reason
            .as_deref()
            .is_some_and(|r| r.starts_with(crate::model::VALIDATION_FAILED))
    }

    /// Why it may go back: rebooted since it was taken out, and its GPUs
    /// read healthy.
    pub(super) fn back_words(&self) -> String {
        let rebooted = self
            .n
            .boot_time
            // Only when both times are known: a node in a maintenance
            // reservation has no reason time of its own, and was said to
            // have "rebooted at …" though it never did (issue 58).
            .filter(|&b| self.n.reason_time.is_some_and(|r| b > r));
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
    pub(super) fn check_level(&self) -> u8 {
        crate::engine::repeat::check_level(self.base.history(self.node))
    }

    /// Validate and resume: a node out of service whose GPUs read healthy
    /// (its remedy done) goes back through the site's check.
    pub(super) fn validate_resume(&self) -> Option<Choice> {
        // Its remedy not done (a pending remap waits for a reset): not yet.
        if self.n.state.schedulable() || self.class >= ActionClass::ResetNextDrain {
            return None;
        }
        let node = self.node;
        let level = self.check_level();
        let step = Action::Validate {
            node: node.to_string(),
            level,
        };
        // A check needs the whole node: while it still runs work the
        // guard refuses it, so nothing is sent now — the plan is to
        // validate once it is empty (issue 58).
        let busy = crate::engine::validate::busy_until(self.c, node);
        let (steps, manual) = match busy {
            None => (vec![step], Vec::new()),
            Some(_) => (
                Vec::new(),
                vec![
                    crate::engine::admit::still_runs_work(&step, self.c).unwrap_or_default(),
                    format!("then: {}", step.command_line()),
                ],
            ),
        };
        Some(Choice {
            name: "validate_resume",
            title: crate::engine::validate::words(level, busy),
            actions: steps.iter().map(Action::command_line).collect(),
            steps,
            manual,
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
    pub(super) fn history_line(&self) -> Option<String> {
        self.base
            .history(self.node)
            .filter(|h| h.is_repeat_offender())
            .map(|h| h.line.clone())
    }

    /// Take it out for repair (RMA): a repeat offender's. Drained with the
    /// history as the reason (its reason set, if it is out already).
    pub(super) fn repair(&self) -> Option<Choice> {
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
    pub(super) fn drain_reboot(&self) -> Option<Choice> {
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
