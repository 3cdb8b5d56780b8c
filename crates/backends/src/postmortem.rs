//! `nightshift report FILE`: the night's timeline from a recording — each
//! incident with the jobs it hit and what they lost, every action taken
//! (from the audit records in the recording), the time from incident to
//! action, what was still open at the end, and the night's health numbers.

use crate::actions::audit::Record;
use crate::engine::SiteParams;
use crate::engine::analysis::Base;
use crate::engine::incidents::Incident;
use crate::engine::incidents::IncidentKind;
use crate::engine::kpis::{Change, JobWatch, KpiBook, Kpis};
use crate::engine::memory::Memory;
use crate::engine::restore::restore;
use crate::engine::xid::XidCatalog;
use crate::model::Phase;
use crate::model::{Cluster, JobState, Timestamp};
use crate::recording::{Recording, RecordingError};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::sync::Arc;

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
    /// Seconds until it is back where it was, from when it stopped.
    pub restore_s: Option<f64>,
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
}

/// What happened to each job over the recording: its state at the end,
/// and when it died or was sent back to the queue.
#[derive(Default)]
struct Fates {
    watch: JobWatch,
    ended: FxHashMap<String, Timestamp>,
    requeued: FxHashMap<String, Timestamp>,
}

impl Fates {
    fn observe(&mut self, c: &Cluster) {
        let (ended, requeued) = (&mut self.ended, &mut self.requeued);
        self.watch.observe(c, |j, change| match change {
            Change::Stopped(_) => {
                ended
                    .entry(j.id.clone())
                    .or_insert(j.end_time.unwrap_or(c.time));
            }
            Change::Requeued => {
                requeued.entry(j.id.clone()).or_insert(c.time);
            }
            Change::Started => {}
        });
    }

