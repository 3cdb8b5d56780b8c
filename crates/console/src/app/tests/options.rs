//! The grid's grouping by failure domain and options of several steps.

use super::*;

/// Within each group of the grid (problems first), a failure domain's
/// nodes sit together: a node of h100-01's leaf listed elsewhere in the
/// cluster comes right after it.
#[test]
fn the_grid_keeps_a_domains_nodes_together() {
    let mut app =
        App::new("sim", false, false, Duration::from_secs(10)).measured_by(crate::views::extent);
    let mut c = Sim::new(SimConfig::default()).expect("sim").snapshot();
    let leaf1 = c
        .node("h100-01")
        .and_then(|n| n.domains.first().cloned())
        .expect("leaf");
    let a1 = c
        .nodes
        .iter()
        .position(|n| n.name == "a100-02")
        .expect("a100-02");
    Arc::make_mut(&mut c.nodes[a1]).domains = vec![leaf1].into();
    let now = Instant::now();
    app.take_in(Msg::Source(Update::Snapshot(Arc::new(c))), now);
    let names: Vec<&str> = app
        .nav
        .grid
        .iter()
        .map(|&n| app.cluster.nodes[n].name.as_str())
        .collect();
    let at = |n: &str| names.iter().position(|x| *x == n).expect("in the grid");
    assert_eq!(at("a100-02"), at("h100-04") + 1, "{names:?}");
    assert!(at("a100-02") < at("h100-05"), "{names:?}");
}

/// A domain's cordon is one guarded action per node: after each goes
/// through, `n` in its outcome previews the next (each confirmed like any
/// action); a step refused or cancelled ends the chain.
#[test]
fn a_domains_cordon_goes_node_by_node_with_n_after_each() {
    let (mut a, _, c, now) = console_at(1230);
    let an = Analysis::compute(
        &c,
        None,
        &Focus::Node("ib-leaf-2".into()),
        &crate::engine::SiteParams::default(),
        &XidCatalog::default(),
    );
    a.take_in(Msg::Analysis(Arc::new(an)), now);
    a.dialog.modal = Some(Modal::Options {
        target: "ib-leaf-2".into(),
    });
    press(&mut a, "1");
    let cordon = |n: &str| Action::Cordon {
        node: n.into(),
        reason: "ib-leaf-2 failing: fabric, not the GPUs".into(),
    };
    assert!(
        matches!(&a.dialog.modal, Some(Modal::Confirm { action, .. }) if *action == cordon("h100-05")),
        "{:?}",
        a.dialog.modal
    );
    assert_eq!(
        a.dialog.plan.next.len(),
        5,
        "three more cordons, two requeues"
    );
    let done = done_step;
    a.take_in(
        Msg::Action(crate::protocol::action::Reply::Done(Box::new(done(
            "cordon h100-05",
        )))),
        a.now,
    );
    assert!(
        drawn(&a).contains("n previews step 2 of 6: cordon h100-06"),
        "{}",
        drawn(&a)
    );
    press(&mut a, "n");
    assert!(
        matches!(&a.dialog.modal, Some(Modal::Confirm { action, .. }) if *action == cordon("h100-06")),
        "{:?}",
        a.dialog.modal
    );
    // Every step numbered, as the first was (issue 39).
    assert!(
        a.flash
            .as_deref()
            .is_some_and(|f| f.starts_with("step 2 of 6: cordon h100-06")),
        "{:?}",
        a.flash
    );
    // Cancelled: the chain ends; n after an outcome opens nothing.
    key(&mut a, KeyCode::Esc);
    assert!(a.dialog.plan.next.is_empty());
    a.take_in(
        Msg::Action(crate::protocol::action::Reply::Done(Box::new(done("x")))),
        a.now,
    );
    press(&mut a, "n");
    assert!(a.dialog.modal.is_none(), "{:?}", a.dialog.modal);
}

