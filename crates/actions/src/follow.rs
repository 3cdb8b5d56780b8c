//! Armed steps (issue 29), the guard's side: arming one (its record in
//! the audit log, the plan confirmed once), cancelling it, and firing it
//! when the engine says it is due — through the same guard as any action,
//! its rules checked again at that moment (data age, the circuit breaker,
//! a node taken out meanwhile); a refusal disarms it and says why. The
//! console and `nightshift follow` both fire through here.

use super::audit::{self, AuditError, AuditLog};
use super::executor::Executor;
use super::guard::{self, Check, Who};
use super::policy::{Policy, Refusal};
use crate::engine::SiteParams;
use crate::engine::analysis::Base;
use crate::engine::armed::{Due, describe, due};
use crate::model::Phase;
use crate::model::audit::Record;
use crate::model::{Action, Armed, Cluster, Trigger};
use std::time::Duration;

/// A step's end (`fired`, `refused`, `cancelled`), sealed with the key
/// that sealed the step: only a sealed end ends it (issue 59).
fn end_record(log: &AuditLog, a: &Armed, who: &Who, phase: Phase, note: String) -> Record {
    Record {
        seal: log
            .seal_key()
            .ok()
            .map(|k| super::seal::end_tag(&k, &a.id, phase.as_str())),
        ..record(a, who, phase, Some(note))
    }
}

fn record(a: &Armed, who: &Who, phase: Phase, note: Option<String>) -> Record {
    Record {
        id: a.id.clone(),
        phase,
        time: audit::now(),
        operator: who.operator(),
        scheduler_user: who.scheduler_user.clone(),
        host: crate::host::name(),
        cluster: who.cluster.clone(),
        source: who.source.clone(),
        action: a.action.verb().into(),
        target: a.action.target().into(),
        reason: a.action.reason().map(str::to_string),
        preview: describe(a),
        armed: (phase == Phase::Armed).then(|| a.clone()),
        note,
        ..Record::default()
    }
}

/// Arms `action` to be sent when `when` is seen; returns it as kept.
pub fn arm(
    log: &AuditLog,
    who: &Who,
    action: Action,
    when: Trigger,
    now: crate::model::Timestamp,
) -> Result<Armed, ArmError> {
    arm_forced(log, who, action, when, now, false)
}

/// [`arm`] for a plan confirmed past the circuit breaker (`--force`): its
/// step keeps the override when it fires.
pub fn arm_forced(
    log: &AuditLog,
    who: &Who,
    action: Action,
    when: Trigger,
    now: crate::model::Timestamp,
    forced: bool,
) -> Result<Armed, ArmError> {
    let key = log.seal_key_for_arming().map_err(ArmError::Key)?;
    let plan = crate::engine::armed::describe_plan(&action, &when);
    let mut a = Armed {
        id: audit::new_id(),
        action,
        when,
        armed_at: now,
        cluster: who.cluster.clone(),
        confirmed_by: who.operator(),
        preview_digest: super::seal::digest(&plan),
        tag: String::new(),
        forced,
    };
    super::seal::armable(&a).map_err(ArmError::NotArmable)?;
    a.tag = super::seal::tag(&key, &a);
    log.write(&record(&a, who, Phase::Armed, None))
        .map_err(ArmError::Audit)?;
    Ok(a)
}

/// Why a step could not be armed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArmError {
    #[error(transparent)]
    Audit(AuditError),
    #[error("cannot seal the armed step: {0}")]
    Key(super::seal::KeyError),
    #[error("{0}")]
    NotArmable(String),
}

/// How an armed step's id is shown: its shortest prefix of 12 characters
/// or more that starts no other armed step's id — what `cancel` takes.
/// Ids begin with the second they were made in, so steps armed in one
/// second (two plans at once, a console and the command line) need more.
pub fn short_id<'a>(id: &'a str, armed: &[Armed]) -> &'a str {
    let longest = armed
        .iter()
        .filter(|a| a.id != id)
        .map(|a| common_prefix(id, &a.id))
        .max()
        .unwrap_or(0);
    cut(id, longest)
}

/// Every armed step's shown id ([`short_id`]), in `armed`'s order, in
/// O(n log n): an id needs one character more than it shares with its
/// neighbours in sorted order (10⁵ steps are listed in well under a
/// second, not minutes).
pub fn short_ids(armed: &[Armed]) -> Vec<String> {
    let mut sorted: Vec<&str> = armed.iter().map(|a| a.id.as_str()).collect();
    sorted.sort_unstable();
    sorted.dedup();
    armed
        .iter()
        .map(|a| {
            let i = sorted.binary_search(&a.id.as_str()).unwrap_or(0);
            let before = i
                .checked_sub(1)
                .and_then(|j| sorted.get(j))
                .map_or(0, |o| common_prefix(&a.id, o));
            let after = sorted.get(i + 1).map_or(0, |o| common_prefix(&a.id, o));
            cut(&a.id, before.max(after)).to_string()
        })
        .collect()
}

