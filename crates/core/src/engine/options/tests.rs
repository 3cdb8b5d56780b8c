use super::*;
use crate::engine::blast::blast;
use crate::engine::fixture::*;
use crate::engine::xid::XidCatalog;
use crate::model::LastXid;
use std::sync::Arc;

fn base_of(c: &Cluster) -> Base {
    Base::compute(c, None, &SiteParams::default(), &XidCatalog::default())
}

fn gpu_mut<'a>(c: &'a mut Cluster, node: &str, gpu: usize) -> &'a mut crate::model::Gpu {
    let n = c
        .nodes
        .iter_mut()
        .find(|n| n.name == node)
        .expect("node in the fixture");
    &mut Arc::make_mut(n).gpus[gpu]
}

/// A job checkpointing every `every` s whose next checkpoint is `next_in`
/// s away, with a 100 GB state.
fn checkpointing(c: &mut Cluster, j: usize, every: u64, next_in: i64) {
    let job = Arc::make_mut(&mut c.jobs[j]);
    job.checkpoint.interval_s = Some(every).into();
    job.checkpoint.last = Some(NOW + next_in - every as i64).into();
    job.checkpoint.size_bytes = Some(100_000_000_000).into();
}

fn pick(o: &Options) -> &'static str {
    o.recommended().map_or("none", |c| c.name)
}

fn choice<'a>(o: &'a Options, name: &str) -> &'a Choice {
    o.options
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no option {name}: {o:#?}"))
}

/// One node, one 8-GPU job on it; GPU 1 has a row remap pending.
fn remap_night(next_in: i64) -> Cluster {
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    add_node(&mut c, "n2", "p", 8);
    let j = run(&mut c, "r", &["n1"], 8, 7200, 86_400);
    checkpointing(&mut c, j, 1800, next_in);
    gpu_mut(&mut c, "n1", 1).row_remap_pending = Some(true);
    c
}

#[test]
fn a_warning_with_a_checkpoint_due_soon_waits_for_it() {
    let c = remap_night(300);
    let o = node_options(&c, &base_of(&c), "n1", &SiteParams::default()).expect("options");
    assert_eq!(o.target.action, ActionClass::ResetNextDrain);
    assert_eq!(pick(&o), "wait_checkpoint", "{o:#?}");
    let wait = choice(&o, "wait_checkpoint");
    assert_eq!(wait.wait_s, Some(300));
    assert_eq!(wait.gpu_hours_lost, Some(0.0));
    // Draining now loses the 1500 s since its checkpoint on 8 GPUs.
    let now = choice(&o, "drain_now");
    let lost = now.gpu_hours_lost.expect("known");
    assert!((lost - 1500.0 / 3600.0 * 8.0).abs() < 1e-9, "{lost}");
    assert!(
        wait.why.contains("next checkpoint in 5m00s"),
        "{}",
        wait.why
    );
    // The key opens the cordon first; the drain follows the checkpoint.
    assert!(matches!(wait.steps[0], Action::Cordon { .. }));
    assert!(matches!(wait.steps[1], Action::Drain { .. }));
    // The GPU reset is offered: the catalog says a reset clears a remap.
    let reset = choice(&o, "reset_gpu");
    assert_eq!(reset.capacity_out.gpus, 1);
    assert!(
        reset.manual[0].contains("--gpu-reset -i 1"),
        "{:?}",
        reset.manual
    );
}

