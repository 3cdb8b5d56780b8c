//! Incidents: what the on-call works through. Every event (Xid, ECC, node
//! state) and every stalled gang, with the jobs it hit (their state then
//! and now, whole gangs), the catalog's action, and where it stands:
//!
//! open → draining → awaiting the remedy (node drained; reboot / reset /
//! replace it) → remedied (health clean, node still out: resume it) →
//! resolved (back in service with clean health).
//!
//! An incident that asks for no drain (an application Xid, a pending
//! remap, a correctable-error rate) is open while the GPU's verdict still
//! calls for its action, then resolved. A node-state incident is open
//! until the node is back in service. Stalls are open while they last.

use super::health::{NodeVerdict, event_action, event_severity};
use super::plan::Unusable;
use super::stall::Stall;
use super::xid::{ActionClass, XidCatalog};
use crate::model::{Cluster, Event, EventKind, GpuHealth, JobState, NodeState, Timestamp};
use crate::text;
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Open,
    /// Drain asked; jobs still on the node.
    Draining,
    /// Drained; the hardware still needs its remedy.
    AwaitingRemedy,
    /// Health is clean again but the node is still out of service.
    Remedied,
    Resolved,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Open => "open",
            Stage::Draining => "draining",
            Stage::AwaitingRemedy => "awaiting remedy",
            Stage::Remedied => "remedied",
            Stage::Resolved => "resolved",
        }
    }
}

/// What an incident is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IncidentKind {
    Xid,
    Ecc,
    Nvlink,
    /// A node's network port.
    Link,
    /// The node itself (down, drained).
    Node,
    /// A hung gang.
    Stall,
    /// Several nodes' links: a switch, a rack.
    Domain,
}

impl IncidentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            IncidentKind::Xid => "xid",
            IncidentKind::Ecc => "ecc",
            IncidentKind::Nvlink => "nvlink",
            IncidentKind::Link => "link",
            IncidentKind::Node => "node",
            IncidentKind::Stall => "stall",
            IncidentKind::Domain => "domain",
        }
    }
}

impl std::fmt::Display for IncidentKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IncidentJob {
    pub id: String,
    pub name: Option<String>,
    pub user: Option<String>,
    pub gang: Option<String>,
    /// Its state when the incident happened (`None`: only its gang was there).
    pub state_then: Option<JobState>,
    /// Its state now (`None`: no longer in the scheduler's data).
    pub state_now: Option<JobState>,
    /// Hit because a job of its gang was.
    pub via_gang: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Incident {
    /// `e<seq>` for an event, `stall-<job>` for a stall.
    pub id: String,
    pub kind: IncidentKind,
    pub seq: Option<u64>,
    pub time: Timestamp,
    pub node: String,
    pub gpu: Option<u32>,
    /// `XID 79`, `ECC DBE`, `NODE DRAIN`, `STALL`: its first event of the
    /// most drastic action.
    pub label: String,
    /// The labels of its other events (`ECC DBE`, `XID 63` of an `XID 48`).
    pub related: Vec<String>,
    /// The Xid, for an Xid incident.
    pub xid: Option<u32>,
    pub message: String,
    pub severity: GpuHealth,
    /// What the catalog says this calls for.
    pub action: ActionClass,
    pub stage: Stage,
    /// One line: where it stands and what to do next.
    pub status: String,
    pub drained_by: Option<String>,
    pub drained_at: Option<Timestamp>,
    pub jobs: Vec<IncidentJob>,
    pub evidence: Vec<String>,
    /// For a stall: GPU-hours burnt per hour while it lasts.
    pub burning_gpu_hours_per_hour: Option<f64>,
    /// For a domain's incident: the domain (its `node` is the domain's
    /// name) and the nodes whose events it gathers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<crate::model::Domain>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// For a domain's incident: the ids its nodes' incidents had before
    /// they were seen to be one (a report over time drops those).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub absorbed: Vec<String>,
}

impl Incident {
    /// A drain reason for the node from this incident: `xid79 GPU3`.
    pub fn drain_reason(&self) -> String {
        let gpu = self.gpu.map_or(String::new(), |g| format!(" GPU{g}"));
        match self.kind {
            IncidentKind::Xid => format!("{}{gpu}", self.label.to_lowercase().replace(' ', "")),
            IncidentKind::Ecc => format!("ecc{gpu}"),
            IncidentKind::Stall => format!("stalled gang{gpu}"),
            IncidentKind::Nvlink => format!("nvlink errors{gpu}"),
            IncidentKind::Link => match self.evidence.first() {
                Some(_) => format!("ib link: {}", self.message),
                None => "ib link".into(),
            },
            IncidentKind::Domain => format!("{} failing (fabric)", self.node),
            _ if self.message.is_empty() => crate::model::PLAIN_REASON.into(),
            _ => self.message.clone(),
        }
    }

