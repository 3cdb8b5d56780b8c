//! Recording and replaying from the command line and the console.

use super::{Recorder, Recording, parse_at};
use crate::actions::audit::AuditLog;
use crate::config::Settings;
use crate::model::Cluster;
use crate::sources::{SourceConfig, Update};
use std::path::Path;
use std::sync::Arc;
use tokio::sync::mpsc;

/// `--replay FILE [--at TIME]`: the recorded state the printing commands
/// answer for (the end of the recording by default).
pub fn replayed(path: &Path, at: Option<&str>) -> Result<Cluster, String> {
    let rec = Recording::open(path)?;
    for w in rec.damage() {
        crate::text::warn(&w);
    }
    let (start, end) = rec.span();
    let t = match at {
        Some(s) => parse_at(s, start)?,
        None => end,
    };
    if t > end {
        // Said, never moved in silence.
        crate::text::warn(&format!(
            "{} is after the recording ends ({}): the state at its end",
            crate::text::datetime(t),
            crate::text::datetime(end)
        ));
    }
    rec.state_at(t)
}

/// `nightshift record FILE`: the sim for `--sim-seconds` of its own time,
/// at full speed and without a terminal; a live source until ctrl-c or
/// `--for`.
pub fn record(settings: &Settings, file: &Path, duration: Option<u64>) -> Result<(), String> {
    let log = AuditLog::new(settings.audit_log.clone());
    match &settings.source {
        SourceConfig::Sim { sim, .. } => {
            if settings.sim_seconds == 0 {
                return Err(
                    "recording the sim needs its length: --sim-seconds S (e.g. 28800 for a night)"
                        .into(),
                );
            }
            let mut s = crate::sources::sim::Sim::new(*sim)?;
            let mut r = Recorder::create(file, "sim")?;
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
        _ => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start the runtime: {e}"))?;
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
) -> Result<(), String> {
    let (mut rx, _control) = crate::sources::spawn(settings.source.clone(), &settings.endpoints)?;
    let mut r = Recorder::create(file, settings.source.name())?;
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

/// The console's `--record FILE`: everything the source sends passes on
/// unchanged; its snapshots, and the audit records written meanwhile, go
/// to the recording. A recording that fails stops recording, never the
/// console. The console finishes the file through the returned [`Tap`] on
/// every way out (q, :q, ctrl-c, a signal, an error).
pub fn tap(
    mut rx: mpsc::Receiver<Update>,
    file: &Path,
    source: &str,
    log: AuditLog,
) -> Result<(mpsc::Receiver<Update>, Tap), String> {
    let mut r = Recorder::create(file, source)?;
    r.follow_audit(log);
    let (tx, out) = mpsc::channel(16);
    let (stop_tx, mut stop) = tokio::sync::oneshot::channel::<()>();
    // The writer (compression, the audit's records, fsync) runs on a thread
    // of its own: the updates pass on without waiting for the disk.
    let (snaps, snaps_rx) = std::sync::mpsc::sync_channel::<Arc<Cluster>>(WRITER_QUEUE);
    let notices = tx.clone();
    let writer = std::thread::Builder::new()
        .name("recording".into())
        .spawn(move || write_all(r, &snaps_rx, &notices))
        .map_err(|e| format!("cannot start the recording's writer: {e}"))?;
    let done = tokio::spawn(async move {
        let mut skipped = 0u64;
        loop {
            let u = tokio::select! {
                u = rx.recv() => u,
                _ = &mut stop => None,
            };
            let Some(u) = u else { break };
            if let Update::Snapshot(c) = &u
                && let Err(std::sync::mpsc::TrySendError::Full(_)) = snaps.try_send(c.clone())
            {
                // The disk is slower than the source: this snapshot is not
                // recorded (the next one is, whole); said once, then counted.
                skipped += 1;
                if skipped == 1 {
                    let _ = tx
                        .send(Update::Notice(
                            "recording: the disk is slower than the source; snapshots are skipped"
                                .into(),
                        ))
                        .await;
                }
            }
            if tx.send(u).await.is_err() {
                break;
            }
        }
        if skipped > 0 {
            tracing::warn!(
                "recording: {skipped} snapshot(s) skipped, the disk was slower than the source"
            );
        }
        drop(snaps);
        // The writer finishes the file once the queue is empty.
        let _ = tokio::task::spawn_blocking(move || writer.join()).await;
    });
    Ok((
        out,
        Tap {
            stop: stop_tx,
            done,
        },
    ))
}

/// Snapshots the writer may hold before the console skips some.
const WRITER_QUEUE: usize = 64;

/// The writer thread: every snapshot queued, then the file finished. A
/// failure stops recording (said on screen and in the message log), never
/// the console.
fn write_all(
    mut r: Recorder,
    snaps: &std::sync::mpsc::Receiver<Arc<Cluster>>,
    notices: &mpsc::Sender<Update>,
) {
    for c in snaps {
        if let Err(e) = r.snapshot(&c) {
            let _ = notices.blocking_send(Update::Notice(format!("RECORDING STOPPED: {e}")));
            return;
        }
    }
    let path = r.path.clone();
    if let Err(e) = r.finish() {
        tracing::error!("{}: {e}", path.display());
    }
}

/// The console's recording, to be finished when the console ends.
pub struct Tap {
    stop: tokio::sync::oneshot::Sender<()>,
    done: tokio::task::JoinHandle<()>,
}

impl Tap {
    /// Stops recording and finishes the file (its last block and the zstd
    /// frame's end), waiting at most a few seconds.
    pub async fn finish(self) {
        let _ = self.stop.send(());
        if tokio::time::timeout(std::time::Duration::from_secs(5), self.done)
            .await
            .is_err()
        {
            tracing::error!("the recording could not be finished within 5 s");
        }
    }
}

/// The scheduler's health numbers for `get kpis`: over a recording (up to
/// `--at`), over `--sim-seconds` of the sim (observed every second), or —
/// a live source — over its one snapshot (rates need history).
pub fn kpis(settings: &Settings, window_s: i64) -> Result<crate::engine::kpis::Kpis, String> {
    use crate::engine::kpis::KpiBook;
    let mut book = KpiBook::new(window_s);
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
        for c in rec.states() {
            let c = c?;
            if c.time > until {
                break;
            }
            book.observe(&c);
        }
    } else if let SourceConfig::Sim { sim, .. } = &settings.source {
        let mut s = crate::sources::sim::Sim::new(*sim)?;
        book.observe(&s.snapshot());
        for _ in 0..settings.sim_seconds {
            s.advance(1);
            book.observe(&s.snapshot());
        }
    } else {
        return Err(
            "kpis need history: record the source (nightshift record FILE) and use --replay FILE, or open the console's :kpis"
                .into(),
        );
    }
    book.figures(window_s)
        .ok_or_else(|| "no snapshot to compute figures from".to_string())
}