/// "Cordon now, drain after the checkpoint" is confirmed once (issue 29):
/// the cordon's preview first; once it is done, the drain is armed with
/// the job's checkpoint as its trigger (no `n` to press); the runner's
/// list of armed steps is shown, and a snapshot where the checkpoint has
/// moved asks the runner to send what is due. A read-only console sends
/// nothing.
#[test]
fn waiting_for_the_checkpoint_arms_the_drain_and_a_due_step_is_sent() {
    let (mut a, mut sim, c, now) = console_at(100);
    // The first snapshot asked for what was armed before: nothing.
    assert!(
        a.sent()
            .iter()
            .any(|r| matches!(r, crate::protocol::action::Request::Armed { .. }))
    );
    a.take_in(
        Msg::Action(crate::protocol::action::Reply::Armed {
            armed: Vec::new(),
            news: Vec::new(),
        }),
        now,
    );
    assert!(a.dialog.modal.is_none(), "{:?}", a.dialog.modal);
    let an = Analysis::compute(
        &c,
        None,
        &Focus::Node("h100-05".into()),
        &crate::engine::SiteParams::default(),
        &XidCatalog::default(),
    );
    a.take_in(Msg::Analysis(Arc::new(an)), now);
    a.dialog.modal = Some(Modal::Options {
        target: "h100-05".into(),
    });
    key(&mut a, KeyCode::Enter);
    assert!(
        matches!(&a.dialog.modal, Some(Modal::Confirm { action: Action::Cordon { node, .. }, .. }) if node == "h100-05"),
        "{:?}",
        a.dialog.modal
    );
    assert!(a.dialog.plan.next.is_empty(), "armed, not stepped by hand");
    a.effects.clear();
    let done = done_step("cordon h100-05");
    a.take_in(
        Msg::Action(crate::protocol::action::Reply::Done(Box::new(done))),
        now,
    );
    let (action, when) = a
        .sent()
        .iter()
        .find_map(|r| match r {
            crate::protocol::action::Request::Arm { action, when, .. } => {
                Some((action.clone(), when.clone()))
            }
            _ => None,
        })
        .expect("the drain armed");
    assert!(matches!(&action, Action::Drain { node, requeue: true, .. } if node == "h100-05"));
    let crate::model::Trigger::Checkpoints { jobs, .. } = &when else {
        panic!("{when:?}");
    };
    assert_eq!(jobs[0].job, "4701");
    let armed = crate::model::Armed {
        id: "a1".into(),
        action,
        when,
        armed_at: c.time,
        cluster: c.name.clone(),
        confirmed_by: String::new(),
        preview_digest: String::new(),
        tag: String::new(),
        forced: false,
    };
    a.take_in(
        Msg::Action(crate::protocol::action::Reply::Armed {
            armed: vec![armed],
            news: vec!["armed: drain h100-05 after the checkpoint of job 4701".into()],
        }),
        now,
    );
    assert_eq!(a.arming.armed.len(), 1);
    assert!(
        a.armed_on("h100-05")[0]
            .1
            .starts_with("waiting for job 4701's checkpoint")
    );
    // Not due yet: nothing sent. Past 02:53:30 the checkpoint moved.
    a.effects.clear();
    a.take_in(Msg::Source(Update::Snapshot(c.clone())), now);
    assert!(
        !a.sent()
            .iter()
            .any(|r| matches!(r, crate::protocol::action::Request::Fire { .. }))
    );
    sim.advance(300);
    a.take_in(Msg::Source(Update::Snapshot(Arc::new(sim.snapshot()))), now);
    assert!(
        a.sent()
            .iter()
            .any(|r| matches!(r, crate::protocol::action::Request::Fire { .. }))
    );
    // A read-only console never sends it.
    let mut ro =
        App::new("sim", true, false, Duration::from_secs(10)).measured_by(crate::views::extent);
    ro.take_in(Msg::Source(Update::Snapshot(Arc::new(sim.snapshot()))), now);
    assert!(ro.sent().is_empty(), "{:?}", ro.sent());
}

