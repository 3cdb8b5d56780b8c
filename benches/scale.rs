//! Scale benchmark (issue 14): at 1,000 and 10,000 nodes (8 GPUs each,
//! 10 jobs per node) on the simulated cluster, seed 7:
//! - memory: the process's resident set (VmRSS) after building the
//!   snapshot and after analysing it, and its peak (VmHWM);
//! - `get … -o json` against the table form of the same command;
//! - frame rendering: every list view at 200×50 and 80×24 into ratatui's
//!   TestBackend, median of 30 frames, and 10k against 1k.
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
    let mut app = App::new("sim", false, false, Duration::from_secs(10));
    let now = Instant::now();
    app.on_update(Update::Snapshot(c.clone()), now);
    app.on_update(Update::ok(Origin::Scheduler), now);
    let mut render = Vec::new();
    println!("\n| view | 200×50 | 80×24 |");
    println!("|---|---|---|");
    for view in ["overview", "nodes", "gpus", "jobs", "queue", "incidents"] {
        if view != "overview" {
            app.run_command(view);
        }
        let a = Analysis::with_base(base.clone(), &app.cluster, &app.focus(), &site);
        app.update(Msg::Analysis(Arc::new(a)), now);
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
    Scale { nodes, render }
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