    /// Its fate, and when it stopped (died or requeued).
    fn fate(&self, id: &str, stalled: bool) -> (String, Option<Timestamp>) {
        let last = self.watch.state(id);
        let ended = self.ended.get(id).copied();
        let requeued = self.requeued.get(id).copied();
        match last {
            Some(JobState::Failed) => ("failed".into(), ended),
            Some(JobState::Cancelled) => ("cancelled".into(), ended),
            _ if requeued.is_some() => ("requeued".into(), requeued),
            Some(JobState::Completed) => ("completed".into(), None),
            Some(s) if s.holds_resources() && stalled => {
                ("stalled, still holding its GPUs".into(), None)
            }
            Some(s) if s.holds_resources() => ("still running".into(), None),
            Some(s) => (s.as_str().into(), None),
            None => ("gone from the data".into(), None),
        }
    }
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

/// For each time, the recording's state then (the last at or before it).
fn capture(
    rec: &Recording,
    mut times: Vec<Timestamp>,
    looks: &rustc_hash::FxHashSet<Timestamp>,
    site: &SiteParams,
) -> Result<std::collections::BTreeMap<Timestamp, Moment>, RecordingError> {
    times.sort_unstable();
    times.dedup();
    let mut out = std::collections::BTreeMap::new();
    let mut want = times.into_iter().peekable();
    let mut prev: Option<Arc<Cluster>> = None;
    // What the analysis remembers of the snapshots up to `prev`, fed as
    // the console's analyst is. A look keeps all of it; a job's stop (one
    // per stopped job, thousands at 10,000 nodes) keeps it without the
    // error counters' readings, which only the health rates read.
    let mut memory = Memory::default();
    let keep = |t: Timestamp, memory: &Memory| {
        if looks.contains(&t) {
            Arc::new(memory.clone())
        } else {
            Arc::new(memory.without_rates())
        }
    };
    for c in rec.states() {
        let c = c?;
        while let Some(&t) = want.peek() {
            if c.time <= t {
                break;
            }
            if let Some(p) = &prev {
                out.insert(t, (p.clone(), keep(t, &memory)));
            }
            want.next();
        }
        if want.peek().is_none() {
            return Ok(out);
        }
        memory.observe(&c, site);
        prev = Some(c);
    }
    if let Some(p) = prev {
        for t in want {
            out.insert(t, (p.clone(), keep(t, &memory)));
        }
    }
    Ok(out)
}

/// A recorded snapshot and what the analysis remembered then.
type Moment = (Arc<Cluster>, Arc<Memory>);

/// Every recorded action: each intent with its outcome, on the source's
/// clock, oldest first.
fn actions_of(rec: &Recording) -> Vec<Action> {
    let audit = rec.audit();
    let outcomes: FxHashMap<&str, &Record> = audit
        .iter()
        .filter(|(_, r)| r.phase == Phase::Outcome)
        .map(|(_, r)| (r.id.as_str(), *r))
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

/// What a job lost, on the snapshot just before it stopped.
struct Loss {
    lost: Option<f64>,
    back: Option<f64>,
    name: Option<String>,
    user: Option<String>,
}

fn loss_then(
    c: &Cluster,
    b: &Base,
    id: &str,
    stopped_at: Option<Timestamp>,
    site: &SiteParams,
) -> Loss {
    let ix = c.jobs.iter().position(|x| x.id == id);
    let job = ix.map(|i| &c.jobs[i]);
    let r = ix
        .filter(|&i| c.jobs[i].state.holds_resources())
        .and_then(|i| restore(c, b, i, site));
    // Up to when it stopped, as the health numbers count it.
    let stopped = job
        .zip(stopped_at)
        .and_then(|(j, t)| crate::engine::restore::lost_gpu_hours(j, t));
    Loss {
        lost: stopped.or_else(|| r.as_ref().and_then(|r| r.lost_gpu_hours.value)),
        back: r.as_ref().and_then(|r| r.total_s.value),
        name: job.map(|x| x.name.clone()),
        user: job.map(|x| x.user.clone()),
    }
}

/// The times to look for incidents: the start, then every
/// `KEY_EVERY_S` while the state changes. Derived from the snapshots, never
/// from the span: a recording whose clock jumps decades holds two looks
/// there, not millions.
fn looks_every_few_minutes(rec: &Recording, from: Timestamp, to: Timestamp) -> Vec<Timestamp> {
    let every = crate::recording::KEY_EVERY_S;
    let mut looks = vec![from];
    for m in rec.marks.iter() {
        let next = from.saturating_add(((m.time - from) / every + 1).saturating_mul(every));
        if next < to && looks.last() != Some(&next) {
            looks.push(next);
        }
    }
    looks
}

/// The report of a recording.
pub fn report(
    rec: &Recording,
    site: &SiteParams,
    cat: &XidCatalog,
) -> Result<NightReport, RecordingError> {
    let (from, to) = rec.span();
    let Night {
        book,
        fates,
        end,
        memory,
    } = walk(rec, from, to, site)?;
    let repeat_offenders = repeat_offenders(&end, memory.fault_log(), site, cat);
    let base_end = memory.base(&end, site, cat);

    let actions = actions_of(rec);

    let mut incidents = Vec::new();
    let mut lost_of_job: FxHashMap<String, f64> = FxHashMap::default();
    // Incidents come and go (a stall ends when its gang is requeued): look
    // every few minutes, just before each action, and at the end. Jobs'
    // losses are read just before they stopped. The states at those times
    // are caught in one more pass over the file each (never held whole).
    let looks = look_times(rec, &actions, from, to);
    let look_set = looks.iter().copied().collect();
    let states = capture(rec, with_stops(&looks, &fates, from), &look_set, site)?;
    let mut bases: FxHashMap<Timestamp, Option<(Arc<Cluster>, Base)>> = FxHashMap::default();
    // The state at `t` (the last at or before it) and its base.
    let mut at = |t: Timestamp| -> Option<(Arc<Cluster>, Base)> {
        bases
            .entry(t)
            .or_insert_with(|| {
                let (c, memory) = states.get(&t)?.clone();
                let b = memory.base(&c, site, cat);
                Some((c, b))
            })
            .clone()
    };
    let mut found: std::collections::BTreeMap<String, Incident> = Default::default();
    for t in looks {
        if let Some((_, b)) = at(t) {
            seen(&mut found, b.incidents);
        }
    }
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
            // The state just before it stopped (a hung one: the end).
            let when = stopped.map(|t| (t - 1).max(from)).or(stalled.then_some(to));
            let at_end = || Some((end.clone(), base_end.clone()));
            let state = match when {
                Some(t) if t == to => at_end(),
                Some(t) => at(t),
                None => None,
            };
            let Loss {
                lost,
                back,
                name,
                user,
            } = loss_at(state, &end, &j.id, stopped, &fate, site);
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
        source: rec.header.source.clone(),
        from,
        to,
        incidents,
        actions,
        open_at_end,
        gpu_hours_lost: lost_of_job.values().sum::<f64>() + 0.0,
        kpis,
        truncated: rec.truncated.clone(),
        repeat_offenders,
    })
}

