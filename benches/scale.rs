//! Scale benchmark (issue 14): at 1,000 and 10,000 nodes (8 GPUs each,
//! 10 jobs per node) on the simulated cluster, seed 7:
//! - memory: the process's resident set (VmRSS) after building the
//!   snapshot and after analysing it, and its peak (VmHWM);
//! - `get … -o json` against the table form of the same command;
//! - frame rendering: every list view at 200×50 and 80×24 into ratatui's
//!   TestBackend, median of 30 frames, and 10k against 1k;
//! - bytes to the terminal: the console's overview driven by the sim for
//!   60 simulated seconds through crossterm into a byte counter, against
//!   the minimal cell diff of the same frames (`terminal_bytes`).
//!
//! Prints figures and the targets they meet or miss. Run:
//! `cargo bench --bench scale` (or `scripts/bench.sh`).

use nightshift::app::{App, Msg};
use nightshift::cli::{Format, GetWhat};
use nightshift::engine::SiteParams;
use nightshift::engine::analysis::{Analysis, Base};
use nightshift::engine::xid::XidCatalog;
use nightshift::sources::sim::{Sim, SimConfig};
use nightshift::sources::{Origin, Update};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A field of /proc/self/status, in MB.
fn status_mb(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    median(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                black_box(f());
                t.elapsed()
            })
            .collect(),
    )
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

struct Scale {
    nodes: usize,
    render: Vec<(String, Duration)>,
}

fn run(nodes: usize) -> Scale {
    let jobs = nodes * 10;
    println!("\n## {nodes} nodes, {} GPUs, {jobs} jobs", nodes * 8);
    let rss0 = status_mb("VmRSS:");
    let t = Instant::now();
    let mut sim = Sim::new(SimConfig {
        seed: 7,
        nodes,
        jobs: Some(jobs),
    })
    .expect("sim");
    sim.advance(60);
    let c = Arc::new(sim.snapshot());
    println!(
        "snapshot: built in {} ; resident {:.0} MB (+{:.0} MB for the sim and one snapshot)",
        ms(t.elapsed()),
        status_mb("VmRSS:"),
        status_mb("VmRSS:") - rss0
    );
    let site = SiteParams::default();
    let cat = XidCatalog::default();
    let before = status_mb("VmRSS:");
    let t = Instant::now();
    let base = Arc::new(Base::compute(&c, None, &site, &cat));
    println!(
        "analysis (plan, verdicts, incidents): {} ; +{:.0} MB resident",
        ms(t.elapsed()),
        status_mb("VmRSS:") - before
    );

    println!("\n| command | table | json | json/table | target ≤ 2× |");
    println!("|---|---|---|---|---|");
    for (name, what) in [
        ("get nodes", GetWhat::Nodes),
        ("get gpus", GetWhat::Gpus),
        ("get jobs", GetWhat::Jobs),
        ("get incidents", GetWhat::Incidents),
    ] {
        let table = time(3, || {
            nightshift::output::render(&c, &base, what, Format::Table)
        });
        let json = time(3, || {
            nightshift::output::render(&c, &base, what, Format::Json)
        });
        let ratio = json.as_secs_f64() / table.as_secs_f64().max(1e-9);
        println!(
            "| {name} | {} | {} | {ratio:.2} | {} |",
            ms(table),
            ms(json),
            if ratio <= 2.0 { "met" } else { "MISSED" }
        );
    }

    // The console on this snapshot, analysed as the analyst task does.
    let mut app = App::new("sim", false, false, Duration::from_secs(10))
        .measured_by(nightshift::views::extent);
    let now = Instant::now();
    let _ = app.update(Msg::Source(Update::Snapshot(c.clone())), now);
    let _ = app.update(Msg::Source(Update::ok(Origin::Scheduler)), now);
    let mut render = Vec::new();
    println!("\n| view | 200×50 | 80×24 |");
    println!("|---|---|---|");
    for view in ["overview", "nodes", "gpus", "jobs", "queue", "incidents"] {
        if view != "overview" {
            let _ = app.run_command(view);
        }
        let a = Analysis::with_base(base.clone(), app.cluster(), &app.focus(), &site);
        let _ = app.update(Msg::Analysis(Arc::new(a)), now);
        let mut row = Vec::new();
        for (w, h) in [(200u16, 50u16), (80, 24)] {
            let mut term = Terminal::new(TestBackend::new(w, h)).expect("terminal");
            let d = time(30, || {
                term.draw(|f| nightshift::views::render(f, &app))
                    .map(|_| ())
                    .expect("draw")
            });
            render.push((format!("{view} {w}×{h}"), d));
            row.push(ms(d));
        }
        println!("| {view} | {} | {} |", row[0], row[1]);
    }
    println!(
        "\nresident after the console's state: {:.0} MB; peak {:.0} MB",
        status_mb("VmRSS:"),
        status_mb("VmHWM:")
    );
    terminal_bytes(&mut sim, &site, &cat);
    Scale { nodes, render }
}

