//! Issue 58's rule as a property of the guard: what the options recommend
//! is what the guard accepts, now, on the same base. An operator who takes
//! every recommendation through the sim's night — each incident node's
//! recommended option and each running job's, at every sample — meets no
//! refusal, and what they take moves the night on (drains done, plans
//! armed), so the states nightshift itself makes are asked too.
//!
//! The breaker's count is left out by a policy without limits: it depends
//! on what else was done in its window, and is the guard's runtime limit
//! (docs/decision-engine.md, "What is available, recommended, refused").

use super::{bench, who};
use crate::engine::SiteParams;
use crate::engine::memory::Memory;
use crate::engine::options::{Options, job_options, node_options};
use crate::engine::xid::XidCatalog;
use crate::guard;
use crate::policy::Policy;
use std::time::Duration;

fn limitless() -> Policy {
    Policy {
        max_nodes_per_window: u32::MAX,
        max_partition_share_out: 1.0,
        ..Policy::default()
    }
}

#[test]
fn every_recommendation_through_the_sim_night_passes_the_guard() {
    let b = bench();
    let site = SiteParams::default();
    let cat = XidCatalog::default();
    let policy = limitless();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let mut memory = Memory::default();
    let (mut asked, mut sent) = (0, 0);
    let mut taken: Vec<crate::Action> = Vec::new();
    for second in 0..1800u64 {
        b.world.lock().expect("sim").advance(1);
        let c = super::snapshot(&b.world);
        memory.observe(&c, &site);
        if second % 30 != 29 {
            continue;
        }
        let base = memory.base(&c, &site, &cat);
        let mut all: Vec<Options> = Vec::new();
        let mut nodes: Vec<String> = base
            .incidents
            .iter()
            .filter(|i| i.is_open())
            .flat_map(|i| std::iter::once(i.node.clone()).chain(i.nodes.iter().cloned()))
            .filter(|n| c.node(n).is_some())
            .collect();
        nodes.sort();
        nodes.dedup();
        for n in &nodes {
            all.push(node_options(&c, &base, n, &site).expect("options"));
        }
        for j in c.jobs.iter().filter(|j| j.state.holds_resources()) {
            all.push(job_options(&c, &base, &j.id, None, &site).expect("options"));
        }
        for o in &all {
            let r = o.recommended().unwrap_or_else(|| panic!("none: {o:#?}"));
            let Some(first) = r.steps.first() else {
                continue;
            };
            asked += 1;
            let p = guard::preview(
                first,
                &c,
                &base,
                Duration::ZERO,
                &policy,
                &b.log,
                false,
                Ok(&b.sim),
                &site,
            );
            assert!(
                p.refusal.is_none(),
                "+{second}s {} {}: recommended {} ({}) — the guard refuses {}: {}",
                o.target.kind,
                o.target.name,
                r.name,
                r.title,
                first.command_line(),
                p.refusal
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default()
            );
            // Take the incidents' node recommendations, as the on-call
            // would (the jobs' preemptions are asked, not taken).
            if o.target.kind == "node" && sent < 20 {
                let typed = p.token.clone().unwrap_or_else(|| "y".into());
                let now = guard::Check {
                    cluster: &c,
                    data_age: Duration::ZERO,
                    policy: &policy,
                };
                let done = rt.block_on(guard::run(
                    &p,
                    &typed,
                    &b.sim,
                    &b.log,
                    &who(),
                    Duration::from_secs(5),
                    now,
                ));
                assert!(
                    done.is_ok(),
                    "+{second}s {}: not sent",
                    first.command_line()
                );
                // Never the same action twice: one that changed nothing
                // was recommended again.
                assert!(
                    !taken.contains(first),
                    "+{second}s {} recommended again after it was sent",
                    first.command_line()
                );
                taken.push(first.clone());
                sent += 1;
                // One action per sample: the next is asked on fresh data.
                break;
            }
        }
    }
    assert!(asked >= 40, "only {asked} recommendations asked");
    assert!(sent >= 3, "only {sent} recommendations taken");
}