/// An armed option's confirmation says the plan's cost, not the cost of
/// what its preview shows sent now (issue 29): the node's armed drain (its
/// preview is the cordon's) and the job's armed preempt (its preview is
/// the preempt's as if sent now, the GPU-h since the checkpoint lost).
#[test]
fn an_armed_option_says_what_the_plan_costs() {
    use crate::engine::armed::plan_cost;
    let c = remap_night(300);
    let base = base_of(&c);
    let site = SiteParams::default();
    let o = node_options(&c, &base, "n1", &site).expect("options");
    assert_eq!(
        plan_cost(choice(&o, "wait_checkpoint")).as_deref(),
        Some("as planned: drain n1 in about 5m00s, 0.0 GPU-h lost")
    );
    assert_eq!(plan_cost(choice(&o, "drain_now")), None);
    let o = job_options(&c, &base, "r", None, &site).expect("options");
    assert_eq!(
        plan_cost(choice(&o, "wait_checkpoint")).as_deref(),
        Some(
            "as planned: preempt r in about 5m00s, 0.0 GPU-h lost; \
             the preview's GPU-h are lost only if it were sent now"
        )
    );
    // Sent now, the 1500 s since its checkpoint on 8 GPUs are lost.
    let now = choice(&o, "hard_preempt").gpu_hours_lost.expect("known");
    assert!((now - 1500.0 / 3600.0 * 8.0).abs() < 1e-9, "{now}");
    assert_eq!(plan_cost(choice(&o, "hard_preempt")), None);
    // A hung gang will not checkpoint: the plan's loss has no number, and
    // says why.
    let c = hung_night();
    let o = node_options(&c, &base_of(&c), "n1", &site).expect("options");
    assert_eq!(
        plan_cost(choice(&o, "wait_checkpoint")).as_deref(),
        Some(
            "as planned: drain n1 when the checkpoint is seen, GPU-h lost unknown \
             (job g is hung: it will not checkpoint)"
        )
    );
}

#[test]
fn a_warning_with_no_checkpoint_near_keeps_running() {
    let c = remap_night(1500);
    let site = SiteParams::default();
    let o = node_options(&c, &base_of(&c), "n1", &site).expect("options");
    assert_eq!(pick(&o), "do_nothing", "{o:#?}");
    assert!(
        choice(&o, "do_nothing")
            .why
            .contains("no checkpoint due within 15m00s")
    );
    // A site that waits longer waits for it.
    let patient = SiteParams {
        checkpoint_wait_max_s: 1800,
        ..site
    };
    let o = node_options(&c, &base_of(&c), "n1", &patient).expect("options");
    assert_eq!(pick(&o), "wait_checkpoint");
}

#[test]
fn waiting_loses_each_jobs_work_after_its_own_checkpoint() {
    let mut c = remap_night(300);
    // A second job on the node checkpoints sooner, 100 s from now.
    Arc::make_mut(&mut c.jobs[0]).gpus_total = Some(4);
    Arc::make_mut(&mut c.jobs[0]).gpus_per_node = Some(4);
    for g in 4..8 {
        gpu_mut(&mut c, "n1", g).job = None;
    }
    let k = run(&mut c, "s", &["n1"], 4, 600, 86_400);
    checkpointing(&mut c, k, 600, 100);
    let o = node_options(&c, &base_of(&c), "n1", &SiteParams::default()).expect("options");
    let wait = choice(&o, "wait_checkpoint");
    assert_eq!(wait.wait_s, Some(300));
    // s checkpoints at +100 and runs 200 s more before the drain at +300.
    let lost = wait.gpu_hours_lost.expect("known");
    assert!((lost - 200.0 / 3600.0 * 4.0).abs() < 1e-9, "{lost}");
}

/// The Xid 79 gang: GPU 3 of n1 fell off the bus under a 2-node job.
fn hung_night() -> Cluster {
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    add_node(&mut c, "n2", "p", 8);
    add_node(&mut c, "n3", "p", 8);
    let j = run(&mut c, "g", &["n1", "n2"], 8, 7200, 86_400);
    checkpointing(&mut c, j, 1800, 120);
    gpu_mut(&mut c, "n1", 3).last_xid = Some(Box::new(LastXid {
        code: 79,
        time: Some(NOW - 300),
        message: None,
    }));
    c
}

#[test]
fn a_hung_gang_is_drained_now_never_waited_for() {
    let c = hung_night();
    let base = base_of(&c);
    assert_eq!(base.stalls.len(), 1, "the fixture's gang is hung");
    let o = node_options(&c, &base, "n1", &SiteParams::default()).expect("options");
    assert_eq!(o.target.hung, vec!["g".to_string()]);
    assert_eq!(pick(&o), "drain_now", "{o:#?}");
    assert!(o.recommended().expect("one").why.contains("already hung"));
    // Its checkpoint "due in 2 minutes" never comes: waiting has no number.
    let wait = choice(&o, "wait_checkpoint");
    assert_eq!(wait.gpu_hours_lost, None);
    assert!(wait.unknowns[0].contains("hung"), "{:?}", wait.unknowns);
    let nothing = choice(&o, "do_nothing");
    assert_eq!(nothing.resume_in_s, None);
    assert!(nothing.unknowns[0].contains("GPU-hours per hour"));
    // Preempting it: the grace period cannot help a hung job.
    let o = job_options(&c, &base, "g", Some(600), &SiteParams::default()).expect("options");
    assert_eq!(pick(&o), "hard_preempt");
    let soft = choice(&o, "soft_preempt");
    assert_eq!(
        soft.gpu_hours_lost,
        choice(&o, "hard_preempt").gpu_hours_lost
    );
    assert!(
        soft.unknowns.iter().any(|u| u.contains("hung")),
        "{soft:#?}"
    );
}

