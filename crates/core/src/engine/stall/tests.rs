//! The stall signature's tests: its history, its counts per job, and the
//! lookup of spinning jobs.

use super::*;
use crate::engine::fixture::*;
use crate::engine::health::verdicts;
use crate::model::LastXid;

fn verdict_map(v: &[NodeVerdict]) -> HashMap<&str, &NodeVerdict> {
    v.iter().map(|x| (x.node.as_str(), x)).collect()
}

fn found(c: &Cluster, h: &StallHistory) -> Vec<Stall> {
    let (cat, site) = (XidCatalog::default(), SiteParams::default());
    let v = verdicts(c, None, &cat, &site);
    stalls(c, &verdict_map(&v), h, &cat, &site)
}

#[test]
fn a_hardware_xid_on_a_rank_stalls_the_whole_gang() {
    let mut c = cluster();
    for n in ["n1", "n2", "n3"] {
        add_node(&mut c, n, "p", 8);
    }
    let a = run(&mut c, "rank0", &["n1"], 8, 600, 7200);
    let b = run(&mut c, "rank1", &["n2"], 8, 600, 7200);
    run(&mut c, "solo", &["n3"], 8, 600, 7200);
    std::sync::Arc::make_mut(&mut c.jobs[a]).gang = Some("g".into());
    std::sync::Arc::make_mut(&mut c.jobs[b]).gang = Some("g".into());
    // The hung-collective look on every GPU: no SM occupancy to speak of.
    for n in &mut c.nodes {
        for g in &mut std::sync::Arc::make_mut(n).gpus {
            g.sm_occupancy = Some(0.01);
        }
    }
    assert!(found(&c, &StallHistory::default()).is_empty());
    std::sync::Arc::make_mut(&mut c.nodes[1]).gpus[3].last_xid = Some(Box::new(LastXid {
        code: 79,
        time: Some(NOW - 60),
        message: None,
    }));
    let s = found(&c, &StallHistory::default());
    let ids: Vec<&str> = s.iter().map(|x| x.job.as_str()).collect();
    assert_eq!(ids, ["rank0", "rank1"], "both ranks, not the solo job");
    let r1 = s.iter().find(|x| x.job == "rank1").expect("rank1");
    assert!(!r1.via_gang);
    assert_eq!(
        (r1.node.as_str(), r1.gpu, r1.since),
        ("n2", Some(3), NOW - 60)
    );
    assert_eq!(r1.burning_gpu_hours_per_hour, 8.0);
    assert!(s.iter().any(|x| x.job == "rank0" && x.via_gang));
    // A job whose GPUs still compute is hit, not hung.
    for n in &mut c.nodes[..2] {
        for g in &mut std::sync::Arc::make_mut(n).gpus {
            g.sm_occupancy = Some(0.7);
        }
    }
    assert!(found(&c, &StallHistory::default()).is_empty());
    for n in &mut c.nodes[..2] {
        for g in &mut std::sync::Arc::make_mut(n).gpus {
            g.sm_occupancy = None;
        }
    }
    assert_eq!(
        found(&c, &StallHistory::default()).len(),
        2,
        "no readings: the Xid decides"
    );
    // An application Xid does not stall a gang: the job dies or goes on.
    std::sync::Arc::make_mut(&mut c.nodes[1]).gpus[3].last_xid = Some(Box::new(LastXid {
        code: 13,
        time: Some(NOW - 60),
        message: None,
    }));
    assert!(found(&c, &StallHistory::default()).is_empty());
    // An Xid from before the job started is not this job's stall.
    std::sync::Arc::make_mut(&mut c.nodes[1]).gpus[3].last_xid = Some(Box::new(LastXid {
        code: 79,
        time: Some(NOW - 10_000),
        message: None,
    }));
    assert!(found(&c, &StallHistory::default()).is_empty());
}

#[test]
fn the_hung_collective_signature_needs_the_whole_window() {
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    run(&mut c, "spin", &["n1"], 8, 600, 7200);
    let site = SiteParams::default();
    let mut h = StallHistory::default();
    let set = |c: &mut Cluster, occ: f64| {
        for g in &mut std::sync::Arc::make_mut(&mut c.nodes[0]).gpus {
            g.utilization = Some(1.0);
            g.sm_occupancy = Some(occ);
        }
    };
    set(&mut c, 0.01);
    h.observe(&c, &site);
    assert!(found(&c, &h).is_empty(), "one sighting is not a stall");
    c.time += site.stall_window_s as i64 - 1;
    h.observe(&c, &site);
    assert!(found(&c, &h).is_empty());
    c.time += 1;
    h.observe(&c, &site);
    let s = found(&c, &h);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].since, NOW);
    assert!(s[0].evidence[0].contains("100% utilization but 1% SM occupancy"));
    // Real work in between restarts the clock.
    set(&mut c, 0.6);
    c.time += 1;
    h.observe(&c, &site);
    set(&mut c, 0.01);
    c.time += 1;
    h.observe(&c, &site);
    assert!(found(&c, &h).is_empty());
}

