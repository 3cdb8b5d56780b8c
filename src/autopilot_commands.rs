//! `nightshift autopilot` (issue 61): every interval the cluster is read,
//! the armed steps due are sent (what `follow` does), and each open
//! incident a `[[policy]]` takes is carried out through the guard (live),
//! said (shadow), or paged when the policy cannot decide. `pause`,
//! `resume` and `status` act on the autopilot of every process that
//! reads the same audit log.

use crate::action_commands::{connect_moment, runtime};
use crate::actions::audit::{self, AuditLog};
use crate::actions::follow::Firing;
use crate::actions::guard::Who;
use crate::autopilot::carry::{Acting, Carried, carry_out};
use crate::autopilot::decide::{Decision, Inputs, Tracker, What, decide};
use crate::autopilot::page::{Page, Pager};
use crate::autopilot::past::{Past, operator_of};
use crate::autopilot::policy::Mode;
use crate::config::Settings;
use crate::engine::memory::Memory;
use crate::error::CommandError;
use crate::model::Cluster;
use crate::text::sanitize;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// How many policies run live and how many in shadow.
fn modes(settings: &Settings, shadow_all: bool) -> (usize, usize) {
    let n = settings.policies.len();
    let live = settings
        .policies
        .iter()
        .filter(|p| p.mode == Mode::Live && !shadow_all && !settings.read_only)
        .count();
    (live, n - live)
}

/// One line: how many policies, in which modes, and whether paused.
pub fn summary(settings: &Settings, past: &Past, shadow_all: bool) -> String {
    let (live, _) = modes(settings, shadow_all);
    let n = settings.policies.len();
    let mut line = format!(
        "autopilot: {n} polic{} ({live} live, {} shadow)",
        if n == 1 { "y" } else { "ies" },
        n - live
    );
    if let Some(p) = &past.paused {
        line.push_str(&format!(
            "; PAUSED by {}@{} at {}{}",
            p.by,
            p.host,
            crate::text::datetime(p.at),
            if p.why.is_empty() {
                String::new()
            } else {
                format!(" ({})", p.why)
            }
        ));
    }
    line
}

/// The autopilot's past for this cluster, from the audit log.
fn past_of(log: &AuditLog, cluster: &str) -> Past {
    let reading = log.reading();
    Past::read(&reading.records, log.armed(), cluster)
}

/// `nightshift autopilot pause|resume`: a record every autopilot reading
/// this log obeys, naming who paused it and why.
pub fn pause(settings: &Settings, pause: bool, why: &str) -> Result<(), CommandError> {
    let log = settings.audit();
    let cluster = cluster_name(settings);
    crate::actions::autopilot_state::switch(&log, pause, audit::os_user(), &cluster, why)
        .map_err(|e| CommandError::Failed(e.to_string()))?;
    crate::outln!(
        "{}",
        if pause {
            "autopilot paused for every nightshift on this audit log (nightshift autopilot resume ends it)"
        } else {
            "autopilot resumed"
        }
    );
    Ok(())
}

/// The name the autopilot's records and status go under without reading
/// the cluster: its `[[clusters]]` name, or the sim's, or none (a pause
/// with no cluster named holds for every cluster on the log).
fn cluster_name(settings: &Settings) -> String {
    settings.cluster.clone().unwrap_or_default()
}

/// `nightshift autopilot status`: the policies, whether the autopilot is
/// paused (on any cluster of this audit log), and its last round.
pub fn status(settings: &Settings) -> Result<(), CommandError> {
    let log = settings.audit();
    let cluster = cluster_name(settings);
    let reading = log.reading();
    let past = Past::read(&reading.records, log.armed(), &cluster);
    crate::outln!("{}", sanitize(&summary(settings, &past, false)));
    let mut clusters: Vec<&str> = reading
        .records
        .iter()
        .filter(|r| matches!(r.phase, crate::model::Phase::Paused))
        .map(|r| r.cluster.as_str())
        .filter(|c| !c.is_empty() && *c != cluster)
        .collect();
    clusters.sort_unstable();
    clusters.dedup();
    for c in clusters {
        if let Some(p) = crate::actions::autopilot_state::paused_in(&reading.records, c) {
            crate::outln!(
                "  PAUSED on {} by {}@{} at {}{}",
                sanitize(c),
                sanitize(&p.by),
                sanitize(&p.host),
                crate::text::datetime(p.at),
                if p.why.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", sanitize(&p.why))
                }
            );
        }
    }
    for p in &settings.policies {
        crate::outln!(
            "  {}  {}  do {}  when {}",
            sanitize(&p.name),
            p.mode.as_str(),
            p.ladder
                .iter()
                .map(|d| d.as_str())
                .collect::<Vec<_>>()
                .join(" → "),
            sanitize(&p.when)
        );
    }
    Ok(())
}

/// How a run goes.
pub struct Run {
    pub interval: Duration,
    pub until: Option<Duration>,
    /// Every policy in shadow mode, whatever the config says.
    pub shadow: bool,
}

/// What one round says, each line once until it changes.
#[derive(Default)]
struct Said {
    lines: HashMap<String, String>,
}

