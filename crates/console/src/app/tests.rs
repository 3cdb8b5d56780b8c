use super::*;
use crate::engine::xid::XidCatalog;
use crate::protocol::source::Origin;
use crate::sim::{Sim, SimConfig};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

impl App {
    /// `update`, with what it asks of the loop kept in the app for the test
    /// to read (the keys below reach the app the same way).
    fn take_in(&mut self, msg: Msg, now: Instant) {
        let fx = self.update(msg, now);
        self.effects.extend(fx);
    }

    /// The requests for the action runner asked for so far.
    fn sent(&self) -> Vec<&crate::protocol::action::Request> {
        self.effects
            .iter()
            .filter_map(|e| match e {
                Effect::Run(r) => Some(r),
                _ => None,
            })
            .collect()
    }

    /// The playback commands asked for so far.
    fn replay_sent(&self) -> Vec<crate::protocol::replay::ReplayCmd> {
        self.effects
            .iter()
            .filter_map(|e| match e {
                Effect::Replay(r) => Some(*r),
                _ => None,
            })
            .collect()
    }

    fn asked(&self, f: fn(&Effect) -> bool) -> bool {
        self.effects.iter().any(f)
    }
}

/// The app after the sim's first snapshot, its status and its analysis,
/// as the loop delivers them.
fn app() -> App {
    let mut app =
        App::new("sim", false, false, Duration::from_secs(10)).measured_by(crate::views::extent);
    let sim = Sim::new(SimConfig::default()).expect("sim");
    let c = Arc::new(sim.snapshot());
    let now = Instant::now();
    app.take_in(Msg::Source(Update::Snapshot(c.clone())), now);
    app.take_in(Msg::Source(Update::ok(Origin::Scheduler)), now);
    let a = Analysis::compute(
        &c,
        None,
        &Focus::None,
        &crate::engine::SiteParams::default(),
        &XidCatalog::default(),
    );
    app.take_in(Msg::Analysis(Arc::new(a)), now);
    app
}

fn press(app: &mut App, keys: &str) {
    for c in keys.chars() {
        app.on_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
    }
}

fn key(app: &mut App, code: KeyCode) {
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE));
}

fn command(app: &mut App, cmd: &str) {
    press(app, ":");
    press(app, cmd);
    key(app, KeyCode::Enter);
}

#[test]
fn colon_commands_switch_views_and_esc_goes_home() {
    let mut a = app();
    for (cmd, view) in [
        ("nodes", View::Nodes),
        ("gpus", View::Gpus),
        ("jobs", View::Jobs),
        ("queue", View::Queue),
        ("inc", View::Incidents),
    ] {
        command(&mut a, cmd);
        assert_eq!(a.screen().view, view, ":{cmd}");
        assert_eq!(a.nav.stack.len(), 2);
    }
    key(&mut a, KeyCode::Esc);
    assert_eq!(a.screen().view, View::Overview);
    key(&mut a, KeyCode::Esc);
    assert_eq!(a.nav.stack.len(), 1, "esc on the overview stays there");
}

#[test]
fn unknown_command_says_so() {
    let mut a = app();
    command(&mut a, "podz");
    assert_eq!(a.screen().view, View::Overview);
    assert!(a.flash.as_deref().is_some_and(|m| m.contains("podz")));
}

#[test]
fn incident_to_node_to_job_by_keys() {
    let mut a = app();
    command(&mut a, "incidents");
    // Newest first: the Xid 79 is the newest at start-up.
    assert!(
        matches!(a.selected_row(), Some(Row::Incident(i)) if a.incident(i).is_some_and(|i| i.label == "XID 79")),
        "{:?}",
        a.selected_row().and_then(|r| match r {
            Row::Incident(i) => a.incident(i).map(|i| i.label.clone()),
            _ => None,
        })
    );
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.screen().view, View::NodeDetail);
    let node = a.screen().target.clone().expect("node");
    assert_eq!(
        a.selected_row().map(|r| a.row_key(r)),
        Some(format!("{node}/3")),
        "the Xid's GPU is selected"
    );
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.screen().view, View::GpuDetail);
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.screen().view, View::JobDetail);
    let job = a
        .index
        .job(&a.cluster, a.screen().target.as_deref().expect("job"))
        .expect("job");
    assert_eq!(a.cluster.jobs[job].name, "llm-pretrain-70b");
    // Back up the same way.
    key(&mut a, KeyCode::Esc);
    key(&mut a, KeyCode::Esc);
    assert_eq!(a.screen().view, View::NodeDetail);
    // Tab moves to the node's jobs; enter opens the gang job too.
    key(&mut a, KeyCode::Tab);
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.screen().view, View::JobDetail);
}

