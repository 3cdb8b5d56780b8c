//! Armed steps from the command line (issue 29): `drain --after-checkpoint`
//! cordons now and arms the drain, `armed` lists what waits, `disarm`
//! cancels, and `follow` sends each step when it is due — through the
//! guard, its rules checked again then — with no terminal, so the on-call
//! can go back to sleep.

use crate::action_commands::{connect, connect_moment, preview_now, print_preview, runtime, send};
use crate::actions::audit::AuditLog;
use crate::actions::executor::Executor;
use crate::actions::follow::{self, Fired, Firing};
use crate::actions::guard;
use crate::actions::policy::Refusal;
use crate::cli::{Command, Format};
use crate::config::Settings;
use crate::engine::armed::{after_checkpoints, describe, describe_plan};
use crate::error::CommandError;
use crate::model::{Action, Armed, Cluster};
use crate::text::sanitize;
use std::time::{Duration, Instant};

/// `nightshift drain NODE --reason R --requeue --after-checkpoint
/// --confirm NODE`: the plan previewed whole, confirmed once; the cordon
/// sent now, the drain armed.
pub fn arm_drain(settings: &Settings, cmd: &Command) -> Result<(), CommandError> {
    let Command::Drain {
        node, reason, act, ..
    } = cmd
    else {
        return Err(CommandError::NotAnAction);
    };
    if settings.replay.is_some() {
        return Err(CommandError::Replay);
    }
    let log = settings.audit();
    let rt = runtime()?;
    let (moment, executor, who) = connect_moment(settings, &rt)?;
    let base = moment.base(&settings.site, &settings.xid_catalog);
    let cluster = moment.cluster;
    let drain = Action::Drain {
        node: node.clone(),
        reason: reason.clone(),
        requeue: true,
    };
    // The drain's blast radius, once: the jobs the plan waits for, and the
    // options' row that says what the plan costs.
    let blast = crate::engine::blast::blast(&cluster, &base, &drain, &settings.site).ok();
    let jobs = blast.as_ref().map(ended_jobs).unwrap_or_default();
    let refusing = blast
        .as_ref()
        .map(|b| b.keep_running.clone())
        .unwrap_or_default();
    if jobs.is_empty() && !refusing.is_empty() {
        // Jobs run there, but none would be requeued: the drain leaves
        // them running (issue 58: "nothing runs on h100-06" was said).
        return Err(CommandError::Failed(format!(
            "{node} runs job(s) {} submitted with --no-requeue: the scheduler refuses their requeue, so an armed drain would leave them running and {node} draining until they end; nothing sent, nothing armed — drain it now to stop new work (they keep running), or cancel them (their owner resubmits)",
            refusing.join(", ")
        )));
    }
    if jobs.is_empty() {
        return Err(CommandError::Failed(format!(
            "nothing runs on {node}: no checkpoint to wait for; drain it now"
        )));
    }
    let cordon = Action::Cordon {
        node: node.clone(),
        reason: format!("{reason}{}", crate::model::AFTER_CHECKPOINT),
    };
    let p = preview_now(settings, &rt, &executor, (&cluster, &base), &cordon, act);
    print_preview(&p, act.output)?;
    let when = after_checkpoints(&cluster, &jobs);
    crate::outln!(
        "then, once confirmed, armed: {} (whole gangs requeued; `nightshift follow` or the console sends it, through the guard again)",
        sanitize(&describe_plan(&drain, &when))
    );
    let options = blast.and_then(|b| {
        crate::engine::options::node_options_with(&cluster, &base, node, &settings.site, b).ok()
    });
    say_plan_cost(options.as_ref(), None);
    if act.dry_run {
        crate::outln!("dry run: nothing sent, nothing armed");
        return Ok(());
    }
    // The key that seals the armed drain, before anything is sent (issue
    // 59: an unusable key sent the cordon, then failed "cannot seal").
    if let Err(e) = log.seal_key_for_arming() {
        return Err(CommandError::Failed(format!(
            "cannot seal the armed step: {e}; nothing sent, nothing armed"
        )));
    }
    // The whole plan ends in a drain: its target is typed.
    if act.confirm.as_deref() != Some(node.as_str()) {
        return Err(CommandError::Destructive {
            verb: "drain",
            token: node.clone(),
        });
    }
    match &p.refusal {
        // Cordoned already: only the drain is left to arm.
        Some(Refusal::Nothing(n)) => crate::outln!("cordon: {}", sanitize(n)),
        _ => {
            let done = send(settings, &rt, &executor, (&p, "y"), &who, &cluster)?;
            crate::outln!("{}", sanitize(&done.message));
            if !done.outcome.ok {
                return Err(CommandError::Failed(
                    "the cordon failed: nothing armed".into(),
                ));
            }
        }
    }
    arm_and_say(&log, &who, drain, when, cluster.time, act.force)
}

