//! `nightshift autopilot --replay FILE` (always shadow): the policies run
//! over a recorded night, snapshot by snapshot, as a live autopilot would
//! have seen it; what each would have done and when is printed beside
//! what the people on that recording did and when — agreements,
//! disagreements, and the minutes a live autopilot would have saved. A
//! site turns a policy live after reading this.

use crate::autopilot::decide::{Inputs, Tracker, What, decide};
use crate::autopilot::past::Past;
use crate::config::Settings;
use crate::engine::memory::Memory;
use crate::error::CommandError;
use crate::model::Phase;
use crate::model::audit::Record;
use crate::text::sanitize;
use std::collections::BTreeMap;

/// What the policies would first have done about one incident.
#[derive(Debug, Clone)]
struct Would {
    line: String,
    node: String,
    policy: String,
    since: i64,
    at: i64,
    /// The first verb it would have sent; `None`: it would have paged.
    verb: Option<String>,
    what: String,
}

/// How often (source seconds) the policies are asked, as a live
/// autopilot's interval.
const EVERY_S: i64 = 5;

/// Runs the policies over the recording in `settings.replay`.
pub fn replay(settings: &Settings) -> Result<(), CommandError> {
    let Some(path) = &settings.replay else {
        return Err(CommandError::Replay);
    };
    let rec = crate::recording::reader::Recording::open(path)?;
    for w in rec.damage() {
        crate::text::warn(&w);
    }
    let people: Vec<(i64, Record)> = rec
        .audit()
        .into_iter()
        .filter(|(_, r)| r.phase == Phase::Intent)
        .map(|(t, r)| (r.source_time.unwrap_or(t), r.clone()))
        .collect();
    let mut memory = Memory::default();
    let mut tracker = Tracker::default();
    let mut would: BTreeMap<String, Would> = BTreeMap::new();
    let mut last: Option<i64> = None;
    let (start, end) = rec.span();
    for c in rec.states() {
        let c = c?;
        memory.observe(&c, &settings.site);
        if last.is_some_and(|l| c.time.saturating_sub(l) < EVERY_S) {
            continue;
        }
        last = Some(c.time);
        let base = memory.base(&c, &settings.site, &settings.xid_catalog);
        // The autopilot's own past is empty: in shadow it sent nothing.
        let past = Past::default();
        let inputs = Inputs {
            policies: &settings.policies,
            cluster: &c,
            base: &base,
            site: &settings.site,
            past: &past,
        };
        let (decisions, _) = decide(&inputs, &mut tracker);
        for d in decisions {
            let (verb, what) = match &d.what {
                What::Act(p) => (
                    p.now
                        .first()
                        .or(p.armed.as_ref().map(|(a, _)| a))
                        .map(|a| a.verb().to_string()),
                    p.line(),
                ),
                What::Page(why) => (None, format!("page: {why}")),
                _ => continue,
            };
            would.entry(d.incident.clone()).or_insert(Would {
                line: d.line,
                node: d.node,
                policy: d.policy,
                since: d.since,
                at: c.time,
                verb,
                what,
            });
        }
    }
    crate::outln!(
        "autopilot in shadow over {} ({} to {}), {} polic{}",
        sanitize(&path.display().to_string()),
        crate::text::datetime(start),
        crate::text::datetime(end),
        settings.policies.len(),
        if settings.policies.len() == 1 {
            "y"
        } else {
            "ies"
        }
    );
    let mut tally = Tally::default();
    for w in would.values() {
        compare(w, &people, &mut tally);
    }
    crate::outln!(
        "{} incident(s) taken by a policy: {} agreement(s), {} disagreement(s), {} the people did nothing about, {} page(s); a live autopilot would have acted {} sooner in all",
        would.len(),
        tally.agree,
        tally.disagree,
        tally.untouched,
        tally.pages,
        crate::text::duration(tally.saved_s)
    );
    Ok(())
}

#[derive(Default)]
struct Tally {
    agree: usize,
    disagree: usize,
    untouched: usize,
    pages: usize,
    saved_s: i64,
}

/// One incident: what the policy would have done, what the people did
/// (their first action on its node after it began), and how they compare.
fn compare(w: &Would, people: &[(i64, Record)], tally: &mut Tally) {
    let person = people
        .iter()
        .find(|(t, r)| *t >= w.since && r.target == w.node && !r.operator.starts_with("policy:"));
    crate::outln!("{} [{}]", sanitize(&w.line), sanitize(&w.policy));
    crate::outln!(
        "    policy  {}  {}",
        crate::text::clock(w.at),
        sanitize(&w.what)
    );
    match person {
        Some((t, r)) => crate::outln!(
            "    people  {}  {} {} {}",
            crate::text::clock(*t),
            sanitize(&r.operator),
            sanitize(&r.action),
            sanitize(&r.target)
        ),
        None => crate::outln!("    people  —  nothing on {}", sanitize(&w.node)),
    }
    let verdict = match (&w.verb, person) {
        (None, _) => {
            tally.pages += 1;
            "a page: a person decides".to_string()
        }
        (Some(_), None) => {
            tally.untouched += 1;
            "the people did nothing about it: read it before turning the policy live".to_string()
        }
        (Some(v), Some((t, r))) if *v == r.action => {
            tally.agree += 1;
            let saved = (t - w.at).max(0);
            tally.saved_s += saved;
            if saved > 0 {
                format!("agree; {} sooner", crate::text::duration(saved))
            } else {
                "agree".to_string()
            }
        }
        (Some(v), Some((_, r))) => {
            tally.disagree += 1;
            format!(
                "DISAGREE: the policy would {v}, the people did {}",
                r.action
            )
        }
    };
    crate::outln!("    → {}", sanitize(&verdict));
}