#[test]
fn a_grace_long_enough_loses_the_write_not_the_time_since_the_checkpoint() {
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    let j = run(&mut c, "r", &["n1"], 8, 7200, 86_400);
    checkpointing(&mut c, j, 3600, 2400);
    let base = base_of(&c);
    let site = SiteParams::default();
    let hard = blast(
        &c,
        &base,
        &Action::Preempt {
            job: "r".into(),
            grace_s: None,
        },
        &site,
    )
    .expect("blast");
    let soft = blast(
        &c,
        &base,
        &Action::Preempt {
            job: "r".into(),
            grace_s: Some(300),
        },
        &site,
    )
    .expect("blast");
    // 1200 s since the checkpoint on 8 GPUs, against a 100 GB ÷ 5 GB/s
    // write of 20 s on 8 GPUs.
    assert!((hard.lost_gpu_hours - 1200.0 / 3600.0 * 8.0).abs() < 1e-9);
    assert!((soft.lost_gpu_hours - 20.0 / 3600.0 * 8.0).abs() < 1e-9);
    let g = soft.killed[0].restore.grace.as_ref().expect("grace");
    assert_eq!(g.fits, Some(true));
    // Too short a grace: the hard numbers, and it says so.
    let short = blast(
        &c,
        &base,
        &Action::Preempt {
            job: "r".into(),
            grace_s: Some(10),
        },
        &site,
    )
    .expect("blast");
    assert_eq!(short.lost_gpu_hours, hard.lost_gpu_hours);
    let g = short.killed[0].restore.grace.as_ref().expect("grace");
    assert_eq!(g.fits, Some(false));
    assert!(g.note.contains("does not fit"), "{}", g.note);
}

