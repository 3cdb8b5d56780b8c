//! The policies' checks at load, and the autopilot over the sim's night:
//! decided by `decide`, sent by `carry_out` through the real guard onto
//! the sim (the same executor the console and the command line use).

use crate::actions::audit::AuditLog;
use crate::actions::executor::Executor;
use crate::actions::guard::Who;
use crate::carry::{Acting, Carried, carry_out};
use crate::decide::{Inputs, Tracker, What, decide};
use crate::engine::SiteParams;
use crate::engine::memory::Memory;
use crate::engine::xid::XidCatalog;
use crate::model::Phase;
use crate::past::{Past, operator_of};
use crate::policy::{Do, Mode, PolicyFile, compile};
use crate::sources::sim::{Sim, SimConfig};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(serde::Deserialize)]
struct File {
    #[serde(default)]
    policy: Vec<PolicyFile>,
}

fn load(text: &str) -> Result<Vec<crate::policy::Policy>, String> {
    let f: File = toml::from_str(text).map_err(|e| e.to_string())?;
    compile(&f.policy, text).map_err(|e| e.to_string())
}

/// The starting set the README proposes (config/policies.example.toml),
/// turned live.
fn starting() -> String {
    include_str!("../../../config/policies.example.toml")
        .replace("mode = \"shadow\"", "mode = \"live\"")
}

#[test]
fn the_starting_policies_load() {
    let p = load(&starting()).expect("policies");
    assert_eq!(p.len(), 2);
    assert_eq!(p[0].name, "gpu-faults");
    assert_eq!(p[0].mode, Mode::Live);
    assert_eq!(p[0].ladder, vec![Do::Recommended]);
    assert_eq!(p[1].ladder, vec![Do::Page]);
    let text = starting();
    let line = text
        .lines()
        .position(|l| l == "name = \"fabric\"")
        .expect("fabric")
        + 1;
    assert_eq!(p[1].line, line, "the line of its name");
}

#[test]
fn a_policy_with_a_typo_is_refused_with_its_line_and_why() {
    // An unknown key: toml's own error names the line.
    let e = load("[[policy]]\nname = \"a\"\nwhen = \"kind == 'xid'\"\nmdoe = \"live\"\n")
        .expect_err("unknown key");
    assert!(e.contains("line 4") && e.contains("mdoe"), "{e}");
    // A name that is not a fact.
    let e = load("\n[[policy]]\nname = \"a\"\nwhen = \"kidn == 'xid'\"\n").expect_err("kidn");
    assert!(
        e.starts_with("line 4: policy \"a\"") && e.contains("\"kidn\"") && e.contains("kind"),
        "{e}"
    );
    // CEL that does not parse.
    let e = load("[[policy]]\nname = \"a\"\nwhen = \"kind == \"\n").expect_err("parse");
    assert!(
        e.starts_with("line 3: ") && e.contains("does not parse"),
        "{e}"
    );
    // Not true or false.
    let e = load("[[policy]]\nname = \"a\"\nwhen = \"xid + 1\"\n").expect_err("int");
    // Numbers are CEL ints: arithmetic and comparison read as written.
    load("[[policy]]\nname = \"a\"\nwhen = \"xid + 1 == 80 && repeat >= 1 && gpu in [3]\"\n")
        .expect("ints");
    assert!(e.contains("true or false"), "{e}");
    // A mode, an option, a duration that are not.
    for (line, want) in [
        ("mode = \"armed\"", "shadow or live"),
        ("do = \"drian_now\"", "not an option"),
        ("hold = \"soon\"", "hold"),
        ("escalate = []", "escalate"),
        ("seen = 0", "seen"),
    ] {
        let text = format!("[[policy]]\nname = \"a\"\nwhen = \"kind == 'xid'\"\n{line}\n");
        let e = load(&text).expect_err(line);
        assert!(e.starts_with("line 2: ") && e.contains(want), "{line}: {e}");
    }
    // Two of one name: the second is refused, and with it every policy.
    let e = load(
        "[[policy]]\nname = \"a\"\nwhen = \"true\"\n[[policy]]\nname = \"a\"\nwhen = \"true\"\n",
    )
    .expect_err("twice");
    assert!(e.starts_with("line 5: ") && e.contains("second"), "{e}");
}

