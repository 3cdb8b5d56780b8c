//! Issue 58: what the options recommend, the guard accepts — each case as
//! it was seen, on the engine.

use super::*;

/// Every option the guard would refuse (`admit::refusal` of its first
/// step, the check its preview makes) is marked unavailable, and the
/// recommended one passes it.
fn assert_recommendation_admitted(c: &Cluster, base: &Base, o: &Options) {
    let r = o.recommended().expect("one recommended");
    assert!(r.available(), "{r:#?}");
    if let Some(first) = r.steps.first() {
        let refused = crate::engine::admit::refusal(first, c, base);
        assert!(refused.is_none(), "{} refused: {refused:?}", r.name);
    }
    for x in &o.options {
        let refused = x
            .steps
            .first()
            .and_then(|s| crate::engine::admit::refusal(s, c, base));
        assert_eq!(
            x.refused.is_some(),
            refused.is_some(),
            "{}: {refused:?}",
            x.name
        );
    }
}

/// Issue 58, seen on Slurm 22.05, 26.05 and Kubernetes: a node drained
/// by hand ("fan noisy -- alice") that still runs a job was recommended
/// "validate, then resume", which the guard refuses (the check needs the
/// whole node). Now the plan is to validate once it is empty, nothing is
/// sent for it now, and the check itself is refused with the guard's words.
#[test]
fn a_node_drained_by_hand_that_still_runs_work_is_validated_once_empty() {
    use crate::model::NodeState;
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    add_node(&mut c, "n2", "p", 8);
    run(&mut c, "5", &["n1"], 4, 600, 3600);
    {
        let n = Arc::make_mut(&mut c.nodes[0]);
        n.state = NodeState::Draining;
        n.reason = Some("fan noisy -- alice".into());
        n.reason_time = Some(NOW - 60);
    }
    let base = base_of(&c);
    let o = node_options(&c, &base, "n1", &SiteParams::default()).expect("options");
    assert_recommendation_admitted(&c, &base, &o);
    let v = choice(&o, "validate_resume");
    assert!(
        v.steps.is_empty(),
        "nothing sent while it runs work: {v:#?}"
    );
    assert!(
        v.title
            .starts_with("validate (DCGM level 2) once its jobs end (by "),
        "{}",
        v.title
    );
    assert!(v.manual[0].contains("still runs job 5"), "{:?}", v.manual);
    let check = Action::Validate {
        node: "n1".into(),
        level: 2,
    };
    assert!(matches!(
        crate::engine::admit::refusal(&check, &c, &base),
        Some(crate::engine::admit::Refused::Cannot(_))
    ));
    // Empty: the check itself, sent.
    c.jobs.clear();
    for g in &mut Arc::make_mut(&mut c.nodes[0]).gpus {
        g.job = None;
    }
    Arc::make_mut(&mut c.nodes[0]).state = NodeState::Drain;
    let base = base_of(&c);
    let o = node_options(&c, &base, "n1", &SiteParams::default()).expect("options");
    assert_eq!(pick(&o), "validate_resume");
    assert!(matches!(
        &choice(&o, "validate_resume").steps[..],
        [Action::Validate { .. }]
    ));
    assert_recommendation_admitted(&c, &base, &o);
}

/// Issue 58, seen on the sim (job 4702): a job submitted with
/// --no-requeue was recommended "preempt with a grace period"; the
/// preempt (a requeue) then failed at the scheduler. Every preemption is
/// unavailable with the guard's reason, and doing nothing is recommended.
#[test]
fn a_job_that_refuses_a_requeue_is_never_recommended_a_preemption() {
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    let j = run(&mut c, "4702", &["n1"], 8, 600, 86_400);
    checkpointing(&mut c, j, 1800, 120);
    Arc::make_mut(&mut c.jobs[j]).requeueable = Some(false);
    let base = base_of(&c);
    let o = job_options(&c, &base, "4702", None, &SiteParams::default()).expect("options");
    assert_eq!(pick(&o), "do_nothing", "{o:#?}");
    assert_recommendation_admitted(&c, &base, &o);
    let hard = choice(&o, "hard_preempt");
    assert!(
        hard.refused
            .as_deref()
            .is_some_and(|r| r.contains("--no-requeue")),
        "{hard:#?}"
    );
    assert!(
        o.recommended()
            .is_some_and(|r| r.why.contains("the guard refuses preempt now")),
        "{o:#?}"
    );
    // The guard's blast of the preempt says the same.
    let b = blast(
        &c,
        &base,
        &Action::Preempt {
            job: "4702".into(),
            grace_s: Some(60),
        },
        &SiteParams::default(),
    );
    assert!(matches!(b, Err(EngineError::NoRequeue(_))), "{b:?}");
}

/// Issue 58, seen on the sim: while the drain of its plan is armed (the
/// node cordoned "…: drain after checkpoint"), the options recommended
/// the same plan again — whose cordon the guard refuses ("cordoned
/// already") — and offered a check of a node with a running job and a
/// pending remap. Now the plan shows as armed, with nothing to send.
#[test]
fn a_node_cordoned_for_its_armed_drain_shows_the_plan_as_armed() {
    use crate::model::NodeState;
    let mut c = remap_night(200);
    {
        let n = Arc::make_mut(&mut c.nodes[0]);
        n.state = NodeState::Cordoned;
        n.reason = Some(format!("GPU 1 row remap{}", crate::model::AFTER_CHECKPOINT));
    }
    let base = base_of(&c);
    let o = node_options(&c, &base, "n1", &SiteParams::default()).expect("options");
    assert_recommendation_admitted(&c, &base, &o);
    assert_eq!(pick(&o), "wait_checkpoint", "{o:#?}");
    let w = choice(&o, "wait_checkpoint");
    assert!(w.title.starts_with("as armed: "), "{}", w.title);
    assert!(w.steps.is_empty() && w.armed_step.is_none(), "{w:#?}");
    assert!(o.options.iter().all(|x| x.name != "validate_resume"));
}

