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
use super::blast::Blast;
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
    /// The step sent after the next checkpoint of `Options::target`'s
    /// jobs, armed (issue 29): 0, nothing is sent first; 1, the first step
    /// is sent now. `None`: every step is sent by hand.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub armed_step: Option<usize>,
    pub unknowns: Vec<String>,
    /// What this option risks.
    pub risk: Option<String>,
    pub recommended: bool,
    /// Why the guard would refuse its first step now (what its key opens),
    /// in the guard's words: an unavailable option, never the recommended
    /// one (`admit`; issue 58). `None`: available.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// One line: for the recommended option, why; for the others, what
    /// speaks against them.
    pub why: String,
}

impl Choice {
    /// The guard would accept its first step now.
    pub fn available(&self) -> bool {
        self.refused.is_none()
    }
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

/// [`kill_terms`], for the tests that hold two surfaces to one number.
#[cfg(test)]
pub(crate) fn kill_terms_of(c: &Cluster, b: &Blast) -> (Option<f64>, Option<i64>, Vec<String>) {
    kill_terms(c, b)
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
    let (Some(every), Some(last)) = (
        j.checkpoint.interval_s.get(),
        j.checkpoint.last.get().or(j.start_time.get()),
    ) else {
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
        .filter(|(_, c)| names.contains(&c.name) && c.available())
        .min_by_key(|(_, c)| cost_key(c))
        .map(|(i, _)| i)
}

/// The option of that name, when the guard would accept it.
pub(super) fn index_of(o: &Options, name: &str) -> Option<usize> {
    o.options
        .iter()
        .position(|c| c.name == name && c.available())
}

/// Marks every option whose first step the guard would refuse now, with
/// the guard's reason (`admit::refusal`, the checks its preview makes on
/// the same snapshot and base). A domain's node-by-node cordon whose first
/// nodes are cordoned already starts at the first that is not: that is
/// what choosing it sends.
pub(super) fn admit(o: &mut Options, c: &Cluster, base: &Base) {
    use super::admit::{Refused, refusal};
    for choice in &mut o.options {
        choice.refused = None;
        while let Some(first) = choice.steps.first() {
            match refusal(first, c, base) {
                // Only where the next step is another cordon (a domain's,
                // node by node): a reset that ends in a resume, or a drain
                // armed over someone else's cordon, would undo or override
                // what nightshift did not do — that plan stays refused.
                Some(Refused::Nothing(_))
                    if matches!(first, Action::Cordon { .. })
                        && matches!(choice.steps.get(1), Some(Action::Cordon { .. })) =>
                {
                    choice.steps.remove(0);
                    if !choice.actions.is_empty() {
                        choice.actions.remove(0);
                    }
                    choice.armed_step = choice.armed_step.map(|k| k.saturating_sub(1));
                }
                r => {
                    choice.refused = r.map(|r| r.to_string());
                    break;
                }
            }
        }
    }
}

/// Marks `pick` recommended with `why`, saying so when its terms are
/// unknown while another option's are known; the others get the line that
/// speaks against them.
pub(super) fn finish(o: &mut Options, pick: Option<usize>, mut why: String) {
    let pick = pick.filter(|&p| o.options[p].available());
    let Some(p) = pick.or_else(|| fallback(o)) else {
        return;
    };
    if pick.is_none() {
        why = refused_why(o);
    }
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
        c.recommended = false;
        c.why = if let Some(r) = &c.refused {
            format!("unavailable: {r}")
        } else if let Some(u) = c.unknowns.first() {
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

/// When what the rules would pick is refused by the guard: what sends
/// nothing (keep it out, do nothing), so a recommendation is always one
/// the guard accepts.
fn fallback(o: &Options) -> Option<usize> {
    ["keep_out", "domain_remedy", "do_nothing"]
        .iter()
        .find_map(|n| {
            o.options
                .iter()
                .position(|c| c.name == *n && c.steps.is_empty() && c.available())
        })
}

/// Why the fallback is recommended: what the guard refuses (each refused
/// option carries the guard's reason beside it).
fn refused_why(o: &Options) -> String {
    let refused: Vec<&str> = o
        .options
        .iter()
        .filter(|c| c.refused.is_some())
        .map(|c| c.title.as_str())
        .collect();
    if refused.is_empty() {
        "nothing else can be done now".to_string()
    } else {
        format!(
            "the guard refuses {}: nothing is sent now",
            refused.join(", ")
        )
    }
}

/// The options for `target`: a node by name, else a job by id, else a
/// failure domain (a switch, a rack) by name.
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
    } else if c.nodes.iter().any(|n| n.in_domain(target)) {
        domain_options(c, base, target, site)
    } else {
        Err(EngineError::NoTarget(target.to_string()))
    }
}

mod domain;
mod job;
mod node;
mod node_case;
pub use domain::domain_options;
pub use job::{job_options, job_options_with};
pub use node::{node_options, node_options_with};

#[cfg(test)]
mod tests;