    /// Its label and how many other events it gathers: `XID 48 +2`.
    pub fn short_label(&self) -> String {
        match self.related.len() {
            0 => self.label.clone(),
            n => format!("{} +{n}", self.label),
        }
    }

    /// Its label and its other events: `XID 48 (+ECC DBE, XID 63)`.
    pub fn full_label(&self) -> String {
        if self.related.is_empty() {
            return self.label.clone();
        }
        format!("{} (+{})", self.label, self.related.join(", "))
    }

    /// Whether the on-call still has something to do about it.
    pub fn is_open(&self) -> bool {
        self.stage != Stage::Resolved
    }

    /// Still failing, not yet remedied: a domain whose links are quiet is
    /// remedied, its nodes go back through their checks (issue 58: a quiet
    /// switch was "failing" to its nodes' options and "remedied" to its
    /// incident).
    pub fn is_failing(&self) -> bool {
        self.stage < Stage::Remedied
    }
}

fn job_entry(c: &Cluster, id: &str, then: Option<JobState>, via_gang: bool) -> IncidentJob {
    let now = c.job(id);
    IncidentJob {
        id: id.to_string(),
        name: now.map(|j| j.name.clone()),
        user: now.map(|j| j.user.clone()),
        gang: now.and_then(|j| j.gang.as_deref().map(str::to_string)),
        state_then: then,
        state_now: now.map(|j| j.state),
        via_gang,
    }
}

/// The jobs an event hit, then their gangs (as the snapshot knows them).
fn victims(c: &Cluster, e: &Event) -> Vec<IncidentJob> {
    let mut out: Vec<IncidentJob> = e
        .jobs
        .iter()
        .map(|j| job_entry(c, &j.id, Some(j.state), false))
        .collect();
    let gangs: Vec<String> = out.iter().filter_map(|j| j.gang.clone()).collect();
    for g in gangs {
        for j in c
            .jobs
            .iter()
            .filter(|j| j.gang.as_deref() == Some(g.as_str()))
        {
            if !out.iter().any(|x| x.id == j.id) {
                out.push(job_entry(c, &j.id, None, true));
            }
        }
    }
    out
}

/// A node state as a participle: `drained`, `down`, `cordoned`.
fn state_word(s: &str) -> &str {
    match s {
        "drain" => "drained",
        other => other,
    }
}

/// Who set a node's current state, and when, in words.
fn by_whom(n: &crate::model::Node) -> String {
    let who = n.reason_set_by.as_deref().unwrap_or("someone");
    match n.reason_time {
        Some(t) => format!("by {who} at {}", text::clock(t)),
        None => format!("by {who}"),
    }
}

/// Where an incident that calls for `action` on node `node` stands.
fn lifecycle(
    c: &Cluster,
    node: &str,
    action: ActionClass,
    still: bool,
    (unusable, level): (&Unusable, u8),
) -> (Stage, String, Option<String>, Option<Timestamp>) {
    let Some(n) = c.node(node) else {
        return (
            Stage::Open,
            format!("{node} is not in the scheduler's data: {}", action.advice()),
            None,
            None,
        );
    };
    if still && super::validate::remedy_window(c, node, action) {
        // Drained and empty: the window its remedy waited for (the words
        // of its node's recommended option, "keep_out").
        return (
            Stage::AwaitingRemedy,
            format!(
                "drained {}; keep it out: {}, then validate",
                by_whom(n),
                action.remedy()
            ),
            n.reason_set_by.clone(),
            n.reason_time,
        );
    }
    if !action.needs_drain() {
        return if still {
            (Stage::Open, action.advice().to_string(), None, None)
        } else {
            (
                Stage::Resolved,
                "resolved: the GPU's verdict no longer calls for it".into(),
                None,
                None,
            )
        };
    }
    let critical = unusable.contains(node);
    let drained = (n.reason_set_by.clone(), n.reason_time);
    match (n.state, critical) {
        (NodeState::Up | NodeState::Unknown | NodeState::Reserved, true) => {
            (Stage::Open, action.advice().to_string(), None, None)
        }
        (NodeState::Cordoned, true) => (
            Stage::Open,
            format!(
                "cordoned {} but its jobs still run: {}",
                by_whom(n),
                action.advice()
            ),
            None,
            None,
        ),
        (NodeState::Draining, true) => (
            Stage::Draining,
            format!(
                "draining {}: jobs still on it; then {}",
                by_whom(n),
                action.remedy()
            ),
            drained.0,
            drained.1,
        ),
        (NodeState::Drain | NodeState::Down, true) => (
            Stage::AwaitingRemedy,
            // The words of its node's recommended option ("keep_out").
            format!(
                "drained {}; keep it out: {}, then validate",
                by_whom(n),
                action.remedy()
            ),
            drained.0,
            drained.1,
        ),
        (NodeState::Up | NodeState::Unknown, false) => (
            Stage::Resolved,
            format!("resolved: {node} is in service with clean health"),
            None,
            None,
        ),
        (_, false) => (
            Stage::Remedied,
            format!(
                // The words of the options' "validate_resume", at the level
                // they check it at (`repeat::check_level`), once it is
                // empty when it still runs work.
                "health is clean again; {node} is still {} {}: {}",
                state_word(n.state.as_str()),
                by_whom(n),
                super::validate::words(level, super::validate::busy_until(c, node))
            ),
            drained.0,
            drained.1,
        ),
    }
}

pub use super::fabric::GROUP_GAP_S;

/// One failure's events, oldest first, as they are being gathered.
struct Failure<'a> {
    node: &'a str,
    gpu: Option<u32>,
    events: Vec<&'a Event>,
    /// Node state changes done while it was open (its drain, its resume).
    stages: Vec<&'a Event>,
    /// The stalls it explains: one gang for a GPU, every gang spanning the
    /// node for a network port.
    stalls: Vec<usize>,
    /// A network port's failure (its events join no GPU's).
    port: bool,
}