impl Said {
    fn say(&mut self, key: &str, line: String) {
        if self.lines.get(key) != Some(&line) {
            crate::outln!("{}", sanitize(&line));
            self.lines.insert(key.to_string(), line);
        }
    }
}

/// The state a run keeps across its rounds.
struct State {
    memory: Memory,
    tracker: Tracker,
    pager: Pager,
    said: Said,
    armed_said: HashMap<String, String>,
    interval_s: u64,
    /// When each incident was first read (the read its snapshot came
    /// from): what an action's lag is measured from.
    first_read: HashMap<String, Instant>,
}

/// `nightshift autopilot`.
pub fn run(settings: &Settings, how: &Run) -> Result<(), CommandError> {
    if settings.policies.is_empty() {
        return Err(CommandError::Failed(
            "no [[policy]] in the configuration: nothing for the autopilot to do (README: \"Letting nightshift act\")".into(),
        ));
    }
    if settings.replay.is_some() {
        return crate::autopilot_shadow::replay(settings);
    }
    let log = settings.audit();
    let rt = runtime()?;
    let (moment, mut executor, who) = connect_moment(settings, &rt)?;
    let mut cluster = moment.cluster;
    let mut read_at = Instant::now();
    let mut state = State {
        memory: moment.memory,
        tracker: Tracker::default(),
        pager: Pager::new(settings.paging.clone()).map_err(CommandError::Failed)?,
        said: Said::default(),
        armed_said: HashMap::new(),
        interval_s: how.interval.as_secs(),
        first_read: HashMap::new(),
    };
    let shadow_all = how.shadow || settings.read_only;
    crate::outln!(
        "{} on {}; paging: {}",
        sanitize(&summary(settings, &past_of(&log, &who.cluster), shadow_all)),
        sanitize(&who.cluster),
        paging_targets(settings)
    );
    let started = Instant::now();
    loop {
        round(
            settings,
            &rt,
            (&cluster, read_at),
            &executor,
            &who,
            &mut state,
            shadow_all,
        );
        if how.until.is_some_and(|u| started.elapsed() >= u) {
            crate::outln!(
                "stopped after {}",
                crate::text::duration(started.elapsed().as_secs() as i64)
            );
            return Ok(());
        }
        if crate::action_commands::interrupted()
            || crate::action_commands::wait_or_signal(&rt, how.interval)
        {
            crate::outln!("stopped by a signal");
            return Ok(());
        }
        // A read that fails keeps the last snapshot, which ages: nothing
        // is decided on it once it is stale (the round says so).
        match crate::follow_commands::reread(settings, &rt, &mut executor, how.interval) {
            Ok(c) => {
                cluster = c;
                read_at = Instant::now();
                state.memory.observe(&cluster, &settings.site);
            }
            Err(e) => state
                .said
                .say("read", format!("reading the cluster failed: {e}")),
        }
    }
}

fn paging_targets(settings: &Settings) -> String {
    let mut t = Vec::new();
    if let Some(a) = &settings.paging.alertmanager {
        t.push(format!("Alertmanager {}", a.url));
    }
    if settings.paging.pagerduty.is_some() {
        t.push("PagerDuty".to_string());
    }
    if t.is_empty() {
        "nowhere ([paging] names none: decisions are only said here)".into()
    } else {
        t.join(", ")
    }
}