/// The sim's night, with the autopilot taking every round (5 s of the
/// sim's clock) as `nightshift autopilot --interval 5s` does.
struct Night {
    sim: Executor,
    world: Arc<Mutex<Sim>>,
    log: AuditLog,
    _dir: tempfile::TempDir,
}

fn night() -> Night {
    let dir = tempfile::tempdir().expect("tempdir");
    let world = Arc::new(Mutex::new(Sim::new(SimConfig::default()).expect("sim")));
    Night {
        sim: Executor::new(crate::sources::sim::Own(world.clone())),
        world,
        log: AuditLog::new(dir.path().join("audit.jsonl"))
            .with_key(Some(dir.path().join("state/armed.key"))),
        _dir: dir,
    }
}

#[derive(Default)]
struct Seen {
    /// (incident, node, the round it was first read in, the round it was
    /// first acted on).
    acted: Vec<(String, String, i64, i64)>,
    /// (incident id, why) of every page decided.
    pages: Vec<(String, String)>,
}

fn run_night(
    policies: &[crate::policy::Policy],
    guard: &crate::actions::policy::Policy,
) -> (Night, Seen) {
    let n = night();
    let site = SiteParams::default();
    let cat = XidCatalog::default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let mut memory = Memory::default();
    let mut tracker = Tracker::default();
    let mut seen = Seen::default();
    let mut first_read: std::collections::HashMap<String, i64> = Default::default();
    for _ in 0..(2400 / 5) {
        n.world.lock().expect("sim").advance(5);
        let c = n.world.lock().expect("sim").snapshot();
        memory.observe(&c, &site);
        let base = memory.base(&c, &site, &cat);
        let reading = n.log.reading();
        let past = Past::read(&reading.records, n.log.armed(), &c.name);
        let inputs = Inputs {
            policies,
            cluster: &c,
            base: &base,
            site: &site,
            past: &past,
        };
        for i in base.incidents.iter().filter(|i| i.is_open()) {
            first_read.entry(i.id.clone()).or_insert(c.time);
        }
        let (decisions, warnings) = decide(&inputs, &mut tracker);
        assert!(warnings.is_empty(), "{warnings:?}");
        for d in decisions {
            match &d.what {
                What::Page(why) => seen.pages.push((d.incident.clone(), why.clone())),
                What::Act(plan) => {
                    let who = Who {
                        scheduler_user: None,
                        cluster: c.name.clone(),
                        source: "sim".into(),
                        operator: Some(operator_of(&d.policy)),
                    };
                    let acting = Acting {
                        cluster: &c,
                        base: &base,
                        data_age: Duration::ZERO,
                        policy: guard,
                        site: &site,
                        log: &n.log,
                        executor: &n.sim,
                        who: &who,
                        timeout: Duration::from_secs(10),
                    };
                    match rt.block_on(carry_out(plan, &acting)) {
                        Carried::Done(_) => {
                            if !seen.acted.iter().any(|a| a.0 == d.incident) {
                                let read = first_read.get(&d.incident).copied().unwrap_or(d.since);
                                seen.acted
                                    .push((d.incident.clone(), d.node.clone(), read, c.time));
                            }
                        }
                        Carried::Page(why) => seen.pages.push((d.incident.clone(), why)),
                    }
                }
                What::Wait(_) | What::Nothing(_) => {}
            }
        }
    }
    (n, seen)
}

