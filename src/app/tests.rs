use super::*;
use crate::sources::sim::{Sim, SimConfig};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn app() -> App {
    let mut app = App::new("sim", false, false, Duration::from_secs(10));
    let sim = Sim::new(SimConfig::default()).expect("sim");
    app.on_update(Update::Snapshot(Arc::new(sim.snapshot())), Instant::now());
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
        assert_eq!(a.stack.len(), 2);
    }
    key(&mut a, KeyCode::Esc);
    assert_eq!(a.screen().view, View::Overview);
    key(&mut a, KeyCode::Esc);
    assert_eq!(a.stack.len(), 1, "esc on the overview stays there");
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
        matches!(a.selected_row(), Some(Row::Event(e)) if a.cluster.events[e].xid() == Some(79))
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
    let job = a.index.job_by_id[a.screen().target.as_deref().expect("job")];
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
    let all = a.rows.len();
    press(&mut a, "/vision");
    let vision = a.rows.len();
    assert!(vision > 0 && vision < all, "{vision} of {all}");
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.input, Input::Normal);
    assert_eq!(a.screen().filter, "vision");
    key(&mut a, KeyCode::Esc);
    assert_eq!(a.rows.len(), all);
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
    assert_eq!(a.screen().selected, a.rows.len() - 1);
    key(&mut a, KeyCode::PageDown);
    assert_eq!(a.screen().selected, a.rows.len() - 1);
    press(&mut a, "g");
    assert_eq!(a.screen().selected, 0);
}

#[test]
fn quit_keys() {
    let mut a = app();
    press(&mut a, "q");
    assert!(a.quit);
    let mut a = app();
    a.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
    assert!(a.quit);
    let mut a = app();
    command(&mut a, "q");
    assert!(a.quit);
    // q typed into a filter is text, not quit.
    let mut a = app();
    press(&mut a, "/q");
    assert!(!a.quit);
}

#[test]
fn data_turns_stale_and_errors_keep_the_last_snapshot() {
    let mut a = app();
    assert!(!a.is_stale());
    let later = a.now + Duration::from_secs(11);
    a.tick(later);
    assert!(a.is_stale());
    let nodes = a.cluster.nodes.len();
    a.on_update(Update::Error("connection refused".into()), later);
    assert_eq!(a.cluster.nodes.len(), nodes);
    assert_eq!(a.source_error.as_deref(), Some("connection refused"));
}
