//! The action commands: `nightshift drain|cordon|resume|requeue|priority|
//! hold|release …` through the same guard the TUI uses, and `audit`.

use crate::actions::audit::warn_unfinished;
use crate::actions::executor::Executor;
use crate::actions::guard::{self, Preview, Who};
use crate::actions::{Action, top_priority};
use crate::cli::{ActArgs, Command, Format};
use crate::config::Settings;
use crate::engine::memory::Moment;
use crate::error::CommandError;
use crate::model::Cluster;
use crate::model::Phase;
use crate::text::{self, sanitize};
use serde::Serialize;
use std::time::Duration;

/// The action a command asks for; `None` for other commands.
pub fn action_of<'a>(
    cmd: &'a Command,
    c: &Cluster,
) -> Option<Result<(Action, &'a ActArgs), CommandError>> {
    Some(Ok(match cmd {
        Command::Drain {
            node,
            reason,
            requeue,
            kill,
            act,
            ..
        } => {
            if !requeue && !kill {
                return Some(Err(CommandError::JobsFate));
            }
            (
                Action::Drain {
                    node: node.clone(),
                    reason: reason.clone(),
                    requeue: *requeue,
                },
                act,
            )
        }
        Command::Cordon { node, reason, act } => (
            Action::Cordon {
                node: node.clone(),
                reason: reason.clone(),
            },
            act,
        ),
        Command::Resume { node, act } => (Action::Resume { node: node.clone() }, act),
        Command::Validate { node, level, act } => (
            Action::Validate {
                node: node.clone(),
                level: *level,
            },
            act,
        ),
        Command::Reason { node, reason, act } => (
            Action::SetReason {
                node: node.clone(),
                reason: reason.clone(),
            },
            act,
        ),
        Command::Requeue { job, act, .. } => (Action::Requeue { job: job.clone() }, act),
        Command::Preempt {
            job, grace, act, ..
        } => (
            Action::Preempt {
                job: job.clone(),
                grace_s: match grace.as_deref().map(crate::engine::units::parse_duration) {
                    Some(Err(e)) => return Some(Err(CommandError::Grace(e))),
                    g => g.and_then(Result::ok),
                },
            },
            act,
        ),
        Command::Priority { job, value, act } => {
            let v = if value == "top" {
                match top_priority(c, job) {
                    Ok(v) => v,
                    Err(e) => return Some(Err(e.into())),
                }
            } else {
                match value.parse::<u64>() {
                    Ok(v) => v,
                    Err(_) => {
                        return Some(Err(CommandError::Priority(value.clone())));
                    }
                }
            };
            (
                Action::Priority {
                    job: job.clone(),
                    value: v,
                },
                act,
            )
        }
        Command::Hold { job, act } => (Action::Hold { job: job.clone() }, act),
        Command::Release { job, act } => (Action::Release { job: job.clone() }, act),
        _ => return None,
    }))
}

#[derive(Serialize)]
struct PreviewJson<'a> {
    action: &'a Action,
    summary: &'a str,
    blast: Option<&'a crate::engine::blast::Blast>,
    calls: &'a [String],
    no_op: bool,
    refused: Option<String>,
    confirm: String,
    /// What `--confirm` must say; `null` when none is needed.
    token: Option<&'a str>,
    warnings: &'a [String],
    undo: Option<&'a Action>,
    undo_command: Option<String>,
}

/// The guard's preview of `action` on the snapshot just read (its data
/// 0 s old), the executor prepared for it, printed as `act` asks.
pub(crate) fn preview_now(
    settings: &Settings,
    rt: &tokio::runtime::Runtime,
    executor: &Executor,
    (cluster, base): (&Cluster, &crate::engine::analysis::Base),
    action: &Action,
    act: &ActArgs,
) -> Preview {
    // One cluster of several (`--context NAME`): the preview names it, and
    // the undo it prints acts there when pasted. What is typed to confirm
    // stays the target (the context was typed already).
    rt.block_on(settings.orchestrator(false).preview(
        Ok(executor),
        action,
        cluster,
        base,
        Duration::ZERO,
        act.force,
    ))
}

/// Sends a preview through the guard (checked again against `cluster`),
/// as the console's runner does.
pub(crate) fn send(
    settings: &Settings,
    rt: &tokio::runtime::Runtime,
    executor: &Executor,
    (p, typed): (&Preview, &str),
    who: &Who,
    cluster: &Cluster,
) -> Result<guard::Done, guard::NotSent> {
    let orchestrator = settings.orchestrator(false);
    finish_despite_signals(
        rt,
        orchestrator.run(executor, p, typed, who, cluster, Duration::ZERO),
    )
}