#[test]
fn filter_narrows_and_esc_clears() {
    let mut a = app();
    command(&mut a, "jobs");
    let all = a.nav.rows.len();
    press(&mut a, "/vision");
    let vision = a.nav.rows.len();
    assert!(vision > 0 && vision < all, "{vision} of {all}");
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.input, Input::Normal);
    assert_eq!(a.screen().filter, "vision");
    key(&mut a, KeyCode::Esc);
    assert_eq!(a.nav.rows.len(), all);
    assert_eq!(
        a.screen().view,
        View::Jobs,
        "first esc clears the filter only"
    );
}

#[test]
fn selection_follows_its_item_across_updates() {
    let mut a = app();
    command(&mut a, "jobs");
    press(&mut a, "jjj");
    let key_before = a.selected_row().map(|r| a.row_key(r));
    let mut sim = Sim::new(SimConfig::default()).expect("sim");
    sim.advance(5);
    a.on_update(Update::Snapshot(Arc::new(sim.snapshot())), Instant::now());
    assert_eq!(a.selected_row().map(|r| a.row_key(r)), key_before);
}

#[test]
fn movement_is_bounded() {
    let mut a = app();
    command(&mut a, "nodes");
    key(&mut a, KeyCode::Up);
    assert_eq!(a.screen().selected, 0);
    press(&mut a, "G");
    assert_eq!(a.screen().selected, a.nav.rows.len() - 1);
    key(&mut a, KeyCode::PageDown);
    assert_eq!(a.screen().selected, a.nav.rows.len() - 1);
    press(&mut a, "g");
    assert_eq!(a.screen().selected, 0);
}

#[test]
fn quit_keys() {
    let mut a = app();
    press(&mut a, "q");
    assert!(a.asked(|e| matches!(e, Effect::Quit)));
    let mut a = app();
    a.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
    assert!(a.asked(|e| matches!(e, Effect::Quit)));
    let mut a = app();
    command(&mut a, "q");
    assert!(a.asked(|e| matches!(e, Effect::Quit)));
    // q typed into a filter is text, not quit.
    let mut a = app();
    press(&mut a, "/q");
    assert!(!a.asked(|e| matches!(e, Effect::Quit)));
}

#[test]
fn data_turns_stale_and_errors_keep_the_last_snapshot() {
    let mut a = app();
    assert!(!a.is_stale());
    let later = a.now + Duration::from_secs(11);
    a.tick(later);
    assert!(a.is_stale());
    let nodes = a.cluster.nodes.len();
    let refused = crate::protocol::source::SourceError::Unreachable {
        what: "slurmrestd".into(),
        detail: "connection refused".into(),
    };
    a.on_update(Update::failed(Origin::Scheduler, refused), later);
    assert_eq!(a.cluster.nodes.len(), nodes);
    let (origin, err, age) = a.failing_origin().expect("the scheduler fails");
    assert_eq!(origin, &Origin::Scheduler);
    assert!(err.contains("connection refused"));
    assert_eq!(age, Some(Duration::from_secs(11)));
}

#[test]
fn a_refresh_slowed_for_slurmrestd_is_shown_and_is_not_an_outage() {
    let mut a = app();
    let t0 = a.now;
    let note = "a poll every 11s: it costs slurmrestd 0.32s, budget 3% of a core";
    let slow = |a: &mut App, t| {
        a.on_update(
            Update::Refresh {
                origin: Origin::Scheduler,
                every: Duration::from_secs(11),
                stretched: true,
                note: note.into(),
            },
            t,
        );
    };
    slow(&mut a, t0);
    assert_eq!(
        a.refresh_badge().as_deref(),
        Some("every 11s (slurmrestd budget)")
    );
    assert_eq!(a.flash.as_deref(), Some(&*format!("refresh: {note}")));
    // Said once, not at every poll.
    a.flash = None;
    slow(&mut a, t0);
    assert_eq!(a.flash, None);
    // Three polls' worth of age is not stale; past it, it is.
    assert_eq!(a.stale_limit(), Duration::from_secs(33));
    a.tick(t0 + Duration::from_secs(30));
    assert!(!a.is_stale(), "30 s old at an 11 s refresh");
    a.tick(t0 + Duration::from_secs(34));
    assert!(a.is_stale());
    // Back to the configured pace: no badge, the configured limit.
    a.on_update(
        Update::Refresh {
            origin: Origin::Scheduler,
            every: Duration::from_secs(2),
            stretched: false,
            note: "a poll every 2s".into(),
        },
        t0,
    );
    assert_eq!(a.refresh_badge(), None);
    assert_eq!(a.stale_limit(), Duration::from_secs(10));
}