/// "Preempt after its next checkpoint" sends nothing now (issue 29): the
/// preempt's guarded preview says it is armed, the typed confirmation arms
/// it with the job's checkpoint as its trigger — no run — and the dialog
/// closes; cancelling the preview arms nothing.
#[test]
fn preempting_after_the_checkpoint_arms_the_preempt_instead_of_sending_it() {
    use crate::protocol::action::Request;
    let (mut a, _, c, now) = console_at(100);
    // Nothing was armed before this console.
    a.take_in(
        Msg::Action(crate::protocol::action::Reply::Armed {
            armed: Vec::new(),
            news: Vec::new(),
        }),
        now,
    );
    let an = Analysis::compute(
        &c,
        None,
        &Focus::Job("4701".into()),
        &crate::engine::SiteParams::default(),
        &XidCatalog::default(),
    );
    let pick = match &an.focus {
        Some(crate::engine::analysis::FocusAnswer::Job {
            options: Some(o), ..
        }) => o
            .options
            .iter()
            .position(|c| c.name == "wait_checkpoint")
            .expect("the option"),
        other => panic!("{other:?}"),
    };
    a.take_in(Msg::Analysis(Arc::new(an)), now);
    let open = |a: &mut App| {
        a.dialog.modal = Some(Modal::Options {
            target: "4701".into(),
        });
        press(a, &(pick + 1).to_string());
    };
    open(&mut a);
    // Cancelled: nothing armed, nothing left to arm.
    key(&mut a, KeyCode::Esc);
    assert!(a.arming.on_confirm.is_none());
    open(&mut a);
    let action = match &a.dialog.modal {
        Some(Modal::Confirm { action, .. }) => action.clone(),
        other => panic!("{other:?}"),
    };
    assert!(matches!(&action, Action::Preempt { job, grace_s: None } if job == "4701"));
    let screen = drawn(&a);
    assert!(
        screen.contains(
            "not sent now: confirming arms it — preempt 4701 after the checkpoint of job 4701"
        ),
        "{screen}"
    );
    // What the plan costs (the option's row), above the preview of the
    // preempt as if sent now.
    assert!(
        screen.contains("as planned: preempt 4701 in about 4m20s, 0.0 GPU-h lost; the preview's"),
        "{screen}"
    );
    let p = preview_typed(action, "4701");
    a.take_in(
        Msg::Action(crate::protocol::action::Reply::Preview(Box::new(p))),
        now,
    );
    a.effects.clear();
    press(&mut a, "4701");
    let later = a.now + Duration::from_millis(300);
    a.tick(later);
    key(&mut a, KeyCode::Enter);
    assert!(!sent_a_run(&a), "nothing is sent now");
    let when = a
        .sent()
        .iter()
        .find_map(|r| match r {
            Request::Arm { action, when, .. } if action.target() == "4701" => Some(when.clone()),
            _ => None,
        })
        .expect("the preempt armed");
    let crate::model::Trigger::Checkpoints { jobs, .. } = &when else {
        panic!("{when:?}");
    };
    assert_eq!(jobs[0].job, "4701");
    assert!(a.dialog.modal.is_none(), "{:?}", a.dialog.modal);
    // The job's screen shows it with what it waits for; :disarm there
    // cancels it.
    let armed = crate::model::Armed {
        id: "a7".into(),
        action: Action::Preempt {
            job: "4701".into(),
            grace_s: None,
        },
        when,
        armed_at: c.time,
        cluster: c.name.clone(),
        confirmed_by: String::new(),
        preview_digest: String::new(),
        tag: String::new(),
        forced: false,
    };
    a.take_in(
        Msg::Action(crate::protocol::action::Reply::Armed {
            armed: vec![armed],
            news: Vec::new(),
        }),
        now,
    );
    command(&mut a, "job 4701");
    let screen = drawn(&a);
    assert!(
        screen.contains(
            "preempt 4701 after the checkpoint of job 4701 — waiting for job 4701's checkpoint"
        ),
        "{screen}"
    );
    a.effects.clear();
    command(&mut a, "disarm");
    assert!(
        a.sent()
            .iter()
            .any(|r| matches!(r, Request::Cancel { ids, .. } if ids == &["a7".to_string()])),
        "{:?}",
        a.sent()
    );
}

/// The screen as a 160×50 terminal shows it, a line each.
fn drawn(a: &App) -> String {
    let mut term =
        ratatui::Terminal::new(ratatui::backend::TestBackend::new(160, 50)).expect("term");
    term.draw(|f| crate::views::render(f, a)).expect("draw");
    let buf = term.backend().buffer().clone();
    (0..buf.area.height)
        .map(|y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
                + "\n"
        })
        .collect()
}

