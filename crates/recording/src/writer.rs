//! Writing a recording: a header, keyframes, deltas, audit records.

use super::RecordingError;
use super::{
    Entry, FORMAT, Header, IndexLine, KEY_EVERY_BYTES, KEY_EVERY_S, Recall, VERSION, WINDOW_LOG,
    delta,
};
use crate::actions::audit::AuditLog;
use crate::engine::SiteParams;
use crate::engine::kpis::KpiBook;
use crate::engine::memory::Memory;
use crate::model::audit::Record;
use crate::model::{Cluster, Timestamp};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Flushed (a zstd block, then the file synced) this often at most.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

type Encoder = zstd::stream::write::Encoder<'static, BufWriter<File>>;

pub struct Recorder {
    /// The zstd frame being written; a keyframe begins a new one, so that
    /// a reader can start decompressing there.
    enc: Option<Encoder>,
    /// The index beside the recording, when it could be made.
    index: Option<BufWriter<File>>,
    /// Lines written (the header is line 1).
    lines: u64,
    /// Bytes of JSON written since the last keyframe.
    since_key: u64,
    /// What the analysis remembers and the health numbers, as of the last
    /// snapshot: written before each keyframe.
    memory: Memory,
    book: KpiBook,
    site: SiteParams,
    /// `KEY_EVERY_BYTES`, or less in the tests.
    key_every_bytes: u64,
    pub path: PathBuf,
    source: String,
    prev: Option<Arc<Cluster>>,
    last_key: Timestamp,
    last_flush: Instant,
    dirty: bool,
    /// Audit records already written: (id, phase).
    seen: std::collections::HashSet<(String, crate::model::Phase)>,
    /// The audit log followed, and its length when last read.
    audit_log: Option<(AuditLog, u64)>,
    /// Uncompressed bytes written, for the size figures.
    pub raw_bytes: u64,
    pub snapshots: u64,
}