#[test]
fn an_endpoint_answering_never_makes_a_dead_scheduler_look_fresh() {
    let mut a = app();
    let t0 = a.now;
    let dcgm = Origin::Endpoint("http://gpu01:9400/metrics".into());
    let dead = crate::protocol::source::SourceError::Timeout {
        what: "GET /slurm/v0.0.38/nodes".into(),
        secs: 10,
    };
    // The scheduler dies; the endpoint keeps answering, and merged
    // snapshots keep coming, every 2 s for 40 s.
    for s in (2..=40).step_by(2) {
        let t = t0 + Duration::from_secs(s);
        a.on_update(Update::failed(Origin::Scheduler, dead.clone()), t);
        a.on_update(Update::Snapshot(a.cluster.clone()), t);
        a.on_update(Update::ok(dcgm.clone()), t);
    }
    assert_eq!(a.data_age(), Some(Duration::from_secs(40)));
    assert!(a.is_stale(), "STALE follows the scheduler");
    let (origin, err, _) = a.failing_origin().expect("shown until it answers");
    assert_eq!(origin, &Origin::Scheduler);
    assert!(err.contains("no answer within 10s"), "{err}");
    // It answers again: fresh, and its error is gone.
    let t = t0 + Duration::from_secs(42);
    a.on_update(Update::ok(Origin::Scheduler), t);
    assert_eq!(a.data_age(), Some(Duration::ZERO));
    assert!(a.failing_origin().is_none());
}

#[test]
fn the_drain_key_is_refused_on_stale_data_at_execute_time() {
    let mut a = app();
    // The preview came back clean while the data was fresh…
    drain_dialog(&mut a);
    // …then the scheduler stops answering for a minute before `enter`.
    let later = a.now + Duration::from_secs(60);
    a.tick(later - Duration::from_millis(200));
    a.effects.clear();
    for c in "h100-03".chars() {
        a.on_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
    }
    // A hand's pause before enter (an enter in the same instant is a paste).
    a.tick(later);
    key(&mut a, KeyCode::Enter);
    // The run request carries the data's age now, for the guard to check.
    match a.sent().last().copied() {
        Some(crate::protocol::action::Request::Run { data_age, .. }) => {
            assert_eq!(*data_age, Duration::from_secs(60))
        }
        _ => panic!("no run request"),
    }
}

#[test]
fn reason_command_previews_a_new_reason_for_the_selected_node() {
    let mut a = app();
    command(&mut a, "incidents");
    a.effects.clear();
    command(&mut a, "reason xid79 GPU3, RMA 4411");
    match a.sent().last().copied() {
        Some(crate::protocol::action::Request::Preview { action, base, .. }) => {
            assert_eq!(
                action,
                &Action::SetReason {
                    node: "h100-03".into(),
                    reason: "xid79 GPU3, RMA 4411".into()
                }
            );
            // The preview reads the analysis the screen shows (issue 39).
            let shown = a.analysis.as_ref().map(|x| &x.base);
            assert!(
                shown.is_some_and(|s| Arc::ptr_eq(base, s)),
                "the screen's analysis goes with the preview"
            );
        }
        _ => panic!("no preview request: {:?}", a.flash),
    }
    let mut ro = app();
    ro.read_only = true;
    command(&mut ro, "incidents");
    ro.effects.clear();
    command(&mut ro, "reason x");
    assert!(ro.sent().is_empty());
}

#[test]
fn u_after_an_action_opens_the_undo_through_its_own_preview() {
    let mut a = app();
    let undo = Action::Resume {
        node: "h100-03".into(),
    };
    let done = crate::protocol::action::Done {
        outcome: crate::model::audit::Outcome::of_steps(vec![crate::model::Step {
            what: "drain h100-03".into(),
            ok: true,
            verified: true,
            observed: "h100-03 is drain".into(),
            error: None,
            unchanged: false,
            refused: None,
        }]),
        undo: Some(undo.clone()),
        message: "done".into(),
    };
    a.take_in(
        Msg::Action(crate::protocol::action::Reply::Done(Box::new(done))),
        a.now,
    );
    assert!(matches!(a.dialog.modal, Some(Modal::Done { ok: true, .. })));
    a.effects.clear();
    press(&mut a, "u");
    assert!(
        matches!(&a.dialog.modal, Some(Modal::Confirm { action, .. }) if *action == undo),
        "the undo is guarded like any action"
    );
    assert!(matches!(
        a.sent().last().copied(),
        Some(crate::protocol::action::Request::Preview { .. })
    ));
}