/// A snapshot without readings (an exporter between scrapes) does not
/// restart a stall's clock: its time stays put.
#[test]
fn missing_readings_keep_a_stalls_start() {
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    run(&mut c, "spin", &["n1"], 8, 600, 7200);
    let site = SiteParams::default();
    let mut h = StallHistory::default();
    let set = |c: &mut Cluster, r: Option<(f64, f64)>| {
        for g in &mut std::sync::Arc::make_mut(&mut c.nodes[0]).gpus {
            g.utilization = r.map(|x| x.0);
            g.sm_occupancy = r.map(|x| x.1);
        }
    };
    set(&mut c, Some((1.0, 0.01)));
    h.observe(&c, &site);
    c.time += 30;
    set(&mut c, None);
    h.observe(&c, &site);
    assert_eq!(h.since("spin"), Some(NOW), "unknown readings keep it");
    c.time += site.stall_window_s as i64;
    set(&mut c, Some((1.0, 0.01)));
    h.observe(&c, &site);
    let s = found(&c, &h);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].since, NOW, "since the first sighting");
}

/// The counts per job kept as nodes change are the counts read afresh
/// from each snapshot: over the sim's minutes (nodes replaced, jobs
/// starting and ending) and a snapshot whose nodes came in another
/// order.
#[test]
fn the_counts_per_job_follow_the_snapshots() {
    use crate::sim::{Sim, SimConfig};
    let site = SiteParams::default();
    let fresh = |c: &Cluster| {
        let mut m: FxHashMap<String, (u32, u32)> = FxHashMap::default();
        for g in c.nodes.iter().flat_map(|n| &n.gpus) {
            if let (Some(j), Some(s)) = (&g.job, spinning(g, &site)) {
                let e = m.entry(j.to_string()).or_default();
                if s {
                    e.0 += 1;
                } else {
                    e.1 += 1;
                }
            }
        }
        m
    };
    let mut sim = Sim::new(SimConfig::default()).expect("sim");
    let mut h = StallHistory::default();
    let mut spun = false;
    for second in 0..400 {
        let mut c = sim.snapshot();
        if second == 200 {
            c.nodes.reverse();
        }
        h.observe(&c, &site);
        assert_eq!(h.spins.by_job, fresh(&c), "at second {second}");
        spun |= h.spins.by_job.values().any(|(yes, _)| *yes > 0);
        sim.advance(1);
    }
    assert!(
        spun,
        "no GPU spun: the counts of spinning GPUs went untried"
    );
}

/// Jobs looked up around where they were are the jobs a read of every
/// job finds: over the sim's minutes (jobs ending and moving up), a
/// snapshot whose jobs came in reverse order, ids that hold nothing or
/// are nowhere, and an id listed twice.
#[test]
fn jobs_looked_up_near_their_place_are_the_ones_a_full_read_finds() {
    use crate::sim::{Sim, SimConfig};
    let mut sim = Sim::new(SimConfig::default()).expect("sim");
    let mut was: FxHashMap<String, usize> = FxHashMap::default();
    let (mut hits, mut tried, mut moved) = (0, 0, 0);
    for second in 0..400 {
        let mut c = sim.snapshot();
        if second == 200 {
            c.jobs.reverse();
        }
        // The same jobs each second (those whose id ends in an even
        // digit), running or not, and one that is nowhere.
        let even = |id: &str| id.ends_with(['0', '2', '4', '6', '8']);
        if second == 300 {
            // A running job listed twice, its ended copy first where
            // it was: the copy found there holds nothing, the other does.
            let k = c
                .jobs
                .iter()
                .position(|j| even(&j.id) && j.state.holds_resources())
                .expect("a running job");
            let mut ended = (*c.jobs[k]).clone();
            ended.state = crate::model::JobState::Completed;
            c.jobs.insert(k, std::sync::Arc::new(ended));
        }
        let mut ids: rustc_hash::FxHashSet<&str> = c
            .jobs
            .iter()
            .map(|j| j.id.as_str())
            .filter(|id| even(id))
            .collect();
        ids.insert("no-such-job");
        let mut want: Vec<&str> = running_of(&c, &ids).collect();
        let mut found = FxHashMap::default();
        let mut got = running_near(&c, &ids, &was, &mut found);
        want.sort_unstable();
        want.dedup();
        got.sort_unstable();
        got.dedup();
        assert_eq!(got, want, "at second {second}");
        tried += ids.len();
        hits += ids.iter().filter(|id| was.contains_key(**id)).count();
        moved += found
            .iter()
            .filter(|(id, k)| was.get(*id).is_some_and(|w| w != *k))
            .count();
        was = found;
        sim.advance(1);
    }
    assert!(
        hits * 2 > tried,
        "the places were rarely used: {hits} of {tried}"
    );
    assert!(
        moved > 0,
        "no job changed its place: the look around went untried"
    );
}
