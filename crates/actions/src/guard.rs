//! The guard: preview → confirm → execute → verify → audit. Nothing is
//! sent before the preview was shown, the confirmation matched, the
//! policies passed — checked again at execute time, on the data as it is
//! then, under the audit log's lock together with writing the intent — and
//! the intent was on disk.

use super::Action;
use super::audit::{self, AuditLog, Outcome as AuditOutcome, Record, Step};
use super::executor::Executor;
use super::policy::{Policy, Refusal};
use crate::engine::SiteParams;
use crate::engine::analysis::Base;
use crate::engine::blast::{Blast, blast};
use crate::engine::error::EngineError;
use crate::engine::incidents::IncidentKind;
use crate::model::Phase;
use crate::model::{Cluster, Refused};
pub use crate::protocol::action::{Answer, Done, Preview};
use std::time::Duration;

/// Context for the audit record.
#[derive(Debug, Clone)]
pub struct Who {
    pub scheduler_user: Option<String>,
    pub cluster: String,
    pub source: String,
    /// Who acts, when not the operating-system user at the keyboard: the
    /// autopilot's `policy:<name>` (issue 61).
    pub operator: Option<String>,
}

impl Who {
    /// The operator its audit records name.
    pub fn operator(&self) -> String {
        self.operator.clone().unwrap_or_else(audit::os_user)
    }
}

/// The name a cluster is audited (and its steps armed) under: its name in
/// `[[clusters]]` when it is one of those, else the snapshot's own — one
/// rule for the console, the command line and `follow`.
pub fn audited_name(configured: Option<&str>, snapshot: &str) -> String {
    configured.unwrap_or(snapshot).to_string()
}

/// The state the policies are checked against: at preview time, and
/// again at execute time with the newest data.
#[derive(Debug, Clone, Copy)]
pub struct Check<'a> {
    pub cluster: &'a Cluster,
    pub data_age: Duration,
    pub policy: &'a Policy,
}

/// Unresolved critical health of a node: what resuming it would put back
/// in service.
fn unresolved(node: &str, base: &Base) -> Vec<String> {
    if !base.unusable.contains(node) {
        return Vec::new();
    }
    base.node_verdict(node)
        .map(|v| {
            // The summary names the main evidence already: each fact once.
            let said = |e: &String| {
                let fact = e.split_once(": ").map_or(e.as_str(), |(_, f)| f);
                v.verdict.summary.ends_with(fact)
            };
            std::iter::once(format!("{node}: {}", v.verdict.summary))
                .chain(
                    v.verdict
                        .evidence
                        .iter()
                        .filter(|e| !said(e))
                        .map(|e| format!("  {e}")),
                )
                .collect()
        })
        .unwrap_or_default()
}

/// What the operator must read before confirming, from the engine's side:
/// a resume of unresolved health (and the typed name it then needs, and the
/// jobs that would start on the broken GPU at once), a drain the catalog
/// advises against, jobs that refuse a requeue.
fn engine_warnings(
    a: &Action,
    base: &Base,
    blast: &Result<Blast, EngineError>,
) -> (Vec<String>, Option<String>) {
    let mut warnings = Vec::new();
    let mut token = None;
    if let Action::Resume { node } = a {
        let evidence = unresolved(node, base);
        if !evidence.is_empty() {
            // Putting a broken GPU back in service takes more than a `y`.
            token = Some(node.clone());
            warnings.push(format!(
                "{node}'s health is unresolved: jobs started on it would fail"
            ));
            warnings.extend(evidence);
            if let Ok(b) = blast
                && !b.start_on_broken.is_empty()
            {
                warnings.push(format!(
                    "the scheduler would start {} on {node} at once, on the broken GPU(s): {}",
                    if b.start_on_broken.len() == 1 {
                        "this pending job"
                    } else {
                        "these pending jobs"
                    },
                    b.start_on_broken.join(", ")
                ));
            }
        }
    }
    // A drain the catalog advises against: the node's failure calls for
    // something else (an application Xid: restart the job, the GPU is fine).
    if let Action::Drain { node, .. } | Action::Cordon { node, .. } = a
        && !base.unusable.contains(node.as_str())
        && let Some(i) = base.incidents.iter().find(|i| {
            &i.node == node
                && i.is_open()
                && i.kind != IncidentKind::Node
                && !i.action.needs_drain()
        })
    {
        warnings.push(format!(
            "the catalog's remedy for {} on {node} is not a drain: {} — see the options (O, or nightshift options {node})",
            i.full_label(),
            i.action.advice()
        ));
    }
    if let (Ok(b), Action::Drain { node, .. }) = (blast, a) {
        for id in &b.keep_running {
            warnings.push(format!(
                "job {id} was submitted with --no-requeue: the scheduler refuses its requeue, so it keeps running and {node} stays draining until it ends; to empty {node} now, cancel it (its owner resubmits it)"
            ));
        }
    }
    (warnings, token)
}

