use super::*;
use crate::engine::fixture::*;
use crate::model::NodeState;
use crate::sim::{Sim, SimConfig};

fn start(p: &Plan, j: usize) -> Option<Timestamp> {
    p.estimate(j).and_then(Estimate::start)
}

#[test]
fn a_job_that_fits_starts_now() {
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    let j = pend(&mut c, "1", "p", 1, 4, 10);
    let p = plan(&c, &SiteParams::default(), &Unusable::default());
    assert_eq!(start(&p, j), Some(NOW));
}

#[test]
fn a_job_waits_for_the_running_job_to_reach_its_limit() {
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    run(&mut c, "r", &["n1"], 6, 600, 3600);
    let j = pend(&mut c, "1", "p", 1, 4, 10);
    let p = plan(&c, &SiteParams::default(), &Unusable::default());
    assert_eq!(start(&p, j), Some(NOW + 3000));
}

#[test]
fn a_site_overrun_past_the_limit_delays_the_next_start() {
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    run(&mut c, "r", &["n1"], 6, 600, 3600);
    let j = pend(&mut c, "1", "p", 1, 4, 10);
    let then = pend(&mut c, "2", "p", 1, 8, 5);
    let params = SiteParams {
        limit_overrun_s: 30,
        ..SiteParams::default()
    };
    let p = plan(&c, &params, &Unusable::default());
    assert_eq!(start(&p, j), Some(NOW + 3030));
    // Job 1 holds 3600 s + 30 s from then.
    assert_eq!(start(&p, then), Some(NOW + 3030 + 3630));
}

#[test]
fn higher_priority_goes_first_and_smaller_jobs_backfill() {
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    add_node(&mut c, "n2", "p", 8);
    run(&mut c, "r1", &["n1"], 8, 0, 3600);
    run(&mut c, "r2", &["n2"], 6, 0, 7200);
    let big = pend(&mut c, "big", "p", 1, 8, 100);
    let small = pend(&mut c, "small", "p", 1, 2, 1);
    let p = plan(&c, &SiteParams::default(), &Unusable::default());
    assert_eq!(start(&p, big), Some(NOW + 3600));
    assert_eq!(
        start(&p, small),
        Some(NOW),
        "backfills into n2's two free GPUs"
    );
}

#[test]
fn the_plan_infers_resources_for_the_first_waiting_job_and_priority_behind_it() {
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    add_node(&mut c, "n2", "q", 8);
    run(&mut c, "r1", &["n1"], 8, 0, 3600);
    run(&mut c, "r2", &["n2"], 6, 0, 3600);
    let first = pend(&mut c, "first", "p", 1, 8, 100);
    let second = pend(&mut c, "second", "p", 1, 1, 50);
    let other = pend(&mut c, "other", "q", 1, 4, 40);
    add_node(&mut c, "n3", "q", 2);
    let fits = pend(&mut c, "fits", "q", 1, 2, 30);
    let behind = pend(&mut c, "behind", "q", 1, 2, 20);
    // Too long for n2's idle GPUs before `other` needs them.
    std::sync::Arc::make_mut(&mut c.jobs[behind]).time_limit = Some(TimeLimit::Seconds(7200));
    let held = pend(&mut c, "held", "p", 1, 1, 200);
    std::sync::Arc::make_mut(&mut c.jobs[held]).reason = Some("JobHeldUser".into());
    let p = plan(&c, &SiteParams::default(), &Unusable::default());
    let r = p.inferred_reasons(&c);
    assert_eq!(r[first], Some("Resources"));
    assert_eq!(r[second], Some("Priority"), "behind a waiting job");
    assert_eq!(
        r[other],
        Some("Resources"),
        "first waiting in its own partition"
    );
    assert_eq!(r[fits], None, "starts now on n3: nothing holds it");
    assert_eq!(r[behind], Some("Priority"), "behind `other`");
    assert_eq!(r[held], None, "the scheduler's word stands");
}

#[test]
fn short_jobs_backfill_into_the_gap_before_a_reservation_and_long_ones_do_not() {
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    run(&mut c, "r", &["n1"], 6, 0, 3600);
    // `big` needs all 8 at 3600: the 2 idle GPUs are reserved from then.
    let big = pend(&mut c, "big", "p", 1, 8, 100);
    let short = pend(&mut c, "short", "p", 1, 2, 50);
    std::sync::Arc::make_mut(&mut c.jobs[short]).time_limit = Some(TimeLimit::Seconds(1200));
    let after = pend(&mut c, "after", "p", 1, 2, 40);
    std::sync::Arc::make_mut(&mut c.jobs[after]).time_limit = Some(TimeLimit::Seconds(2400));
    let long = pend(&mut c, "long", "p", 1, 2, 30);
    std::sync::Arc::make_mut(&mut c.jobs[long]).time_limit = Some(TimeLimit::Seconds(7200));
    let p = plan(&c, &SiteParams::default(), &Unusable::default());
    assert_eq!(start(&p, big), Some(NOW + 3600));
    assert_eq!(start(&p, short), Some(NOW), "ends before big starts");
    assert_eq!(
        start(&p, after),
        Some(NOW + 1200),
        "fits in what is left of the gap, after short"
    );
    assert_eq!(
        start(&p, long),
        Some(NOW + 7200),
        "would delay big: after it, with big's limit"
    );
    let r = p.inferred_reasons(&c);
    assert_eq!(r[short], None, "backfilled now");
    assert_eq!(r[after], Some("Priority"));
}