#[test]
fn an_unknown_option_is_recommended_only_saying_so() {
    // No checkpoint metadata at all: draining's restore time is unknown.
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    run(&mut c, "r", &["n1"], 8, 600, 86_400);
    gpu_mut(&mut c, "n1", 2).ecc.dbe_volatile = Some(1).into();
    let o = node_options(&c, &base_of(&c), "n1", &SiteParams::default()).expect("options");
    let r = o.recommended().expect("one");
    assert!(!r.unknowns.is_empty(), "{r:#?}");
    assert!(r.why.contains("unknown"), "{}", r.why);
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// A node with one or two jobs in a random state: checkpoints known or
    /// not, a problem of a random class, hung or not.
    fn night(
        ran: i64,
        since: Option<i64>,
        every: Option<u64>,
        size: Option<u64>,
        problem: u8,
        second: bool,
    ) -> Cluster {
        let mut c = cluster();
        add_node(&mut c, "n1", "p", 8);
        add_node(&mut c, "n2", "p", 8);
        let per = if second { 4 } else { 8 };
        let j = run(&mut c, "a", &["n1"], per, ran, 86_400);
        {
            let job = Arc::make_mut(&mut c.jobs[j]);
            job.checkpoint.interval_s = every.into();
            job.checkpoint.last = since.map(|s| NOW - s.min(ran)).into();
            job.checkpoint.size_bytes = size.into();
        }
        if second {
            run(&mut c, "b", &["n1"], 4, ran / 2, 86_400);
        }
        let g = gpu_mut(&mut c, "n1", 0);
        match problem % 5 {
            0 => {}
            1 => g.row_remap_pending = Some(true),
            2 => g.ecc.dbe_volatile = Some(2).into(),
            3 => {
                g.last_xid = Some(Box::new(LastXid {
                    code: 79,
                    time: Some(NOW - 30),
                    message: None,
                }))
            }
            _ => {
                g.last_xid = Some(Box::new(LastXid {
                    code: 13,
                    time: Some(NOW - 30),
                    message: None,
                }))
            }
        }
        c
    }

    proptest! {
        #[test]
        fn the_engine_never_recommends_against_its_rules(
            ran in 60i64..100_000,
            since in proptest::option::of(0i64..20_000),
            every in proptest::option::of(60u64..7200),
            size in proptest::option::of(1_000_000_000u64..5_000_000_000_000),
            problem in 0u8..5,
            second in any::<bool>(),
        ) {
            let c = night(ran, since, every, size, problem, second);
            let base = base_of(&c);
            let o = node_options(&c, &base, "n1", &SiteParams::default()).expect("options");
            let r = o.recommended().expect("always one");
            prop_assert_eq!(o.options.iter().filter(|c| c.recommended).count(), 1);
            // A hung job: waiting (or doing nothing) is never the answer.
            if !o.target.hung.is_empty() {
                prop_assert!(r.name != "wait_checkpoint" && r.name != "do_nothing", "{:?}", r);
            }
            // Unknown terms are never recommended over known ones silently.
            if !r.unknowns.is_empty() && o.options.iter().any(|c| !c.recommended && c.unknowns.is_empty()) {
                prop_assert!(r.why.contains("unknown"), "{}", r.why);
            }
            // An unknown term is null, never a number that was guessed.
            for ch in &o.options {
                if ch.gpu_hours_lost.is_none() {
                    prop_assert!(!ch.unknowns.is_empty(), "{:?}", ch);
                }
            }
        }

        #[test]
        fn grace_never_loses_more_than_hard_preemption(
            ran in 60i64..100_000,
            since in proptest::option::of(0i64..20_000),
            every in proptest::option::of(60u64..7200),
            size in proptest::option::of(1_000_000_000u64..5_000_000_000_000),
            problem in 0u8..5,
            grace in 1u64..7200,
        ) {
            let c = night(ran, since, every, size, problem, false);
            let base = base_of(&c);
            let site = SiteParams::default();
            let o = job_options(&c, &base, "a", Some(grace), &site).expect("options");
            let hard = choice(&o, "hard_preempt").gpu_hours_lost;
            let soft = choice(&o, "soft_preempt").gpu_hours_lost;
            if let (Some(h), Some(s)) = (hard, soft) {
                prop_assert!(s <= h + 1e-9, "soft {s} > hard {h}");
            }
            prop_assert_eq!(hard.is_some(), soft.is_some());
            if !o.target.hung.is_empty() {
                prop_assert_eq!(pick(&o), "hard_preempt");
            }
        }
    }
}

/// h100-01 is healthy but carries ranks of the gang hung by h100-03's Xid
/// 79: the remedy is h100-03's, named; not a drain of the healthy half.
#[test]
fn a_healthy_node_of_a_hung_gang_is_sent_to_the_broken_node() {
    let c = crate::sim::Sim::new(crate::sim::SimConfig::default())
        .expect("sim")
        .snapshot();
    let b = base_of(&c);
    let o = node_options(&c, &b, "h100-01", &SiteParams::default()).expect("options");
    assert_eq!(pick(&o), "drain_broken");
    let chosen = o.recommended().expect("a pick");
    assert!(
        matches!(&chosen.steps[..], [Action::Drain { node, .. }] if node == "h100-03"),
        "{:?}",
        chosen.steps
    );
    assert!(chosen.why.contains("h100-01 is healthy"), "{}", chosen.why);
    // On the broken node itself, its own drain.
    let o = node_options(&c, &b, "h100-03", &SiteParams::default()).expect("options");
    assert_eq!(pick(&o), "drain_now");
}