/// Whether `a` cordons a node of a domain whose incident is open.
fn cordons_failing_domain(a: &Action, base: &Base) -> bool {
    let Action::Cordon { node, .. } = a else {
        return false;
    };
    base.incidents
        .iter()
        .any(|i| i.kind == IncidentKind::Domain && i.is_failing() && i.nodes.contains(node))
}

/// The breaker's refusal of a drain whose node's only trouble is its
/// failing domain (the engine's check, `admit::failing_domain_drain`).
fn failing_domain_drain(a: &Action, base: &Base) -> Option<Refusal> {
    crate::engine::admit::failing_domain_drain(a, base).map(Refusal::Breaker)
}

/// A validation of a node that still runs work (the engine's check,
/// `admit::still_runs_work`).
fn still_runs_work(a: &Action, c: &Cluster) -> Option<Refusal> {
    crate::engine::admit::still_runs_work(a, c).map(Refusal::Unknown)
}

/// Builds the preview: blast radius, calls, policy verdict, undo.
#[allow(clippy::too_many_arguments)]
pub fn preview(
    a: &Action,
    c: &Cluster,
    base: &Base,
    data_age: Duration,
    policy: &Policy,
    log: &AuditLog,
    force: bool,
    executor: Result<&Executor, &str>,
    site: &SiteParams,
) -> Preview {
    let how = How {
        force,
        step_of: None,
    };
    preview_as(a, c, base, data_age, policy, log, how, executor, site)
}

/// How a preview is asked: past the breaker (`force`), and for an armed
/// step (`step_of`, its id): the breaker does not count what was done to
/// the step's own node — its plan's cordon — against it (docs/actions.md).
pub struct How {
    pub force: bool,
    pub step_of: Option<String>,
}

