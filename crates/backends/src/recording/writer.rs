//! Writing a recording: a header, keyframes, deltas, audit records.

use super::RecordingError;
use super::{Entry, FORMAT, Header, KEY_EVERY_S, VERSION, WINDOW_LOG, delta};
use crate::actions::audit::AuditLog;
use crate::model::audit::Record;
use crate::model::{Cluster, Timestamp};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Flushed (a zstd block, then the file synced) this often at most.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

pub struct Recorder {
    enc: zstd::stream::write::Encoder<'static, BufWriter<File>>,
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
        let mut enc = zstd::stream::write::Encoder::new(BufWriter::new(file), 3)
            .map_err(|e| RecordingError::Zstd(Arc::new(e)))?;
        enc.long_distance_matching(true)
            .and_then(|()| enc.window_log(WINDOW_LOG))
            .map_err(|e| RecordingError::Zstd(Arc::new(e)))?;
        Ok(Recorder {
            enc,
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

    fn line(&mut self, e: &Entry) -> Result<(), RecordingError> {
        let mut text = serde_json::to_vec(e).map_err(|e| RecordingError::Encode(Arc::new(e)))?;
        text.push(b'\n');
        self.raw_bytes += text.len() as u64;
        self.enc
            .write_all(&text)
            .map_err(|e| RecordingError::WriteTo {
                path: self.path.clone(),
                source: Arc::new(e),
            })?;
        self.dirty = true;
        Ok(())
    }

    /// Records a snapshot: a keyframe when due (or when only a keyframe can
    /// say what changed), else what changed.
    pub fn snapshot(&mut self, c: &Arc<Cluster>) -> Result<(), RecordingError> {
        if self.prev.is_none() {
            self.line(&Entry::Header(Header {
                format: FORMAT.into(),
                version: VERSION,
                source: self.source.clone(),
                cluster: c.name.clone(),
                started: c.time,
                recorder: format!("nightshift {}", env!("CARGO_PKG_VERSION")),
            }))?;
        }
        let d = match &self.prev {
            Some(p) if c.time - self.last_key < KEY_EVERY_S => delta(p, c),
            _ => None,
        };
        match d {
            Some(d) => self.line(&Entry::Delta(Box::new(d)))?,
            None => {
                self.last_key = c.time;
                self.line(&Entry::Key {
                    cluster: Box::new((**c).clone()),
                })?;
            }
        }
        self.prev = Some(c.clone());
        self.snapshots += 1;
        self.audit_since()?;
        self.flush_if_due()
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
        self.enc.flush().map_err(err)?;
        self.enc.get_mut().flush().map_err(err)?;
        self.enc.get_ref().get_ref().sync_data().map_err(err)?;
        self.last_flush = Instant::now();
        self.dirty = false;
        Ok(())
    }

    /// Ends the stream cleanly.
    pub fn finish(self) -> Result<(), RecordingError> {
        let err = |e: std::io::Error| RecordingError::Finish(Arc::new(e));
        let mut w = self.enc.finish().map_err(err)?;
        w.flush().map_err(err)?;
        w.get_ref().sync_data().map_err(err)
    }
}
