//! The console's screens: the message log, the mouse, intents, the
//! header's engine lag, recording and replay.

use super::*;

#[test]
fn status_messages_are_kept_and_m_reopens_them() {
    let mut a = app();
    for c in ":podz\n".chars() {
        let code = if c == '\n' {
            KeyCode::Enter
        } else {
            KeyCode::Char(c)
        };
        a.take_in(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)), a.now);
    }
    assert!(a.flash.as_deref().is_some_and(|f| f.contains("podz")));
    // The next key clears the status line; the log keeps the message.
    a.take_in(
        Msg::Key(KeyEvent::new(KeyCode::Char('m'), KeyModifiers::NONE)),
        a.now,
    );
    assert!(a.flash.is_none());
    assert_eq!(a.overlay, Some(Overlay::Messages));
    assert!(a.messages.iter().any(|(_, m)| m.contains("podz")));
}

#[test]
fn the_wheel_moves_and_a_click_selects_then_opens() {
    use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
    let mouse = |kind, row| MouseEvent {
        kind,
        column: 10,
        row,
        modifiers: KeyModifiers::NONE,
    };
    let mut a = app();
    a.take_in(Msg::Resize(100, 30), a.now);
    command(&mut a, "jobs");
    a.take_in(Msg::Mouse(mouse(MouseEventKind::ScrollDown, 10)), a.now);
    assert_eq!(a.screen().selected, 3);
    a.take_in(Msg::Mouse(mouse(MouseEventKind::ScrollUp, 10)), a.now);
    assert_eq!(a.screen().selected, 0);
    // Row 3 of the screen is the list's first row (header, border, header row).
    a.take_in(
        Msg::Mouse(mouse(MouseEventKind::Down(MouseButton::Left), 5)),
        a.now,
    );
    assert_eq!(a.screen().selected, 2);
    let id = a.selected_row().map(|r| a.row_key(r));
    a.take_in(
        Msg::Mouse(mouse(MouseEventKind::Down(MouseButton::Left), 5)),
        a.now,
    );
    assert_eq!(
        a.screen().view,
        View::JobDetail,
        "a click on the selected row opens it"
    );
    assert_eq!(a.screen().target, id);
}

/// Each screen says what its own keys mean, as intents, without changing
/// anything; the app carries them out.
#[test]
fn screens_answer_keys_with_intents_and_change_nothing() {
    use crate::app::screens::on_key;
    let k = |c: KeyCode| KeyEvent::new(c, KeyModifiers::NONE);
    let mut a = app();
    a.size = (120, 40);
    // The overview's grid: down is a row of the grid, not the next node.
    a.carry_out(Intent::SwitchPane);
    assert_eq!(a.screen().pane, Pane::Second);
    let cols = a.grid_columns();
    assert!(cols > 1);
    let before = a.screen().selected;
    let msg = on_key(&a, k(KeyCode::Char('j')));
    assert!(
        matches!(msg, Some(Intent::Select(i)) if i == before + cols),
        "{msg:?}"
    );
    assert_eq!(a.screen().selected, before, "on_key changes nothing");
    // A list: digits sort; keys it leaves alone are the app's.
    command(&mut a, "jobs");
    assert!(matches!(
        on_key(&a, k(KeyCode::Char('3'))),
        Some(Intent::SortBy(2))
    ));
    assert!(matches!(
        on_key(&a, k(KeyCode::Char('0'))),
        Some(Intent::SortBy(9))
    ));
    assert!(on_key(&a, k(KeyCode::Char('j'))).is_none());
    // A GPU's enter opens its job.
    command(&mut a, "gpu h100-03/3");
    let job = a.gpu_detail_job().expect("a job on h100-03/3");
    let msg = on_key(&a, k(KeyCode::Enter));
    match msg {
        Some(Intent::Open(s)) => {
            assert_eq!(s.view, View::JobDetail);
            assert_eq!(s.target.as_deref(), Some(job.as_str()));
        }
        other => panic!("{other:?}"),
    }
    // And the app, given the key, does what the message says.
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.screen().view, View::JobDetail);
}

/// On a big cluster the analyst plans every few seconds: the header says
/// how far the engine's answers trail the snapshot shown, and says
/// nothing once they catch up.
#[test]
fn the_header_says_when_the_engine_trails_the_snapshot() {
    let mut a = app();
    let header = |a: &App| {
        let mut term =
            ratatui::Terminal::new(ratatui::backend::TestBackend::new(200, 50)).expect("term");
        term.draw(|f| crate::views::render(f, a)).expect("draw");
        let buf = term.backend().buffer().clone();
        (0..buf.area.width)
            .map(|x| buf[(x, 0)].symbol().to_string())
            .collect::<String>()
    };
    assert!(!header(&a).contains("behind"), "{}", header(&a));
    let mut sim = Sim::new(SimConfig::default()).expect("sim");
    sim.advance(7);
    let later = Arc::new(sim.snapshot());
    a.take_in(Msg::Source(Update::Snapshot(later.clone())), Instant::now());
    assert_eq!(a.analysis_lag_s(), Some(7));
    assert!(header(&a).contains("engine 7s behind"), "{}", header(&a));
    let caught_up = Analysis::compute(
        &later,
        None,
        &Focus::None,
        &crate::engine::SiteParams::default(),
        &XidCatalog::default(),
    );
    a.take_in(Msg::Analysis(Arc::new(caught_up)), Instant::now());
    assert_eq!(a.analysis_lag_s(), None);
    assert!(!header(&a).contains("behind"), "{}", header(&a));
}

#[test]
fn a_stopped_recording_is_said_on_screen_and_kept_in_the_log() {
    let mut a = app();
    let now = a.now;
    a.take_in(
        Msg::Source(Update::Notice(
            "RECORDING STOPPED: cannot write the recording: No space left on device".into(),
        )),
        now,
    );
    assert!(
        a.flash
            .as_deref()
            .is_some_and(|f| f.starts_with("RECORDING STOPPED"))
    );
    assert!(
        a.messages
            .iter()
            .any(|(_, m)| m.contains("No space left on device"))
    );
    // The data is as fresh as it was: a notice is no origin.
    assert!(a.data_age().is_some());
}

#[test]
fn replay_keys_steer_the_playback_and_act_on_nothing() {
    use crate::protocol::replay::ReplayCmd;
    let mut a =
        App::new("replay", true, false, Duration::from_secs(10)).measured_by(crate::views::extent);
    let sim = Sim::new(SimConfig::default()).expect("sim");
    let c = Arc::new(sim.snapshot());
    let now = Instant::now();
    a.take_in(Msg::Source(Update::Snapshot(c.clone())), now);
    assert_eq!(a.replay.start, Some(c.time));
    press(&mut a, "> <n");
    a.on_key(KeyEvent::new(KeyCode::Char(' '), KeyModifiers::NONE));
    a.command("at +10m");
    assert_eq!(
        a.replay_sent(),
        vec![
            ReplayCmd::Faster,
            ReplayCmd::Pause,
            ReplayCmd::Slower,
            ReplayCmd::NextIncident,
            ReplayCmd::Pause,
            ReplayCmd::Seek(c.time + 600),
        ]
    );
    press(&mut a, "D");
    assert!(a.sent().is_empty(), "read-only: nothing to the runner");
    // A live console gives these keys no playback meaning.
    let mut live = app();
    press(&mut live, ">n");
    assert!(live.replay_sent().is_empty());
}