impl Failure<'_> {
    fn first(&self) -> Timestamp {
        self.events.first().map_or(0, |e| e.time)
    }
    fn last(&self) -> Timestamp {
        self.events.last().map_or(0, |e| e.time)
    }
}

/// Whether the node rebooted between `a` and `b` (a reboot ends a failure:
/// what comes after is a new one), from the nodes' boot times.
fn rebooted_between(
    boots: &FxHashMap<&str, Timestamp>,
    node: &str,
    a: Timestamp,
    b: Timestamp,
) -> bool {
    boots.get(node).is_some_and(|&t| a < t && t <= b)
}

/// Whether an event can open an incident (or stage one): every kind but a
/// network port coming back up. Replay's `n` jumps to the next of these.
pub fn may_open(e: &Event) -> bool {
    !matches!(e.kind, EventKind::Link { down: false, .. })
}

/// Gathers the GPU events into failures: the events of one GPU (or, when
/// a report names no GPU, of its node) less than [`GROUP_GAP_S`] apart
/// and not separated by a reboot. Node state changes within a day of a
/// failure on their node are its stages; stalls of a gang whose rank was
/// on the failed GPU are its evidence. What joins nothing stands alone.
fn gather<'a>(
    c: &'a Cluster,
    stalls: &[Stall],
    cat: &XidCatalog,
) -> (Vec<Failure<'a>>, Vec<&'a Event>, Vec<usize>) {
    // Looked up once: a scan of the nodes per comparison was linear in the
    // cluster's size.
    let boots: FxHashMap<&str, Timestamp> = c
        .nodes
        .iter()
        .filter_map(|n| n.boot_time.map(|b| (n.name.as_str(), b)))
        .collect();
    let mut events: Vec<&Event> = c.events.iter().collect();
    events.sort_by_key(|e| (e.time, e.seq));
    let mut failures: Vec<Failure> = Vec::new();
    let mut node_events = Vec::new();
    for e in events {
        if matches!(e.kind, EventKind::NodeState { .. }) {
            node_events.push(e);
            continue;
        }
        if super::xid::boot_noise(e, boots.get(e.node.as_str()).copied(), cat) {
            continue;
        }
        let port = matches!(e.kind, EventKind::Link { .. });
        let joins = failures.iter_mut().rev().find(|f| {
            f.node == e.node
                && f.port == port
                && (f.gpu == e.gpu || f.gpu.is_none() || e.gpu.is_none())
                && e.time - f.last() <= GROUP_GAP_S
                && !rebooted_between(&boots, &e.node, f.last(), e.time)
        });
        match joins {
            Some(f) => {
                f.gpu = f.gpu.or(e.gpu);
                f.events.push(e);
            }
            None => failures.push(Failure {
                node: &e.node,
                gpu: e.gpu,
                events: vec![e],
                stages: Vec::new(),
                stalls: Vec::new(),
                port,
            }),
        }
    }
    // A node whose fault the cluster still reports (a condition, a taint)
    // is in that failure however old it is: a cordon read today joins the
    // Xid its taint says, even a week on (the failure is still current).
    let reported: std::collections::HashSet<&str> = c
        .nodes
        .iter()
        .filter(|n| !n.fault_reports.is_empty())
        .map(|n| n.name.as_str())
        .collect();
    let mut alone = Vec::new();
    for e in node_events {
        let of = failures.iter_mut().rev().find(|f| {
            f.node == e.node
                && f.first() <= e.time
                && (e.time - f.last() <= super::health::XID_WINDOW_S
                    || reported.contains(e.node.as_str()))
                && !rebooted_between(&boots, &e.node, f.last(), e.time)
        });
        match of {
            Some(f) => f.stages.push(e),
            None => alone.push(e),
        }
    }
    let mut lone_stalls = Vec::new();
    for (i, s) in stalls.iter().enumerate().filter(|(_, s)| !s.via_gang) {
        let of = failures.iter_mut().rev().find(|f| {
            f.node == s.node
                && (f.stalls.is_empty() || f.port)
                && f.port == s.fabric
                && (s.gpu.is_none() || f.gpu.is_none() || s.gpu == f.gpu)
                && f.first() <= s.since + GROUP_GAP_S
        });
        match of {
            Some(f) => f.stalls.push(i),
            None => lone_stalls.push(i),
        }
    }
    (failures, alone, lone_stalls)
}