/// Runs `work` (an action in flight: its intent is or will be written)
/// to its end even when a terminating signal comes (issue 59: SIGTERM
/// between intent and outcome exited at once, the scontrol child ran on
/// and only the intent was audited). The step in flight is finished —
/// bounded by the action's own timeout — and its outcome written; the
/// signal is kept in [`INTERRUPTED`] and the program then exits as it
/// asks. For the action commands and `follow`'s firing alike.
pub(crate) fn finish_despite_signals<T>(
    rt: &tokio::runtime::Runtime,
    work: impl std::future::Future<Output = T>,
) -> T {
    rt.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let kinds = [
            (SignalKind::terminate(), libc::SIGTERM, "SIGTERM"),
            (SignalKind::hangup(), libc::SIGHUP, "SIGHUP"),
            (SignalKind::interrupt(), libc::SIGINT, "SIGINT"),
        ];
        let mut sigs: Vec<(tokio::signal::unix::Signal, i32, &str)> = kinds
            .into_iter()
            .filter_map(|(k, n, name)| signal(k).ok().map(|s| (s, n, name)))
            .collect();
        tokio::pin!(work);
        let caught = async {
            let waits = sigs
                .iter_mut()
                .map(|(s, n, name)| Box::pin(async move { s.recv().await.map(|_| (*n, *name)) }));
            futures_util::future::select_all(waits).await.0
        };
        tokio::select! {
            done = &mut work => done,
            got = caught => {
                if let Some((n, name)) = got {
                    INTERRUPTED.store(n, std::sync::atomic::Ordering::SeqCst);
                    eprintln!(
                        "nightshift: {name}: finishing the action in flight and writing its outcome before exiting"
                    );
                }
                work.await
            }
        }
    })
}

/// Waits `d`, or until a terminating signal comes (then kept in
/// [`INTERRUPTED`]; true). Once an action has run, the signals are the
/// runtime's to hear, no longer the default end of the process: a loop
/// such as `follow` waits through this, so a SIGTERM still ends it.
pub(crate) fn wait_or_signal(rt: &tokio::runtime::Runtime, d: Duration) -> bool {
    rt.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let mut sigs: Vec<(tokio::signal::unix::Signal, i32)> = [
            (SignalKind::terminate(), libc::SIGTERM),
            (SignalKind::hangup(), libc::SIGHUP),
            (SignalKind::interrupt(), libc::SIGINT),
        ]
        .into_iter()
        .filter_map(|(k, n)| signal(k).ok().map(|s| (s, n)))
        .collect();
        let caught = async {
            let waits = sigs
                .iter_mut()
                .map(|(s, n)| Box::pin(async move { s.recv().await.map(|_| *n) }));
            futures_util::future::select_all(waits).await.0
        };
        tokio::select! {
            _ = tokio::time::sleep(d) => false,
            got = caught => match got {
                Some(n) => {
                    INTERRUPTED.store(n, std::sync::atomic::Ordering::SeqCst);
                    true
                }
                None => false,
            },
        }
    })
}

/// Whether a terminating signal came while an action was in flight.
pub(crate) fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) != 0
}

/// The terminating signal caught while an action was in flight (0: none):
/// the program exits with 128 + it once the outcome is written.
pub static INTERRUPTED: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

pub(crate) fn print_preview(p: &Preview, format: Format) -> Result<(), CommandError> {
    match format {
        Format::Json => {
            let j = PreviewJson {
                action: &p.action,
                summary: &p.summary,
                blast: p.blast.as_ref().and_then(|b| b.as_ref().ok()),
                calls: &p.calls,
                no_op: p.no_op,
                refused: p.refusal.as_ref().map(ToString::to_string),
                confirm: p.confirm_prompt(),
                token: p.token.as_deref(),
                warnings: &p.warnings,
                undo: p.undo.as_ref(),
                undo_command: p.undo_line(),
            };
            crate::outln!("{}", crate::text::json_pretty(&j)?);
        }
        Format::Table => {
            match &p.cluster {
                Some(c) => crate::outln!(
                    "preview: {} (cluster {})",
                    sanitize(&p.action.describe()),
                    sanitize(c)
                ),
                None => crate::outln!("preview: {}", sanitize(&p.action.describe())),
            }
            match &p.blast {
                Some(Ok(b)) => crate::out!("{}", crate::report::blast(b)),
                Some(Err(e)) => crate::outln!("  {}", sanitize(&e.to_string())),
                None => crate::outln!("  {}", sanitize(&p.summary)),
            }
            for w in &p.warnings {
                crate::outln!("WARNING: {}", sanitize(w));
            }
            for c in &p.calls {
                crate::outln!("will send: {}", sanitize(c));
            }
            if let Some(u) = p.undo_line() {
                crate::outln!("undo: {}", sanitize(&u));
            }
            if let Some(r) = &p.refusal {
                crate::outln!("refused: {r}");
            }
        }
    }
    Ok(())
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, CommandError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CommandError::Runtime)
}