/// Issue 58, seen on the sim: after its armed drain fired, h100-05 was
/// drained and empty with GPU 1's remap pending, and its options said
/// "keep running, reset the GPU at the next drain window". This is that
/// window: keep it out, reset, validate — and its incident says the same.
#[test]
fn a_drained_empty_node_with_a_pending_remap_is_in_its_drain_window() {
    use crate::model::NodeState;
    let mut c = remap_night(200);
    c.jobs.clear();
    {
        let n = Arc::make_mut(&mut c.nodes[0]);
        for g in &mut n.gpus {
            g.job = None;
        }
        n.state = NodeState::Drain;
        n.reason = Some("GPU 1 row remap".into());
        n.reason_set_by = Some("root".into());
        n.reason_time = Some(NOW - 30);
    }
    let base = base_of(&c);
    let o = node_options(&c, &base, "n1", &SiteParams::default()).expect("options");
    assert_recommendation_admitted(&c, &base, &o);
    assert_eq!(pick(&o), "keep_out", "{o:#?}");
    let k = choice(&o, "keep_out");
    assert_eq!(k.title, "keep it out: reset the GPU, then validate");
    assert!(k.why.contains("drain window"), "{}", k.why);
}

/// Issue 58 on the sim: h100-05's Xid 63 (a remap pending) and its job
/// drained away — the armed drain of its plan fired — leave it drained and
/// empty. Its incident registers the drain and waits for the remedy, in
/// the words of the option its node recommends (keep it out, reset the
/// GPU, validate), not "reset the GPU at the next drain window".
#[test]
fn after_its_drain_the_remap_incident_awaits_its_remedy_in_its_options_words() {
    use crate::engine::incidents::Stage;
    use crate::sim::{Sim, SimConfig};
    let mut s = Sim::new(SimConfig::default()).expect("sim");
    s.advance(100);
    s.apply(&Action::Drain {
        node: "h100-05".into(),
        reason: "nightshift: reset@drain".into(),
        requeue: true,
    })
    .expect("drain");
    s.advance(5);
    let c = s.snapshot();
    let base = base_of(&c);
    let inc = base
        .incidents
        .iter()
        .find(|i| i.node == "h100-05" && i.xid == Some(63))
        .expect("the Xid 63 incident");
    let o = node_options(&c, &base, "h100-05", &SiteParams::default()).expect("options");
    assert_recommendation_admitted(&c, &base, &o);
    let r = o.recommended().expect("one");
    assert_eq!(r.name, "keep_out", "{o:#?}");
    assert_eq!(inc.stage, Stage::AwaitingRemedy, "{}", inc.status);
    assert!(
        inc.status.ends_with(&r.title),
        "{} / {}",
        inc.status,
        r.title
    );
}

/// Issue 58, seen on Slurm 26.05: a node held in a maintenance reservation
/// (no reason time of its own) was said to have "rebooted at … since it
/// was taken out" though it never rebooted. Only when both times are known
/// and the boot is after the reason is a reboot said.
#[test]
fn a_reboot_is_said_only_when_the_node_booted_after_it_was_taken_out() {
    use crate::model::NodeState;
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    add_node(&mut c, "n2", "p", 8);
    {
        let n = Arc::make_mut(&mut c.nodes[0]);
        n.state = NodeState::Drain;
        n.reason = Some("in maintenance reservation maint-a1".into());
        n.reason_time = None;
        n.boot_time = Some(NOW - 86_400);
    }
    let o = node_options(&c, &base_of(&c), "n1", &SiteParams::default()).expect("options");
    let v = choice(&o, "validate_resume");
    assert!(!v.why.contains("rebooted at"), "{}", v.why);
    Arc::make_mut(&mut c.nodes[0]).reason_time = Some(NOW - 600);
    Arc::make_mut(&mut c.nodes[0]).boot_time = Some(NOW - 300);
    let o = node_options(&c, &base_of(&c), "n1", &SiteParams::default()).expect("options");
    assert!(
        choice(&o, "validate_resume")
            .why
            .starts_with("rebooted at "),
        "{o:#?}"
    );
}

/// A node someone else cordoned: a plan that starts with a cordon and
/// goes on to undo or override it (the reset's resume, the drain armed
/// over it, which `follow` then refuses as someone else's) is refused, not
/// started at its second step.
#[test]
fn a_plan_is_not_started_past_someone_elses_cordon() {
    use crate::model::NodeState;
    let mut c = remap_night(200);
    {
        let n = Arc::make_mut(&mut c.nodes[0]);
        n.state = NodeState::Cordoned;
        n.reason = Some("cordon: fan noisy -- alice".into());
    }
    let base = base_of(&c);
    let o = node_options(&c, &base, "n1", &SiteParams::default()).expect("options");
    assert_recommendation_admitted(&c, &base, &o);
    for name in ["reset_gpu", "wait_checkpoint"] {
        let x = choice(&o, name);
        assert!(
            x.refused.is_some() && matches!(x.steps.first(), Some(Action::Cordon { .. })),
            "{name}: {x:#?}"
        );
    }
}