/// [`preview`], as `how` says.
#[allow(clippy::too_many_arguments)]
pub fn preview_as(
    a: &Action,
    c: &Cluster,
    base: &Base,
    data_age: Duration,
    policy: &Policy,
    log: &AuditLog,
    how: How,
    executor: Result<&Executor, &str>,
    site: &SiteParams,
) -> Preview {
    let force = how.force;
    let own = how.step_of.as_ref().and(a.takes_out());
    let blast = blast(c, base, a, site);
    let jobs: Vec<String> = match &blast {
        Ok(b) => b.killed.iter().map(|k| k.id.clone()).collect(),
        _ => Vec::new(),
    };
    // An action that changes nothing is refused here: nothing sent,
    // nothing audited, no undo offered.
    // A requeue the scheduler refuses (--no-requeue; a bare pod): the
    // engine's check, the one the options make (`admit`).
    let nothing = crate::engine::admit::nothing(a, c);
    let no_op = nothing.is_some();
    let summary = match (&blast, a) {
        (Ok(b), _) => b.summary.clone(),
        (Err(e), _) => e.to_string(),
    };
    let (mut warnings, resume_token) = engine_warnings(a, base, &blast);
    let token = resume_token.or_else(|| a.is_destructive().then(|| a.target().to_string()));
    if let Ok(x) = executor {
        warnings.extend(x.warnings(a));
    }
    let clusters = policy.clusters(&c.name);
    let recent = log.reading_checked().map(|r| {
        r.taken_out(&audit::Window {
            clusters: &clusters,
            source_now: c.time,
            wall_now: audit::now(),
            span_s: policy.window.as_secs() as i64,
            except: own,
            scheduler: Some(c),
        })
    });
    let remedy = cordons_failing_domain(a, base);
    // The policies first (stale data says more than a dead connection),
    // then the audit, then whether there is anyone to send to.
    let refusal = nothing
        .map(Refusal::Nothing)
        .or_else(|| still_runs_work(a, c))
        .or_else(|| {
            // Cordoning a failing domain's nodes is its remedy: the
            // breaker's count does not stop it at the third.
            policy
                .check_listing(
                    a,
                    c,
                    data_age,
                    recent.as_deref().unwrap_or(&[]),
                    force || remedy,
                )
                .err()
        })
        .or_else(|| (!force).then(|| failing_domain_drain(a, base)).flatten())
        .or_else(|| recent.err().map(unreadable_audit))
        .or_else(|| {
            executor
                .err()
                .map(|e| Refusal::Unknown(format!("cannot reach the scheduler to act: {e}")))
        })
        .or_else(|| {
            executor
                .ok()
                .and_then(|x| x.cannot(a))
                .map(|why| Refusal::Unknown(format!("the scheduler cannot do this: {why}")))
        });
    // The incident this answers, once: its line and its fault. A cordon
    // that is a failing domain's remedy answers the domain's incident, not
    // the node's own (issue 39: the leaf plan's cordons were filed under
    // the nodes' Xid and DBE incidents).
    let incident = if remedy {
        base.incidents.iter().find(|i| {
            i.kind == IncidentKind::Domain && i.is_open() && i.nodes.iter().any(|n| n == a.target())
        })
    } else {
        a.on_node()
            .then(|| base.node_incident(a.target()))
            .flatten()
    };
    Preview {
        action: a.clone(),
        calls: match executor {
            _ if no_op => Vec::new(),
            Ok(x) => x.calls(a, &jobs),
            Err(_) => Vec::new(),
        },
        refusal,
        blast: Some(blast),
        summary,
        no_op,
        undo: if no_op { None } else { a.undo(c) },
        token: if no_op { None } else { token },
        warnings,
        forced: force,
        domain_remedy: remedy,
        node_in_service: a
            .on_node()
            .then(|| c.node(a.target()))
            .flatten()
            .is_some_and(|n| n.state.schedulable()),
        cluster: None,
        incident: incident.map(crate::audit::incident_line),
        fault: incident.and_then(crate::audit::fault_of),
        step_of: how.step_of.clone(),
        source_time: c.time,
    }
}

/// Why a node action previewed on a node in service must not go on now:
/// another drain or cordon of it is in flight (an intent without an
/// outcome in the shared audit log), or the newest data shows it taken out
/// since the preview. Sending it would overwrite that one's reason, and its
/// undo would undo the other operator's work.
fn taken_meanwhile(p: &Preview, now: &Check<'_>, log: &audit::Reading) -> Option<String> {
    let node = p.action.takes_out()?;
    if p.no_op {
        return None;
    }
    // Within the breaker's window: an intent interrupted days ago is the
    // start-up warning's business, not a drain in flight.
    let since = audit::now() - now.policy.window.as_secs() as i64;
    if let Some(r) = log.unfinished().into_iter().rev().find(|r| {
        r.target == node && r.time >= since && (r.action == "drain" || r.action == "cordon")
    }) {
        return Some(format!(
            "{} of {node} by {} since {} is in flight (no outcome yet); wait for it, then look again",
            r.action,
            crate::text::sanitize(&r.operator),
            crate::text::datetime(r.time)
        ));
    }
    let out = now
        .cluster
        .node(node)
        .is_some_and(|n| !n.state.schedulable());
    (p.node_in_service && out).then(|| {
        format!(
            "{node} was taken out of service since the preview (by someone else?); preview again"
        )
    })
}

/// An audit log that cannot be read refuses every action: the breaker
/// cannot count what it cannot read, and an action nobody can audit is not
/// taken.
fn unreadable_audit(e: audit::AuditError) -> Refusal {
    Refusal::Unknown(format!(
        "{e}; nightshift acts only with an audit log it can read (fix it, or point --audit-log elsewhere)"
    ))
}