#[test]
fn an_endpoint_alone_does_not_make_a_silent_scheduler_look_fresh() {
    let mut a =
        App::new("slurm", false, false, Duration::from_secs(10)).measured_by(crate::views::extent);
    let now = a.now;
    a.on_update(
        Update::ok(Origin::Endpoint("http://gpu01:9400/metrics".into())),
        now,
    );
    assert_eq!(a.data_age(), None, "waiting for the scheduler");
    assert!(a.is_stale());
    // With no scheduler at all, the endpoints are what the data is.
    let mut e = App::new("endpoints", false, false, Duration::from_secs(10))
        .measured_by(crate::views::extent);
    e.on_update(
        Update::ok(Origin::Endpoint("http://gpu01:9400/metrics".into())),
        now,
    );
    assert_eq!(e.data_age(), Some(Duration::ZERO));
}

#[test]
fn the_first_screen_opens_on_its_incidents_and_d_drains_from_there() {
    let mut a = app();
    assert_eq!(a.screen().view, View::Overview);
    assert_eq!(
        a.screen().pane,
        Pane::First,
        "the open incidents have the keys"
    );
    a.effects.clear();
    press(&mut a, "D");
    match a.sent().last().copied() {
        Some(crate::protocol::action::Request::Preview { action, .. }) => assert_eq!(
            action,
            &Action::Drain {
                node: "h100-03".into(),
                reason: "xid79 GPU3".into(),
                requeue: true
            },
            "one key from the first screen, for the newest critical incident"
        ),
        _ => panic!("no preview: {:?}", a.flash),
    }
}

#[test]
fn the_grid_shows_problems_first_and_j_moves_a_row_down() {
    let mut a = app();
    a.take_in(Msg::Resize(80, 24), a.now);
    key(&mut a, KeyCode::Tab);
    assert_eq!(a.screen().pane, Pane::Second);
    let first: Vec<&str> = a.nav.grid[..3]
        .iter()
        .map(|&n| a.cluster.nodes[n].name.as_str())
        .collect();
    // At 02:47:30: the Xid 79 node, then the node drained for burn-in,
    // then the rest in name order.
    assert_eq!(first, ["h100-03", "a100-08", "h100-01"]);
    let cols = a.grid_columns();
    assert!(cols > 1);
    press(&mut a, "j");
    assert_eq!(
        a.screen().selected,
        cols,
        "down is a row down, not the next cell"
    );
    press(&mut a, "l");
    assert_eq!(a.screen().selected, cols + 1);
    press(&mut a, "k");
    assert_eq!(a.screen().selected, 1);
}

#[test]
fn sorting_by_a_column_keeps_the_selection_and_reverses() {
    let mut a = app();
    command(&mut a, "jobs");
    press(&mut a, "jj");
    let before = a.selected_row().map(|r| a.row_key(r));
    press(&mut a, "3"); // NAME
    assert_eq!(a.screen().sort, Some((2, false)));
    assert_eq!(
        a.selected_row().map(|r| a.row_key(r)),
        before,
        "same row selected"
    );
    let names: Vec<String> = a
        .nav
        .rows
        .iter()
        .filter_map(|r| match r {
            Row::Job(j) => Some(a.cluster.jobs[*j].name.to_lowercase()),
            _ => None,
        })
        .collect();
    assert!(names.windows(2).all(|w| w[0] <= w[1]), "{names:?}");
    press(&mut a, "3");
    assert_eq!(a.screen().sort, Some((2, true)));
    let first = match a.nav.rows[0] {
        Row::Job(j) => a.cluster.jobs[j].name.to_lowercase(),
        _ => String::new(),
    };
    assert_eq!(Some(&first), names.last(), "reversed");
    // It survives a refresh.
    let mut sim = Sim::new(SimConfig::default()).expect("sim");
    sim.advance(3);
    a.on_update(Update::Snapshot(Arc::new(sim.snapshot())), a.now);
    assert_eq!(a.screen().sort, Some((2, true)));
}

#[test]
fn filters_work_on_every_column_and_by_field() {
    let mut a = app();
    command(&mut a, "gpus");
    a.set_filter("crit".into());
    assert_eq!(a.nav.rows.len(), 1, "the Xid 79 GPU");
    command(&mut a, "jobs");
    a.set_filter("state:pending".into());
    assert!(!a.nav.rows.is_empty());
    assert!(
        a.nav
            .rows
            .iter()
            .all(|r| matches!(r, Row::Job(j) if a.cluster.jobs[*j].state.is_pending()))
    );
    a.set_filter("!state:pending".into());
    assert!(
        a.nav
            .rows
            .iter()
            .all(|r| matches!(r, Row::Job(j) if !a.cluster.jobs[*j].state.is_pending()))
    );
    command(&mut a, "nodes");
    a.set_filter("drain".into());
    assert_eq!(a.nav.rows.len(), 1);
}

