//! Render tests: every view drawn into ratatui's TestBackend from the
//! simulated cluster (seed 1), at 80×24 and at 200×50, compared with insta
//! snapshots in tests/snapshots/. The sim is deterministic, so a changed
//! snapshot means a changed screen.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use nightshift::actions::runner::Request;
use nightshift::app::{App, Effect, Msg, View};
use nightshift::engine::SiteParams;
use nightshift::engine::analysis::Analysis;
use nightshift::engine::xid::XidCatalog;
use nightshift::sources::sim::{Sim, SimConfig};
use nightshift::sources::{Origin, SourceError, Update};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A source's update, as the loop hands it over.
trait Feed {
    fn on_update(&mut self, update: Update, now: Instant);
}

impl Feed for App {
    fn on_update(&mut self, update: Update, now: Instant) {
        let _ = self.update(Msg::Source(update), now);
    }
}

/// The requests for the action runner among `effects`.
fn sent(effects: &[Effect]) -> Vec<&Request> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Run(r) => Some(r),
            _ => None,
        })
        .collect()
}

fn app_after(seconds: u64) -> App {
    app_as("sim", false, false, seconds)
}

/// The same, as the console of `source` ("replay": playing a recording),
/// read-only or without colours when asked.
fn app_as(source: &str, read_only: bool, no_color: bool, seconds: u64) -> App {
    let mut sim = Sim::new(SimConfig::default()).expect("sim");
    let mut app = App::new(source, read_only, no_color, Duration::from_secs(10))
        .measured_by(nightshift::views::extent);
    let t0 = Instant::now();
    // A few snapshots so that sparklines have history.
    for i in 0..=seconds.min(20) {
        if i > 0 {
            sim.advance(seconds / seconds.clamp(1, 20));
        }
        app.on_update(Update::Snapshot(Arc::new(sim.snapshot())), t0);
        app.on_update(Update::ok(Origin::Scheduler), t0);
    }
    app
}

/// Keys as a hand types them: an `enter` comes a moment after the key
/// before it (one in the same instant is taken for a paste, and refused in
/// a typed confirmation).
/// What they asked of the loop is returned.
fn keys(app: &mut App, codes: &[KeyCode]) -> Vec<Effect> {
    let mut effects = Vec::new();
    for &c in codes {
        let now = if c == KeyCode::Enter {
            app.now() + Duration::from_millis(20)
        } else {
            app.now()
        };
        effects.extend(app.update(Msg::Key(KeyEvent::new(c, KeyModifiers::NONE)), now));
    }
    effects
}

fn command(app: &mut App, cmd: &str) {
    let _ = app.run_command(cmd);
}

fn screen(app: &App, w: u16, h: u16) -> String {
    drawn(w, h, |f| nightshift::views::render(f, app))
}

