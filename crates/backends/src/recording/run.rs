//! The console's recording (`--record`) and the state of a recording at a
//! time (`--replay FILE --at`).

use super::RecordingError;
use super::{Recorder, Recording, parse_at};
use crate::actions::audit::AuditLog;
use crate::engine::memory::{Memory, Moment};
use crate::model::Cluster;
use crate::sources::Update;
use std::path::Path;
use std::sync::Arc;
use tokio::sync::mpsc;

/// `--replay FILE [--at TIME]`: the recorded state the printing commands
/// answer for (the end of the recording by default).
pub fn replayed(path: &Path, at: Option<&str>) -> Result<Cluster, RecordingError> {
    Ok(replayed_moment(path, at, &crate::engine::SiteParams::default())?.cluster)
}

/// The recorded state at `--at` with what the analysis remembers of the
/// snapshots before it, fed in order from the recording's start as the
/// console's analyst is fed while it plays: `--replay --at` answers what
/// the console showed at that moment.
pub fn replayed_moment(
    path: &Path,
    at: Option<&str>,
    site: &crate::engine::SiteParams,
) -> Result<Moment, RecordingError> {
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
    // From the keyframe before `t` and what the analysis remembered then
    // (version 2), not from the start.
    let key = Memory::site_key(site);
    if let (mut cur, Some(recall)) = rec.recalled_at(t.min(end), Some(&key))? {
        let mut memory = recall.memory;
        memory.observe(&cur.current, site);
        cur.step_to(t, |c| memory.observe(c, site))?;
        let mut cluster = cur.current;
        cluster.history.extend(memory.fault_log().faults());
        return Ok(Moment { cluster, memory });
    }
    // The night's faults up to then, not only the events the source still
    // held at `t`: the nodes that keep failing are counted on all of them.
    let mut memory = Memory::default();
    let mut state = None;
    for c in rec.states() {
        let c = c?;
        if c.time > t {
            break;
        }
        memory.observe(&c, site);
        state = Some(c);
    }
    let mut cluster = match state {
        Some(c) => Arc::unwrap_or_clone(c),
        None => rec.state_at(t)?,
    };
    cluster.history.extend(memory.fault_log().faults());
    Ok(Moment { cluster, memory })
}

/// The console's `--record FILE`: everything the source sends passes on
/// unchanged; its snapshots, and the audit records written meanwhile, go
/// to the recording. A recording that fails stops recording, never the
/// console. The console finishes the file through the returned [`Tap`] on
/// every way out (q, :q, ctrl-c, a signal, an error).
pub fn tap(
    mut rx: mpsc::Receiver<Update>,
    file: &Path,
    (source, site): (&str, &crate::engine::SiteParams),
    log: AuditLog,
) -> Result<(mpsc::Receiver<Update>, Tap), RecordingError> {
    let mut r = Recorder::create(file, source)?.with_site(site.clone());
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
        .map_err(|e| RecordingError::Thread(Arc::new(e)))?;
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