#[test]
fn a_gang_needs_all_its_nodes_at_once() {
    let mut c = cluster();
    for n in ["n1", "n2", "n3"] {
        add_node(&mut c, n, "p", 8);
    }
    run(&mut c, "r", &["n3"], 1, 0, 5000);
    let g = pend(&mut c, "g", "p", 3, 8, 10);
    let p = plan(&c, &SiteParams::default(), &Unusable::default());
    assert_eq!(start(&p, g), Some(NOW + 5000));
}

#[test]
fn drained_capacity_never_frees_and_holds_block() {
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    std::sync::Arc::make_mut(&mut c.nodes[0]).state = NodeState::Drain;
    let j = pend(&mut c, "1", "p", 1, 1, 10);
    let h = pend(&mut c, "2", "p", 1, 1, 10);
    std::sync::Arc::make_mut(&mut c.jobs[h]).reason = Some("JobHeldUser".into());
    let p = plan(&c, &SiteParams::default(), &Unusable::default());
    assert_eq!(
        p.estimate(j),
        Some(&Estimate::NoFit {
            reason: "needs 1 node with 1 GPUs, 0 left in p".into(),
            waits_for: vec!["n1".into()],
            permanent: false,
        })
    );
    assert_eq!(
        p.estimate(h),
        Some(&Estimate::Blocked {
            reason: "JobHeldUser".into()
        })
    );
}

#[test]
fn a_team_at_quota_waits_for_its_own_work_to_end() {
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    add_node(&mut c, "n2", "p", 8);
    run(&mut c, "r", &["n1"], 8, 0, 1000);
    quota(&mut c, "team", 8);
    let j = pend(&mut c, "1", "p", 1, 4, 10);
    let p = plan(&c, &SiteParams::default(), &Unusable::default());
    assert_eq!(
        start(&p, j),
        Some(NOW + 1000),
        "n2 is free but the team is at its quota"
    );
}

#[test]
fn the_sim_night_plans_sensibly() {
    let c = Sim::new(SimConfig::default()).expect("sim").snapshot();
    let p = plan(&c, &SiteParams::default(), &Unusable::default());
    for (i, j) in c.jobs.iter().enumerate() {
        match (j.state.is_pending(), p.estimate(i)) {
            (true, Some(Estimate::Starts { start, .. })) => assert!(*start >= c.time, "{}", j.name),
            (true, Some(_)) => {}
            (true, None) => panic!("pending job {} has no estimate", j.name),
            (false, e) => assert!(e.is_none()),
        }
    }
    let asr = c
        .jobs
        .iter()
        .position(|j| j.name == "asr-conformer-8g")
        .expect("asr");
    assert!(
        start(&p, asr).is_some_and(|s| s > c.time),
        "fragmented: no node has 8 free now"
    );
    let dep = c
        .jobs
        .iter()
        .position(|j| j.name == "llm-eval-70b")
        .expect("eval");
    assert!(matches!(p.estimate(dep), Some(Estimate::Blocked { .. })));
}

proptest::proptest! {
    /// The quota book's cursors answer as asking the usage at now and at
    /// every end after it would (the quadratic reference they replaced),
    /// through any mix of added work and questions of any size.
    #[test]
    fn the_quota_book_agrees_with_the_usage_at_every_end(
        limit in 0u32..40,
        now in 0i64..50,
        steps in proptest::collection::vec((0i64..100, 0i64..60, 0u32..12, proptest::bool::ANY), 0..40),
    ) {
        let mut book = QuotaBook::new(limit, now);
        for (a, b, g, ask) in steps {
            if ask {
                let need = g * 4;
                let reference = if need > limit {
                    NEVER
                } else {
                    let mut at: Vec<Timestamp> = std::iter::once(now)
                        .chain(book.held.iter().map(|h| h.1).filter(|&e| e > now))
                        .collect();
                    at.sort_unstable();
                    at.into_iter()
                        .find(|&t| book.usage_at(t) + need <= limit)
                        .unwrap_or(NEVER)
                };
                proptest::prop_assert_eq!(book.earliest(need), reference, "need {}", need);
            } else {
                book.add(a, a + b, g);
            }
        }
    }
}

/// A node the scheduler holds back for a reservation (issue 38: a
/// maintenance reservation read as free capacity) is capacity from the
/// reservation's end, not now; with no known end, never.
#[test]
fn a_reserved_node_is_capacity_from_its_reservations_end_only() {
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    let j = pend(&mut c, "1", "p", 1, 8, 10);
    let reserve = |c: &mut Cluster, back_at: Option<Timestamp>| {
        let n = std::sync::Arc::make_mut(&mut c.nodes[0]);
        n.state = NodeState::Reserved;
        n.back_at = back_at;
    };
    reserve(&mut c, Some(NOW + 3600));
    let p = plan(&c, &SiteParams::default(), &Unusable::default());
    assert_eq!(start(&p, j), Some(NOW + 3600));
    reserve(&mut c, None);
    let p = plan(&c, &SiteParams::default(), &Unusable::default());
    assert!(
        matches!(p.estimate(j), Some(Estimate::NoFit { .. })),
        "{:?}",
        p.estimate(j)
    );
}