/// Counts what crossterm writes.
#[derive(Default, Clone)]
struct Counter(std::rc::Rc<std::cell::Cell<usize>>);

impl std::io::Write for Counter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.set(self.0.get() + b.len());
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The least a terminal must be sent to turn frame `a` into frame `b`:
/// each changed cell's text, a cursor move (`ESC [ row ; col H`) before
/// each run of changed cells that does not follow the last one, and a
/// colour change (`ESC [ … m`, counted as 10 bytes: a foreground and a
/// background) wherever a changed cell's style differs from the one
/// written before it.
fn minimal_diff(a: &ratatui::buffer::Buffer, b: &ratatui::buffer::Buffer) -> usize {
    let mut bytes = 0;
    let mut next: Option<(u16, u16)> = None;
    let mut style = None;
    for (x, y, cell) in a.diff(b) {
        bytes += cell.symbol().len();
        if next != Some((x, y)) {
            bytes += format!("\x1b[{};{}H", y + 1, x + 1).len();
        }
        let s = (cell.fg, cell.bg, cell.modifier);
        if style != Some(s) {
            bytes += 10;
            style = Some(s);
        }
        next = Some((x + 1, y));
    }
    bytes
}

/// The overview at 200×50, one frame per simulated second as the console
/// draws it (a snapshot a second, an analysis when the analyst's budget
/// allows), for 60 seconds: bytes sent against the minimal cell diff.
fn terminal_bytes(sim: &mut Sim, site: &SiteParams, cat: &XidCatalog) {
    use ratatui::backend::CrosstermBackend;
    use ratatui::layout::Rect;
    use ratatui::{TerminalOptions, Viewport};
    let (w, h) = (200u16, 50u16);
    let counter = Counter::default();
    let mut term = Terminal::with_options(
        CrosstermBackend::new(counter.clone()),
        TerminalOptions {
            viewport: Viewport::Fixed(Rect::new(0, 0, w, h)),
        },
    )
    .expect("terminal");
    let mut app = App::new("sim", false, false, Duration::from_secs(10))
        .measured_by(nightshift::views::extent);
    let _ = app.update(Msg::Resize(w, h), Instant::now());
    let mut prev = ratatui::buffer::Buffer::empty(Rect::new(0, 0, w, h));
    let (mut sent, mut minimal, mut first) = (0usize, 0usize, 0usize);
    let secs = 60;
    let mut next_analysis = Instant::now();
    for s in 0..=secs {
        sim.step();
        let c = Arc::new(sim.snapshot());
        let now = Instant::now();
        let _ = app.update(Msg::Source(Update::Snapshot(c.clone())), now);
        let _ = app.update(Msg::Source(Update::ok(Origin::Scheduler)), now);
        if now >= next_analysis {
            let t = Instant::now();
            let a = Analysis::compute(&c, None, &app.focus(), site, cat);
            next_analysis = nightshift::analyst::next_analysis(t, t.elapsed());
            let _ = app.update(Msg::Analysis(Arc::new(a)), now);
        }
        let before = counter.0.get();
        let frame = term
            .draw(|f| nightshift::views::render(f, &app))
            .expect("draw");
        let cur = frame.buffer.clone();
        let wrote = counter.0.get() - before;
        if s == 0 {
            // The first frame paints the whole screen: not steady state.
            first = wrote;
        } else {
            sent += wrote;
            minimal += minimal_diff(&prev, &cur);
        }
        prev = cur;
    }
    let ratio = sent as f64 / minimal.max(1) as f64;
    println!(
        "\nterminal bytes, overview {w}×{h}, {secs} s at one frame a second: first frame {first} B; then {:.0} B/s sent, {:.0} B/s minimal cell diff: {ratio:.2}× (target ≤ 2×: {})",
        sent as f64 / f64::from(secs),
        minimal as f64 / f64::from(secs),
        if ratio <= 2.0 { "met" } else { "MISSED" }
    );
}

fn main() {
    let small = run(1_000);
    let big = run(10_000);
    println!(
        "\n## frame time, {} nodes against {} (target: median ≤ 2 ms, within 1.5×)",
        big.nodes, small.nodes
    );
    println!("| view | 1k | 10k | ratio | verdict |");
    println!("|---|---|---|---|---|");
    for ((name, a), (_, b)) in small.render.iter().zip(&big.render) {
        let ratio = b.as_secs_f64() / a.as_secs_f64().max(1e-9);
        let ok = b.as_secs_f64() <= 0.002 && ratio <= 1.5;
        println!(
            "| {name} | {} | {} | {ratio:.2} | {} |",
            ms(*a),
            ms(*b),
            if ok { "met" } else { "MISSED" }
        );
    }
}