fn record(p: &Preview, who: &Who, id: &str, phase: Phase, outcome: Option<AuditOutcome>) -> Record {
    Record {
        id: id.to_string(),
        phase,
        time: audit::now(),
        operator: who.operator(),
        scheduler_user: who.scheduler_user.clone(),
        host: crate::host::name(),
        cluster: who.cluster.clone(),
        source: who.source.clone(),
        action: p.action.verb().into(),
        target: p.action.target().into(),
        reason: p.action.reason().map(str::to_string),
        preview: p.summary.clone(),
        incident: p.incident.clone(),
        fault: (phase == Phase::Intent).then(|| p.fault.clone()).flatten(),
        step_of: p.step_of.clone(),
        source_time: Some(p.source_time),
        domain_remedy: p.domain_remedy,
        // The intent carries what the operator saw; the outcome its result.
        warnings: if phase == Phase::Intent {
            p.warnings.clone()
        } else {
            Vec::new()
        },
        outcome,
        armed: None,
        note: None,
        seal: None,
    }
}

/// The outcome in one line: each step with ✓ or its error, then the undo.
fn message(p: &Preview, o: &AuditOutcome) -> String {
    if o.no_op {
        return format!("{}: already so, nothing sent", p.action.describe());
    }
    if o.steps.len() <= 1 {
        return match (&o.error, o.verified) {
            (Some(e), _) => format!("{} failed: {e}", p.action.verb()),
            (None, true) => format!("done and verified: {}", o.observed),
            (None, false) => format!("sent, but not visible yet: {}", o.observed),
        };
    }
    let steps: Vec<String> = o
        .steps
        .iter()
        .map(|s| match (&s.error, s.verified) {
            (Some(e), _) => format!("{} failed: {e}", s.what),
            (None, true) if s.unchanged => format!("{}: nothing sent, {}", s.what, s.observed),
            (None, true) => format!("{} ✓", s.what),
            (None, false) => format!("{} sent, not visible yet", s.what),
        })
        .collect();
    let head = if o.partial {
        "PARTLY DONE"
    } else if o.ok && o.verified {
        "done and verified"
    } else if o.ok {
        "sent, not all visible yet"
    } else {
        "failed"
    };
    let next: Vec<String> = if o.partial {
        o.steps
            .iter()
            .filter(|s| !s.ok)
            .map(|s| next_after(&p.action, s))
            .collect()
    } else {
        Vec::new()
    };
    if next.is_empty() {
        format!("{head}: {}", steps.join("; "))
    } else {
        format!("{head}: {}; next: {}", steps.join("; "), next.join("; "))
    }
}

/// What to do about a step that failed while the rest went through.
pub(super) fn next_after(a: &Action, s: &Step) -> String {
    let (verb, target) = s.what.split_once(' ').unwrap_or((s.what.as_str(), ""));
    let node = if a.on_node() { a.target() } else { "" };
    match verb {
        "requeue" if s.refused == Some(Refused::NoRequeue) => {
            format!(
                "job {target} refuses a requeue (submitted with --no-requeue): it keeps running{}; cancel it to free its GPUs, and its owner resubmits it",
                if node.is_empty() {
                    String::new()
                } else {
                    format!(" and {node} stays draining until it ends")
                }
            )
        }
        "requeue" => format!("retry it: nightshift requeue {target}"),
        "cancel" => format!(
            "job {target} still runs on {node}, which takes no new work: retry the drain (nightshift drain {node} --reason …)"
        ),
        "evict" => format!(
            "pod {target} still runs on {node}, which takes no new work: retry the drain once its disruption budget allows it"
        ),
        _ => format!("{} failed: look at {} and retry it", s.what, a.target()),
    }
}

/// Why a confirmed action was not sent: nothing of it reached the
/// scheduler.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NotSent {
    #[error("refused: {0}; nothing sent")]
    Refused(Refusal),
    #[error("not confirmed ({0}); nothing sent")]
    NotConfirmed(String),
    /// A policy refuses on the newest data (or the audit log cannot be
    /// read to count with).
    #[error("refused at execute time: {0}; nothing sent")]
    RefusedNow(Refusal),
    /// Another operator took the node out since the preview.
    #[error("refused at execute time: {0}; nothing sent")]
    TakenMeanwhile(String),
    /// The intent could not be written (or the log locked).
    #[error("{0}; nothing sent")]
    Audit(#[from] audit::AuditError),
}

impl From<NotSent> for String {
    fn from(e: NotSent) -> String {
        e.to_string()
    }
}