fn common_prefix(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

/// `id` cut one past `shared` characters, 12 at least.
fn cut(id: &str, shared: usize) -> &str {
    let n = (shared + 1).max(12);
    id.get(..n).unwrap_or(id)
}

/// Cancels the armed step `id` (an id's unique prefix will do) of
/// `who.cluster` (of any cluster when that is empty).
pub fn cancel(log: &AuditLog, who: &Who, id: &str, why: &str) -> Result<Armed, String> {
    if id.is_empty() {
        return Err("give the id of the step to cancel".into());
    }
    let armed = log.armed();
    // Only this cluster's steps, when it is named.
    let found: Vec<&Armed> = armed
        .iter()
        .filter(|a| a.id.starts_with(id) && (who.cluster.is_empty() || a.cluster == who.cluster))
        .collect();
    let a = match found[..] {
        [a] => a.clone(),
        [] => return Err(format!("nothing armed as {id}")),
        _ => {
            return Err(format!(
                "{id} names {} armed steps: give more of it",
                found.len()
            ));
        }
    };
    log.write(&end_record(log, &a, who, Phase::Cancelled, why.to_string()))
        .map_err(|e| e.to_string())?;
    Ok(a)
}

/// What came of looking at an armed step.
#[derive(Debug, Clone, PartialEq)]
pub enum Fired {
    /// Not due: what it waits for.
    Waiting(String),
    /// Sent: the guard's one-line outcome, and whether it all went.
    Sent { message: String, ok: bool },
    /// Due, but the guard's rules no longer hold: disarmed, and why.
    Refused(String),
}

/// Everything firing needs besides the step.
pub struct Firing<'a> {
    pub cluster: &'a Cluster,
    pub base: &'a Base,
    pub data_age: Duration,
    pub policy: &'a Policy,
    pub site: &'a SiteParams,
    pub log: &'a AuditLog,
    pub executor: &'a Executor,
    pub who: &'a Who,
    pub timeout: Duration,
}

/// The circuit breaker on the plan as a whole: an armed drain of a node
/// the plan cordoned is judged as taking that node out now — the nodes
/// taken out meanwhile count (in the audit log, and out of service in the
/// partition), the plan's own cordon does not. The guard alone would let
/// it through: the node is out already.
fn breaker_now(a: &Armed, f: &Firing<'_>) -> Option<Refusal> {
    if a.forced {
        return None;
    }
    let node = a.action.takes_out()?;
    let mut view = f.cluster.clone();
    if let Some(n) = view.nodes.iter_mut().find(|n| n.name == node) {
        std::sync::Arc::make_mut(n).state = crate::model::NodeState::Up;
    }
    let reading = f.log.reading();
    let mut clusters = f.policy.clusters(&f.cluster.name);
    clusters.push(&f.who.cluster);
    let recent = reading.taken_out(&audit::Window {
        clusters: &clusters,
        source_now: f.cluster.time,
        wall_now: audit::now(),
        span_s: f.policy.window.as_secs() as i64,
        except: Some(node),
        scheduler: Some(f.cluster),
    });
    f.policy
        .check_listing(&a.action, &view, f.data_age, &recent, false)
        .err()
        .filter(|r| matches!(r, Refusal::Breaker(_)))
}

/// An armed drain whose node someone else took out meanwhile (its reason
/// is no longer the plan's cordon's): not sent over their drain — refused,
/// naming who and why (issue 37: it was recorded "fired … done").
fn taken_by_someone_else(a: &Armed, c: &Cluster) -> Option<String> {
    let Action::Drain { node, .. } = &a.action else {
        return None;
    };
    let n = c.node(node)?;
    if n.state.schedulable()
        || n.reason
            .as_deref()
            .is_some_and(|r| r.ends_with(crate::model::AFTER_CHECKPOINT))
    {
        return None;
    }
    Some(format!(
        "{node} is already {} by {} ({}): the plan's drain is not sent over it",
        n.state.as_str(),
        n.reason_set_by.as_deref().unwrap_or("someone else"),
        n.reason.as_deref().unwrap_or("no reason given")
    ))
}