/// What one pass over the recording gathers.
struct Night {
    book: KpiBook,
    fates: Fates,
    end: Arc<Cluster>,
    /// What the analysis remembers at the end (the console's, had it
    /// watched the whole night), every hardware fault of it included (a
    /// source keeps its newest events only).
    memory: Memory,
}

fn walk(
    rec: &Recording,
    from: Timestamp,
    to: Timestamp,
    site: &SiteParams,
) -> Result<Night, RecordingError> {
    let mut book = KpiBook::new(to - from + 1);
    let mut fates = Fates::default();
    let mut end: Option<Arc<Cluster>> = None;
    let mut memory = Memory::default();
    for c in rec.states() {
        let c = c?;
        book.observe(&c);
        fates.observe(&c);
        memory.observe(&c, site);
        end = Some(c);
    }
    Ok(Night {
        book,
        fates,
        end: end.ok_or(RecordingError::Nothing)?,
        memory,
    })
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

/// When to look for incidents: every few minutes, and just before each
/// action.
fn look_times(
    rec: &Recording,
    actions: &[Action],
    from: Timestamp,
    to: Timestamp,
) -> Vec<Timestamp> {
    let mut looks = looks_every_few_minutes(rec, from, to);
    looks.extend(actions.iter().map(|a| a.time));
    looks
}

/// The looks, and the moment before each job stopped (its losses are read
/// there).
fn with_stops(looks: &[Timestamp], fates: &Fates, from: Timestamp) -> Vec<Timestamp> {
    let mut wanted = looks.to_vec();
    wanted.extend(
        fates
            .ended
            .values()
            .chain(fates.requeued.values())
            .map(|t| t.saturating_sub(1).max(from)),
    );
    wanted
}

/// What a job an incident hit lost, read from `state` (the state just
/// before it stopped; a hung one: the end). Its work was thrown away when
/// it stopped: a failed job at its end time, a requeued one when requeued.
fn loss_at(
    state: Option<(Arc<Cluster>, Base)>,
    end: &Cluster,
    job: &str,
    stopped: Option<Timestamp>,
    fate: &str,
    site: &SiteParams,
) -> Loss {
    // When its work was thrown away: a failed job at its end time.
    let stopped_at = stopped.map(|t| {
        end.job(job)
            .and_then(|x| x.end_time)
            .filter(|_| !fate.starts_with("requeued"))
            .unwrap_or(t)
    });
    match state {
        Some((c, b)) => loss_then(&c, &b, job, stopped_at, site),
        None => Loss {
            lost: Some(0.0),
            back: None,
            name: None,
            user: None,
        },
    }
}

/// The end's view of each incident, keeping what only earlier looks saw
/// (the gang its failure stalled before the drain requeued it).
/// Keeps each incident's first view; a domain's incident gathers nodes as
/// their links go: its widest view is the one to tell.
fn seen(found: &mut std::collections::BTreeMap<String, Incident>, now: Vec<Incident>) {
    for i in now {
        let wider = found
            .get(&i.id)
            .is_none_or(|x| i.kind == IncidentKind::Domain && i.nodes.len() > x.nodes.len());
        if wider {
            found.insert(i.id.clone(), i);
        }
    }
}

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
pub use markdown::markdown;