/// One round: the armed steps due, then each policy's decisions, then
/// the pages.
fn round(
    settings: &Settings,
    rt: &tokio::runtime::Runtime,
    (cluster, read_at): (&Cluster, Instant),
    executor: &crate::actions::executor::Executor,
    who: &Who,
    state: &mut State,
    shadow_all: bool,
) {
    let log = settings.audit();
    let data_age = read_at.elapsed();
    let base = state
        .memory
        .base(cluster, &settings.site, &settings.xid_catalog);
    let past = past_of(&log, &who.cluster);
    // What sending needs, armed steps and policies' plans alike.
    let firing = Firing {
        cluster,
        base: &base,
        data_age,
        policy: &settings.policy,
        site: &settings.site,
        log: &log,
        executor,
        who,
        timeout: settings.action_timeout,
    };
    // The armed steps due (a policy's and a person's), as `follow` sends
    // them — unless paused or read-only.
    if past.paused.is_none() && !settings.read_only {
        let all = log.armed();
        let here: Vec<_> = all
            .iter()
            .filter(|a| a.cluster == who.cluster)
            .cloned()
            .collect();
        crate::follow_commands::send_due(rt, &firing, (&here, &all), &mut state.armed_said);
    }
    let stale = data_age > settings.policy.max_data_age;
    if stale {
        state.said.say(
            "stale",
            format!(
                "the data is {} old: nothing is decided on it",
                crate::text::duration(data_age.as_secs() as i64)
            ),
        );
    }
    let inputs = Inputs {
        policies: &settings.policies,
        cluster,
        base: &base,
        site: &settings.site,
        past: &past,
    };
    let (decisions, warnings) = decide(&inputs, &mut state.tracker);
    for w in warnings {
        crate::text::warn(&w);
    }
    let open_now: HashSet<&str> = base
        .incidents
        .iter()
        .filter(|i| i.is_open())
        .map(|i| i.id.as_str())
        .collect();
    state
        .first_read
        .retain(|id, _| open_now.contains(id.as_str()));
    for id in &open_now {
        state.first_read.entry(id.to_string()).or_insert(read_at);
    }
    let mut pages = Vec::new();
    let mut handling = std::collections::BTreeMap::new();
    for d in decisions.iter().filter(|_| !stale) {
        let live = d.mode == Mode::Live && !shadow_all;
        let (mut line, page) = one(rt, d, &firing, live, &past);
        if matches!(d.what, What::Act(_)) && live && past.paused.is_none() && page.is_none() {
            // How long after its first reading it was sent (the
            // benchmark's number: scripts/bench-autopilot.sh).
            if let Some(t) = state.first_read.get(&d.incident) {
                line.push_str(&format!(
                    " (sent {:.1} s after its first reading)",
                    t.elapsed().as_secs_f64()
                ));
            }
        }
        state.said.say(
            &format!("{} {}", d.policy, d.incident),
            format!("{} [{}]: {line}", d.line, d.policy),
        );
        handling.insert(d.incident.clone(), format!("[{}] {line}", d.policy));
        pages.extend(page);
    }
    acted_before(&base, &past, &mut handling);
    let (live, shadow) = modes(settings, shadow_all);
    let status = crate::model::AutopilotRound {
        host: crate::host::name(),
        pid: std::process::id(),
        at: audit::now(),
        interval_s: state.interval_s,
        cluster: who.cluster.clone(),
        live,
        shadow,
        handling,
    };
    if let Err(e) = crate::actions::autopilot_state::write_round(&log, &status) {
        state
            .said
            .say("status", format!("the consoles' status file: {e}"));
    }
    // A page stands while its incident is failing: a switch gone quiet
    // (remedied), an incident closed, resolve theirs.
    let open: HashSet<String> = base
        .incidents
        .iter()
        .filter(|i| i.is_failing())
        .map(|i| i.id.clone())
        .collect();
    for line in rt.block_on(state.pager.round(pages, &open)) {
        crate::outln!("{}", sanitize(&line));
        tracing::warn!("autopilot: {line}");
    }
}

/// One decision carried out (live), or said (shadow, paused): what it
/// comes to in one line (said once, and written for the consoles), and
/// the page it calls for.
fn one(
    rt: &tokio::runtime::Runtime,
    d: &Decision,
    acting: &Acting<'_>,
    live: bool,
    past: &Past,
) -> (String, Option<Page>) {
    let page = |summary: String| Page {
        incident: d.incident.clone(),
        cluster: acting.who.cluster.clone(),
        node: d.node.clone(),
        policy: d.policy.clone(),
        summary: format!("{}: {summary}", d.line),
    };
    match &d.what {
        What::Wait(w) => (format!("waits for {w}"), None),
        What::Nothing(n) => (n.clone(), None),
        What::Page(why) => (format!("a person decides: {why}"), Some(page(why.clone()))),
        What::Act(plan) if !live => (format!("shadow: would {}", plan.line()), None),
        What::Act(plan) => {
            if let Some(p) = &past.paused {
                return (format!("paused by {}: would {}", p.by, plan.line()), None);
            }
            let who = Who {
                operator: Some(operator_of(&d.policy)),
                ..acting.who.clone()
            };
            let a = Acting {
                who: &who,
                ..*acting
            };
            match crate::action_commands::finish_despite_signals(rt, carry_out(plan, &a)) {
                Carried::Done(msg) => {
                    tracing::info!("autopilot {} [{}]: {msg}", d.line, d.policy);
                    (format!("{}: {msg}", plan.title), None)
                }
                Carried::Page(why) => (format!("a person decides: {why}"), Some(page(why))),
            }
        }
    }
}

/// The incidents the autopilot acted on before that no policy takes now
/// (its drain moved them on): what it sent, and what it armed — the
/// consoles show it on each.
fn acted_before(
    base: &crate::engine::analysis::Base,
    past: &Past,
    handling: &mut std::collections::BTreeMap<String, String>,
) {
    for i in base.incidents.iter().filter(|i| i.is_open()) {
        if handling.contains_key(&i.id) {
            continue;
        }
        let sent: Vec<String> = past
            .sent
            .iter()
            .filter(|s| s.target == i.node && s.at >= i.time)
            .map(|s| {
                format!(
                    "[{}] sent {} {} at {}",
                    s.policy,
                    s.verb,
                    s.target,
                    crate::text::clock(s.at)
                )
            })
            .collect();
        let armed: Vec<String> = past
            .armed
            .iter()
            .filter(|a| crate::engine::armed::on_node(a, &i.node))
            .map(|a| format!("armed: {}", crate::engine::armed::describe(a)))
            .collect();
        if !sent.is_empty() {
            handling.insert(
                i.id.clone(),
                sent.into_iter().chain(armed).collect::<Vec<_>>().join("; "),
            );
        }
    }
}
