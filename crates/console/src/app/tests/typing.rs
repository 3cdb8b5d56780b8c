//! Typing and pasting at the console: pastes that never confirm, bounded
//! inputs, completion, filters by field, the keys that act on a list's
//! row, the header's clock.

use super::*;

/// Pasting the node's name with a newline never confirms: bracketed, the
/// newline is text; plain (the keys in one burst), the enter is refused.
#[test]
fn a_paste_never_confirms_a_drain() {
    let mut a = app();
    drain_dialog(&mut a);
    a.take_in(Msg::Paste("h100-03\n".into()), a.now);
    assert!(!sent_a_run(&a), "a bracketed paste confirmed");
    match &a.dialog.modal {
        Some(Modal::Confirm { typed, .. }) => assert_eq!(typed, "h100-03\n"),
        other => panic!("the dialog is gone: {other:?}"),
    }
    // Plain: the characters and the enter in the same instant.
    let mut a = app();
    drain_dialog(&mut a);
    press(&mut a, "h100-03");
    key(&mut a, KeyCode::Enter);
    assert!(!sent_a_run(&a), "a plain paste confirmed");
    assert!(
        a.flash.as_deref().is_some_and(|f| f.contains("paste")),
        "{:?}",
        a.flash
    );
    // Then the operator's own enter confirms what is typed.
    let later = a.now + Duration::from_millis(300);
    a.tick(later);
    key(&mut a, KeyCode::Enter);
    assert!(sent_a_run(&a), "the operator's enter confirms");
}

/// 100 KB pasted into the filter: cut to the bound at once, filtered once.
#[test]
fn a_huge_paste_into_the_filter_is_cut_and_applied_once() {
    let mut a = app();
    command(&mut a, "nodes");
    press(&mut a, "/");
    let huge = "h100".repeat(25_000);
    let t = std::time::Instant::now();
    a.take_in(Msg::Paste(huge.clone()), a.now);
    match &a.input {
        crate::app::Input::Filter(f) => assert_eq!(f.chars().count(), super::keys::MAX_INPUT),
        other => panic!("not filtering: {other:?}"),
    }
    assert!(
        a.flash.as_deref().is_some_and(|f| f.contains("at most")),
        "{:?}",
        a.flash
    );
    // And typed key by key (a plain paste): every character past the bound
    // is refused, none copies the whole filter again.
    press(&mut a, &huge[..2_000]);
    match &a.input {
        crate::app::Input::Filter(f) => assert_eq!(f.chars().count(), super::keys::MAX_INPUT),
        other => panic!("not filtering: {other:?}"),
    }
    // Not a timing test: a sanity bound far above the few ms it takes.
    assert!(t.elapsed() < Duration::from_secs(20));
    // Pasted where nothing is being typed: ignored, never taken for keys.
    let mut a = app();
    command(&mut a, "incidents");
    a.take_in(Msg::Paste("D".into()), a.now);
    assert!(a.dialog.modal.is_none(), "a pasted D opened a drain");
}

/// Tab on a prefix several names share completes what they share, then
/// says which names fit.
#[test]
fn tab_on_an_ambiguous_prefix_shows_the_candidates() {
    let mut a = app();
    press(&mut a, ":");
    press(&mut a, "node h100-0");
    key(&mut a, KeyCode::Tab);
    let f = a.flash.clone().unwrap_or_default();
    assert!(f.starts_with("8 fit: h100-01 h100-02"), "{f}");
    assert_eq!(a.input, crate::app::Input::Command("node h100-0".into()));
    press(&mut a, "3");
    key(&mut a, KeyCode::Tab);
    assert_eq!(a.input, crate::app::Input::Command("node h100-03".into()));
}

/// `:at` in a live console says what it is for.
#[test]
fn at_in_a_live_console_says_it_is_for_replays() {
    let mut a = app();
    command(&mut a, "at 03:10");
    let f = a.flash.clone().unwrap_or_default();
    assert!(f.contains("replay"), "{f}");
}

/// A colon pressed twice is the prompt's colon, not the command's: `::job
/// X` opens the job, as vim takes `::q`.
#[test]
fn a_colon_pressed_twice_still_runs_the_command() {
    let mut a = app();
    command(&mut a, ":queue");
    assert_eq!(a.screen().view, View::Queue, "{:?}", a.flash);
    command(&mut a, ": nodes");
    assert_eq!(a.screen().view, View::Nodes, "{:?}", a.flash);
}

/// `/foo:bar` with no field foo: said, with the list's fields, instead of
/// an empty list in silence; a time (`/02:47`) still filters as text.
#[test]
fn an_unknown_filter_field_is_said_with_the_fields() {
    let mut a = app();
    command(&mut a, "jobs");
    press(&mut a, "/foo:bar");
    let f = a.flash.clone().unwrap_or_default();
    assert!(f.contains("no field \"foo\"") && f.contains("state"), "{f}");
    key(&mut a, KeyCode::Esc);
    command(&mut a, "incidents");
    press(&mut a, "/02:47");
    assert!(!a.nav.rows.is_empty(), "a time is text, not a field");
    assert!(a.flash.is_none(), "{:?}", a.flash);
}

/// O on a :nodes row opens that node's options, as D C U act on the row
/// (it said "open a node first").
#[test]
fn o_on_a_nodes_row_compares_that_nodes_options() {
    let mut a = app();
    command(&mut a, "nodes");
    let row = a
        .nav
        .rows
        .iter()
        .position(|r| matches!(r, Row::Node(n) if a.cluster.nodes[*n].name == "h100-03"))
        .expect("h100-03's row");
    a.select(row);
    assert_eq!(
        a.focus(),
        crate::engine::analysis::Focus::Node("h100-03".into())
    );
    press(&mut a, "O");
    match &a.dialog.modal {
        Some(Modal::Options { target }) => assert_eq!(target, "h100-03"),
        other => panic!("no options: {other:?} {:?}", a.flash),
    }
}

/// The header's clock runs on between snapshots while the source answers
/// (a Kubernetes watch sends one only on a change); it stops when the data
/// is stale, and a recording's is its snapshot's.
#[test]
fn the_source_clock_runs_on_between_snapshots_while_fresh() {
    let mut a = app();
    let t = a.cluster.time;
    let later = a.now + Duration::from_secs(5);
    a.take_in(Msg::Source(Update::ok(Origin::Scheduler)), later);
    assert_eq!(a.source_clock(), t + 5);
    a.tick(a.now + Duration::from_secs(120));
    assert!(a.is_stale());
    assert_eq!(a.source_clock(), t, "stale: the data's own time");
    let mut r = app();
    r.replay.on = true;
    r.tick(r.now + Duration::from_secs(5));
    assert_eq!(r.source_clock(), r.cluster.time);
}
