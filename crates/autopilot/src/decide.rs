//! How a policy chooses, as a pure function of the snapshot, its analysis,
//! what the autopilot did before (from the audit log) and what it has
//! seen: for each open incident the first policy that takes it, and what
//! it does — wait (the condition must hold longer), act (the steps of the
//! option it chose, which the guard would accept now), page (a person
//! decides), or nothing (done already; nothing nightshift can send).

use crate::engine::SiteParams;
use crate::engine::analysis::Base;
use crate::engine::incidents::{Incident, IncidentKind};
use crate::engine::options::{Choice, Options, domain_options, node_options};
use crate::facts::Facts;
use crate::model::{Action, Cluster, Timestamp, Trigger};
use crate::past::Past;
use crate::policy::{Do, Mode, Policy};
use std::collections::{HashMap, HashSet};

/// What a policy does about one incident now.
#[derive(Debug, Clone, PartialEq)]
pub enum What {
    /// Not yet: what it waits for.
    Wait(String),
    /// Send these steps now (in order), then arm the last one when it
    /// waits for a checkpoint.
    Act(Plan),
    /// A person decides: why.
    Page(String),
    /// Nothing to send: why (done already, nothing nightshift sends).
    Nothing(String),
}

/// The option a policy carries out.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The option's name and title (`drain_now`, "Drain now, requeue").
    pub option: String,
    pub title: String,
    /// Sent now, in order (those the autopilot sent already left out).
    pub now: Vec<Action>,
    /// Armed: sent when the jobs' checkpoints are seen.
    pub armed: Option<(Action, Trigger)>,
    /// What a person does on the node afterwards (nightshift resets and
    /// reboots nothing): said, not paged.
    pub manual: Vec<String>,
    /// The ladder's rung this is (0: the first failure).
    pub rung: usize,
}

impl Plan {
    /// The plan in one line: its title, the steps sent now, the step armed.
    pub fn line(&self) -> String {
        let mut parts: Vec<String> = self.now.iter().map(|a| a.command_line()).collect();
        if let Some((a, when)) = &self.armed {
            parts.push(format!(
                "arm: {}",
                crate::engine::armed::describe_plan(a, when)
            ));
        }
        format!("{} — {}", self.title, parts.join(", then "))
    }
}

/// One policy's decision about one incident.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub policy: String,
    pub mode: Mode,
    /// The incident's id (`e12`) and its one line (`e12 XID 79 on gpu01 GPU 3`).
    pub incident: String,
    pub line: String,
    pub node: String,
    /// Its first time (the source's clock).
    pub since: Timestamp,
    pub what: What,
}

/// What the autopilot has seen across its rounds: when each policy first
/// took each incident, and the incidents each policy took on each node.
#[derive(Debug, Clone, Default)]
pub struct Tracker {
    first: HashMap<(String, String), Timestamp>,
    seen: HashMap<(String, String), Vec<(String, Timestamp)>>,
    /// `when`s that failed on some incident, said once each.
    pub warned: HashSet<String>,
}

/// Everything deciding reads.
pub struct Inputs<'a> {
    pub policies: &'a [Policy],
    pub cluster: &'a Cluster,
    pub base: &'a Base,
    pub site: &'a SiteParams,
    pub past: &'a Past,
}

/// The decisions for every open incident some policy takes, oldest
/// incident first; the warnings of `when`s that failed, once each.
pub fn decide(inp: &Inputs<'_>, t: &mut Tracker) -> (Vec<Decision>, Vec<String>) {
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    let now = inp.cluster.time;
    for i in inp.base.incidents.iter().rev().filter(|i| i.is_open()) {
        let facts = Facts::of(i, inp.cluster, inp.base);
        let Some(policy) = inp.policies.iter().find(|p| match p.matches(&facts) {
            Ok(m) => m,
            Err(e) => {
                if t.warned.insert(e.clone()) {
                    warnings.push(e);
                }
                false
            }
        }) else {
            continue;
        };
        let key = (policy.name.clone(), i.id.clone());
        let first = *t.first.entry(key).or_insert(now);
        let seen = t
            .seen
            .entry((policy.name.clone(), i.node.clone()))
            .or_default();
        if !seen.iter().any(|(id, _)| id == &i.id) {
            seen.push((i.id.clone(), now));
        }
        seen.retain(|(_, at)| now - at <= policy.within_s);
        let times = seen.len() as u32;
        let what = if now - first < policy.hold_s {
            What::Wait(format!(
                "the condition to hold {} (held {})",
                crate::text::duration(policy.hold_s),
                crate::text::duration(now - first)
            ))
        } else if times < policy.seen {
            What::Wait(format!(
                "{} of {} incidents on {} within {}",
                times,
                policy.seen,
                i.node,
                crate::text::duration(policy.within_s)
            ))
        } else {
            choose(policy, i, inp)
        };
        out.push(Decision {
            policy: policy.name.clone(),
            mode: policy.mode,
            incident: i.id.clone(),
            line: crate::actions::audit::incident_line(i),
            node: i.node.clone(),
            since: i.time,
            what,
        });
    }
    // Incidents gone from the data are forgotten.
    let open: HashSet<&str> = inp
        .base
        .incidents
        .iter()
        .filter(|i| i.is_open())
        .map(|i| i.id.as_str())
        .collect();
    t.first.retain(|(_, id), _| open.contains(id.as_str()));
    (out, warnings)
}