/// Runs one action command end to end.
pub fn run(settings: &Settings, cmd: &Command) -> Result<(), CommandError> {
    if settings.replay.is_some() {
        return Err(CommandError::Replay);
    }
    let log = settings.audit();
    for w in warn_unfinished(&log) {
        eprintln!("nightshift: warning: {}", sanitize(&w));
    }
    let rt = runtime()?;
    let (moment, executor, who) = connect_moment(settings, &rt)?;
    let base = moment.base(&settings.site, &settings.xid_catalog);
    let cluster = moment.cluster;
    let (action, act) = action_of(cmd, &cluster).ok_or(CommandError::NotAnAction)??;
    let p = preview_now(settings, &rt, &executor, (&cluster, &base), &action, act);
    print_preview(&p, act.output)?;
    // Nothing to do is not an error: nothing was sent, as asked.
    if let Some(crate::actions::policy::Refusal::Nothing(_)) = &p.refusal {
        return Ok(());
    }
    if act.dry_run {
        crate::outln!("dry run: nothing sent");
        return Ok(());
    }
    let typed = match (&p.token, &act.confirm) {
        (Some(_), Some(t)) => t.clone(),
        (Some(t), None) if matches!(action, Action::Resume { .. }) && !p.warnings.is_empty() => {
            return Err(CommandError::ResumeBroken {
                node: sanitize(t).into_owned(),
                token: t.clone(),
            });
        }
        (Some(t), None) => {
            return Err(CommandError::Destructive {
                verb: action.verb(),
                token: t.clone(),
            });
        }
        (None, _) => "y".into(),
    };
    let done = send(settings, &rt, &executor, (&p, &typed), &who, &cluster)?;
    crate::outln!("{}", sanitize(&done.message));
    if done.outcome.partial {
        return Err(CommandError::Partial(
            done.outcome.error.unwrap_or_default(),
        ));
    }
    if !done.outcome.ok {
        return Err(CommandError::Failed(
            done.outcome.error.unwrap_or_else(|| "failed".into()),
        ));
    }
    if !done.outcome.verified {
        return Err(CommandError::NotVisible);
    }
    Ok(())
}

/// The snapshot, the executor for its backend and who acts: what every
/// command that previews or sends an action starts from.
pub(crate) fn connect(
    settings: &Settings,
    rt: &tokio::runtime::Runtime,
) -> Result<(Cluster, Executor, Who), CommandError> {
    connect_moment(settings, rt).map(|(m, x, who)| (m.cluster, x, who))
}

/// [`connect`], with what the analysis remembers of the snapshots before
/// (a recording's, replayed): the base its previews read is the one the
/// console showed at that moment.
pub(crate) fn connect_moment(
    settings: &Settings,
    rt: &tokio::runtime::Runtime,
) -> Result<(Moment, Executor, Who), CommandError> {
    if let Some(path) = &settings.replay {
        // The options of a recorded moment: shown, never sent.
        let m =
            crate::recording::run::replayed_moment(path, settings.at.as_deref(), &settings.site)?;
        let who = Who {
            scheduler_user: None,
            cluster: m.cluster.name.clone(),
            source: "replay".into(),
            operator: None,
        };
        return Ok((m, Executor::replay(), who));
    }
    let (reading, executor) = rt
        .block_on(nightshift_sources::once::connect(
            &settings.source,
            settings.sim_seconds,
            &settings.site,
        ))?
        .ok_or(CommandError::NoScheduler)?;
    let who = Who {
        scheduler_user: reading.scheduler_user.clone(),
        cluster: reading.cluster.name.clone(),
        source: reading.source.into(),
        operator: None,
    };
    // The same moment `get` reads (one_shot::moment): the endpoints' GPU
    // readings and Prometheus's fault history laid over the scheduler's,
    // the [topology] domains, the memory of what came before.
    let m = crate::one_shot::moment(settings, Some(reading), crate::one_shot::Wanted::Whole)
        .map_err(CommandError::Endpoints)?;
    // Audited as the console audits it: what one arms, the other (and
    // `follow`) finds.
    let who = Who {
        cluster: guard::audited_name(settings.cluster.as_deref(), &who.cluster),
        ..who
    };
    Ok((m, executor, who))
}