/// The hung night's n1 had two more Xid 79s this month (Prometheus's
/// history): a repeat offender, whose options recommend repair.
#[test]
fn a_node_with_its_third_xid_79_in_30_days_goes_to_repair_not_another_reboot() {
    use crate::model::{Fault, PastFault};
    let mut c = hung_night();
    for days in [25, 8] {
        c.history.push(PastFault {
            time: NOW - days * 86_400,
            node: "n1".into(),
            gpu: Some(3),
            fault: Fault::Xid(79),
            from: "prometheus".into(),
        });
    }
    let base = base_of(&c);
    let h = base.history("n1").expect("n1's history");
    assert!(h.line.starts_with("3rd Xid 79 in 30 days"), "{}", h.line);
    let o = node_options(&c, &base, "n1", &SiteParams::default()).expect("options");
    assert_eq!(pick(&o), "repair", "{o:#?}");
    let repair = choice(&o, "repair");
    assert!(
        repair.why.starts_with("3rd Xid 79 in 30 days"),
        "{}",
        repair.why
    );
    match &repair.steps[..] {
        [Action::Drain { reason, .. }] => {
            assert!(reason.starts_with("RMA: 3rd Xid 79"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert!(choice(&o, "drain_now").why.contains("keeps failing"));
    assert_eq!(o.options.iter().filter(|c| c.recommended).count(), 1);
    // Two in 30 days: not yet; its history is still there.
    c.history.pop();
    let base = base_of(&c);
    assert!(
        base.history("n1")
            .expect("history")
            .line
            .starts_with("2nd Xid 79")
    );
    let o = node_options(&c, &base, "n1", &SiteParams::default()).expect("options");
    assert_eq!(pick(&o), "drain_now");
    assert!(o.options.iter().all(|c| c.name != "repair"));
    // Already out of service: the repair sets its reason.
    c.history.push(PastFault {
        time: NOW - 86_400,
        node: "n1".into(),
        gpu: Some(3),
        fault: Fault::Xid(79),
        from: "prometheus".into(),
    });
    Arc::make_mut(&mut c.nodes[0]).state = crate::model::NodeState::Drain;
    let base = base_of(&c);
    let o = node_options(&c, &base, "n1", &SiteParams::default()).expect("options");
    assert_eq!(pick(&o), "repair");
    assert!(matches!(
        &choice(&o, "repair").steps[..],
        [Action::SetReason { .. }]
    ));
}

/// Back to service (issue 29): a drained node whose GPUs read healthy again
/// (rebooted) goes back through the site's check — level 2 after a
/// reboot's fault, level 1 after one a GPU reset clears — unless its last
/// check failed; a node in service is offered no check.
#[test]
fn a_drained_node_with_healthy_gpus_is_validated_then_resumed() {
    use crate::model::{Fault, NodeState, PastFault};
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    add_node(&mut c, "n2", "p", 8);
    let o = node_options(&c, &base_of(&c), "n1", &SiteParams::default()).expect("options");
    assert!(o.options.iter().all(|c| c.name != "validate_resume"));
    {
        let n = Arc::make_mut(&mut c.nodes[0]);
        n.state = NodeState::Drain;
        n.reason = Some("Xid 79".into());
        n.reason_time = Some(NOW - 1200);
        n.boot_time = Some(NOW - 300);
    }
    c.history.push(PastFault {
        time: NOW - 1500,
        node: "n1".into(),
        gpu: Some(3),
        fault: Fault::Xid(79),
        from: "events".into(),
    });
    let o = node_options(&c, &base_of(&c), "n1", &SiteParams::default()).expect("options");
    assert_eq!(pick(&o), "validate_resume", "{o:#?}");
    let v = choice(&o, "validate_resume");
    assert!(
        matches!(&v.steps[..], [Action::Validate { level: 2, .. }]),
        "{v:#?}"
    );
    assert!(v.why.starts_with("rebooted at "), "{}", v.why);
    // A remap failure recorded (Xid 64): its remedy is a GPU reset, level 1.
    c.history[0].fault = Fault::Xid(64);
    let o = node_options(&c, &base_of(&c), "n1", &SiteParams::default()).expect("options");
    assert!(matches!(
        &choice(&o, "validate_resume").steps[..],
        [Action::Validate { level: 1, .. }]
    ));
    // Its last check failed: not recommended again, and it says why.
    Arc::make_mut(&mut c.nodes[0]).reason = Some(format!(
        "{}: PCIe: GPU 3 failed",
        crate::model::VALIDATION_FAILED
    ));
    let o = node_options(&c, &base_of(&c), "n1", &SiteParams::default()).expect("options");
    assert_ne!(pick(&o), "validate_resume");
    assert!(choice(&o, "validate_resume").unknowns[0].contains("its last check failed"));
    // Nor "healthy: nothing to do" (issue 39): kept out, and why.
    let kept = o.options.iter().find(|c| c.recommended).expect("one");
    assert!(
        kept.why
            .starts_with("its last check failed (nightshift validation failed: PCIe"),
        "{}",
        kept.why
    );
}

/// A node under a failing leaf switch (the sim night at +20 min: ib-leaf-2
/// flaps under h100-05…08) is never recommended "do nothing", nor
/// validate-then-resume once out of service: its GPU check does not test
/// the fabric (issue 37). In service: cordon it (the domain's remedy);
/// cordoned by the leaf plan: keep it out until the switch is fixed.
#[test]
fn a_node_of_a_failing_domain_is_never_put_back_nor_left_as_it_is() {
    use crate::sim::{Sim, SimConfig};
    let mut s = Sim::new(SimConfig::default()).expect("sim");
    s.advance(1230);
    let c = s.snapshot();
    let site = SiteParams::default();
    let o = node_options(&c, &base_of(&c), "h100-07", &site).expect("options");
    assert_eq!(pick(&o), "domain_remedy", "{o:#?}");
    assert!(matches!(
        choice(&o, "domain_remedy").steps.as_slice(),
        [Action::Cordon { .. }]
    ));
    // Cordoned (as the leaf plan does), its GPUs healthy: still not put
    // back while the leaf fails.
    s.apply(&Action::Cordon {
        node: "h100-07".into(),
        reason: "ib-leaf-2 failing".into(),
    })
    .expect("cordon");
    let c = s.snapshot();
    let o = node_options(&c, &base_of(&c), "h100-07", &site).expect("options");
    assert!(
        o.options.iter().all(|c| c.name != "validate_resume"),
        "{o:#?}"
    );
    assert_eq!(pick(&o), "domain_remedy", "{o:#?}");
    assert!(choice(&o, "domain_remedy").title.starts_with("keep it out"));
}

/// A node out of service with a GPU at warn (h100-05: Xid 63, a row remap
/// pending until the GPU is reset) is not "healthy": validate-then-resume
/// is not what its options recommend (issue 37).
#[test]
fn a_node_with_a_gpu_at_warn_is_not_recommended_back_as_healthy() {
    use crate::sim::{Sim, SimConfig};
    let mut s = Sim::new(SimConfig::default()).expect("sim");
    s.advance(200);
    s.apply(&Action::Cordon {
        node: "h100-05".into(),
        reason: "remap pending".into(),
    })
    .expect("cordon");
    let c = s.snapshot();
    let o = node_options(&c, &base_of(&c), "h100-05", &SiteParams::default()).expect("options");
    assert_ne!(pick(&o), "validate_resume", "{o:#?}");
    assert!(
        o.recommended()
            .is_none_or(|r| !r.why.contains("read healthy")),
        "{o:#?}"
    );
}

/// The leaf plan's row says when its stalled gangs are back as their own
/// requeue previews will once its cordons are done (issue 39: the row said
/// "back in 5m30s" on the capacity its own cordons take away; the step's
/// preview, after them, "back in 12h05m").
#[test]
fn the_domain_plans_back_in_is_what_its_requeues_say_after_its_cordons() {
    use crate::sim::{Sim, SimConfig};
    let mut s = Sim::new(SimConfig::default()).expect("sim");
    s.advance(1230);
    let c = s.snapshot();
    let site = SiteParams::default();
    let o = domain::domain_options(&c, &base_of(&c), "ib-leaf-2", &site).expect("options");
    let plan = choice(&o, "cordon_domain");
    let back = plan.resume_in_s.expect("back in");
    let mut requeues = Vec::new();
    for a in &plan.steps {
        match a {
            Action::Cordon { .. } => {
                s.apply(a).expect("cordon");
            }
            Action::Requeue { job } => requeues.push(job.clone()),
            other => panic!("{other:?}"),
        }
    }
    assert!(!requeues.is_empty(), "its stalled gangs");
    let after = s.snapshot();
    let b = base_of(&after);
    let latest = requeues
        .iter()
        .map(|j| {
            let bl = blast(&after, &b, &Action::Requeue { job: j.clone() }, &site).expect("blast");
            kill_terms(&after, &bl).1.expect("back in")
        })
        .max()
        .expect("one");
    assert_eq!(back, latest, "{}", plan.title);
}

mod admitted;