/// A console on the simulated night `secs` in: its first snapshot taken,
/// the scheduler fresh.
fn console_at(secs: u64) -> (App, Sim, Arc<crate::model::Cluster>, Instant) {
    let mut a =
        App::new("sim", false, false, Duration::from_secs(10)).measured_by(crate::views::extent);
    let mut sim = Sim::new(SimConfig::default()).expect("sim");
    sim.advance(secs);
    let c = Arc::new(sim.snapshot());
    let now = Instant::now();
    a.take_in(Msg::Source(Update::Snapshot(c.clone())), now);
    a.take_in(Msg::Source(Update::ok(Origin::Scheduler)), now);
    (a, sim, c, now)
}

/// Armed steps another process made reach this console (issue 37): asked
/// for again when the cluster's name changes (a console with endpoints
/// sees their snapshot, "node endpoints", before the scheduler's) and
/// every few snapshots (a step armed from the command line meanwhile);
/// `q` with steps armed says nobody sends them once it is gone, and the
/// next `q` quits.
#[test]
fn armed_steps_of_other_processes_show_and_q_says_what_quitting_leaves() {
    use crate::protocol::action::{Reply, Request};
    let asked = |a: &App| a.sent().iter().any(|r| matches!(r, Request::Armed { .. }));
    let mut a =
        App::new("slurm", false, false, Duration::from_secs(10)).measured_by(crate::views::extent);
    let mut sim = Sim::new(SimConfig::default()).expect("sim");
    sim.advance(100);
    let now = Instant::now();
    let mut first = sim.snapshot();
    first.name = "node endpoints".into();
    a.take_in(Msg::Source(Update::Snapshot(Arc::new(first))), now);
    assert!(asked(&a));
    a.take_in(
        Msg::Action(Reply::Armed {
            armed: Vec::new(),
            news: Vec::new(),
        }),
        now,
    );
    a.effects.clear();
    let c = Arc::new(sim.snapshot());
    a.take_in(Msg::Source(Update::Snapshot(c.clone())), now);
    assert!(asked(&a), "the scheduler's name: asked again");
    a.take_in(
        Msg::Action(Reply::Armed {
            armed: Vec::new(),
            news: Vec::new(),
        }),
        now,
    );
    a.effects.clear();
    for _ in 0..super::super::armed::ARMED_REFRESH {
        a.take_in(Msg::Source(Update::Snapshot(c.clone())), now);
    }
    assert!(asked(&a), "asked again after a few snapshots");
    let armed = crate::model::Armed {
        id: "1796006850-1-1-1".into(),
        action: Action::Requeue { job: "4701".into() },
        when: crate::engine::armed::after_checkpoints(&c, &["4701".to_string()]),
        armed_at: c.time,
        cluster: c.name.clone(),
        confirmed_by: String::new(),
        preview_digest: String::new(),
        tag: String::new(),
        forced: false,
    };
    a.take_in(
        Msg::Action(Reply::Armed {
            armed: vec![armed],
            news: Vec::new(),
        }),
        now,
    );
    assert_eq!(a.arming.armed.len(), 1, "the command line's step shows");
    a.dialog.modal = None;
    a.effects.clear();
    press(&mut a, "q");
    assert!(!a.asked(|e| matches!(e, Effect::Quit)));
    assert!(
        a.flash
            .as_deref()
            .is_some_and(|f| f.contains("nightshift follow")),
        "{:?}",
        a.flash
    );
    press(&mut a, "q");
    assert!(a.asked(|e| matches!(e, Effect::Quit)));
}