/// A job bound to named nodes (`--nodelist`) starts there or not at all:
/// not on another node with room now (issue 38: `-w` of a reserved node
/// read as "can start now" elsewhere).
#[test]
fn a_job_bound_to_named_nodes_waits_for_them() {
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    add_node(&mut c, "n2", "p", 8);
    run(&mut c, "r", &["n2"], 8, 600, 3600);
    let j = pend(&mut c, "1", "p", 1, 8, 10);
    std::sync::Arc::make_mut(&mut c.jobs[j]).required_nodes = vec!["n2".into()].into();
    let free = pend(&mut c, "2", "p", 1, 8, 5);
    let p = plan(&c, &SiteParams::default(), &Unusable::default());
    assert_eq!(start(&p, j), Some(NOW + 3000));
    assert!(
        matches!(p.estimate(j), Some(Estimate::Starts { nodes, .. }) if nodes == &["n2"]),
        "{:?}",
        p.estimate(j)
    );
    assert_eq!(start(&p, free), Some(NOW), "n1 stays for the others");
    std::sync::Arc::make_mut(&mut c.jobs[j]).required_nodes = vec!["nope".into()].into();
    let p = plan(&c, &SiteParams::default(), &Unusable::default());
    assert!(matches!(p.estimate(j), Some(Estimate::Blocked { .. })));
}

/// Jobs ahead with no time limit: no estimate, and the reason says which
/// jobs hold the nodes that fit (issue 38: a start "in 364d23h" before).
#[test]
fn no_estimate_names_the_jobs_without_a_time_limit() {
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    let r = run(&mut c, "r1", &["n1"], 8, 600, 3600);
    std::sync::Arc::make_mut(&mut c.jobs[r]).time_limit = Some(TimeLimit::Unlimited);
    let j = pend(&mut c, "1", "p", 1, 8, 10);
    let p = plan(&c, &SiteParams::default(), &Unusable::default());
    match p.estimate(j) {
        Some(Estimate::NoFit {
            reason, permanent, ..
        }) => {
            assert!(
                reason.ends_with("held by jobs without a time limit (r1)"),
                "{reason}"
            );
            assert!(!permanent, "it starts once r1 ends: no estimate, not never");
        }
        other => panic!("{other:?}"),
    }
    // Larger than any node of its partition: never.
    let big = pend(&mut c, "2", "p", 1, 16, 1);
    let p = plan(&c, &SiteParams::default(), &Unusable::default());
    assert!(
        matches!(
            p.estimate(big),
            Some(Estimate::NoFit {
                permanent: true,
                ..
            })
        ),
        "{:?}",
        p.estimate(big)
    );
}

/// Issue 58, seen on Slurm 26.05: a maintenance window on a100n1 starting
/// in 20 minutes for an hour, and a 30-minute job bound to it (`-w`):
/// Slurm starts it after the window (squeue --start), not now. A job
/// whose limit fits before the window starts now; one free to go
/// elsewhere goes there.
#[test]
fn a_job_whose_limit_runs_into_a_reservation_ahead_starts_after_it() {
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    add_node(&mut c, "n2", "p", 8);
    c.reservations.push(crate::model::Reservation {
        name: "maint-a1".into(),
        nodes: vec!["n1".into()],
        start: NOW + 1200,
        end: Some(NOW + 1200 + 3600),
    });
    let limit = |c: &mut Cluster, j: usize, s: u64| {
        std::sync::Arc::make_mut(&mut c.jobs[j]).time_limit =
            Some(crate::model::TimeLimit::Seconds(s));
    };
    let bound = pend(&mut c, "bound", "p", 1, 4, 30);
    limit(&mut c, bound, 1800);
    std::sync::Arc::make_mut(&mut c.jobs[bound]).required_nodes = vec!["n1".into()].into();
    let short = pend(&mut c, "short", "p", 1, 4, 20);
    limit(&mut c, short, 600);
    std::sync::Arc::make_mut(&mut c.jobs[short]).required_nodes = vec!["n1".into()].into();
    let free = pend(&mut c, "free", "p", 1, 8, 10);
    limit(&mut c, free, 1800);
    let p = plan(&c, &SiteParams::default(), &Unusable::default());
    assert_eq!(
        start(&p, bound),
        Some(NOW + 1200 + 3600),
        "{:?}",
        p.estimate(bound)
    );
    assert_eq!(start(&p, short), Some(NOW), "{:?}", p.estimate(short));
    assert_eq!(start(&p, free), Some(NOW), "{:?}", p.estimate(free));
    assert!(
        matches!(p.estimate(free), Some(Estimate::Starts { nodes, .. }) if nodes == &["n2".to_string()]),
        "{:?}",
        p.estimate(free)
    );
}