/// The rung of the ladder for `i`, and what it does.
fn choose(policy: &Policy, i: &Incident, inp: &Inputs<'_>) -> What {
    let failures = inp.past.earlier_incidents(&i.node, i.time, policy.within_s);
    let Some(rung) = policy.ladder.get(failures) else {
        return What::Page(format!(
            "{} failed {} times within {} and the autopilot acted each time; policy {}'s ladder ends: a person decides (keep it out for the hardware?)",
            i.node,
            failures + 1,
            crate::text::duration(policy.within_s),
            policy.name
        ));
    };
    if *rung == Do::Page {
        return What::Page(format!("policy {} pages for {}", policy.name, i.label));
    }
    let options = if i.kind == IncidentKind::Domain {
        domain_options(inp.cluster, inp.base, &i.node, inp.site)
    } else {
        node_options(inp.cluster, inp.base, &i.node, inp.site)
    };
    let options = match options {
        Ok(o) => o,
        Err(e) => return What::Page(format!("no options for {}: {e}", i.node)),
    };
    let choice = match rung {
        Do::Recommended => options.recommended(),
        Do::Option(name) => options.options.iter().find(|c| c.name == name.as_str()),
        Do::Page => None,
    };
    let Some(choice) = choice else {
        return What::Page(format!(
            "{} is not an option for {} now (the options: {})",
            rung.as_str(),
            i.node,
            names(&options)
        ));
    };
    plan_of(choice, &options, i, inp, policy, failures)
}

fn names(o: &Options) -> String {
    o.options
        .iter()
        .map(|c| c.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The plan of `choice`, or why not.
fn plan_of(
    choice: &Choice,
    options: &Options,
    i: &Incident,
    inp: &Inputs<'_>,
    policy: &Policy,
    rung: usize,
) -> What {
    if let Some(r) = &choice.refused {
        return What::Page(format!(
            "{} ({}) is refused by the guard: {r}",
            choice.title, choice.name
        ));
    }
    if choice.steps.is_empty() {
        let manual = if choice.manual.is_empty() {
            String::new()
        } else {
            format!("; for a person: {}", choice.manual.join("; "))
        };
        return What::Nothing(format!(
            "{}: nothing for nightshift to send{manual}",
            choice.title
        ));
    }
    // Steps sent before: by this process or another (the audit log),
    // for this incident (after it began).
    let sent = |a: &Action| inp.past.sent_since(a, i.time);
    let (now_steps, armed) = match choice.armed_step {
        Some(k) => {
            let later = choice.steps.get(k).cloned();
            let when = crate::engine::armed::after_checkpoints(inp.cluster, &options.target.jobs);
            (
                choice.steps.iter().take(k).cloned().collect::<Vec<_>>(),
                later.map(|a| (a, when)),
            )
        }
        None => (choice.steps.clone(), None),
    };
    // A resume after a drain waits for the person's repair: only the steps
    // before it are the autopilot's.
    let auto: Vec<Action> = match now_steps
        .iter()
        .position(|a| matches!(a, Action::Resume { .. }) && !choice.manual.is_empty())
    {
        Some(p) => now_steps.iter().take(p).cloned().collect(),
        None => now_steps,
    };
    let left: Vec<Action> = auto.into_iter().filter(|a| !sent(a)).collect();
    let armed = armed.filter(|(a, _)| !sent(a) && !inp.past.armed_for(a));
    if left.is_empty() && armed.is_none() {
        return What::Nothing(format!("{}: sent already", choice.title));
    }
    if let Some(why) = inp.past.over_limit(policy, inp.cluster, &i.node) {
        return What::Page(why);
    }
    What::Act(Plan {
        option: choice.name.to_string(),
        title: choice.title.clone(),
        now: left,
        armed,
        manual: choice.manual.clone(),
        rung,
    })
}