/// `force NODE` typed at an armed plan's cordon (the breaker refused it)
/// reaches its armed step (issue 37): the drain is armed `forced`, as
/// `--force` arms it on the command line, so it is not refused when it
/// fires; a plain confirmation arms it unforced.
#[test]
fn force_typed_at_an_armed_plans_cordon_reaches_its_armed_step() {
    use crate::protocol::action::{Reply, Request};
    for (typed, forced) in [("force h100-05", true), ("h100-05", false)] {
        let (mut a, _, c, now) = console_at(100);
        a.take_in(
            Msg::Action(Reply::Armed {
                armed: Vec::new(),
                news: Vec::new(),
            }),
            now,
        );
        let an = Analysis::compute(
            &c,
            None,
            &Focus::Node("h100-05".into()),
            &crate::engine::SiteParams::default(),
            &XidCatalog::default(),
        );
        a.take_in(Msg::Analysis(Arc::new(an)), now);
        a.dialog.modal = Some(Modal::Options {
            target: "h100-05".into(),
        });
        key(&mut a, KeyCode::Enter);
        let action = match &a.dialog.modal {
            Some(Modal::Confirm { action, .. }) => action.clone(),
            other => panic!("{other:?}"),
        };
        assert!(matches!(&action, Action::Cordon { node, .. } if node == "h100-05"));
        // The preview of the plan's cordon asks for the sealing key to be
        // checked: a step is armed once it is confirmed (issue 59).
        assert!(
            a.sent().iter().any(|r| matches!(
                r,
                Request::Preview {
                    arming: true,
                    action: Action::Cordon { .. },
                    ..
                }
            )),
            "the cordon's preview says a step is armed after it"
        );
        let mut p = preview_typed(action, "h100-05");
        if forced {
            p.refusal = Some(crate::protocol::action::Refusal::Breaker(
                "3 node(s) already taken out in the last 10 min".into(),
            ));
        }
        a.take_in(Msg::Action(Reply::Preview(Box::new(p))), now);
        a.effects.clear();
        press(&mut a, typed);
        let later = a.now + Duration::from_millis(300);
        a.tick(later);
        key(&mut a, KeyCode::Enter);
        assert!(sent_a_run(&a), "{typed}: the cordon is sent");
        a.take_in(
            Msg::Action(Reply::Done(Box::new(done_step("cordon h100-05")))),
            now,
        );
        let armed_forced = a
            .sent()
            .iter()
            .find_map(|r| match r {
                Request::Arm { action, forced, .. } if action.target() == "h100-05" => {
                    Some(*forced)
                }
                _ => None,
            })
            .expect("the drain armed");
        assert_eq!(armed_forced, forced, "{typed}");
    }
}

/// A replay offers no action key in the incident pane (issue 39: it said
/// "D: drain" where nothing is sent); live, it does.
#[test]
fn the_incident_pane_offers_drain_only_where_it_acts() {
    for replay in [false, true] {
        let mut a = super::app();
        a.replay.on = replay;
        super::command(&mut a, "incidents");
        let s = drawn(&a);
        assert!(s.contains("selected (enter: node"), "{s}");
        assert_eq!(s.contains("D: drain"), !replay, "{s}");
    }
}

/// `:kpis` counts the hung gang's unsaved work as the report does (issue
/// 39: it said "0.0 by requeued" and nothing of the hung 32-GPU gang the
/// report counted), from the analysis the screens show.
#[test]
fn the_kpis_panel_counts_the_hung_gang_as_the_report_does() {
    let mut a = super::app();
    crate::engine::kpis::observe_shared(&a.kpis().0.clone(), &a.cluster.clone());
    super::command(&mut a, "kpis");
    let hung = a.kpis().1.and_then(|k| k.lost_gpu_hours_hung);
    let base = &a.analysis.as_ref().expect("analysis").base;
    let want = crate::engine::kpis::hung_lost(base, &a.cluster);
    assert!(want > 0.0, "the Xid 79's gang hangs");
    assert_eq!(hung, Some(want));
}

/// Issue 58: an option the guard would refuse opens nothing in the
/// console — its key says it is unavailable and why — and the
/// recommended one (`enter`) is one the guard accepts.
#[test]
fn a_refused_option_opens_nothing_and_says_why() {
    let (mut a, _, c, now) = console_at(300);
    let an = Analysis::compute(
        &c,
        None,
        &crate::engine::analysis::Focus::Job("4702".into()),
        &crate::engine::SiteParams::default(),
        &XidCatalog::default(),
    );
    a.take_in(Msg::Analysis(Arc::new(an)), now);
    a.dialog.modal = Some(Modal::Options {
        target: "4702".into(),
    });
    press(&mut a, "1");
    assert!(
        matches!(&a.dialog.modal, Some(Modal::Options { .. })),
        "nothing opened: {:?}",
        a.dialog.modal
    );
    assert!(
        a.flash
            .as_deref()
            .is_some_and(|f| f.contains("unavailable") && f.contains("--no-requeue")),
        "{:?}",
        a.flash
    );
}