/// What the armed plan costs, as the options' "after the checkpoint" row
/// counts it (the preview above is of what is sent now); `step`: the
/// job's requeue or preempt armed (nothing sent before it).
fn say_plan_cost(options: Option<&crate::engine::options::Options>, step: Option<&Action>) {
    use crate::engine::armed::{plan_cost, plan_cost_of};
    let choice = options.and_then(|o| o.options.iter().find(|c| c.armed_step.is_some()));
    let plan = match step {
        Some(s) => choice.map(|c| plan_cost_of(s, true, c)),
        None => choice.and_then(plan_cost),
    };
    if let Some(line) = plan {
        crate::outln!("{}", sanitize(&line));
    }
}

/// The jobs a blast radius ends (whole gangs): what an armed step waits for.
fn ended_jobs(b: &crate::engine::blast::Blast) -> Vec<String> {
    b.killed.iter().map(|k| k.id.clone()).collect()
}

/// Arms `action` in the audit log and says how to cancel it.
fn arm_and_say(
    log: &AuditLog,
    who: &guard::Who,
    action: Action,
    when: crate::model::Trigger,
    time: i64,
    forced: bool,
) -> Result<(), CommandError> {
    let a = follow::arm_forced(log, who, action, when, time, forced)
        .map_err(|e| CommandError::Failed(e.to_string()))?;
    let id = sanitize(follow::short_id(&a.id, &log.armed())).into_owned();
    crate::outln!(
        "armed {id}: {} (nightshift disarm {id} cancels)",
        sanitize(&describe(&a)),
    );
    Ok(())
}

/// `nightshift requeue JOB --after-checkpoint --confirm JOB` (or
/// `preempt`): the action previewed as it would be sent now (its blast
/// radius), confirmed once, and armed — nothing is sent now; `follow` or
/// the console sends it when the job's checkpoint is seen to move.
pub fn arm_job(settings: &Settings, cmd: &Command) -> Result<(), CommandError> {
    if settings.replay.is_some() {
        return Err(CommandError::Replay);
    }
    let log = settings.audit();
    let rt = runtime()?;
    let (moment, executor, who) = connect_moment(settings, &rt)?;
    let base = moment.base(&settings.site, &settings.xid_catalog);
    let cluster = moment.cluster;
    let (action, act) = match crate::action_commands::action_of(cmd, &cluster) {
        Some(r) => r?,
        None => return Err(CommandError::NotAnAction),
    };
    let job = action.target().to_string();
    if !cluster.job(&job).is_some_and(|j| j.state.holds_resources()) {
        return Err(CommandError::Failed(format!(
            "job {job} is not running: no checkpoint to wait for"
        )));
    }
    // Every job it ends (the whole gang) is waited for.
    let mut jobs = crate::engine::blast::blast(&cluster, &base, &action, &settings.site)
        .map(|b| ended_jobs(&b))
        .unwrap_or_default();
    if !jobs.contains(&job) {
        jobs.insert(0, job.clone());
    }
    let p = preview_now(settings, &rt, &executor, (&cluster, &base), &action, act);
    print_preview(&p, act.output)?;
    let when = after_checkpoints(&cluster, &jobs);
    crate::outln!(
        "nothing sent now; confirming arms it: {} (`nightshift follow` or the console sends it, through the guard again)",
        sanitize(&describe_plan(&action, &when))
    );
    let options = crate::engine::options::job_options(&cluster, &base, &job, None, &settings.site);
    say_plan_cost(options.ok().as_ref(), Some(&action));
    if act.dry_run {
        crate::outln!("dry run: nothing armed");
        return Ok(());
    }
    match &p.refusal {
        Some(Refusal::Breaker(_)) if act.force => {}
        Some(r) => {
            return Err(CommandError::Failed(format!(
                "refused: {}; nothing armed",
                sanitize(&r.to_string())
            )));
        }
        None => {}
    }
    if let Some(t) = &p.token
        && act.confirm.as_deref() != Some(t.as_str())
    {
        return Err(CommandError::Destructive {
            verb: action.verb(),
            token: t.clone(),
        });
    }
    arm_and_say(&log, &who, action, when, cluster.time, act.force)
}

