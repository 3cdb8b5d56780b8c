//! `nightshift report FILE`: the night's timeline from a recording — each
//! incident with the jobs it hit and what they lost, every action taken
//! (from the audit records in the recording), the time from incident to
//! action, what was still open at the end, and the night's health numbers.

use crate::RecordingError;
use crate::actions::audit::Record;
use crate::engine::SiteParams;
use crate::engine::analysis::Base;
use crate::engine::incidents::Incident;
use crate::engine::incidents::IncidentKind;
use crate::engine::kpis::Kpis;
use crate::engine::restore::restore;
use crate::engine::xid::XidCatalog;
use crate::model::Phase;
use crate::model::{Cluster, Timestamp};
use crate::stream::Stream;
use rustc_hash::FxHashMap;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HitJob {
    pub id: String,
    pub name: Option<String>,
    pub user: Option<String>,
    /// `failed`, `requeued`, `stalled`, `cancelled`, `completed` or
    /// `still running` by the end of the recording.
    pub fate: String,
    pub via_gang: bool,
    /// GPU-hours of work lost since its checkpoint when it stopped (a hung
    /// job still holding its GPUs: all of it since its checkpoint, lost
    /// when it is requeued); 0 for a job still running.
    pub gpu_hours_lost: Option<f64>,
    /// Seconds until it is back where it was, from when it stopped, as
    /// estimated then (from the snapshot before it stopped).
    pub restore_s: Option<f64>,
    /// What happened: seconds from when it stopped until it was seen
    /// running again (a requeued job), when the recording shows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ran_again_after_s: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Action {
    pub time: Timestamp,
    pub operator: String,
    pub action: String,
    pub target: String,
    pub reason: Option<String>,
    pub preview: String,
    /// The incident the action answered, as the audit names it.
    pub incident: Option<String>,
    /// `verified`, `sent, not verified`, `failed: …`, `partly done: …`,
    /// `no outcome recorded`.
    pub outcome: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IncidentEntry {
    pub id: String,
    pub time: Timestamp,
    pub node: String,
    pub gpu: Option<u32>,
    pub label: String,
    pub kind: String,
    /// For a domain's incident (`node` is the domain): its nodes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    pub xid: Option<u32>,
    /// The catalog's name for the Xid, or the event's message.
    pub meaning: String,
    /// The catalog's advice.
    pub advice: String,
    pub jobs: Vec<HitJob>,
    /// The first action on its node or jobs after it, and how long after.
    pub first_action: Option<Action>,
    pub time_to_action_s: Option<i64>,
    /// The actions after the first that answer it (a plan's other steps).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub later_actions: Vec<Action>,
    /// Its stage at the end of the recording.
    pub stage_at_end: String,
    pub burning_gpu_hours_per_hour: Option<f64>,
    /// Its events (the Xid, the counters it moved, the drain), one line each.
    pub evidence: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NightReport {
    pub cluster: String,
    pub source: String,
    pub from: Timestamp,
    pub to: Timestamp,
    /// Oldest first.
    pub incidents: Vec<IncidentEntry>,
    pub actions: Vec<Action>,
    /// Incidents still open at the end: `id label on node`.
    pub open_at_end: Vec<String>,
    /// Σ over the jobs hit (each once) of the GPU-hours lost that are known.
    pub gpu_hours_lost: f64,
    pub kpis: Option<Kpis>,
    /// Why the recording ended early, when it did.
    pub truncated: Option<String>,
    /// Nodes past `[engine] repeat_offender` at the end: their hardware
    /// faults over the recording and the history its source gave.
    pub repeat_offenders: Vec<crate::engine::repeat::NodeHistory>,
    /// What was wrong with the file, a line each (said as warnings).
    #[serde(skip)]
    pub damage: Vec<String>,
}

fn action_of(time: Timestamp, intent: &Record, outcome: Option<&Record>) -> Action {
    let outcome = match outcome.and_then(|o| o.outcome.as_ref()) {
        None => "no outcome recorded".to_string(),
        Some(o) if o.no_op => "no-op: already so".into(),
        Some(o) if o.partial => format!("partly done: {}", o.error.clone().unwrap_or_default()),
        Some(o) if !o.ok => format!("failed: {}", o.error.clone().unwrap_or_default()),
        Some(o) if o.verified => format!("verified: {}", o.observed),
        Some(o) => format!("sent, not verified: {}", o.observed),
    };
    Action {
        time,
        operator: intent.operator.clone(),
        action: intent.action.clone(),
        target: intent.target.clone(),
        reason: intent.reason.clone(),
        preview: intent.preview.clone(),
        incident: intent.incident.clone(),
        outcome,
    }
}

/// Every recorded action: each intent with its outcome, on the source's
/// clock, oldest first.
fn actions_of(audit: &[(Timestamp, Record)]) -> Vec<Action> {
    let outcomes: FxHashMap<&str, &Record> = audit
        .iter()
        .filter(|(_, r)| r.phase == Phase::Outcome)
        .map(|(_, r)| (r.id.as_str(), r))
        .collect();
    let mut actions: Vec<Action> = audit
        .iter()
        .filter(|(_, r)| r.phase == Phase::Intent)
        .map(|(t, r)| action_of(*t, r, outcomes.get(r.id.as_str()).copied()))
        .collect();
    actions.sort_by_key(|a| a.time);
    actions
}

/// Whether `a` answers `inc`: an action that names an incident (the
/// audit's `incident`) answers that one alone (or the domain's incident
/// that absorbed it); one that names none answers the incidents on its
/// node or one of their jobs (issue 39: the leaf plan's cordons were
/// pinned on their nodes' own incidents by their node).
pub(crate) fn answers(a: &Action, inc: &Incident) -> bool {
    if a.time < inc.time {
        return false;
    }
    match a
        .incident
        .as_deref()
        .and_then(|x| x.split_whitespace().next())
    {
        Some(id) => id == inc.id || inc.absorbed.iter().any(|x| x == id),
        None => {
            a.target == inc.node
                || inc.nodes.contains(&a.target)
                || inc.jobs.iter().any(|j| j.id == a.target)
        }
    }
}

/// The first action at or after an incident that answers it.
fn first_action(actions: &[Action], inc: &Incident) -> Option<Action> {
    actions.iter().find(|a| answers(a, inc)).cloned()
}

/// What a job lost, from the snapshot just before it stopped.
struct Loss {
    lost: Option<f64>,
    back: Option<f64>,
    name: Option<String>,
    user: Option<String>,
}

/// The report of a recording, read in one pass (see `night`).
pub fn report(
    stream: Stream,
    site: &SiteParams,
    cat: &XidCatalog,
) -> Result<NightReport, RecordingError> {
    let Night {
        header,
        from,
        to,
        book,
        fates,
        end,
        memory,
        mut found,
        audit,
        before,
        truncated,
        damage,
    } = night::walk(stream, site, cat)?;
    let repeat_offenders = repeat_offenders(&end, memory.fault_log(), site, cat);
    let base_end = memory.base(&end, site, cat);
    let actions = actions_of(&audit);
    let mut incidents = Vec::new();
    let mut lost_of_job: FxHashMap<String, f64> = FxHashMap::default();
    keep_earlier_views(&mut found, &base_end.incidents);
    // A node's incident seen before it was known to be part of its
    // domain's is told by the domain's.
    let absorbed: rustc_hash::FxHashSet<String> = found
        .values()
        .flat_map(|i| i.absorbed.iter().cloned())
        .collect();
    found.retain(|id, _| !absorbed.contains(id));
    let at_end: rustc_hash::FxHashSet<&str> =
        base_end.incidents.iter().map(|i| i.id.as_str()).collect();
    let mut ordered: Vec<&Incident> = found.values().collect();
    ordered.sort_by_key(|i| (i.time, i.id.clone()));
    for inc in ordered {
        let mut jobs = Vec::new();
        for j in &inc.jobs {
            let stalled =
                inc.kind == IncidentKind::Stall || base_end.stalls.iter().any(|x| x.job == j.id);
            let (fate, stopped) = fates.fate(&j.id, stalled);
            // Work is lost when the job stops (died, requeued), or — a hung
            // job still holding its GPUs — all of it since its checkpoint
            // will be when it is requeued. A running job has lost nothing.
            let Loss {
                lost,
                back,
                name,
                user,
            } = match stopped {
                Some((t, how)) => {
                    let b = before
                        .get(&(j.id.clone(), how))
                        .cloned()
                        .unwrap_or_default();
                    loss_before(&b, &end, &j.id, t, &fate)
                }
                None if stalled => loss_at_end(&end, &base_end, &j.id, site),
                None => Loss {
                    lost: Some(0.0),
                    back: None,
                    name: None,
                    user: None,
                },
            };
            if let Some(l) = lost {
                lost_of_job.insert(j.id.clone(), l);
            }
            jobs.push(HitJob {
                id: j.id.clone(),
                name: j.name.clone().or(name),
                user: j.user.clone().or(user),
                fate,
                via_gang: j.via_gang,
                gpu_hours_lost: lost,
                restore_s: back,
                ran_again_after_s: match stopped {
                    Some((t, _)) => fates.ran_again(&j.id).map(|r| (r - t).max(0)),
                    None => None,
                },
            });
        }
        incidents.push(entry_of(
            inc,
            jobs,
            &actions,
            cat,
            at_end.contains(inc.id.as_str()),
        ));
    }
    let hung = crate::engine::kpis::hung_lost(&base_end, &end);
    let mut kpis = book.figures(to - from);
    if let Some(k) = &mut kpis {
        k.lost_gpu_hours_hung = Some(hung);
    }
    let open_at_end = open_incidents(&base_end);
    Ok(NightReport {
        cluster: end.name.clone(),
        source: header.source,
        from,
        to,
        incidents,
        actions,
        open_at_end,
        gpu_hours_lost: lost_of_job.values().sum::<f64>() + 0.0,
        kpis,
        truncated,
        repeat_offenders,
        damage,
    })
}

/// What a job that stopped lost: its work since its checkpoint up to when
/// it was thrown away (a failed job at its end time, a requeued one when
/// requeued), and the restore estimate of the snapshot before.
fn loss_before(b: &Before, end: &Cluster, id: &str, stopped: Timestamp, fate: &str) -> Loss {
    let stopped_at = end
        .job(id)
        .and_then(|x| x.end_time.get())
        .filter(|_| !fate.starts_with("requeued"))
        .unwrap_or(stopped);
    let r = b.restore.as_ref();
    Loss {
        lost: b
            .job
            .as_deref()
            .and_then(|j| crate::engine::restore::lost_gpu_hours(j, stopped_at))
            .or_else(|| r.and_then(|r| r.lost_gpu_hours.value)),
        back: r.and_then(|r| r.total_s.value),
        name: b.job.as_ref().map(|x| x.name.clone()),
        user: b.job.as_ref().map(|x| x.user.clone()),
    }
}

/// What a hung job still holding its GPUs at the end will lose: all of it
/// since its checkpoint, when it is requeued.
fn loss_at_end(end: &Cluster, base_end: &Base, id: &str, site: &SiteParams) -> Loss {
    let ix = end.jobs.iter().position(|x| x.id == id);
    let job = ix.map(|i| &end.jobs[i]);
    let r = ix
        .filter(|&i| end.jobs[i].state.holds_resources())
        .and_then(|i| restore(end, base_end, i, site));
    Loss {
        lost: r.as_ref().and_then(|r| r.lost_gpu_hours.value),
        back: r.as_ref().and_then(|r| r.total_s.value),
        name: job.map(|x| x.name.clone()),
        user: job.map(|x| x.user.clone()),
    }
}

/// The nodes past `[engine] repeat_offender` at the end of the night,
/// counting every fault seen in any of its snapshots.
fn repeat_offenders(
    end: &Cluster,
    faults: &crate::engine::repeat::FaultLog,
    site: &SiteParams,
    cat: &XidCatalog,
) -> Vec<crate::engine::repeat::NodeHistory> {
    let mut whole = end.clone();
    whole.history.extend(faults.faults());
    crate::engine::repeat::histories(&whole, cat, &site.repeat_offender)
        .into_values()
        .filter(|h| h.is_repeat_offender())
        .collect()
}

/// The end's view of each incident, keeping what only earlier looks saw
/// (the gang its failure stalled before the drain requeued it).
fn keep_earlier_views(
    found: &mut std::collections::BTreeMap<String, Incident>,
    at_end: &[Incident],
) {
    for i in at_end {
        let mut now = i.clone();
        if let Some(before) = found.get(&i.id) {
            now.burning_gpu_hours_per_hour = now
                .burning_gpu_hours_per_hour
                .or(before.burning_gpu_hours_per_hour);
            let earlier: Vec<String> = before
                .evidence
                .iter()
                .filter(|e| !now.evidence.contains(e))
                .cloned()
                .collect();
            now.evidence.extend(earlier);
        }
        found.insert(i.id.clone(), now);
    }
}

/// One incident of the report: what it was, whom it hit, what was done.
fn entry_of(
    inc: &Incident,
    jobs: Vec<HitJob>,
    actions: &[Action],
    cat: &XidCatalog,
    still_open: bool,
) -> IncidentEntry {
    let first_action = first_action(actions, inc);
    let later_actions: Vec<Action> = actions
        .iter()
        .filter(|a| answers(a, inc))
        .skip(1)
        .cloned()
        .collect();
    let meaning = match inc.xid {
        Some(x) => cat.name(x).to_string(),
        None => inc.message.clone(),
    };
    IncidentEntry {
        id: inc.id.clone(),
        time: inc.time,
        node: inc.node.clone(),
        gpu: inc.gpu,
        label: inc.full_label(),
        kind: inc.kind.to_string(),
        nodes: inc.nodes.clone(),
        xid: inc.xid,
        meaning,
        advice: inc.action.advice().to_string(),
        jobs,
        time_to_action_s: first_action.as_ref().map(|a| a.time - inc.time),
        first_action,
        later_actions,
        stage_at_end: if still_open {
            inc.stage.as_str().to_string()
        } else {
            "over: no longer seen at the end".to_string()
        },
        burning_gpu_hours_per_hour: inc.burning_gpu_hours_per_hour,
        evidence: inc.evidence.clone(),
    }
}

/// The incidents still open at the end, a line each.
fn open_incidents(base_end: &Base) -> Vec<String> {
    base_end
        .incidents
        .iter()
        .filter(|i| i.is_open())
        .map(|i| format!("{} {} on {}", i.id, i.full_label(), i.node))
        .collect()
}

mod markdown;
mod night;
pub use markdown::markdown;
use night::{Before, Night};

#[cfg(test)]
mod tests {
    //! The report and the audit read an action's incident the same way.
    //! (Moved here with the crates' split: it needs the guard's preview,
    //! the layer below, and the report.)
    use super::Action;
    use crate::actions::audit::AuditLog;
    use crate::actions::executor::Executor;
    use crate::actions::policy::Policy;
    use crate::engine::SiteParams;
    use crate::engine::analysis::Base;
    use crate::engine::incidents::IncidentKind;
    use crate::engine::xid::XidCatalog;
    use crate::sources::sim::{Sim, SimConfig};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    /// The leaf plan's cordons answer the leaf's incident, in the audit and in
    /// the report (issue 39: "cordon h100-05" was filed under h100-05's Xid 63
    /// incident, "cordon h100-06" under its DBE, by their node).
    #[test]
    fn a_domain_remedys_cordon_answers_the_domains_incident_in_audit_and_report() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut sim = Sim::new(SimConfig::default()).expect("sim");
        sim.advance(1230);
        let c = sim.snapshot();
        let site = SiteParams::default();
        let base = Base::compute(&c, None, &site, &XidCatalog::default());
        let sim = Executor::new(crate::sources::sim::Own(Arc::new(Mutex::new(sim))));
        let log = AuditLog::new(dir.path().join("audit.jsonl"));
        let leaf = base
            .incidents
            .iter()
            .find(|i| i.kind == IncidentKind::Domain)
            .expect("the leaf's incident");
        let own = base
            .incidents
            .iter()
            .find(|i| i.node == "h100-06" && i.kind != IncidentKind::Domain)
            .expect("h100-06's own incident");
        let p = crate::actions::guard::preview(
            &crate::model::Action::Cordon {
                node: "h100-06".into(),
                reason: "ib-leaf-2 failing (fabric)".into(),
            },
            &c,
            &base,
            Duration::ZERO,
            &Policy::default(),
            &log,
            false,
            Ok(&sim),
            &site,
        );
        let line = p.incident.clone().unwrap_or_default();
        assert!(line.starts_with(&format!("{} ", leaf.id)), "{line}");
        let a = Action {
            time: c.time,
            operator: "oncall".into(),
            action: "cordon".into(),
            target: "h100-06".into(),
            reason: None,
            preview: String::new(),
            incident: p.incident,
            outcome: "verified".into(),
        };
        assert!(super::answers(&a, leaf));
        assert!(!super::answers(&a, own), "{}", own.id);
    }
}