impl Recorder {
    /// A new recording at `path`; an existing file is never overwritten.
    pub fn create(path: &Path, source: &str) -> Result<Recorder, RecordingError> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| RecordingError::Create {
                path: path.to_path_buf(),
                source: Arc::new(e),
            })?;
        let enc = encoder(BufWriter::new(file))?;
        // The index is an aid: a recording without one is scanned. One
        // left beside an earlier file of this name is another's.
        let _ = std::fs::remove_file(super::index_path(path));
        let index = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(super::index_path(path))
            .map(BufWriter::new)
            .map_err(|e| tracing::warn!("{}: no index beside it: {e}", path.display()))
            .ok();
        Ok(Recorder {
            enc: Some(enc),
            index,
            lines: 0,
            since_key: 0,
            memory: Memory::default(),
            book: KpiBook::new(i64::MAX / 4),
            site: SiteParams::default(),
            key_every_bytes: KEY_EVERY_BYTES,
            path: path.to_path_buf(),
            source: source.to_string(),
            prev: None,
            last_key: Timestamp::MIN,
            last_flush: Instant::now(),
            dirty: false,
            seen: Default::default(),
            audit_log: None,
            raw_bytes: 0,
            snapshots: 0,
        })
    }

    /// The site's parameters the recorded memory is taken with (the
    /// defaults otherwise).
    pub fn with_site(mut self, site: SiteParams) -> Recorder {
        self.site = site;
        self
    }

    /// A keyframe once the deltas since the last pass `bytes` (tests: a
    /// small cluster's bridged keyframes).
    #[cfg(test)]
    pub(crate) fn with_key_every_bytes(mut self, bytes: u64) -> Recorder {
        self.key_every_bytes = bytes;
        self
    }

    fn enc(&mut self) -> Result<&mut Encoder, RecordingError> {
        self.enc.as_mut().ok_or_else(|| {
            RecordingError::Write(Arc::new(std::io::Error::other(
                "the recording was closed after a failed write",
            )))
        })
    }

    /// An index line; a failure to write it drops the index (the recording
    /// goes on, and is scanned when read).
    fn index(&mut self, l: &IndexLine) {
        let Some(w) = &mut self.index else { return };
        let ok = serde_json::to_vec(l)
            .map_err(std::io::Error::other)
            .and_then(|mut v| {
                v.push(b'\n');
                w.write_all(&v)
            });
        if let Err(e) = ok {
            tracing::warn!("{}: the index is dropped: {e}", self.path.display());
            self.index = None;
            let _ = std::fs::remove_file(super::index_path(&self.path));
        }
    }

    /// Ends the current zstd frame and begins another; the new frame's
    /// offset in the file.
    fn new_frame(&mut self) -> Result<u64, RecordingError> {
        let err = |e: std::io::Error| RecordingError::Write(Arc::new(e));
        let enc = self
            .enc
            .take()
            .ok_or_else(|| err(std::io::Error::other("closed")))?;
        let w = end_frame(enc).map_err(err)?;
        let offset = w.get_ref().metadata().map_err(err)?.len();
        self.enc = Some(encoder(w)?);
        Ok(offset)
    }

    fn line(&mut self, e: &Entry) -> Result<(), RecordingError> {
        self.raw_line(e)
    }

    /// Records a snapshot: a keyframe when due (or when only a keyframe can
    /// say what changed), else what changed.
    pub fn snapshot(&mut self, c: &Arc<Cluster>) -> Result<(), RecordingError> {
        if self.prev.is_none() {
            let header = Header {
                format: FORMAT.into(),
                version: VERSION,
                source: self.source.clone(),
                cluster: c.name.clone(),
                started: c.time,
                recorder: format!("nightshift {}", env!("CARGO_PKG_VERSION")),
            };
            self.line(&Entry::Header(header.clone()))?;
            self.index(&IndexLine {
                header: Some(header),
                ..IndexLine::default()
            });
        }
        let due = c.time.saturating_sub(self.last_key) >= KEY_EVERY_S
            || self.since_key >= self.key_every_bytes;
        match self.prev.as_ref().and_then(|p| delta(p, c)) {
            Some(d) => {
                self.line(&Entry::Delta(Box::new(d)))?;
                self.index(&IndexLine {
                    t: Some(c.time),
                    line: Some(self.lines),
                    ..IndexLine::default()
                });
                // Read in order, the delta says it; a seek starts from the
                // keyframe after it.
                if due {
                    self.keyframe(c, true)?;
                }
            }
            None => self.keyframe(c, false)?,
        }
        self.memory.observe(c, &self.site);
        self.book.observe(c);
        self.prev = Some(c.clone());
        self.snapshots += 1;
        self.audit_since()?;
        self.flush_if_due()
    }

    /// A keyframe, in a zstd frame of its own after what the analysis
    /// remembered and the health numbers up to it.
    fn keyframe(&mut self, c: &Arc<Cluster>, bridged: bool) -> Result<(), RecordingError> {
        self.last_key = c.time;
        let offset = match self.prev {
            // The first frame holds the header too.
            None => 0,
            Some(_) => self.new_frame()?,
        };
        let first = if self.prev.is_none() {
            1
        } else {
            self.lines + 1
        };
        let recall = Recall {
            kind: "recall".into(),
            time: c.time,
            site: Memory::site_key(&self.site),
            memory: self.memory.clone(),
            book: self.book.clone(),
        };
        self.raw_line(&recall)?;
        self.line(&Entry::Key {
            bridged,
            cluster: Box::new((**c).clone()),
        })?;
        self.since_key = 0;
        // A bridged keyframe ends its frame: read in order, it is passed
        // over at the frame's end, undecompressed.
        let then = if bridged {
            Some(self.new_frame()?)
        } else {
            None
        };
        self.index(&IndexLine {
            t: Some(c.time),
            line: Some(self.lines),
            frame: Some((offset, first)),
            bridged,
            then,
            ..IndexLine::default()
        });
        Ok(())
    }

    /// A line of any shape (the recall line is not an `Entry`).
    fn raw_line<T: serde::Serialize>(&mut self, v: &T) -> Result<(), RecordingError> {
        let mut text = serde_json::to_vec(v).map_err(|e| RecordingError::Encode(Arc::new(e)))?;
        text.push(b'\n');
        self.raw_bytes += text.len() as u64;
        self.since_key += text.len() as u64;
        let path = self.path.clone();
        self.enc()?
            .write_all(&text)
            .map_err(|e| RecordingError::WriteTo {
                path,
                source: Arc::new(e),
            })?;
        self.lines += 1;
        self.dirty = true;
        Ok(())
    }

    /// Records the actions of `log` from now on, each with the next
    /// snapshot: what it holds already predates the recording.
    pub fn follow_audit(&mut self, log: AuditLog) {
        self.skip_audit(&log.read());
        let len = crate::actions::audit::log_len(&log);
        self.audit_log = Some((log, len));
    }

    /// The followed log's new records; it is read again only when it grew.
    fn audit_since(&mut self) -> Result<(), RecordingError> {
        let Some((log, len)) = &mut self.audit_log else {
            return Ok(());
        };
        let now = crate::actions::audit::log_len(log);
        if now == *len {
            return Ok(());
        }
        *len = now;
        let records = log.read();
        self.audit(&records)
    }

    /// Records the audit records not written yet, stamped with the newest
    /// snapshot's clock.
    fn audit(&mut self, records: &[Record]) -> Result<(), RecordingError> {
        let time = self.prev.as_ref().map_or(0, |c| c.time);
        for r in records {
            if self.seen.insert((r.id.clone(), r.phase)) {
                self.line(&Entry::Audit {
                    time,
                    record: Box::new(r.clone()),
                })?;
                self.index(&IndexLine {
                    audit: Some((time, Box::new(r.clone()))),
                    ..IndexLine::default()
                });
            }
        }
        self.flush_if_due()
    }

    /// Marks audit records already in the log as seen (they predate it).
    fn skip_audit(&mut self, records: &[Record]) {
        for r in records {
            self.seen.insert((r.id.clone(), r.phase));
        }
    }

    fn flush_if_due(&mut self) -> Result<(), RecordingError> {
        if self.dirty && self.last_flush.elapsed() >= FLUSH_EVERY {
            self.flush()?;
        }
        Ok(())
    }

    /// Ends the current zstd block and syncs the file: what is written so
    /// far survives a crash.
    pub fn flush(&mut self) -> Result<(), RecordingError> {
        let err = |e: std::io::Error| RecordingError::Write(Arc::new(e));
        let enc = self.enc()?;
        enc.flush().map_err(err)?;
        enc.get_mut().flush().map_err(err)?;
        enc.get_ref().get_ref().sync_data().map_err(err)?;
        let size = enc.get_ref().get_ref().metadata().map_err(err)?.len();
        self.index(&IndexLine {
            size: Some(size),
            ..IndexLine::default()
        });
        // After the recording: the index never names a line the file
        // does not hold yet.
        if let Some(w) = &mut self.index
            && let Err(e) = w.flush()
        {
            tracing::warn!("{}: the index is dropped: {e}", self.path.display());
            self.index = None;
        }
        self.last_flush = Instant::now();
        self.dirty = false;
        Ok(())
    }

    /// Ends the stream cleanly.
    pub fn finish(mut self) -> Result<(), RecordingError> {
        let err = |e: std::io::Error| RecordingError::Finish(Arc::new(e));
        let enc = self
            .enc
            .take()
            .ok_or_else(|| err(std::io::Error::other("closed")))?;
        let w = end_frame(enc).map_err(err)?;
        w.get_ref().sync_data().map_err(err)?;
        let size = w.get_ref().metadata().map_err(err)?.len();
        self.index(&IndexLine {
            size: Some(size),
            ..IndexLine::default()
        });
        if let Some(mut i) = self.index.take() {
            i.flush().map_err(err)?;
        }
        Ok(())
    }
}

/// Ends a zstd frame and hands its file back, written out.
fn end_frame(enc: Encoder) -> std::io::Result<BufWriter<File>> {
    let mut w = enc.finish()?;
    w.flush()?;
    Ok(w)
}

/// A zstd frame's encoder: level 3, long-distance matching over a 128 MiB
/// window.
fn encoder(w: BufWriter<File>) -> Result<Encoder, RecordingError> {
    let mut enc =
        zstd::stream::write::Encoder::new(w, 3).map_err(|e| RecordingError::Zstd(Arc::new(e)))?;
    enc.long_distance_matching(true)
        .and_then(|()| enc.window_log(WINDOW_LOG))
        .map_err(|e| RecordingError::Zstd(Arc::new(e)))?;
    Ok(enc)
}