/// Adds `more` to `jobs`, each job once.
fn join_jobs(jobs: &mut Vec<IncidentJob>, more: Vec<IncidentJob>) {
    for j in more {
        if !jobs.iter().any(|x| x.id == j.id) {
            jobs.push(j);
        }
    }
}

/// A stall's burn and the jobs of its gang.
fn stall_parts(c: &Cluster, stalls: &[Stall], s: &Stall) -> (f64, Vec<IncidentJob>) {
    let gang: Vec<&Stall> = stalls.iter().filter(|x| x.cause_job == s.job).collect();
    let burning: f64 = gang.iter().map(|x| x.burning_gpu_hours_per_hour).sum();
    let jobs = gang
        .iter()
        .map(|x| job_entry(c, &x.job, c.job(&x.job).map(|j| j.state), x.via_gang))
        .collect();
    (burning, jobs)
}

/// One line of evidence for an event: `02:49:10 XID 48: DBE …`.
fn event_line(e: &Event) -> String {
    format!(
        "{} {}{}: {}",
        text::clock(e.time),
        e.label(),
        e.gpu.map_or(String::new(), |g| format!(" GPU {g}")),
        e.message
    )
}

/// A failure as the incident the on-call works through.
fn failure_incident(
    c: &Cluster,
    f: &Failure<'_>,
    verdicts: &HashMap<&str, &NodeVerdict>,
    (unusable, level): (&Unusable, u8),
    stalls: &[Stall],
    cat: &XidCatalog,
) -> Option<Incident> {
    let first = *f.events.first()?;
    let action = f
        .events
        .iter()
        .map(|e| event_action(e, cat))
        .max()
        .unwrap_or(ActionClass::None);
    // The first event that calls for the failure's action names it.
    let primary = f
        .events
        .iter()
        .find(|e| event_action(e, cat) == action)
        .copied()
        .unwrap_or(first);
    let mut related: Vec<String> = Vec::new();
    for e in &f.events {
        let l = e.label();
        if l != primary.label() && !related.contains(&l) {
            related.push(l);
        }
    }
    // Does the GPU's (or, with none named, the node's) verdict still call for it?
    let still = verdicts.get(f.node).is_some_and(|v| match f.gpu {
        Some(g) => v
            .gpus
            .iter()
            .any(|x| x.gpu == g && x.verdict.action >= action),
        None => v.verdict.action >= action,
    });
    let (stage, mut status, by, at) = lifecycle(c, f.node, action, still, (unusable, level));
    let mut jobs = Vec::new();
    for e in &f.events {
        join_jobs(&mut jobs, victims(c, e));
    }
    // Its story in time order: the events, the gang it stalled, the stages.
    let mut story: Vec<(Timestamp, String)> =
        f.events.iter().map(|e| (e.time, event_line(e))).collect();
    story.extend(f.stages.iter().map(|e| {
        (
            e.time,
            format!(
                "{} {}: {}",
                text::clock(e.time),
                e.label().to_lowercase(),
                e.message
            ),
        )
    }));
    let mut burning = None;
    for s in f.stalls.iter().filter_map(|&i| stalls.get(i)) {
        let (b, gang) = stall_parts(c, stalls, s);
        join_jobs(&mut jobs, gang);
        let whose = if f.stalls.len() > 1 {
            format!(" of job {}", s.job)
        } else {
            String::new()
        };
        story.push((
            s.since,
            format!(
                "{} the gang{whose} stalled: {}",
                text::clock(s.since),
                s.evidence.first().map_or("", String::as_str)
            ),
        ));
        story.extend(s.evidence.iter().skip(1).map(|e| (s.since, e.clone())));
        if stage == Stage::Open {
            status = format!(
                "{status}; its gang burns {b:.0} GPU-hours per hour since {}: requeue it from its checkpoint",
                text::clock(s.since)
            );
        }
        burning = Some(burning.unwrap_or(0.0) + b);
    }
    story.sort_by_key(|(t, _)| *t);
    let evidence: Vec<String> = story.into_iter().map(|(_, l)| l).collect();
    Some(Incident {
        id: format!("e{}", first.seq),
        kind: match primary.kind {
            EventKind::Xid { .. } => IncidentKind::Xid,
            EventKind::Link { .. } => IncidentKind::Link,
            EventKind::NvLink { .. } => IncidentKind::Nvlink,
            _ => IncidentKind::Ecc,
        },
        seq: Some(first.seq),
        time: first.time,
        node: f.node.to_string(),
        gpu: f.gpu,
        label: primary.label(),
        related,
        xid: primary.xid(),
        message: primary.message.clone(),
        severity: f
            .events
            .iter()
            .map(|e| event_severity(e, cat))
            .max()
            .unwrap_or(GpuHealth::Ok),
        action,
        stage,
        status,
        drained_by: by,
        drained_at: at,
        jobs,
        evidence,
        burning_gpu_hours_per_hour: burning,
        domain: None,
        nodes: Vec::new(),
        absorbed: Vec::new(),
    })
}