/// What `draw` leaves on a `w`×`h` screen, row by row.
fn drawn(w: u16, h: u16, draw: impl FnOnce(&mut ratatui::Frame)) -> String {
    let mut term = Terminal::new(TestBackend::new(w, h)).expect("terminal");
    term.draw(draw).expect("draw");
    let buf = term.backend().buffer().clone();
    let mut out = String::new();
    for y in 0..h {
        for x in 0..w {
            out.push_str(buf[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

/// The engine's answers for what the app shows, as the analyst task would
/// send them.
/// The analysis a console would have shown: on the default sim's
/// cluster, with the memory of watching the sim from its start to this
/// moment (its storm and flaps are derived from its readings, as live;
/// engine::derive), then this snapshot (edited or not) observed.
fn analyse(app: &mut App) {
    let site = SiteParams::default();
    let c = app.cluster();
    let mut m = nightshift::engine::memory::Memory::default();
    if c.source == "sim" && c.name == "sim-16" {
        let mut s = Sim::new(SimConfig::default()).expect("sim");
        let mut at = s.snapshot().time;
        while at < c.time {
            let by = (c.time - at).min(10);
            s.advance(by.unsigned_abs());
            at += by;
            m.observe(&s.snapshot(), &site);
        }
    }
    m.observe(c, &site);
    let base = Arc::new(m.base(c, &site, &XidCatalog::default()));
    let a = Analysis::with_base(base, c, &app.focus(), &site);
    let now = app.now();
    let _ = app.update(Msg::Analysis(Arc::new(a)), now);
}

/// Each view at both sizes.
fn check(name: &str, app: &mut App) {
    analyse(app);
    insta::assert_snapshot!(format!("{name}_80x24"), screen(app, 80, 24));
    insta::assert_snapshot!(format!("{name}_200x50"), screen(app, 200, 50));
}

#[test]
fn overview() {
    check("overview", &mut app_after(200));
    // The selected incident's what → status, whole at 80 and 120 columns
    // (the table cuts its last column there).
    let mut a = app_after(200);
    analyse(&mut a);
    for w in [80, 120] {
        let s = screen(&a, w, 30);
        let joined: String = s.lines().map(|l| l.trim()).collect::<Vec<_>>().join(" ");
        assert!(
            joined.contains(
                "XID 48 (+ECC DBE, XID 63): DBE (double bit error) ECC error → drain the node, then reset the GPU"
            ),
            "at {w} columns:\n{s}"
        );
    }
    // One screen, one set of numbers: the header's unavailable GPUs are the
    // partitions' summed, the open incidents are the table's rows, the
    // queue's chart says the pending jobs the summary says.
    let s = screen(&a, 200, 50);
    let num_after = |hay: &str, key: &str| -> Vec<u64> {
        hay.match_indices(key)
            .filter_map(|(i, _)| {
                hay[i + key.len()..]
                    .split(|c: char| !c.is_ascii_digit())
                    .find(|t| !t.is_empty())
                    .and_then(|t| t.parse().ok())
            })
            .collect()
    };
    let num_before = |hay: &str, key: &str| -> Vec<u64> {
        hay.match_indices(key)
            .filter_map(|(i, _)| {
                hay[..i]
                    .trim_end()
                    .rsplit(|c: char| !c.is_ascii_digit())
                    .next()
                    .and_then(|t| t.parse().ok())
            })
            .collect()
    };
    let header_unavail = num_after(&s, "unavail ")[0];
    let line = s
        .lines()
        .find(|l| l.contains(" critical ") && l.contains(" unavail"))
        .unwrap_or_default();
    let parts: u64 = num_before(line, " unavail").iter().sum();
    assert_eq!(header_unavail, parts, "{s}");
    let open = num_after(&s, "Incidents ")[0];
    let range = s
        .lines()
        .find(|l| l.starts_with('└') && l.contains(" of "))
        .unwrap_or_default();
    let rows = num_after(range, " of ").into_iter().next().unwrap_or(0);
    assert_eq!(open, rows, "{s}");
    assert_eq!(
        num_after(&s, "queue ")[0],
        num_before(&s, " pending")[0],
        "{s}"
    );
}

#[test]
fn nodes() {
    let mut a = app_after(200);
    command(&mut a, "nodes");
    check("nodes", &mut a);
}

#[test]
fn gpus() {
    let mut a = app_after(200);
    command(&mut a, "gpus");
    check("gpus", &mut a);
}

#[test]
fn jobs_and_queue() {
    let mut a = app_after(200);
    command(&mut a, "jobs");
    check("jobs", &mut a);
    command(&mut a, "queue");
    check("queue", &mut a);
    // The first in scheduler order: the fragmented 8-GPU wait, explained.
    keys(&mut a, &[KeyCode::Enter]);
    assert_eq!(a.screen().view, View::JobDetail);
    check("job_pending", &mut a);
    let s = screen(&a, 120, 40);
    assert!(
        // 16 at the start; the Xid 13 at +40 s freed one on a100-07.
        s.contains("17 GPUs free, but at most 3 on any node; needs 8 on one node"),
        "{s}"
    );
}

#[test]
fn incidents_and_drill_down() {
    let mut a = app_after(200);
    command(&mut a, "incidents");
    check("incidents", &mut a);
    // The newest: h100-06 GPU 5's Xid 48 with its DBE and remap → node → gpu.
    keys(&mut a, &[KeyCode::Enter]);
    assert_eq!(a.screen().view, View::NodeDetail);
    check("node_detail", &mut a);
    let s = screen(&a, 160, 48);
    assert!(
        s.contains("drain the node, then reset the GPU"),
        "the verdict is shown:\n{s}"
    );
    assert!(
        s.contains("job(s) 4702 keep running (--no-requeue): it stays draining"),
        "the drain blast radius is shown:\n{s}"
    );
    keys(&mut a, &[KeyCode::Enter]);
    assert_eq!(a.screen().view, View::GpuDetail);
    check("gpu_detail", &mut a);
    keys(&mut a, &[KeyCode::Enter]);
    assert_eq!(a.screen().view, View::JobDetail);
    check("job_detail", &mut a);
}

#[test]
fn help_overlay() {
    let mut a = app_after(0);
    keys(&mut a, &[KeyCode::Char('?')]);
    check("help", &mut a);
    // At 80×24 it scrolls to its last line; a key up from there moves at once.
    let mut a = app_after(0);
    let _ = a.update(Msg::Resize(80, 24), a.now());
    keys(&mut a, &[KeyCode::Char('?'), KeyCode::End]);
    let s = screen(&a, 80, 24);
    // Its end: the words, after the keys.
    assert!(
        s.contains("GPU-hours lost") && s.contains("N jumped"),
        "{s}"
    );
    insta::assert_snapshot!("help_80x24_end", s);
    let end = a.overlay().1;
    assert!(end > 0, "it had to scroll");
    keys(&mut a, &[KeyCode::Char('k')]);
    assert_eq!(a.overlay().1, end - 1);
    keys(&mut a, &[KeyCode::Char('x')]);
    assert!(a.overlay().0.is_none(), "any other key closes it");
}

/// Started against a dead slurmrestd: no zero that was not read, no empty
/// cluster name; what is awaited and the error, whole; the error in the
/// message log too.
#[test]
fn before_the_first_answer_nothing_made_up_is_shown() {
    let mut a = App::new("slurm", false, false, Duration::from_secs(10))
        .measured_by(nightshift::views::extent);
    let err = SourceError::Unreachable {
        what: "slurmrestd at http://127.0.0.1:6820".into(),
        detail: "tcp connect error: Connection refused (os error 111), asked again every 10 s; check that slurmrestd runs and listens there".into(),
    };
    a.on_update(
        Update::failed(Origin::Scheduler, err.clone()),
        Instant::now(),
    );
    for (w, h) in [(80, 24), (200, 50)] {
        let s = screen(&a, w, h);
        assert!(
            !s.contains("GPUs 0") && !s.contains("alloc 0"),
            "made-up zeros:\n{s}"
        );
        assert!(!s.contains("│  │"), "an empty cluster name:\n{s}");
        assert!(s.contains("waiting for the first answer"), "{s}");
        assert!(
            s.contains("listens there"),
            "the error whole, to its end:\n{s}"
        );
        // Where to look for why (issue 41).
        assert!(s.contains("nightshift doctor"), "{s}");
        insta::assert_snapshot!(format!("waiting_dead_slurmrestd_{w}x{h}"), s);
    }
    keys(&mut a, &[KeyCode::Char('m')]);
    let s = screen(&a, 120, 30);
    assert!(s.contains("Connection refused"), "in the message log:\n{s}");
    assert!(
        s.contains("nightshift doctor"),
        "the log points to it:\n{s}"
    );
    // The same error again is not logged twice; answering again is.
    a.on_update(Update::failed(Origin::Scheduler, err), Instant::now());
    let logged = |a: &App, what: &str| {
        a.messages()
            .iter()
            .filter(|(_, m)| m.contains(what))
            .count()
    };
    assert_eq!(logged(&a, "Connection refused"), 1);
    a.on_update(Update::ok(Origin::Scheduler), Instant::now());
    assert_eq!(logged(&a, "slurm answers again"), 1);
}

/// The rows of the README's first table after `heading` (no header rows).
fn readme_table(heading: &str) -> Vec<&'static str> {
    let readme = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"));
    readme
        .split(heading)
        .nth(1)
        .unwrap_or_else(|| panic!("a {heading} section"))
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .collect()
}

/// Every key of the README's table is in the help, and every key of the
/// help is in the README's table.
#[test]
fn the_readme_key_table_matches_the_help() {
    let table = readme_table("## Keys");
    let help: String = nightshift::views::HELP
        .iter()
        .map(|(k, w)| format!("{k} {w} "))
        .collect();
    let readme_table = table.join(" ");
    for row in &table {
        let first = row.split('|').nth(1).unwrap_or_default();
        for key in first.split('`').skip(1).step_by(2) {
            let key = key.split_whitespace().next().unwrap_or_default();
            assert!(help.contains(key), "README key {key:?} is not in the help");
        }
    }
    for (keys, _) in nightshift::views::HELP {
        for key in keys.split_whitespace().filter(|k| {
            !matches!(
                *k,
                "…" | "(after"
                    | "an"
                    | "action)"
                    | "TEXT"
                    | "ID"
                    | "N"
                    | "N/I"
                    | "8h"
                    | "03:10"
                    | "+90m"
            )
        }) {
            assert!(
                readme_table.contains(key),
                "help key {key:?} is not in the README's table"
            );
        }
    }
}

#[test]
fn stale_data_and_read_only_are_shown() {
    let mut a = app_as("sim", true, false, 0);
    let later = Instant::now() + Duration::from_secs(42);
    a.on_update(
        Update::failed(
            Origin::Scheduler,
            SourceError::Unreachable {
                what: "slurmrestd".into(),
                detail: "connection refused".into(),
            },
        ),
        later,
    );
    let s = screen(&a, 120, 30);
    let header = s.lines().next().expect("header");
    assert!(header.contains("STALE 4"), "{header}");
    assert!(header.contains("READ-ONLY"), "{header}");
    assert!(header.contains("connection refused"), "{header}");
}

/// A Prometheus that answers slowly or in part says so in the header (its
/// answer stands, with its age), until it answers whole and in time.
#[test]
fn a_slow_or_partial_prometheus_is_said_in_the_header() {
    let mut a = app_after(0);
    let now = Instant::now();
    let prom = Origin::Endpoint("http://prometheus:9090".into());
    a.on_update(Update::ok(prom.clone()), now);
    a.on_update(
        Update::Quality {
            origin: prom.clone(),
            note: Some("slow: answered in 4.1 s".into()),
        },
        now,
    );
    let s = screen(&a, 200, 30);
    let header = s.lines().next().expect("header");
    assert!(
        header.contains("http://prometheus:9090: slow: answered in 4.1 s"),
        "{header}"
    );
    a.on_update(
        Update::Quality {
            origin: prom,
            note: None,
        },
        now,
    );
    let s = screen(&a, 200, 30);
    assert!(
        !s.lines().next().unwrap_or_default().contains("slow"),
        "{s}"
    );
}

#[test]
fn tiny_and_empty_terminals_do_not_panic() {
    let a = app_after(0);
    for (w, h) in [
        (0, 0),
        (1, 1),
        (0, 10),
        (10, 0),
        (20, 5),
        (59, 30),
        (80, 15),
    ] {
        let s = screen(&a, w, h);
        let first = s.lines().next().unwrap_or("");
        if w > 0 && h > 0 {
            assert!(
                "nightshift: terminal".starts_with(first)
                    || first.starts_with("nightshift: terminal"),
                "{w}x{h}: {s}"
            );
            // The whole notice, wrapped, wherever the screen holds it.
            let all: String = s.lines().map(str::trim).collect::<Vec<_>>().join(" ");
            if u32::from(w) * u32::from(h) >= 80 && w >= 12 {
                assert!(all.contains("needs 60x16"), "{w}x{h}: {s}");
            }
        }
    }
    let s = screen(&a, 60, 16);
    assert!(
        s.contains(" sim │ sim-16 │"),
        "60x16 draws the console:\n{s}"
    );
}

#[test]
fn escape_sequences_in_job_names_are_drawn_inert() {
    let mut a = app_after(0);
    command(&mut a, "jobs");
    let s = screen(&a, 160, 48);
    assert!(
        s.contains("␛[31mpwn␛[0m"),
        "the hostile name is shown, defused:\n{s}"
    );
    assert!(!s.chars().any(|c| c.is_control() && c != '\n'));
}

#[test]
fn no_color_draws_without_colours() {
    let mut a = app_as("sim", false, true, 200);
    // The critical glyph comes from the engine's verdicts, as in the app.
    analyse(&mut a);
    let mut term = Terminal::new(TestBackend::new(100, 30)).expect("terminal");
    term.draw(|f| nightshift::views::render(f, &a))
        .expect("draw");
    let buf = term.backend().buffer();
    use ratatui::style::Color;
    for cell in buf.content() {
        assert!(
            cell.fg == Color::Reset && cell.bg == Color::Reset,
            "coloured cell {:?}",
            cell
        );
    }
    // Meaning survives: the critical GPU's glyph is still there.
    let text: String = buf.content().iter().map(|c| c.symbol()).collect();
    assert!(text.contains("▁▁▁X▁▁▁▁"));
}

#[test]
fn drawing_at_scale_stays_within_the_screen() {
    let sim = Sim::new(SimConfig {
        seed: 3,
        nodes: 2000,
        jobs: Some(20_000),
    })
    .expect("sim");
    let mut a = App::new("sim", false, false, Duration::from_secs(10))
        .measured_by(nightshift::views::extent);
    a.on_update(Update::Snapshot(Arc::new(sim.snapshot())), Instant::now());
    analyse(&mut a);
    for cmd in ["overview", "nodes", "gpus", "jobs", "queue", "incidents"] {
        command(&mut a, cmd);
        keys(&mut a, &[KeyCode::End]);
        let s = screen(&a, 100, 30);
        assert!(s.contains(" of "), ":{cmd} shows its position");
    }
}

#[test]
fn stale_gpu_readings_show_their_age() {
    let mut c = Sim::new(SimConfig::default()).expect("sim").snapshot();
    // The node endpoint of h100-05 stopped answering five minutes ago.
    for g in std::sync::Arc::make_mut(
        c.nodes
            .iter_mut()
            .find(|n| n.name == "h100-05")
            .expect("node"),
    )
    .gpus
    .iter_mut()
    {
        g.reading_time = Some(c.time - 300);
        g.reading_source = Some("dcgm http://h100-05:9400/metrics".into());
    }
    let mut a = App::new("sim", false, false, Duration::from_secs(10))
        .measured_by(nightshift::views::extent);
    a.on_update(Update::Snapshot(Arc::new(c)), Instant::now());
    command(&mut a, "nodes");
    keys(
        &mut a,
        &[
            KeyCode::Down,
            KeyCode::Down,
            KeyCode::Down,
            KeyCode::Down,
            KeyCode::Enter,
        ],
    );
    assert_eq!(a.screen().target.as_deref(), Some("h100-05"));
    let s = screen(&a, 120, 40);
    assert!(s.contains("~"), "stale numbers are marked:\n{s}");
    keys(&mut a, &[KeyCode::Enter]);
    let s = screen(&a, 120, 40);
    assert!(
        s.contains("5m00s old — STALE: its endpoint is not answering"),
        "{s}"
    );
}

/// The drain dialog at 80×24 over a node with many jobs: the body scrolls,
/// and what to type and how to cancel stay on screen, in the dialog and in
/// the footer.
#[test]
fn drain_dialog_with_many_victims_keeps_its_prompt_at_80x24() {
    use nightshift::actions::Action;
    // h100-08 carries a job per GPU, of several users.
    let (mut app, sim, c) = sim_app(0, |c| {
        let template = c
            .jobs
            .iter()
            .find(|j| j.state.holds_resources())
            .expect("a job")
            .clone();
        let n = c
            .nodes
            .iter()
            .position(|n| n.name == "h100-08")
            .expect("h100-08");
        for g in 0..8u32 {
            let mut j = (*template).clone();
            j.id = format!("9{g:03}");
            j.name = format!("sweep-trial-{g}");
            j.user = ["ana", "ben", "cai", "dee"][g as usize % 4].to_string();
            j.nodes = vec!["h100-08".into()];
            j.gpus_per_node = Some(1);
            j.node_count = Some(1);
            j.gpus_total = Some(1);
            j.gang = None;
            std::sync::Arc::make_mut(&mut c.nodes[n]).gpus[g as usize].job = Some(j.id.clone());
            c.jobs.push(std::sync::Arc::new(j));
        }
    });
    let action = Action::Drain {
        node: "h100-08".into(),
        reason: "xid79 GPU3".into(),
        requeue: true,
    };
    let p = open_dialog(&mut app, &c, sim, action);
    assert!(
        p.blast
            .as_ref()
            .is_some_and(|b| b.as_ref().is_ok_and(|b| b.killed.len() >= 9))
    );
    let s = screen(&app, 80, 24);
    assert!(s.contains("type h100-08 and press enter to confirm"), "{s}");
    assert!(s.contains("esc cancels"), "{s}");
    assert!(s.contains("more lines"), "the body says it scrolls:\n{s}");
    let footer = s.lines().last().expect("footer");
    assert!(
        footer.contains("type h100-08") && footer.contains("cancel"),
        "{footer}"
    );
    insta::assert_snapshot!("drain_dialog_many_victims_80x24", s);
    insta::assert_snapshot!("drain_dialog_many_victims_200x50", screen(&app, 200, 50));
    // Scrolled to the end: the undo line shows, the prompt still does.
    keys(
        &mut app,
        &[KeyCode::PageDown, KeyCode::PageDown, KeyCode::PageDown],
    );
    let s = screen(&app, 80, 24);
    assert!(s.contains("undo: nightshift resume h100-08"), "{s}");
    assert!(s.contains("type h100-08 and press enter to confirm"), "{s}");
    insta::assert_snapshot!("drain_dialog_many_victims_80x24_scrolled", s);
}

/// Prometheus's hour before nightshift opened: the GPU screen lists the
/// Xids it saw with their times and its charts say where the back-fill
/// ends; the message log says what was read.
#[test]
fn gpu_history_back_filled_from_prometheus() {
    use nightshift::model::{Backfill, GpuBackfill, XidSeen};
    let mut a = app_after(0);
    let t = a.cluster().time;
    let mut gpus = std::collections::BTreeMap::new();
    gpus.insert(
        ("h100-06".to_string(), 5),
        GpuBackfill {
            occupancy: (0..120)
                .map(|i| Some(if i < 100 { 80 } else { 0 }))
                .collect(),
            utilization: vec![Some(100); 120],
            xids: vec![XidSeen {
                code: 79,
                first_seen: t - 600,
                at_window_start: false,
            }],
        },
    );
    a.on_update(
        Update::Backfill(Arc::new(Backfill {
            start: t - 119 * 30,
            step: 30,
            slots: 120,
            gpus,
            notes: Vec::new(),
        })),
        Instant::now(),
    );
    command(&mut a, "gpu h100-06/5");
    assert_eq!(a.screen().view, View::GpuDetail);
    analyse(&mut a);
    let s = screen(&a, 200, 50);
    let when = nightshift::text::clock(t - 600);
    assert!(
        s.lines()
            .any(|l| l.contains("Xids in the last hour") && l.contains(&format!("79 at {when}"))),
        "{s}"
    );
    assert!(s.contains("from Prometheus"), "{s}");
    assert!(s.contains("-59m30s"), "the charts show the hour:\n{s}");
    insta::assert_snapshot!("gpu_detail_back_filled_200x50", s);
    let s = screen(&a, 80, 24);
    assert!(s.contains("Xids in the last hour"), "{s}");
    insta::assert_snapshot!("gpu_detail_back_filled_80x24", s);
    assert!(
        a.messages()
            .iter()
            .any(|(_, m)| m.contains("last hour for 1 GPUs read from Prometheus")),
        "{:?}",
        a.messages()
    );
}

/// Opens `action`'s dialog on `app` with the guard's real preview of it
/// over `c` (the sim's executor answers what it would send).
fn open_dialog(
    app: &mut App,
    c: &Arc<nightshift::model::Cluster>,
    sim: Sim,
    action: nightshift::actions::Action,
) -> nightshift::actions::guard::Preview {
    use nightshift::actions::executor::Executor;
    use nightshift::actions::{audit::AuditLog, guard, policy::Policy, runner::Reply};
    use nightshift::engine::analysis::Base;
    let _ = app.open_action(action.clone());
    let dir = tempfile::tempdir().expect("tempdir");
    let base = Base::compute(c, None, &SiteParams::default(), &XidCatalog::default());
    let exec = Executor::new(nightshift::sources::sim::Own(std::sync::Arc::new(
        std::sync::Mutex::new(sim),
    )));
    let p = guard::preview(
        &action,
        c,
        &base,
        Duration::ZERO,
        &Policy::default(),
        &AuditLog::new(dir.path().join("a.jsonl")),
        false,
        Ok(&exec),
        &SiteParams::default(),
    );
    let now = app.now();
    let _ = app.update(Msg::Action(Reply::Preview(Box::new(p.clone()))), now);
    p
}

/// The sim after `seconds`, as one snapshot, in an app with its analysis.
fn sim_app(
    seconds: u64,
    edit: impl FnOnce(&mut nightshift::model::Cluster),
) -> (App, Sim, Arc<nightshift::model::Cluster>) {
    let mut sim = Sim::new(SimConfig::default()).expect("sim");
    sim.advance(seconds);
    let mut c = sim.snapshot();
    edit(&mut c);
    let c = Arc::new(c);
    let mut app = App::new("sim", false, false, Duration::from_secs(10))
        .measured_by(nightshift::views::extent);
    let now = Instant::now();
    app.on_update(Update::Snapshot(c.clone()), now);
    app.on_update(Update::ok(Origin::Scheduler), now);
    analyse(&mut app);
    (app, sim, c)
}

/// Every other dialog at both sizes, each with its prompt on screen: a
/// requeue, a resume of a node whose GPU is still broken (evidence and a
/// typed name), a cordon the circuit breaker refuses (and how to
/// override), the outcome of a drain, and a failure.
#[test]
fn every_dialog_keeps_its_prompt() {
    use nightshift::actions::Action;
    use nightshift::actions::runner::Reply;
    use nightshift::model::NodeState;
    let both = |app: &App, name: &str, must: &[&str]| {
        for (w, h) in [(80, 24), (200, 50)] {
            let s = screen(app, w, h);
            for m in must {
                assert!(s.contains(m), "{name} at {w}x{h} lacks {m:?}:\n{s}");
            }
            insta::assert_snapshot!(format!("{name}_{w}x{h}"), s);
        }
    };

    // Requeue a running job: its gang, and what to type.
    let (mut app, sim, c) = sim_app(200, |_| {});
    open_dialog(&mut app, &c, sim, Action::Requeue { job: "4701".into() });
    both(
        &app,
        "dialog_requeue",
        &["type 4701 and press enter to confirm", "esc"],
    );
    // A wrong name is not sent: the dialog stays and says so.
    let runs = |effects: &[Effect]| {
        sent(effects)
            .iter()
            .filter(|r| matches!(r, Request::Run { .. }))
            .count()
    };
    let fx = keys(&mut app, &[KeyCode::Char('4'), KeyCode::Enter]);
    assert_eq!(runs(&fx), 0, "nothing sent on a wrong name");
    assert!(
        app.flash().is_some_and(|f| f.contains("does not match")),
        "{:?}",
        app.flash()
    );
    // Typed right: sent, and the dialog waits for the outcome.
    let fx = keys(
        &mut app,
        &[
            KeyCode::Char('4'),
            KeyCode::Char('7'),
            KeyCode::Char('0'),
            KeyCode::Char('1'),
            KeyCode::Enter,
        ],
    );
    assert_eq!(runs(&fx), 1, "sent once");
    both(&app, "dialog_running", &["waiting for the outcome"]);

    // Resume a drained node whose GPU is still critical.
    let (mut app, sim, c) = sim_app(200, |c| {
        if let Some(n) = c.nodes.iter_mut().find(|n| n.name == "h100-06") {
            let n = std::sync::Arc::make_mut(n);
            n.state = NodeState::Drain;
            n.reason = Some("xid48 GPU5".into());
        }
    });
    open_dialog(
        &mut app,
        &c,
        sim,
        Action::Resume {
            node: "h100-06".into(),
        },
    );
    both(
        &app,
        "dialog_resume_broken_node",
        &["type h100-06 and press enter to confirm"],
    );
    // Each fact once: the Xid 48 the summary names is not listed again.
    let s = screen(&app, 200, 50);
    assert_eq!(s.matches("Xid 48 (Double").count(), 1, "{s}");

    // A third h100 node out: the breaker refuses, and says how to override.
    let (mut app, sim, c) = sim_app(0, |c| {
        for n in c
            .nodes
            .iter_mut()
            .filter(|n| n.name == "h100-07" || n.name == "h100-08")
        {
            let n = std::sync::Arc::make_mut(n);
            n.state = NodeState::Drain;
            n.reason = Some("maintenance".into());
        }
    });
    let p = open_dialog(
        &mut app,
        &c,
        sim,
        Action::Cordon {
            node: "h100-05".into(),
            reason: "flaky".into(),
        },
    );
    assert!(p.refusal.is_some(), "the breaker refuses");
    both(
        &app,
        "dialog_breaker_refuses",
        &["force h100-05", "circuit breaker"],
    );

    // The outcome of a drain, from the guard run against the sim.
    let (mut app, mut sim, c) = sim_app(200, |_| {});
    let p = {
        let s2 = Sim::new(SimConfig::default()).expect("sim");
        open_dialog(
            &mut app,
            &c,
            s2,
            Action::Drain {
                node: "h100-06".into(),
                reason: "xid48 GPU5".into(),
                requeue: true,
            },
        )
    };
    sim.advance(0);
    let exec = nightshift::actions::executor::Executor::new(nightshift::sources::sim::Own(
        std::sync::Arc::new(std::sync::Mutex::new(sim)),
    ));
    let dir = tempfile::tempdir().expect("tempdir");
    let log = nightshift::actions::audit::AuditLog::new(dir.path().join("a.jsonl"));
    let who = nightshift::actions::guard::Who {
        scheduler_user: None,
        cluster: "sim-16".into(),
        source: "sim".into(),
        operator: None,
    };
    let policy = nightshift::actions::policy::Policy::default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let done = rt
        .block_on(nightshift::actions::guard::run(
            &p,
            "h100-06",
            &exec,
            &log,
            &who,
            Duration::from_secs(5),
            nightshift::actions::guard::Check {
                cluster: &c,
                data_age: Duration::ZERO,
                policy: &policy,
            },
        ))
        .expect("drained");
    let now = app.now();
    let _ = app.update(Msg::Action(Reply::Done(Box::new(done))), now);
    both(&app, "dialog_drain_done", &["h100-06"]);

    // A failure says so and what was kept.
    let (mut app, _, _) = sim_app(0, |_| {});
    let now = app.now();
    let _ = app.update(
        Msg::Action(Reply::Failed(
            "drain failed: slurmrestd at http://127.0.0.1:6820 did not answer in 10s; nothing sent"
                .into(),
        )),
        now,
    );
    both(&app, "dialog_failed", &["did not answer in 10s"]);
    // The message log keeps what the status line said.
    keys(&mut app, &[KeyCode::Esc, KeyCode::Char('m')]);
    for (w, h) in [(80, 24), (200, 50)] {
        let s = screen(&app, w, h);
        assert!(s.contains("answer in 10s"), "{s}");
        // The log's times are the source's (the sim's 02:47), with the wall
        // clock beside them where it differs: that one masked.
        assert!(
            s.contains("02:47:30 (wall "),
            "the source's clock first:\n{s}"
        );
        let mut c: Vec<char> = s.chars().collect();
        let wall: Vec<char> = "(wall ".chars().collect();
        for i in 0..c.len().saturating_sub(wall.len() + 8) {
            if c[i..i + wall.len()] == wall[..] {
                for (k, x) in "hh:mm:ss".chars().enumerate() {
                    c[i + wall.len() + k] = x;
                }
            }
        }
        let masked: String = c.into_iter().collect();
        insta::assert_snapshot!(format!("message_log_{w}x{h}"), masked);
    }
}

/// Every node's screen at 80×24: its first three jobs (or all it has) in
/// view, the engine's recommendation whole with its `O`, and `O` in the
/// hints (the jobs pane showed `1-0 of 1`, the recommendation was cut).
#[test]
fn every_node_screen_fits_80x24() {
    let mut a = app_after(200);
    let _ = a.update(Msg::Resize(80, 24), a.now());
    let names: Vec<String> = a.cluster().nodes.iter().map(|n| n.name.clone()).collect();
    for name in names {
        command(&mut a, &format!("node {name}"));
        analyse(&mut a);
        let s = screen(&a, 80, 24);
        let jobs = a.index().jobs_on(a.cluster(), &name).len();
        // The jobs pane is the last box: its range `1-k of n`.
        let range = s
            .lines()
            .rev()
            .find(|l| l.contains(" of ") && l.starts_with('└'))
            .unwrap_or_default();
        let shown: usize = range
            .split(" of ")
            .next()
            .and_then(|r| r.rsplit('-').next())
            .and_then(|k| k.trim().parse().ok())
            .unwrap_or(0);
        assert!(
            shown >= jobs.min(3),
            "{name}: {shown} of {jobs} jobs shown:\n{s}"
        );
        assert!(s.contains("<O> options"), "{name}: O in the hints:\n{s}");
        if s.contains(" options ") && s.contains('▶') {
            assert!(
                s.contains("(O: compare"),
                "{name}: the recommendation whole:\n{s}"
            );
        }
        keys(&mut a, &[KeyCode::Esc]);
    }
}

/// The job screen scrolls to its last line where it does not fit
/// (`pgdn`, `ctrl-d`; `j` `k` too when the job has no nodes to move in).
#[test]
fn the_job_screen_scrolls_to_its_last_line() {
    let mut a = app_after(200);
    let _ = a.update(Msg::Resize(80, 18), a.now());
    command(&mut a, "job 4702");
    analyse(&mut a);
    let before = screen(&a, 80, 18);
    assert!(
        !before.contains("(O: compare all 2)"),
        "it does not fit:\n{before}"
    );
    keys(&mut a, &[KeyCode::PageDown]);
    let after = screen(&a, 80, 18);
    assert!(
        after.contains("(O: compare all 2)"),
        "scrolled to the end:\n{after}"
    );
    assert!(
        after.contains("nodes (enter: node detail)"),
        "the nodes stay:\n{after}"
    );
    // Up again: the first line back.
    keys(&mut a, &[KeyCode::PageUp]);
    assert!(screen(&a, 80, 18).contains("name                        detr-sweep"));
    // A pending job: j scrolls.
    command(&mut a, "job 4722");
    analyse(&mut a);
    let _ = a.update(Msg::Resize(80, 16), a.now());
    let top = screen(&a, 80, 16);
    keys(&mut a, &[KeyCode::Char('j'); 6]);
    let down = screen(&a, 80, 16);
    assert_ne!(top, down, "j scrolled the pending job's text");
    assert!(
        down.contains("resuming a100-08 would let it start"),
        "{down}"
    );
    // Past the end it stays at the end, and one key up moves at once.
    let end = a.screen().scroll;
    keys(&mut a, &[KeyCode::Char('j')]);
    assert_eq!(a.screen().scroll, end);
    keys(&mut a, &[KeyCode::Char('k')]);
    assert_eq!(a.screen().scroll, end - 1);
}

/// `D` on h100-06's node screen and on its newest incident row (the Xid 63
/// its remap left) drain with one reason: the critical incident's (the Xid
/// 48 / DBE the options use too), not the latest Xid's.
#[test]
fn one_drain_reason_whichever_way_the_node_is_reached() {
    let drain_reason = |effects: &[Effect]| {
        sent(effects).into_iter().find_map(|r| match r {
            nightshift::actions::runner::Request::Preview {
                action: nightshift::actions::Action::Drain { reason, .. },
                ..
            } => Some(reason.clone()),
            _ => None,
        })
    };
    let mut a = app_after(200);
    command(&mut a, "node h100-06");
    analyse(&mut a);
    let fx = keys(&mut a, &[KeyCode::Char('D')]);
    let from_node = drain_reason(&fx).expect("a drain preview");
    keys(&mut a, &[KeyCode::Esc]);
    command(&mut a, "incidents");
    analyse(&mut a);
    // The newest incident: h100-06's Xid 63.
    let fx = keys(&mut a, &[KeyCode::Char('D')]);
    let from_row = drain_reason(&fx).expect("a drain preview");
    assert_eq!(from_node, from_row);
    assert!(!from_node.contains("xid63"), "{from_node}");
    let base = &a.analysis().expect("analysis").base;
    assert_eq!(
        Some(from_node),
        base.drain_reason("h100-06"),
        "the options' reason too"
    );
}

/// A replay's header at 80 columns keeps its state whole: playing at what
/// speed, where, of how long; paused; ended.
#[test]
fn the_replay_header_fits_80_columns() {
    use nightshift::sources::Playback;
    let mut a = app_as("replay", true, false, 0);
    let start = a.cluster().time;
    let p = Playback {
        paused: false,
        speed: 2.0,
        at: start + 330,
        start,
        end: start + 600,
        ended: false,
    };
    a.on_update(Update::Playback(p), a.now());
    let header = |a: &App| {
        screen(a, 80, 24)
            .lines()
            .next()
            .unwrap_or_default()
            .to_string()
    };
    let h = header(&a);
    assert!(h.contains("▶ 2× 02:53:00 / 02:57:30 (55 %)"), "{h}");
    a.on_update(Update::Playback(Playback { paused: true, ..p }), a.now());
    assert!(
        header(&a).contains("⏸ 02:53:00 / 02:57:30"),
        "{}",
        header(&a)
    );
    a.on_update(
        Update::Playback(Playback {
            ended: true,
            at: start + 600,
            ..p
        }),
        a.now(),
    );
    assert!(header(&a).contains("■ end 02:57:30"), "{}", header(&a));
    insta::assert_snapshot!("replay_header_80x24", screen(&a, 80, 24));
}

/// The GPU screen scrolls to its last line where it does not fit.
#[test]
fn the_gpu_screen_scrolls_to_its_last_line() {
    let mut a = app_after(200);
    let _ = a.update(Msg::Resize(80, 16), a.now());
    command(&mut a, "gpu h100-06/5");
    analyse(&mut a);
    let before = screen(&a, 80, 16);
    assert!(!before.contains(" hit "), "it does not fit:\n{before}");
    keys(&mut a, &[KeyCode::PageDown]);
    let after = screen(&a, 80, 16);
    assert!(
        after.contains(" hit "),
        "scrolled to its last line:\n{after}"
    );
    assert!(after.contains("SM occupancy"), "the chart stays:\n{after}");
}

/// The README's Words table and the help's words say the same.
#[test]
fn the_readme_words_are_the_helps() {
    let table = readme_table("### Words");
    assert_eq!(table.len(), nightshift::views::WORDS.len());
    for (row, (words, means)) in table.iter().zip(nightshift::views::WORDS) {
        let row = row.replace('`', "");
        assert!(row.contains(means), "{row} vs {means}");
        for w in words.split("  ") {
            let first = w.split_whitespace().next().unwrap_or_default();
            assert!(row.contains(first), "{row} vs {w}");
        }
    }
}

/// The `:kpis` panel draws figures computed when the panel opened or the
/// book changed, never while drawing: a draw with the book held elsewhere
/// (the analyst feeding it) neither waits for it nor computes.
#[test]
fn the_kpis_panel_draws_what_was_computed_without_the_book() {
    let mut a = app_after(200);
    let book = a.kpis().0.clone();
    book.lock().expect("book").observe(&a.cluster().clone());
    command(&mut a, "kpis 1h");
    assert!(a.kpis().1.is_some(), "computed when it opened");
    let held = book.lock().expect("book");
    let s = screen(&a, 100, 30);
    drop(held);
    assert!(s.contains("scheduler health"), "{s}");
    assert!(s.contains("mean SM occupancy"), "{s}");
}

/// A GPU whose exporter reports NVLink error counters shows them on its
/// screen, each by name; one whose exporter does not has no such row.
#[test]
fn the_gpu_screen_shows_nvlink_errors_where_reported() {
    let (mut a, _, _) = sim_app(0, |c| {
        if let Some(n) = c.nodes.iter_mut().find(|n| n.name == "h100-05") {
            std::sync::Arc::make_mut(n).gpus[2].nvlink = nightshift::model::NvLinkErrors {
                crc_flit: Some(4150).into(),
                crc_data: Some(7).into(),
                replay: Some(1050).into(),
                recovery: None.into(),
            };
            // The sim's exporter reports the counters; this one's does not.
            std::sync::Arc::make_mut(n).gpus[3].nvlink = Default::default();
        }
    });
    command(&mut a, "gpu h100-05/2");
    let s = screen(&a, 120, 40);
    assert!(
        s.contains("NVLink errors (all links)")
            && s.contains("CRC flit 4150, CRC data 7, replay 1050, recovery -"),
        "{s}"
    );
    command(&mut a, "gpu h100-05/3");
    let s = screen(&a, 120, 40);
    assert!(!s.contains("NVLink errors"), "{s}");
}

/// The leaf switch's flap on the sim night (+20 min): one incident of the
/// switch at the top of the list, the grid's domain line marks it failing,
/// `O` on it compares the domain's choices (cordon it, drain it all, wait)
/// with the cordon recommended, and enter opens the domain's nodes.
#[test]
fn the_leaf_flap_is_one_incident_with_its_domains_options() {
    let mut a = app_after(1230);
    analyse(&mut a);
    let s = screen(&a, 200, 50);
    assert!(s.contains("LEAF FAILING"), "{s}");
    assert!(s.contains("ib-leaf-2 FAILING 4 link(s) down"), "{s}");
    assert_eq!(
        s.matches("IB DOWN").count(),
        s.matches("+IB DOWN").count(),
        "no node's own link incident, only the switch's: {s}"
    );
    keys(&mut a, &[KeyCode::Char('O')]);
    analyse(&mut a);
    let s = screen(&a, 200, 50);
    assert!(
        s.contains("cordon ib-leaf-2's 4 nodes for new work, page the network owner"),
        "{s}"
    );
    assert!(s.contains("drain all 4 nodes of ib-leaf-2"), "{s}");
    assert!(s.contains("the fabric failed, not the GPUs"), "{s}");
    // Enter opens the domain (issue 39: it opened h100-05, its first
    // node): its four nodes and their state, nothing else.
    keys(&mut a, &[KeyCode::Esc, KeyCode::Enter]);
    analyse(&mut a);
    let s = screen(&a, 200, 50);
    for n in ["h100-05", "h100-06", "h100-07", "h100-08"] {
        assert!(s.contains(n), "{n}: {s}");
    }
    assert!(s.contains("domain:ib-leaf-2"), "the filter says why: {s}");
    assert!(!s.contains("h100-01 "), "{s}");
    // Its first node from there says why it is held.
    keys(&mut a, &[KeyCode::Enter]);
    analyse(&mut a);
    let s = screen(&a, 200, 50);
    assert!(
        s.contains("h100-05 up partition h100  domains ib-leaf-2"),
        "{s}"
    );
    assert!(
        s.contains("leaf ib-leaf-2 is failing under several nodes at once"),
        "{s}"
    );
    // The NVLink storm (+15 min) names its link on the GPU's screen.
    command(&mut a, "gpu a100-03/1");
    analyse(&mut a);
    let s = screen(&a, 200, 50);
    assert!(s.contains("NVLink errors by link"), "{s}");
    assert!(s.contains("L3: CRC flit "), "{s}");
    assert!(!s.contains("L2:"), "clean links are not listed: {s}");
}

/// The fleet overview (`--all`) at both sizes: each cluster's row (its
/// incidents by severity, GPUs out, queue, longest wait, its data's age —
/// one of them stale with its source's error), every open incident with
/// its cluster's name first; and a cluster opened from it, named in its
/// header. A drain's preview there names the cluster and asks for
/// CLUSTER/NODE.
#[test]
fn the_fleet_overview_shows_each_cluster_and_every_incident() {
    use nightshift::fleet::{Fleet, Member};
    let (east, _, _) = sim_app(0, |_| {});
    let (west, sim, c) = sim_app(2000, |_| {});
    let (down, _, _) = sim_app(600, |_| {});
    let mut f = Fleet::new(vec![
        Member {
            name: "east".into(),
            app: east,
        },
        Member {
            name: "west".into(),
            app: west,
        },
        Member {
            name: "lab-slurm".into(),
            app: down,
        },
    ]);
    let later = Instant::now() + Duration::from_secs(95);
    let dead = SourceError::Unreachable {
        what: "slurmrestd at http://127.0.0.1:6820".into(),
        detail: "connection refused".into(),
    };
    f.to_member(
        2,
        Msg::Source(Update::failed(Origin::Scheduler, dead)),
        later,
    );
    for m in 0..2 {
        f.to_member(m, Msg::Source(Update::ok(Origin::Scheduler)), later);
    }
    let fleet_screen =
        |f: &Fleet, w: u16, h: u16| drawn(w, h, |fr| nightshift::views::fleet::render(fr, f));
    let s = fleet_screen(&f, 120, 30);
    assert!(s.contains("3 clusters"), "{s}");
    assert!(s.contains("STALE"), "{s}");
    assert!(s.contains("connection refused"), "{s}");
    insta::assert_snapshot!("fleet_overview_120x30", s);
    insta::assert_snapshot!("fleet_overview_80x24", fleet_screen(&f, 80, 24));
    // Opened: its own console, its name in the header.
    f.key(KeyEvent::from(KeyCode::Char('2')), later);
    let s = fleet_screen(&f, 120, 30);
    assert!(
        s.lines().next().is_some_and(|l| l.contains("◆ west")),
        "{s}"
    );
    // A drain there: the preview names the cluster; CLUSTER/NODE is typed.
    let p = open_dialog(
        &mut f.members[1].app,
        &c,
        sim,
        nightshift::actions::Action::Drain {
            node: "h100-03".into(),
            reason: "xid".into(),
            requeue: true,
        },
    )
    .in_cluster("west");
    let now = f.members[1].app.now();
    let _ = f.members[1].app.update(
        Msg::Action(nightshift::actions::runner::Reply::Preview(Box::new(
            p.clone(),
        ))),
        now,
    );
    let s = fleet_screen(&f, 120, 30);
    assert!(s.contains("cluster: west"), "{s}");
    assert!(s.contains("type west/h100-03"), "{s}");
    assert!(p.accepts("west/h100-03") && !p.accepts("h100-03"));
}

/// A cluster whose name is 10 KB long keeps the header's clock and data
/// age on an 80-column line (issue 43): the name is cut, not the facts.
#[test]
fn a_huge_cluster_name_does_not_push_the_data_age_off_the_header() {
    let mut a = app_after(0);
    let mut c = (*a.cluster()).as_ref().clone();
    c.name = "n".repeat(10_000);
    let t0 = Instant::now();
    a.on_update(Update::Snapshot(Arc::new(c)), t0);
    a.on_update(Update::ok(Origin::Scheduler), t0);
    let s = screen(&a, 80, 24);
    let header = s.lines().next().expect("header");
    assert!(header.contains("Z │"), "{header}");
    assert!(header.contains('…'), "the name is cut: {header}");
}