#[test]
fn jumps_open_an_object_and_tab_completes_names() {
    let mut a = app();
    command(&mut a, "job 4700");
    assert_eq!(
        (a.screen().view, a.screen().target.as_deref()),
        (View::JobDetail, Some("4700"))
    );
    command(&mut a, "node h100-03");
    assert_eq!(a.screen().view, View::NodeDetail);
    command(&mut a, "gpu h100-03/3");
    assert_eq!(
        (a.screen().view, a.screen().target.as_deref()),
        (View::GpuDetail, Some("h100-03/3"))
    );
    command(&mut a, "node h100-99");
    assert!(a.flash.as_deref().is_some_and(|f| f.contains("no node")));
    assert_eq!(a.complete("inc"), "incidents");
    assert_eq!(a.complete("no"), "node", "nodes and node share 'node'");
    assert_eq!(a.complete("node h100-0"), "node h100-0");
    assert_eq!(a.complete("node a100-08"), "node a100-08");
    assert_eq!(a.complete("gpu h100-03/"), "gpu h100-03/");
    assert_eq!(a.complete("job 470"), "job 470");
    assert_eq!(a.complete("job 4700"), "job 4700");
    // In the key flow.
    press(&mut a, ":que");
    key(&mut a, KeyCode::Tab);
    assert_eq!(a.input, Input::Command("queue".into()));
}

#[test]
fn unread_incidents_count_until_opened_and_a_new_critical_one_rings() {
    let mut a = app();
    a.bell_on_critical = true;
    let open = a.unread();
    assert!(open >= 2, "everything is new at start: {open}");
    assert!(
        !a.asked(|e| matches!(e, Effect::Bell)),
        "not for what was there when the console opened"
    );
    command(&mut a, "incidents");
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.unread(), open - 1, "opened is read");
    // A new critical incident: the Xid 48 with its DBE, 100 s later.
    let mut sim = Sim::new(SimConfig::default()).expect("sim");
    sim.advance(101);
    let c = Arc::new(sim.snapshot());
    let an = Analysis::compute(
        &c,
        None,
        &Focus::None,
        &crate::engine::SiteParams::default(),
        &XidCatalog::default(),
    );
    a.take_in(Msg::Source(Update::Snapshot(c)), a.now);
    a.take_in(Msg::Analysis(Arc::new(an)), a.now);
    assert!(a.asked(|e| matches!(e, Effect::Bell)));
    assert!(a.unread() > open - 1);
}

mod screens;

/// The confirmation of a drain: the dialog with its preview, as the runner
/// answers it.
fn drain_dialog(a: &mut App) {
    command(a, "incidents");
    press(a, "D");
    let action = match &a.dialog.modal {
        Some(Modal::Confirm { action, .. }) => action.clone(),
        other => panic!("no confirm dialog: {other:?}"),
    };
    let p = preview_typed(action, "h100-03");
    a.take_in(
        Msg::Action(crate::protocol::action::Reply::Preview(Box::new(p))),
        a.now,
    );
    a.effects.clear();
}

/// The runner's preview of `action`: nothing refused, `token` to type.
fn preview_typed(action: Action, token: &str) -> crate::protocol::action::Preview {
    crate::protocol::action::Preview {
        action,
        blast: None,
        summary: String::new(),
        calls: Vec::new(),
        no_op: false,
        refusal: None,
        undo: None,
        token: Some(token.into()),
        warnings: Vec::new(),
        forced: false,
        domain_remedy: false,
        incident: None,
        fault: None,
        step_of: None,
        source_time: 0,
        node_in_service: true,
        cluster: None,
    }
}

/// The runner's answer that `what` was done and verified.
fn done_step(what: &str) -> crate::protocol::action::Done {
    crate::protocol::action::Done {
        outcome: crate::model::audit::Outcome::of_steps(vec![crate::model::Step {
            what: what.into(),
            ok: true,
            verified: true,
            observed: "done".into(),
            error: None,
            unchanged: false,
            refused: None,
        }]),
        undo: None,
        message: "done".into(),
    }
}

fn sent_a_run(a: &App) -> bool {
    a.sent()
        .iter()
        .any(|r| matches!(r, crate::protocol::action::Request::Run { .. }))
}

mod typing;

mod options;