/// A node state change that belongs to no failure: open while the node
/// stays in that state.
fn node_incident(c: &Cluster, e: &Event, cat: &XidCatalog) -> Option<Incident> {
    let EventKind::NodeState { to, .. } = &e.kind else {
        return None;
    };
    let now = c.node(&e.node).map(|n| n.state);
    let out_now = now.is_some_and(|s| s != NodeState::Up);
    let same = now.is_some_and(|s| s.as_str() == to);
    let (stage, status, by, at) = if to == "up" || !out_now {
        (
            Stage::Resolved,
            format!("{} is in service", e.node),
            None,
            None,
        )
    } else if same {
        let n = c.node(&e.node);
        (
            Stage::Open,
            format!(
                "{} is {}{}{}",
                e.node,
                state_word(to),
                n.map_or(String::new(), |n| format!(" {}", by_whom(n))),
                n.and_then(|n| n.reason.as_deref())
                    .map_or(String::new(), |r| format!(": {r}"))
            ),
            n.and_then(|n| n.reason_set_by.clone()),
            n.and_then(|n| n.reason_time),
        )
    } else {
        (
            Stage::Resolved,
            format!(
                "superseded: {} is {} now",
                e.node,
                now.map_or("?", |s| s.as_str())
            ),
            None,
            None,
        )
    };
    Some(Incident {
        id: format!("e{}", e.seq),
        kind: IncidentKind::Node,
        seq: Some(e.seq),
        time: e.time,
        node: e.node.clone(),
        gpu: e.gpu,
        label: e.label(),
        related: Vec::new(),
        xid: None,
        message: e.message.clone(),
        severity: event_severity(e, cat),
        action: event_action(e, cat),
        stage,
        status,
        drained_by: by,
        drained_at: at,
        jobs: victims(c, e),
        evidence: Vec::new(),
        burning_gpu_hours_per_hour: None,
        domain: None,
        nodes: Vec::new(),
        absorbed: Vec::new(),
    })
}