/// `nightshift armed`: what waits, oldest first.
pub fn list(settings: &Settings, format: Format) -> Result<(), CommandError> {
    let log = settings.audit();
    let checked = log.armed_checked();
    // What will not be fired, and the lines that could not be read, are
    // said (on stderr), never skipped in silence.
    for w in checked.warnings() {
        crate::text::warn(&w);
    }
    if checked.trusted.is_empty()
        && let Some(why) = checked.unverifiable()
    {
        return Err(CommandError::Failed(sanitize(&why).into_owned()));
    }
    let armed = checked.trusted;
    match format {
        Format::Json => crate::outln!("{}", crate::text::json_pretty(&armed)?),
        Format::Table => {
            if armed.is_empty() {
                crate::outln!("nothing armed");
            }
            let ids = follow::short_ids(&armed);
            let now = (!armed.is_empty()).then(|| now_of(settings));
            for (a, id) in armed.iter().zip(&ids) {
                crate::outln!(
                    "{}  {}  {}  armed {} (source's clock)",
                    sanitize(id),
                    sanitize(&a.cluster),
                    sanitize(&describe(a)),
                    crate::text::datetime(a.armed_at)
                );
                // What it waits for now, as `follow` and the console say it.
                match &now {
                    Some(Ok((c, name))) if *name == a.cluster => {
                        let line = match crate::engine::armed::due(a, c) {
                            crate::engine::armed::Due::Wait(w) => format!("waiting for {w}"),
                            crate::engine::armed::Due::Fire(w) => {
                                format!("due now ({w}): sent by the next console or follow")
                            }
                        };
                        crate::outln!("    now: {}", sanitize(&line));
                    }
                    Some(Err(e)) => crate::outln!(
                        "    now: unknown: {} not read ({})",
                        sanitize(&a.cluster),
                        sanitize(e)
                    ),
                    _ => {}
                }
            }
        }
    }
    Ok(())
}

/// The source's snapshot and the name its steps are armed under, for
/// `armed` to say what each waits for now; why not, when it cannot be read.
fn now_of(settings: &Settings) -> Result<(Cluster, String), String> {
    if settings.replay.is_some() {
        return Err("a recording is not the cluster now".into());
    }
    let rt = runtime().map_err(|e| e.to_string())?;
    connect(settings, &rt)
        .map(|(c, _, who)| (c, who.cluster))
        .map_err(|e| e.to_string())
}

/// `nightshift disarm ID`.
pub fn disarm(settings: &Settings, id: &str) -> Result<(), CommandError> {
    let log = settings.audit();
    // An id is at least the 12 characters `armed` shows: "" or a few
    // digits would name whatever happens to be armed.
    if id.chars().count() < 12 {
        return Err(CommandError::Failed(format!(
            "{:?} is too short to name an armed step: give the id `nightshift armed` shows (12 characters or more)",
            sanitize(id)
        )));
    }
    let who = guard::Who {
        scheduler_user: None,
        cluster: settings.cluster.clone().unwrap_or_default(),
        source: "cli".into(),
        operator: None,
    };
    let before = log.armed();
    let a = follow::cancel(&log, &who, id, "cancelled by the operator")
        .map_err(|e| CommandError::Failed(sanitize(&e).into_owned()))?;
    crate::outln!(
        "cancelled {}: {}",
        sanitize(follow::short_id(&a.id, &before)),
        sanitize(&describe(&a))
    );
    Ok(())
}

/// The cluster again: the same simulated cluster moved on by `step` of its
/// time, or the live source read anew (with a new executor).
pub fn reread(
    settings: &Settings,
    rt: &tokio::runtime::Runtime,
    executor: &mut Executor,
    step: Duration,
) -> Result<Cluster, CommandError> {
    let speed = settings.source.speed();
    if let Some(c) = executor.advance((step.as_secs_f64() * speed).round() as u64) {
        return c.map_err(CommandError::Failed);
    }
    let (c, x, _) = connect(settings, rt)?;
    *executor = x;
    Ok(c)
}