/// Closes the intents of `a`'s own sends that have no outcome (the sender
/// was killed mid-send) with an outcome that says so; whether there were
/// any. The caller holds the sending lock: no other nightshift is sending
/// it now.
fn close_interrupted(a: &Armed, f: &Firing<'_>) -> bool {
    let reading = f.log.reading();
    let open: Vec<&Record> = reading
        .unfinished()
        .into_iter()
        .filter(|r| r.step_of.as_deref() == Some(a.id.as_str()))
        .collect();
    for r in &open {
        let closed = Record {
            phase: Phase::Outcome,
            time: audit::now(),
            outcome: Some(audit::Outcome {
                ok: false,
                verified: false,
                no_op: false,
                partial: true,
                observed:
                    "interrupted: the sending nightshift stopped before the outcome; sent again"
                        .into(),
                error: Some("interrupted mid-send".into()),
                steps: Vec::new(),
            }),
            ..(*r).clone()
        };
        if let Err(e) = f.log.write(&closed) {
            tracing::warn!("armed step {}: closing its interrupted send: {e}", a.id);
        }
    }
    !open.is_empty()
}

/// Fires `a` when it is due on `f.cluster`, through the guard (the caller
/// gives this cluster's steps).
pub async fn fire_if_due(a: &Armed, f: &Firing<'_>) -> Fired {
    // A read-only nightshift sends nothing, and disarms nothing either.
    if f.policy.read_only {
        return Fired::Waiting("a read-only nightshift to stop (it sends nothing)".into());
    }
    let why = match due(a, f.cluster) {
        Due::Wait(w) => return Fired::Waiting(w),
        Due::Fire(why) => why,
    };
    // One sender at a time: another nightshift on this log (the console,
    // `follow`) may be sending this very step; once the lock is ours, the
    // step must still be armed.
    let _sending = match f.log.firing() {
        Ok(Some(lock)) => lock,
        Ok(None) => return Fired::Waiting("another nightshift sending it".into()),
        // A lock that cannot be taken (a directory, a link, a FIFO where
        // it should be) means nothing is sent: it fails closed.
        Err(e) => return Fired::Waiting(format!("the sending lock: {e}; nothing sent")),
    };
    // Still armed, sealed, and this very step (not another line that
    // took its id).
    if !f.log.armed().iter().any(|x| x == a) {
        return Fired::Waiting("sent or cancelled by another nightshift".into());
    }
    // A send of this very step cut off (a `follow` killed mid-send and
    // started again): its intent has no outcome. It is closed as
    // interrupted — so it does not read as another operator's drain in
    // flight — and the step is sent again: what is left of it (the
    // requeues after the drain) goes; what was done reads as done.
    let interrupted = close_interrupted(a, f);
    f.executor.prepare(&a.action).await;
    let how = guard::How {
        force: a.forced,
        step_of: Some(a.id.clone()),
    };
    let p = guard::preview_as(
        &a.action,
        f.cluster,
        f.base,
        f.data_age,
        f.policy,
        f.log,
        how,
        Ok(f.executor),
        f.site,
    );
    // The plan was confirmed when it was armed: its token stands typed.
    let typed = p.token.clone().unwrap_or_else(|| "y".into());
    let refused = |why: String| {
        let note = format!("{}: {why}", describe(a));
        let _ = f
            .log
            .write(&end_record(f.log, a, f.who, Phase::Refused, note.clone()));
        Fired::Refused(note)
    };
    if let Some(r) = breaker_now(a, f) {
        return refused(r.to_string());
    }
    // (After its own interrupted send, the reason is its own drain's.)
    if let Some(why) = (!interrupted)
        .then(|| taken_by_someone_else(a, f.cluster))
        .flatten()
    {
        return refused(why);
    }
    // Nothing left to do after its own interrupted send: it was done.
    if let (true, Some(Refusal::Nothing(n))) = (interrupted, &p.refusal) {
        let note = format!("{why}: done by its interrupted send ({n})");
        let _ = f
            .log
            .write(&end_record(f.log, a, f.who, Phase::Fired, note.clone()));
        return Fired::Sent {
            message: note,
            ok: true,
        };
    }
    if let Some(r) = &p.refusal {
        return refused(match r {
            Refusal::Nothing(n) => format!("nothing to do now ({n})"),
            other => other.to_string(),
        });
    }
    let now = Check {
        cluster: f.cluster,
        data_age: f.data_age,
        policy: f.policy,
    };
    match guard::run(&p, &typed, f.executor, f.log, f.who, f.timeout, now).await {
        Ok(done) => {
            let note = format!("{why}: {}", done.message);
            let _ = f
                .log
                .write(&end_record(f.log, a, f.who, Phase::Fired, note.clone()));
            Fired::Sent {
                message: note,
                ok: done.outcome.ok,
            }
        }
        // Refused now (the breaker, old data, the node taken out
        // meanwhile), or the intent could not be written.
        Err(e) => refused(e.to_string()),
    }
}