/// A stalled gang no GPU failure explains.
fn stall_incident(
    c: &Cluster,
    s: &Stall,
    verdicts: &HashMap<&str, &NodeVerdict>,
    stalls: &[Stall],
) -> Incident {
    let (burning, jobs) = stall_parts(c, stalls, s);
    let action = match s.gpu {
        Some(_) => verdicts
            .get(s.node.as_str())
            .map_or(ActionClass::Investigate, |v| v.verdict.action),
        None => ActionClass::Investigate,
    };
    let name = c
        .job(&s.job)
        .map_or(String::new(), |j| format!(" ({})", j.name));
    Incident {
        id: format!("stall-{}", s.job),
        kind: IncidentKind::Stall,
        seq: None,
        time: s.since,
        node: s.node.clone(),
        gpu: s.gpu,
        label: "STALL".into(),
        related: Vec::new(),
        xid: None,
        message: format!(
            "job {}{name} makes no progress: {}",
            s.job,
            s.evidence.first().map_or("", String::as_str)
        ),
        severity: GpuHealth::Critical,
        action,
        stage: Stage::Open,
        status: format!(
            "burning {burning:.0} GPU-hours per hour since {}: requeue the gang from its checkpoint{}",
            text::clock(s.since),
            if action.needs_drain() {
                " (drain its broken node: D)"
            } else {
                ""
            }
        ),
        drained_by: None,
        drained_at: None,
        jobs,
        evidence: s.evidence.clone(),
        burning_gpu_hours_per_hour: Some(burning),
        domain: None,
        nodes: Vec::new(),
        absorbed: Vec::new(),
    }
}

/// Every incident of the snapshot, newest first: one per failure (see
/// [`gather`]; docs/decision-engine.md, "Incidents").
pub fn incidents(
    c: &Cluster,
    verdicts: &HashMap<&str, &NodeVerdict>,
    unusable: &Unusable,
    stalls: &[Stall],
    cat: &XidCatalog,
    histories: &std::collections::BTreeMap<String, super::repeat::NodeHistory>,
) -> Vec<Incident> {
    let (failures, alone, lone_stalls) = gather(c, stalls, cat);
    let mut out: Vec<Incident> = failures
        .iter()
        .filter_map(|f| {
            let level = super::repeat::check_level(histories.get(f.node));
            failure_incident(c, f, verdicts, (unusable, level), stalls, cat)
        })
        .collect();
    out.extend(alone.into_iter().filter_map(|e| node_incident(c, e, cat)));
    out.extend(
        lone_stalls
            .into_iter()
            .filter_map(|i| stalls.get(i))
            .map(|s| stall_incident(c, s, verdicts, stalls)),
    );
    // Newest first; at the same time the event before the stall it causes.
    out.sort_by(|a, b| {
        b.time
            .cmp(&a.time)
            .then((a.kind == IncidentKind::Stall).cmp(&(b.kind == IncidentKind::Stall)))
            .then(b.id.cmp(&a.id))
    });
    out
}

#[cfg(test)]
mod tests;
