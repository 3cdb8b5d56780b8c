//! Engine benchmark at the scale of a big cluster: 10,000 nodes, 80,000
//! GPUs, 100,000 jobs (the simulated cluster, seed 7). Prints figures and
//! how they compare with the targets (why ≤ 5 ms for one job, whole-queue
//! ETA ≤ 500 ms on a 2-core machine). Run: cargo bench --bench engine

use nightshift::engine::SiteParams;
use nightshift::engine::analysis::Base;
use nightshift::engine::blast::{Target, blast};
use nightshift::engine::health::verdicts;
use nightshift::engine::plan::{Unusable, plan};
use nightshift::engine::why::why;
use nightshift::engine::xid::XidCatalog;
use nightshift::sources::sim::{Sim, SimConfig};
use std::hint::black_box;
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, Duration) {
    let samples: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            black_box(f());
            t.elapsed()
        })
        .collect();
    let min = samples.iter().copied().min().unwrap_or_default();
    (median(samples), min)
}

fn report(name: &str, (med, min): (Duration, Duration), target: Option<Duration>) {
    let verdict = match target {
        Some(t) if med <= t => format!("  target {t:?}: MET"),
        Some(t) => format!("  target {t:?}: MISSED"),
        None => String::new(),
    };
    println!(
        "{name:<44} median {:>10.3} ms   min {:>10.3} ms{verdict}",
        med.as_secs_f64() * 1e3,
        min.as_secs_f64() * 1e3
    );
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` would pass other flags.
    let t = Instant::now();
    let sim = Sim::new(SimConfig {
        seed: 7,
        nodes: 10_000,
        jobs: Some(100_000),
    })
    .expect("sim");
    let c = sim.snapshot();
    println!(
        "cluster: {} nodes, {} GPUs, {} jobs ({} pending); generated in {:.0} ms",
        c.nodes.len(),
        c.gpus().count(),
        c.jobs.len(),
        c.jobs.iter().filter(|j| j.state.is_pending()).count(),
        t.elapsed().as_secs_f64() * 1e3
    );
    let site = SiteParams::default();
    let none = Unusable::default();
    report(
        "whole-queue ETA (plan)",
        time(7, || plan(&c, &site, &none)),
        Some(Duration::from_millis(500)),
    );
    // A big team at its quota: the account with the most running jobs gets
    // a GPU limit of exactly what it holds, so each of its pending jobs
    // asks the quota book when enough of its thousands of jobs end.
    let mut counts: std::collections::HashMap<&str, (u32, u32)> = std::collections::HashMap::new();
    for j in c.jobs.iter().filter(|j| j.state.holds_resources()) {
        if let Some(a) = j.account.as_deref() {
            let e = counts.entry(a).or_default();
            e.0 += 1;
            e.1 += j.gpus_requested().unwrap_or(0);
        }
    }
    if let Some((team, (held, gpus))) = counts.into_iter().max_by_key(|(_, (n, _))| *n) {
        let team = team.to_string();
        let mut at_quota = c.clone();
        at_quota.quotas.retain(|q| q.account != team);
        at_quota.quotas.push(nightshift::model::Quota {
            account: team.clone(),
            gpu_limit: Some(gpus),
            gpus_in_use: gpus,
        });
        let waiting = at_quota
            .jobs
            .iter()
            .filter(|j| j.state.is_pending() && j.account.as_deref() == Some(team.as_str()))
            .count();
        report(
            &format!("whole-queue ETA, team at quota ({held} held, {waiting} waiting)"),
            time(5, || plan(&at_quota, &site, &none)),
            Some(Duration::from_millis(500)),
        );
    }
    let cat = XidCatalog::default();
    let base = Base::compute(&c, None, &site, &cat);
    let p = &base.plan;
    // The last pending jobs in scheduler order: the most jobs ahead of them.
    let picks: Vec<usize> = p.order.iter().rev().take(50).copied().collect();
    let mut k = 0;
    report(
        "why(job), given the snapshot's plan",
        time(200, || {
            k = (k + 1) % picks.len();
            why(&c, picks[k], &base)
        }),
        Some(Duration::from_millis(5)),
    );
    report(
        "why(job) cold: base (verdicts + plan) + why",
        time(5, || {
            why(&c, picks[0], &Base::compute(&c, None, &site, &cat))
        }),
        None,
    );
    report(
        "health verdicts, all nodes",
        time(7, || verdicts(&c, None, &cat, &site)),
        None,
    );
    let node = c.nodes[0].name.clone();
    report(
        "blast: drain a node (the plan after; the base's plan before)",
        time(3, || {
            blast(
                &c,
                &base,
                &Target::Drain {
                    reason: String::new(),
                    node: node.clone(),
                    requeue: true,
                },
                &site,
            )
        }),
        None,
    );
}
