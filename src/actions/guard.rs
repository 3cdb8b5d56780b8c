//! The guard: preview → confirm → execute → verify → audit. Nothing is
//! sent before the preview was shown, the confirmation matched, the
//! policies passed and the intent was on disk.

use super::Action;
use super::audit::{self, AuditLog, Outcome as AuditOutcome, Record};
use super::executor::Executor;
use super::policy::{Policy, Refusal};
use crate::engine::SiteParams;
use crate::engine::analysis::Base;
use crate::engine::blast::{Blast, blast};
use crate::model::Cluster;
use std::time::Duration;

/// What the operator sees before confirming.
#[derive(Debug, Clone)]
pub struct Preview {
    pub action: Action,
    pub blast: Option<Result<Blast, String>>,
    /// Capacity a cordon takes (no job dies).
    pub summary: String,
    /// The exact scheduler calls.
    pub calls: Vec<String>,
    pub no_op: bool,
    /// Set when a policy refuses; confirming then does nothing.
    pub refusal: Option<Refusal>,
    pub undo: Option<String>,
}

impl Preview {
    /// What must be typed: the target for destructive actions, else `y`.
    pub fn confirm_prompt(&self) -> String {
        match self.action.confirm_token() {
            Some(t) => format!("type {t} and press enter to confirm"),
            None => "press y to confirm".into(),
        }
    }

    pub fn accepts(&self, typed: &str) -> bool {
        match self.action.confirm_token() {
            Some(t) => typed.trim() == t,
            None => {
                typed.trim().eq_ignore_ascii_case("y") || typed.trim().eq_ignore_ascii_case("yes")
            }
        }
    }
}

/// Context for the audit record.
#[derive(Debug, Clone)]
pub struct Who {
    pub scheduler_user: Option<String>,
    pub cluster: String,
    pub source: String,
}

/// Builds the preview: blast radius, calls, policy verdict, undo.
#[allow(clippy::too_many_arguments)]
pub fn preview(
    a: &Action,
    c: &Cluster,
    base: &Base,
    data_age: Duration,
    policy: &Policy,
    recent_out: u32,
    force: bool,
    executor: &Executor,
    site: &SiteParams,
) -> Preview {
    let blast = a.blast_target().map(|t| blast(c, base, &t, site));
    let jobs: Vec<String> = match &blast {
        Some(Ok(b)) => b.killed.iter().map(|k| k.id.clone()).collect(),
        _ => Vec::new(),
    };
    let no_op = a.is_no_op(c);
    let summary = match (&blast, a) {
        (Some(Ok(b)), _) => b.summary.clone(),
        (Some(Err(e)), _) => e.clone(),
        (None, Action::Cordon { node, .. }) => {
            let gpus = c.node(node).map_or(0, |n| n.gpu_count);
            format!("{gpus} GPUs of {node} take no new work; running jobs continue")
        }
        (None, _) => a.describe(),
    };
    Preview {
        action: a.clone(),
        calls: if no_op {
            Vec::new()
        } else {
            executor.calls(a, &jobs)
        },
        refusal: policy.check(a, c, data_age, recent_out, force).err(),
        blast,
        summary,
        no_op,
        undo: a.undo(c),
    }
}

/// The result of a confirmed action.
#[derive(Debug, Clone, PartialEq)]
pub struct Done {
    pub outcome: AuditOutcome,
    pub undo: Option<String>,
    pub message: String,
}

fn record(p: &Preview, who: &Who, id: &str, phase: &str, outcome: Option<AuditOutcome>) -> Record {
    Record {
        id: id.to_string(),
        phase: phase.into(),
        time: audit::now(),
        operator: audit::os_user(),
        scheduler_user: who.scheduler_user.clone(),
        host: audit::host(),
        cluster: who.cluster.clone(),
        source: who.source.clone(),
        action: p.action.verb().into(),
        target: p.action.target().into(),
        reason: p.action.reason().map(str::to_string),
        preview: p.summary.clone(),
        outcome,
    }
}

/// Executes a confirmed preview. Refuses when a policy refused, the
/// confirmation does not match, or the intent cannot be written.
pub async fn run(
    p: &Preview,
    typed: &str,
    executor: &Executor,
    log: &AuditLog,
    who: &Who,
    timeout: Duration,
) -> Result<Done, String> {
    if let Some(r) = &p.refusal {
        return Err(format!("refused: {r}; nothing sent"));
    }
    if !p.accepts(typed) {
        return Err(format!(
            "not confirmed ({}); nothing sent",
            p.confirm_prompt()
        ));
    }
    let id = audit::new_id();
    log.write(&record(p, who, &id, "intent", None))
        .map_err(|e| format!("{e}; nothing sent"))?;
    let outcome = if p.no_op {
        AuditOutcome {
            ok: true,
            verified: true,
            no_op: true,
            observed: "already so: nothing to do".into(),
            error: None,
        }
    } else {
        match tokio::time::timeout(timeout, executor.execute(&p.action)).await {
            Ok(Ok(o)) => AuditOutcome {
                ok: true,
                verified: o.verified,
                no_op: false,
                observed: o.observed,
                error: None,
            },
            Ok(Err(e)) => AuditOutcome {
                ok: false,
                verified: false,
                no_op: false,
                observed: String::new(),
                error: Some(e),
            },
            Err(_) => AuditOutcome {
                ok: false,
                verified: false,
                no_op: false,
                observed: String::new(),
                error: Some(format!(
                    "no answer within {}s: the change may or may not have been made",
                    timeout.as_secs()
                )),
            },
        }
    };
    let written = log.write(&record(p, who, &id, "outcome", Some(outcome.clone())));
    let mut message = match (&outcome.error, outcome.no_op, outcome.verified) {
        (Some(e), _, _) => format!("{} failed: {e}", p.action.verb()),
        (None, true, _) => format!("{}: already so, nothing sent", p.action.describe()),
        (None, false, true) => format!("done and verified: {}", outcome.observed),
        (None, false, false) => format!("sent, but not visible yet: {}", outcome.observed),
    };
    if let Err(e) = written {
        message.push_str(&format!(" (audit outcome not written: {e})"));
    }
    let undo = if outcome.ok && !outcome.no_op {
        p.undo.clone()
    } else {
        None
    };
    if let Some(u) = &undo {
        message.push_str(&format!("; undo: {u}"));
    }
    Ok(Done {
        outcome,
        undo,
        message,
    })
}