/// Executes a confirmed preview. Refuses when a policy refuses now (on
/// `now`, the newest data), the confirmation does not match, or the
/// intent cannot be written.
pub async fn run(
    p: &Preview,
    typed: &str,
    executor: &Executor,
    log: &AuditLog,
    who: &Who,
    timeout: Duration,
    now: Check<'_>,
) -> Result<Done, NotSent> {
    let answer = p.answer(typed);
    if answer == Answer::No {
        if let Some(r) = &p.refusal {
            return Err(NotSent::Refused(r.clone()));
        }
        return Err(NotSent::NotConfirmed(p.confirm_prompt()));
    }
    if let Some(r) = &p.refusal
        && !matches!(r, Refusal::Breaker(_))
    {
        return Err(NotSent::Refused(r.clone()));
    }
    let force = answer == Answer::Force || p.forced || p.domain_remedy;
    let id = audit::new_id();
    // The policies again, on the data as it is now, and the intent, under
    // one lock: two operators cannot both pass the breaker's count.
    log.locked(|| {
        // One reading of the log for the breaker's count and the drains in
        // flight.
        let reading = log.reading();
        if let Some(e) = reading.unreadable.first() {
            return Err(NotSent::RefusedNow(unreadable_audit(e.clone())));
        }
        let mut clusters = now.policy.clusters(&now.cluster.name);
        clusters.push(&who.cluster);
        let recent = reading.taken_out(&audit::Window {
            clusters: &clusters,
            source_now: now.cluster.time,
            wall_now: audit::now(),
            span_s: now.policy.window.as_secs() as i64,
            // An armed step's own node: its plan's cordon is not counted.
            except: p.step_of.as_ref().and(p.action.takes_out()),
            scheduler: Some(now.cluster),
        });
        if let Err(r) =
            now.policy
                .check_listing(&p.action, now.cluster, now.data_age, &recent, force)
        {
            return Err(NotSent::RefusedNow(r));
        }
        if let Some(why) = taken_meanwhile(p, &now, &reading) {
            return Err(NotSent::TakenMeanwhile(why));
        }
        log.write(&record(p, who, &id, Phase::Intent, None))
            .map_err(NotSent::from)
    })??;
    let outcome = if p.no_op {
        AuditOutcome {
            ok: true,
            verified: true,
            no_op: true,
            partial: false,
            observed: "already so: nothing to do".into(),
            error: None,
            steps: Vec::new(),
        }
    } else {
        // A soft preemption waits for its checkpoint up to its grace period.
        let limit = match &p.action {
            Action::Preempt {
                grace_s: Some(g), ..
            } => timeout + Duration::from_secs(*g),
            _ => timeout + executor.extra_time(&p.action),
        };
        match tokio::time::timeout(limit, executor.execute(&p.action)).await {
            Ok(steps) => AuditOutcome::of_steps(steps),
            Err(_) => {
                // The change may have been made: look before saying.
                let seen = executor.observe(&p.action).await;
                AuditOutcome::of_steps(vec![Step {
                    what: p.action.verb().to_string(),
                    ok: seen.as_ref().is_ok_and(|o| o.verified),
                    verified: seen.as_ref().is_ok_and(|o| o.verified),
                    observed: match &seen {
                        Ok(o) => o.observed.clone(),
                        Err(e) => format!("cannot re-read the state: {e}"),
                    },
                    error: match &seen {
                        Ok(o) if o.verified => None,
                        _ => Some(format!(
                            "no answer within {}s and the change is not visible",
                            timeout.as_secs()
                        )),
                    },
                    unchanged: false,
                    refused: None,
                }])
            }
        }
    };
    let written = log.write(&record(p, who, &id, Phase::Outcome, Some(outcome.clone())));
    let mut message = message(p, &outcome);
    if let Err(e) = written {
        message.push_str(&format!(" (audit outcome not written: {e})"));
    }
    // Something was done: offer to undo it, even after a partial outcome.
    let done_something =
        !outcome.no_op && outcome.steps.first().is_some_and(|s| s.ok && !s.unchanged);
    let undo = if done_something { p.undo.clone() } else { None };
    if let Some(u) = &undo {
        message.push_str(&format!(
            "; undo: {}",
            u.command_line_in(p.cluster.as_deref())
        ));
    }
    Ok(Done {
        outcome,
        undo,
        message,
    })
}
