//! Recording from the command line (`nightshift record`) and the health
//! numbers of `get kpis`: what reads the settings to start a source.

use crate::actions::audit::AuditLog;
use crate::config::Settings;
use crate::error::CommandError;
use crate::recording::{Recorder, Recording, parse_at};
use crate::sources::Update;
use std::path::Path;
use std::sync::Arc;

/// `nightshift record FILE`: the sim for `--sim-seconds` of its own time,
/// at full speed and without a terminal; a live source until ctrl-c or
/// `--for`.
pub fn record(settings: &Settings, file: &Path, duration: Option<u64>) -> Result<(), CommandError> {
    let log = settings.audit();
    match settings.source.sim() {
        Some(sim) => {
            if settings.sim_seconds == 0 {
                return Err(CommandError::SimLength);
            }
            let mut s = crate::sources::sim::Sim::new(sim)?;
            let mut r = Recorder::create(file, "sim")?.with_site(settings.site.clone());
            r.follow_audit(log);
            let began = std::time::Instant::now();
            for _ in 0..=settings.sim_seconds {
                r.snapshot(&Arc::new(s.snapshot()))?;
                s.advance(1);
            }
            let (snaps, raw) = (r.snapshots, r.raw_bytes);
            r.finish()?;
            say_done(file, snaps, raw, began.elapsed());
            Ok(())
        }
        None => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .map_err(CommandError::Runtime)?;
            rt.block_on(record_live(settings, file, duration, log))
        }
    }
}

fn say_done(file: &Path, snapshots: u64, raw: u64, took: std::time::Duration) {
    let size = std::fs::metadata(file).map_or(0, |m| m.len());
    crate::outln!(
        "recorded {snapshots} snapshots to {}: {} ({} before compression) in {:.1} s",
        file.display(),
        crate::text::bytes(size),
        crate::text::bytes(raw),
        took.as_secs_f64()
    );
}

async fn record_live(
    settings: &Settings,
    file: &Path,
    duration: Option<u64>,
    log: AuditLog,
) -> Result<(), CommandError> {
    let (mut rx, _control) = crate::sources::spawn(
        settings.source.clone(),
        &settings.endpoints,
        crate::sources::assemble::Assembly::new(settings.topology.clone()),
        crate::sources::nothing_open(),
    )?;
    let mut r = Recorder::create(file, settings.source.name())?.with_site(settings.site.clone());
    r.follow_audit(log);
    let began = std::time::Instant::now();
    let until = duration.map(|d| tokio::time::Instant::now() + std::time::Duration::from_secs(d));
    let stop = async {
        match until {
            Some(t) => tokio::time::sleep_until(t).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(stop);
    loop {
        tokio::select! {
            u = rx.recv() => match u {
                Some(Update::Snapshot(c)) => r.snapshot(&c)?,
                Some(Update::Status { origin, error: Some(e) }) => {
                    crate::text::warn(&format!("{}: {e}", origin.name()));
                }
                Some(_) => {}
                None => break,
            },
            _ = tokio::signal::ctrl_c() => break,
            _ = &mut stop => break,
        }
    }
    let (snaps, raw) = (r.snapshots, r.raw_bytes);
    r.finish()?;
    say_done(file, snaps, raw, began.elapsed());
    Ok(())
}

/// The scheduler's health numbers for `get kpis`: over a recording (up to
/// `--at`), over `--sim-seconds` of the sim (observed every second), or —
/// a live source — over its one snapshot (rates need history).
pub fn kpis(settings: &Settings, window_s: i64) -> Result<crate::engine::kpis::Kpis, CommandError> {
    use crate::engine::kpis::KpiBook;
    let mut book = KpiBook::new(window_s);
    // The last snapshot seen: its hung gangs' unsaved work is counted as
    // the report and `:kpis` count it.
    let mut last: Option<std::sync::Arc<crate::model::Cluster>> = None;
    // The stalls' history, as the console's analyst keeps it.
    let mut memory = crate::engine::memory::Memory::default();
    if let Some(path) = &settings.replay {
        let rec = Recording::open(path)?;
        for w in rec.damage() {
            crate::text::warn(&w);
        }
        let (start, end) = rec.span();
        let until = match settings.at.as_deref() {
            Some(s) => parse_at(s, start)?,
            None => end,
        };
        // From the keyframe before `until` and what was recorded with it
        // (version 2), else from the start.
        let key = crate::engine::memory::Memory::site_key(&settings.site);
        let recalled = match until >= start {
            true => match rec.recalled_at(until.min(end), Some(&key))? {
                (cur, Some(r)) => Some((cur, r)),
                (_, None) => None,
            },
            false => None,
        };
        let site = &settings.site;
        match recalled {
            Some((mut cur, r)) => {
                (book, memory) = (r.book.keeping(window_s), r.memory);
                book.observe(&cur.current);
                memory.observe(&cur.current, site);
                cur.step_to(until, |c| {
                    book.observe(c);
                    memory.observe(c, site);
                })?;
                last = Some(std::sync::Arc::new(cur.current));
            }
            None => {
                for c in rec.states() {
                    let c = c?;
                    if c.time > until {
                        break;
                    }
                    book.observe(&c);
                    memory.observe(&c, site);
                    last = Some(c);
                }
            }
        }
    } else if let Some(sim) = settings.source.sim() {
        let mut s = crate::sources::sim::Sim::new(sim)?;
        let mut see = |c: &crate::model::Cluster| {
            book.observe(c);
            memory.observe(c, &settings.site);
        };
        see(&s.snapshot());
        for _ in 0..settings.sim_seconds {
            s.advance(1);
            see(&s.snapshot());
        }
        last = Some(std::sync::Arc::new(s.snapshot()));
    } else {
        return Err(CommandError::KpisNeedHistory);
    }
    let mut k = book.figures(window_s).ok_or(CommandError::NoSnapshot)?;
    if let Some(c) = last {
        let base = memory.base(&c, &settings.site, &settings.xid_catalog);
        k.lost_gpu_hours_hung = Some(crate::engine::kpis::hung_lost(&base, &c));
    }
    Ok(k)
}