#[test]
fn the_starting_policies_remedy_every_gpu_fault_of_the_sims_night_and_page_the_switch() {
    let policies = load(&starting()).expect("policies");
    let (n, seen) = run_night(&policies, &crate::actions::policy::Policy::default());
    // The night's GPU faults: the Xid 79 it starts with, the Xid 48 (with
    // its DBE, then its Xid 63) and the NVLink storm; the Xid 13 is the
    // application's (restart the job), the row remap a warning: no policy
    // takes them.
    let nodes: Vec<&str> = seen.acted.iter().map(|a| a.1.as_str()).collect();
    assert_eq!(
        seen.acted.len(),
        3,
        "{:?} pages {:?}",
        seen.acted,
        &seen.pages[..seen.pages.len().min(3)]
    );
    // Each acted on in the round that first read it: within one
    // interval of its first reading.
    for (id, node, read, at) in &seen.acted {
        assert_eq!(at, read, "{id} on {node}: first read {read}, acted {at}");
    }
    let records = n.log.read();
    let drains: Vec<&crate::model::audit::Record> = records
        .iter()
        .filter(|r| r.phase == Phase::Intent && r.action == "drain")
        .collect();
    assert_eq!(drains.len(), 3, "{drains:#?}");
    for r in &drains {
        assert_eq!(r.operator, "policy:gpu-faults");
        assert!(nodes.contains(&r.target.as_str()), "{}", r.target);
        assert!(r.incident.is_some(), "the incident it answers");
    }
    // Every outcome went.
    assert!(
        records
            .iter()
            .filter(|r| r.phase == Phase::Outcome)
            .all(|r| r.outcome.as_ref().is_some_and(|o| o.ok)),
        "{records:#?}"
    );
    // The leaf's flaps: one domain incident, paged by its policy, never
    // acted on.
    let mut paged: Vec<&str> = seen.pages.iter().map(|p| p.0.as_str()).collect();
    paged.sort_unstable();
    paged.dedup();
    assert_eq!(paged.len(), 1, "{:?}", seen.pages);
    assert!(
        seen.pages.iter().all(|p| p.1.contains("fabric pages")),
        "{:?}",
        seen.pages
    );
}

#[test]
fn at_the_breaker_the_autopilot_pages_and_sends_nothing_more() {
    let policies = load(&starting()).expect("policies");
    // One node out in any 10 minutes: the storm's drain comes 13 minutes
    // after the Xid 48's — let the window cover it.
    let guard = crate::actions::policy::Policy {
        max_nodes_per_window: 1,
        window: Duration::from_secs(3600),
        ..Default::default()
    };
    let (n, seen) = run_night(&policies, &guard);
    let drains = n
        .log
        .read()
        .into_iter()
        .filter(|r| r.phase == Phase::Intent && r.action == "drain")
        .count();
    assert_eq!(drains, 1, "one node out, the breaker's limit");
    assert!(
        seen.pages
            .iter()
            .any(|(_, why)| why.contains("circuit breaker")),
        "{:?}",
        seen.pages
    );
}

#[test]
fn a_node_that_fails_again_climbs_the_ladder_then_pages() {
    let policies = load(
        "[[policy]]\nname = \"p\"\nwhen = \"true\"\nescalate = [\"drain_now\"]\nmode = \"live\"\n",
    )
    .expect("policies");
    let p = &policies[0];
    let mut past = Past::default();
    past.sent.push(crate::past::Sent {
        policy: "p".into(),
        verb: "drain".into(),
        target: "h100-03".into(),
        incident: Some("e1 XID 79 on h100-03 GPU 3".into()),
        at: 1_000,
    });
    // A second incident on the node within the window: past the ladder.
    assert_eq!(past.earlier_incidents("h100-03", 2_000, p.within_s), 1);
    assert_eq!(p.ladder.get(1), None);
    // Outside the window, the first rung again.
    assert_eq!(
        past.earlier_incidents("h100-03", 1_000 + p.within_s + 1, p.within_s),
        0
    );
    // Another node's history is its own.
    assert_eq!(past.earlier_incidents("h100-04", 2_000, p.within_s), 0);
}