/// `nightshift options NODE|JOB`: the remediation options side by side,
/// each with the backend's exact calls.
pub fn options(
    settings: &Settings,
    target: &str,
    grace_s: Option<u64>,
    format: Format,
) -> Result<(), CommandError> {
    let rt = runtime()?;
    let (moment, executor, _) = connect_moment(settings, &rt)?;
    let base = moment.base(&settings.site, &settings.xid_catalog);
    let cluster = moment.cluster;
    let mut o = crate::engine::options::options(&cluster, &base, target, grace_s, &settings.site)?;
    for choice in &mut o.options {
        for a in &choice.steps {
            rt.block_on(executor.prepare(a));
        }
        choice.actions = exact_calls(&executor, &choice.steps, &o.target.jobs);
        choice
            .actions
            .extend(choice.manual.iter().map(|m| format!("by hand: {m}")));
    }
    match format {
        Format::Json => crate::outln!("{}", crate::text::json_pretty(&o)?),
        Format::Table => crate::out!("{}", crate::report::options(&o)),
    }
    Ok(())
}

/// The backend's calls for an option's steps, in order.
pub fn exact_calls(executor: &Executor, steps: &[Action], jobs: &[String]) -> Vec<String> {
    steps
        .iter()
        .flat_map(|a| match a {
            Action::Drain { .. } => executor.calls(a, jobs),
            _ => executor.calls(a, &[]),
        })
        .collect()
}

/// `nightshift audit`.
pub fn show(settings: &Settings, format: Format) -> Result<(), CommandError> {
    let log = settings.audit();
    let reading = log.reading();
    if !reading.unreadable.is_empty() {
        return Err(CommandError::AuditUnreadable(reading.unreadable));
    }
    let records = reading.records;
    match format {
        Format::Json => crate::outln!("{}", crate::text::json_pretty(&records)?),
        Format::Table => {
            // Two clocks, each named (issue 39): when it was written (the
            // wall clock) and the source's time it acted on (a sim's or a
            // replay's night; the armed steps' clock).
            // The operator's column as wide as its widest (a policy's
            // `policy:gpu-faults`), up to 24.
            let op = records
                .iter()
                .map(|r| sanitize(&r.operator).chars().count())
                .max()
                .unwrap_or(0)
                .clamp(10, 24);
            crate::outln!(
                "{:<20}  {:<11}  {:<9}  {:<op$}  {:<9}  {:<16}  {:<10}  RESULT",
                "WALL CLOCK (UTC)",
                "SOURCE",
                "PHASE",
                "OPERATOR",
                "ACTION",
                "TARGET",
                "CLUSTER"
            );
            for r in &records {
                let result = match &r.outcome {
                    // An armed step's records: what it waits for, or why it ended.
                    None => r
                        .note
                        .clone()
                        .or_else(|| {
                            (r.phase == Phase::Armed).then(|| match &r.armed {
                                Some(a) => crate::engine::armed::describe(a),
                                None => r.preview.clone(),
                            })
                        })
                        .unwrap_or_else(|| "-".to_string()),
                    Some(o) if o.no_op => "no-op".into(),
                    Some(o) if !o.ok => format!("FAILED: {}", o.error.as_deref().unwrap_or("")),
                    Some(o) if o.verified => format!("verified: {}", o.observed),
                    Some(o) => format!("not verified: {}", o.observed),
                };
                // An armed step is what its seal covers, never the
                // record's outer fields (issue 59: "resume a100-01" was
                // listed while drain h100-05 was what would fire).
                let (action, target) = match &r.armed {
                    Some(a) => (a.action.verb().to_string(), a.action.target().to_string()),
                    None => (r.action.clone(), r.target.clone()),
                };
                crate::outln!(
                    "{:<20}  {:<11}  {:<9}  {:<op$}  {:<9}  {:<16}  {:<10}  {}",
                    text::datetime(r.time),
                    r.source_time
                        .map_or("-".to_string(), |t| text::moment_short(t, r.time)),
                    r.phase.as_str(),
                    sanitize(&r.operator),
                    sanitize(&action),
                    sanitize(&target),
                    sanitize(&r.cluster),
                    sanitize(&result)
                );
            }
            crate::outln!("log: {}", log.path.display());
        }
    }
    for w in reading.skipped.iter().chain(&warn_unfinished(&log)) {
        eprintln!("nightshift: warning: {}", sanitize(w));
    }
    Ok(())
}
