//! The console's recording (`--record`) and the state of a recording at a
//! time (`--replay FILE --at`).

use super::RecordingError;
use super::{Recorder, Recording, parse_at};
use crate::actions::audit::AuditLog;
use crate::engine::memory::{Memory, Moment};
use crate::model::Cluster;
use crate::sources::assemble::Sink;
use std::path::Path;
use std::sync::{Arc, Mutex};

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

/// The console's `--record FILE`: each snapshot as the analysis gets it,
/// and the audit records written meanwhile, go to the recording. The sink
/// is handed to the source (`sources::spawn`), which offers it every
/// snapshot it finishes: no task of its own passes the updates on. A
/// recording that fails stops recording, never the console. The console
/// finishes the file through the returned [`Tap`] on every way out (q,
/// :q, ctrl-c, a signal, an error).
pub fn tap(
    file: &Path,
    (source, site): (&str, &crate::engine::SiteParams),
    log: AuditLog,
) -> Result<(Box<dyn Sink>, Tap), RecordingError> {
    let mut r = Recorder::create(file, source)?.with_site(site.clone());
    r.follow_audit(log);
    // The writer (compression, the audit's records, fsync) runs on a thread
    // of its own: the snapshots pass on without waiting for the disk.
    let (snaps, snaps_rx) = std::sync::mpsc::sync_channel::<Arc<Cluster>>(WRITER_QUEUE);
    let failed: Failed = Arc::default();
    let f = failed.clone();
    let writer = std::thread::Builder::new()
        .name("recording".into())
        .spawn(move || write_all(r, &snaps_rx, &f))
        .map_err(|e| RecordingError::Thread(Arc::new(e)))?;
    let queue = Arc::new(Mutex::new(Some(snaps)));
    let sink = Writing {
        queue: queue.clone(),
        failed,
        skipped: 0,
        told: false,
    };
    Ok((Box::new(sink), Tap { queue, writer }))
}

/// Why the writer stopped, when it failed.
type Failed = Arc<Mutex<Option<String>>>;

/// The writer's queue, while the console records (the tap takes it away
/// to finish the file).
type Queue = Arc<Mutex<Option<std::sync::mpsc::SyncSender<Arc<Cluster>>>>>;

/// The source's side of the recording.
struct Writing {
    queue: Queue,
    failed: Failed,
    /// Snapshots the disk was too slow for.
    skipped: u64,
    /// The writer's failure has been said.
    told: bool,
}

impl Sink for Writing {
    fn offer(&mut self, c: &Arc<Cluster>) -> Option<String> {
        use std::sync::mpsc::TrySendError;
        let queue = self.queue.lock().ok()?;
        match queue.as_ref()?.try_send(c.clone()) {
            Ok(()) => None,
            Err(TrySendError::Full(_)) => {
                // The disk is slower than the source: this snapshot is not
                // recorded (the next one is, whole); said once, then counted.
                self.skipped += 1;
                (self.skipped == 1).then(|| {
                    "recording: the disk is slower than the source; snapshots are skipped".into()
                })
            }
            Err(TrySendError::Disconnected(_)) if !self.told => {
                self.told = true;
                let why = self.failed.lock().ok()?.clone()?;
                Some(format!("RECORDING STOPPED: {why}"))
            }
            Err(TrySendError::Disconnected(_)) => None,
        }
    }
}

impl Drop for Writing {
    fn drop(&mut self) {
        if self.skipped > 0 {
            tracing::warn!(
                "recording: {} snapshot(s) skipped, the disk was slower than the source",
                self.skipped
            );
        }
    }
}

/// Snapshots the writer may hold before the console skips some.
const WRITER_QUEUE: usize = 64;

/// The writer thread: every snapshot queued, then the file finished. A
/// failure stops recording (said on screen, with the next snapshot, and
/// in the message log), never the console.
fn write_all(mut r: Recorder, snaps: &std::sync::mpsc::Receiver<Arc<Cluster>>, failed: &Failed) {
    for c in snaps {
        if let Err(e) = r.snapshot(&c) {
            tracing::error!("recording stopped: {e}");
            if let Ok(mut f) = failed.lock() {
                *f = Some(e.to_string());
            }
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
    queue: Queue,
    writer: std::thread::JoinHandle<()>,
}

impl Tap {
    /// Stops recording and finishes the file (its last block and the zstd
    /// frame's end), waiting at most a few seconds.
    pub async fn finish(self) {
        // No snapshot is queued after this: the writer empties the queue
        // and finishes the file.
        if let Ok(mut q) = self.queue.lock() {
            q.take();
        }
        let writer = self.writer;
        let joined = tokio::task::spawn_blocking(move || writer.join());
        if tokio::time::timeout(std::time::Duration::from_secs(5), joined)
            .await
            .is_err()
        {
            tracing::error!("the recording could not be finished within 5 s");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sink(queue: std::sync::mpsc::SyncSender<Arc<Cluster>>, failed: Failed) -> Writing {
        Writing {
            queue: Arc::new(Mutex::new(Some(queue))),
            failed,
            skipped: 0,
            told: false,
        }
    }

    /// A disk slower than the source skips snapshots and says so once; a
    /// writer that failed is said once, with why; a finished recording
    /// takes nothing more and says nothing.
    #[test]
    fn the_recording_sink_never_waits_and_says_each_trouble_once() {
        let c = Arc::new(Cluster::default());
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let mut slow = sink(tx, Failed::default());
        assert_eq!(slow.offer(&c), None, "queued");
        let told = slow.offer(&c);
        assert!(told.is_some_and(|t| t.contains("snapshots are skipped")));
        assert_eq!(slow.offer(&c), None, "counted, not said again");
        assert_eq!(slow.skipped, 2);
        assert_eq!(rx.try_iter().count(), 1);

        let (tx, rx) = std::sync::mpsc::sync_channel(4);
        drop(rx);
        let failed: Failed = Arc::new(Mutex::new(Some("No space left on device".into())));
        let mut dead = sink(tx, failed);
        assert_eq!(
            dead.offer(&c),
            Some("RECORDING STOPPED: No space left on device".into())
        );
        assert_eq!(dead.offer(&c), None, "said once");

        let (tx, _rx) = std::sync::mpsc::sync_channel(4);
        let mut done = sink(tx, Failed::default());
        if let Ok(mut q) = done.queue.lock() {
            q.take();
        }
        assert_eq!(done.offer(&c), None);
    }
}