/// Looks at each of `armed` (this cluster's steps; `all`: every armed
/// step, for their shown ids) and sends it when due; each step's news is
/// said once, not every round. A signal during a send stops the rest.
pub fn send_due(
    rt: &tokio::runtime::Runtime,
    firing: &Firing<'_>,
    (armed, all): (&[Armed], &[Armed]),
    said: &mut std::collections::HashMap<String, String>,
) {
    for a in armed {
        let fired =
            crate::action_commands::finish_despite_signals(rt, follow::fire_if_due(a, firing));
        let line = match fired {
            Fired::Waiting(w) => format!("{}: waiting for {w}", describe(a)),
            Fired::Sent { message, .. } => format!("fired: {message}"),
            Fired::Refused(why) => format!("refused, disarmed: {why}"),
        };
        // Each step's news once, not every round.
        if said.get(&a.id) != Some(&line) {
            crate::outln!(
                "{}  {}",
                sanitize(follow::short_id(&a.id, all)),
                sanitize(&line)
            );
            said.insert(a.id.clone(), line);
        }
        // A signal came while that step was sent: no other is begun.
        if crate::action_commands::interrupted() {
            break;
        }
    }
}

/// `nightshift follow`: every `interval`, each armed step of this cluster
/// is looked at and sent when due; ends when none is left (or after
/// `until`).
pub fn run(
    settings: &Settings,
    interval: Duration,
    until: Option<Duration>,
) -> Result<(), CommandError> {
    if settings.replay.is_some() {
        return Err(CommandError::Replay);
    }
    if settings.read_only {
        return Err(CommandError::Failed(
            "read-only: follow sends the armed steps, and sends nothing read-only".into(),
        ));
    }
    let log = settings.audit();
    let rt = runtime()?;
    // One memory for the whole run: each round's snapshot is observed
    // into it, as the console's analyst does (a node down that lasts, a
    // storm, are derived across the rounds).
    let (moment, mut executor, who) = connect_moment(settings, &rt)?;
    let (mut cluster, mut memory) = (moment.cluster, moment.memory);
    let started = Instant::now();
    let mut said: std::collections::HashMap<String, String> = Default::default();
    let mut warned = std::collections::HashSet::new();
    loop {
        let checked = log.armed_checked();
        for w in checked.warnings() {
            if warned.insert(w.clone()) {
                crate::text::warn(&w);
            }
        }
        // Ids are shown apart from every armed step's: `disarm` takes any.
        let unverifiable = checked.unverifiable();
        let all = checked.trusted;
        let armed: Vec<Armed> = all
            .iter()
            .filter(|a| a.cluster == who.cluster)
            .cloned()
            .collect();
        if armed.is_empty() {
            // Not "done" when what is armed cannot be known (issue 59).
            if let Some(why) = unverifiable {
                return Err(CommandError::Failed(sanitize(&why).into_owned()));
            }
            crate::outln!("nothing armed on {}: done", sanitize(&who.cluster));
            return Ok(());
        }
        let base = memory.base(&cluster, &settings.site, &settings.xid_catalog);
        let firing = Firing {
            cluster: &cluster,
            base: &base,
            data_age: Duration::ZERO,
            policy: &settings.policy,
            site: &settings.site,
            log: &log,
            executor: &executor,
            who: &who,
            timeout: settings.action_timeout,
        };
        send_due(&rt, &firing, (&armed, &all), &mut said);
        if until.is_some_and(|u| started.elapsed() >= u) {
            crate::outln!(
                "stopped after {}: {} step(s) still armed",
                crate::text::duration(started.elapsed().as_secs() as i64),
                log.armed().len()
            );
            return Ok(());
        }
        // A terminating signal ends `follow` between rounds, and after the
        // step it came during was finished and audited.
        if crate::action_commands::interrupted()
            || crate::action_commands::wait_or_signal(&rt, interval)
        {
            crate::outln!(
                "stopped by a signal: {} step(s) still armed",
                log.armed().len()
            );
            return Ok(());
        }
        cluster = reread(settings, &rt, &mut executor, interval)?;
        memory.observe(&cluster, &settings.site);
    }
}
