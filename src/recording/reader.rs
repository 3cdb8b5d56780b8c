//! Reading a recording back: states at any time, in order, and the audit.

use super::{Entry, FORMAT, Header, VERSION, WINDOW_LOG, apply};
use crate::actions::audit::Record;
use crate::model::{Cluster, Timestamp};
use std::io::BufRead;
use std::path::Path;
use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct Recording {
    pub header: Header,
    /// Keyframes, deltas and audit records, in the order written.
    pub entries: Vec<Entry>,
    /// Why reading stopped early (a crash mid-write cuts the last block).
    pub truncated: Option<String>,
}

impl Recording {
    pub fn open(path: &Path) -> Result<Recording, String> {
        let file = std::fs::File::open(path)
            .map_err(|e| format!("cannot open the recording {}: {e}", path.display()))?;
        let mut dec = zstd::stream::read::Decoder::new(file)
            .map_err(|e| format!("{}: not a recording: {e}", path.display()))?;
        dec.window_log_max(WINDOW_LOG + 1)
            .map_err(|e| format!("zstd: {e}"))?;
        let mut lines = std::io::BufReader::new(dec);
        let mut header = None;
        let mut entries = Vec::new();
        let mut truncated = None;
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match lines.read_until(b'\n', &mut buf) {
                Ok(0) => break,
                Ok(_) if buf.last() != Some(&b'\n') => {
                    truncated = Some("the last line is incomplete (cut off mid-write)".into());
                    break;
                }
                Ok(_) => {}
                Err(e) if header.is_none() => {
                    return Err(format!(
                        "{}: not a nightshift recording: {e}",
                        path.display()
                    ));
                }
                Err(e) => {
                    truncated = Some(format!("stopped at a damaged block: {e}"));
                    break;
                }
            }
            let e: Entry = match serde_json::from_slice(&buf) {
                Ok(e) => e,
                Err(e) if header.is_none() => {
                    return Err(format!(
                        "{}: not a nightshift recording: {e}",
                        path.display()
                    ));
                }
                Err(e) => {
                    truncated = Some(format!("stopped at an unreadable line: {e}"));
                    break;
                }
            };
            match e {
                Entry::Header(h) if header.is_none() => {
                    if h.format != FORMAT || h.version > VERSION {
                        return Err(format!(
                            "{}: {} version {}, this nightshift reads {FORMAT} up to version {VERSION}",
                            path.display(),
                            h.format,
                            h.version
                        ));
                    }
                    header = Some(h);
                }
                _ if header.is_none() => {
                    return Err(format!("{}: no recording header", path.display()));
                }
                e => entries.push(e),
            }
        }
        let header = header.ok_or_else(|| format!("{}: empty recording", path.display()))?;
        if !entries.iter().any(|e| matches!(e, Entry::Key { .. })) {
            return Err(format!(
                "{}: the recording holds no snapshot",
                path.display()
            ));
        }
        Ok(Recording {
            header,
            entries,
            truncated,
        })
    }

    /// The first and last snapshot times.
    pub fn span(&self) -> (Timestamp, Timestamp) {
        let times = self
            .entries
            .iter()
            .filter(|e| !matches!(e, Entry::Audit { .. }))
            .filter_map(Entry::time);
        let (mut lo, mut hi) = (Timestamp::MAX, Timestamp::MIN);
        for t in times {
            lo = lo.min(t);
            hi = hi.max(t);
        }
        (lo, hi)
    }

    /// Every snapshot in order, each as the source delivered it.
    pub fn states(&self) -> States<'_> {
        States {
            entries: &self.entries,
            next: 0,
            current: None,
        }
    }

    /// The snapshot the source had delivered at `t`: the last one at or
    /// before it. Replayed from the keyframe before it.
    pub fn state_at(&self, t: Timestamp) -> Result<Cluster, String> {
        let (lo, hi) = self.span();
        if t < lo {
            return Err(format!(
                "{} is before the recording starts ({})",
                crate::text::datetime(t),
                crate::text::datetime(lo)
            ));
        }
        let key = self
            .entries
            .iter()
            .rposition(|e| matches!(e, Entry::Key { cluster } if cluster.time <= t))
            .ok_or("no keyframe before that time")?;
        let Entry::Key { cluster } = &self.entries[key] else {
            return Err("no keyframe before that time".into());
        };
        let mut c: Cluster = (**cluster).clone();
        for e in &self.entries[key + 1..] {
            match e {
                Entry::Delta(d) if d.time <= t => apply(&mut c, d)?,
                Entry::Key { cluster } if cluster.time <= t => c = (**cluster).clone(),
                Entry::Delta(_) | Entry::Key { .. } => break,
                _ => {}
            }
        }
        if t > hi + 60 {
            tracing::info!(
                at = t,
                last = hi,
                "asked past the recording's end: its last snapshot"
            );
        }
        Ok(c)
    }

    /// The audit records, each with the source's clock when it was seen.
    pub fn audit(&self) -> Vec<(Timestamp, &Record)> {
        self.entries
            .iter()
            .filter_map(|e| match e {
                Entry::Audit { time, record } => Some((*time, record.as_ref())),
                _ => None,
            })
            .collect()
    }
}

/// The snapshots of a recording in order (see `Recording::states`).
pub struct States<'a> {
    entries: &'a [Entry],
    next: usize,
    current: Option<Cluster>,
}

impl Iterator for States<'_> {
    type Item = Result<Arc<Cluster>, String>;

    fn next(&mut self) -> Option<Self::Item> {
        while let Some(e) = self.entries.get(self.next) {
            self.next += 1;
            match e {
                Entry::Key { cluster } => {
                    self.current = Some((**cluster).clone());
                }
                Entry::Delta(d) => {
                    let Some(c) = self.current.as_mut() else {
                        return Some(Err("a delta before any keyframe".into()));
                    };
                    if let Err(err) = apply(c, d) {
                        return Some(Err(err));
                    }
                }
                _ => continue,
            }
            return self.current.clone().map(|c| Ok(Arc::new(c)));
        }
        None
    }
}
