//! Reading a recording back: states at any time, in order, and the audit.
//!
//! A recording of a big cluster is gigabytes of JSON once decompressed (an
//! hour of the 10,000-node sim: 17.7 GB), so nothing holds it whole: opening
//! reads it once for an index (each snapshot line's kind and time) and the
//! audit records; states are streamed again from the file, parsing only the
//! keyframe before the time asked for and the deltas after it.

use super::{Delta, Entry, FORMAT, Header, VERSION, WINDOW_LOG, apply};
use crate::actions::audit::Record;
use crate::model::{Cluster, Timestamp};
use serde::Deserialize;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One snapshot line of the index: a keyframe or a delta, and its time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    pub key: bool,
    pub time: Timestamp,
}

#[derive(Debug, Clone)]
pub struct Recording {
    pub path: PathBuf,
    pub header: Header,
    /// Every keyframe and delta, in order.
    pub marks: Vec<Mark>,
    /// The audit records, each with the source's clock when it was seen.
    audit: Vec<(Timestamp, Record)>,
    /// Why reading stopped early (a crash mid-write cuts the last block).
    pub truncated: Option<String>,
}

/// Just enough of a line to index it; the rest is skipped unparsed.
#[derive(Deserialize)]
struct Peek {
    kind: String,
    time: Option<Timestamp>,
    cluster: Option<PeekCluster>,
}

#[derive(Deserialize)]
struct PeekCluster {
    time: Timestamp,
}

/// The lines of a recording's decompressed stream, and how it ended.
struct Lines {
    inner:
        std::io::BufReader<zstd::stream::read::Decoder<'static, std::io::BufReader<std::fs::File>>>,
    buf: Vec<u8>,
    /// Set when the stream ends early; the iterator then ends.
    cut: Option<String>,
}

impl Lines {
    fn open(path: &Path) -> Result<Lines, String> {
        let file = std::fs::File::open(path)
            .map_err(|e| format!("cannot open the recording {}: {e}", path.display()))?;
        let mut dec = zstd::stream::read::Decoder::new(file)
            .map_err(|e| format!("{}: not a recording: {e}", path.display()))?;
        dec.window_log_max(WINDOW_LOG + 1)
            .map_err(|e| format!("zstd: {e}"))?;
        Ok(Lines {
            inner: std::io::BufReader::with_capacity(1 << 20, dec),
            buf: Vec::new(),
            cut: None,
        })
    }

    /// The next complete line; `None` at the end or at a cut.
    fn next_line(&mut self) -> Option<&[u8]> {
        if self.cut.is_some() {
            return None;
        }
        self.buf.clear();
        match self.inner.read_until(b'\n', &mut self.buf) {
            Ok(0) => None,
            Ok(_) if self.buf.last() != Some(&b'\n') => {
                self.cut = Some("the last line is incomplete (cut off mid-write)".into());
                None
            }
            Ok(_) => Some(&self.buf),
            Err(e) => {
                self.cut = Some(format!("stopped at a damaged block: {e}"));
                None
            }
        }
    }
}

/// Whether a line is a snapshot line (keyframe or delta), cheaply: the tag
/// is written first.
fn is_snapshot(line: &[u8]) -> bool {
    line.starts_with(br#"{"kind":"key""#) || line.starts_with(br#"{"kind":"delta""#)
}

impl Recording {
    pub fn open(path: &Path) -> Result<Recording, String> {
        let mut lines = Lines::open(path)?;
        let bad = |e: String| format!("{}: not a nightshift recording: {e}", path.display());
        let header: Header = match lines.next_line() {
            Some(l) => match serde_json::from_slice::<Entry>(l) {
                Ok(Entry::Header(h)) => h,
                Ok(_) => return Err(format!("{}: no recording header", path.display())),
                Err(e) => return Err(bad(e.to_string())),
            },
            None => {
                return Err(match lines.cut {
                    Some(e) => bad(e),
                    None => format!("{}: empty recording", path.display()),
                });
            }
        };
        if header.format != FORMAT || header.version > VERSION {
            return Err(format!(
                "{}: {} version {}, this nightshift reads {FORMAT} up to version {VERSION}",
                path.display(),
                header.format,
                header.version
            ));
        }
        let mut marks = Vec::new();
        let mut audit = Vec::new();
        let mut truncated = None;
        while let Some(l) = lines.next_line() {
            if is_snapshot(l) {
                match serde_json::from_slice::<Peek>(l) {
                    Ok(p) => {
                        let key = p.kind == "key";
                        let time = if key {
                            p.cluster.map(|c| c.time)
                        } else {
                            p.time
                        };
                        match time {
                            Some(time) => marks.push(Mark { key, time }),
                            None => {
                                truncated = Some("a snapshot line without a time".into());
                                break;
                            }
                        }
                    }
                    Err(e) => {
                        truncated = Some(format!("stopped at an unreadable line: {e}"));
                        break;
                    }
                }
            } else {
                match serde_json::from_slice::<Entry>(l) {
                    Ok(Entry::Audit { time, record }) => audit.push((time, *record)),
                    Ok(_) => {}
                    Err(e) => {
                        truncated = Some(format!("stopped at an unreadable line: {e}"));
                        break;
                    }
                }
            }
        }
        let truncated = truncated.or(lines.cut);
        if !marks.iter().any(|m| m.key) {
            return Err(format!(
                "{}: the recording holds no snapshot",
                path.display()
            ));
        }
        Ok(Recording {
            path: path.to_path_buf(),
            header,
            marks,
            audit,
            truncated,
        })
    }

    /// The first and last snapshot times.
    pub fn span(&self) -> (Timestamp, Timestamp) {
        let lo = self.marks.iter().map(|m| m.time).min().unwrap_or(0);
        let hi = self.marks.iter().map(|m| m.time).max().unwrap_or(0);
        (lo, hi)
    }

    /// A cursor on the snapshot the source had delivered at `t` (the last
    /// one at or before it), replayed from the keyframe before it.
    pub fn cursor_at(&self, t: Timestamp) -> Result<Cursor, String> {
        let (lo, _) = self.span();
        if t < lo {
            return Err(format!(
                "{} is before the recording starts ({})",
                crate::text::datetime(t),
                crate::text::datetime(lo)
            ));
        }
        let key = self
            .marks
            .iter()
            .rposition(|m| m.key && m.time <= t)
            .ok_or("no keyframe before that time")?;
        let mut lines = Lines::open(&self.path)?;
        // Skip to the keyframe without parsing what comes before it.
        let mut seen = 0usize;
        let first = loop {
            let Some(l) = lines.next_line() else {
                return Err(lines.cut.unwrap_or_else(|| "the recording changed".into()));
            };
            if !is_snapshot(l) {
                continue;
            }
            if seen == key {
                break parse(l)?;
            }
            seen += 1;
        };
        let Entry::Key { cluster } = first else {
            return Err("the index and the file disagree".into());
        };
        let mut c = Cursor {
            lines,
            current: *cluster,
            ahead: None,
            next_mark: key + 1,
        };
        while c.next_time_of(&self.marks).is_some_and(|x| x <= t) {
            c.step()?;
        }
        Ok(c)
    }

    /// The snapshot the source had delivered at `t`.
    pub fn state_at(&self, t: Timestamp) -> Result<Cluster, String> {
        Ok(self.cursor_at(t)?.current)
    }

    /// Every snapshot in order, each as the source delivered it.
    pub fn states(&self) -> States {
        States {
            lines: Lines::open(&self.path),
            current: None,
            done: false,
        }
    }

    /// The audit records, each with the source's clock when it was seen.
    pub fn audit(&self) -> Vec<(Timestamp, &Record)> {
        self.audit.iter().map(|(t, r)| (*t, r)).collect()
    }
}

/// A keyframe line without its tag.
#[derive(Deserialize)]
struct KeyLine {
    cluster: Box<Cluster>,
}

/// A snapshot line. Its struct is read straight from the line (the `kind`
/// tag ignored): serde's tagged-enum path buffers every value first, which
/// cost a third of reading a big recording.
fn parse(line: &[u8]) -> Result<Entry, String> {
    let bad = |e: serde_json::Error| format!("an unreadable snapshot line: {e}");
    if line.starts_with(br#"{"kind":"delta""#) {
        serde_json::from_slice::<Delta>(line)
            .map(|d| Entry::Delta(Box::new(d)))
            .map_err(bad)
    } else if line.starts_with(br#"{"kind":"key""#) {
        serde_json::from_slice::<KeyLine>(line)
            .map(|k| Entry::Key { cluster: k.cluster })
            .map_err(bad)
    } else {
        serde_json::from_slice(line).map_err(bad)
    }
}

/// A position in a recording: the snapshot at it, and the way on.
pub struct Cursor {
    lines: Lines,
    pub current: Cluster,
    /// The next snapshot entry, read ahead.
    ahead: Option<Entry>,
    /// Its index in the marks.
    next_mark: usize,
}

impl Cursor {
    fn next_time_of(&self, marks: &[Mark]) -> Option<Timestamp> {
        marks.get(self.next_mark).map(|m| m.time)
    }

    /// The next snapshot entry, read ahead without applying it.
    pub fn peek(&mut self) -> Result<Option<&Entry>, String> {
        if self.ahead.is_none() {
            loop {
                let Some(l) = self.lines.next_line() else {
                    return Ok(None);
                };
                if is_snapshot(l) {
                    self.ahead = Some(parse(l)?);
                    break;
                }
            }
        }
        Ok(self.ahead.as_ref())
    }

    /// Applies the next snapshot entry; false at the end.
    pub fn step(&mut self) -> Result<bool, String> {
        self.peek()?;
        let Some(e) = self.ahead.take() else {
            return Ok(false);
        };
        self.next_mark += 1;
        match e {
            Entry::Key { cluster } => self.current = *cluster,
            Entry::Delta(d) => apply(&mut self.current, &d)?,
            _ => {}
        }
        Ok(true)
    }

    /// The time of the next snapshot, when there is one.
    pub fn next_time(&mut self) -> Option<Timestamp> {
        self.peek().ok().flatten().and_then(Entry::time)
    }

    /// The next delta, when the next entry is one.
    pub fn next_delta(&mut self) -> Option<&Delta> {
        match self.peek().ok().flatten() {
            Some(Entry::Delta(d)) => Some(d),
            _ => None,
        }
    }
}

/// The snapshots of a recording in order (see `Recording::states`).
pub struct States {
    lines: Result<Lines, String>,
    current: Option<Cluster>,
    done: bool,
}

impl Iterator for States {
    type Item = Result<Arc<Cluster>, String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let lines = match &mut self.lines {
            Ok(l) => l,
            Err(e) => {
                self.done = true;
                return Some(Err(e.clone()));
            }
        };
        loop {
            let Some(l) = lines.next_line() else {
                self.done = true;
                return None;
            };
            if !is_snapshot(l) {
                continue;
            }
            let step = parse(l).and_then(|e| match e {
                Entry::Key { cluster } => {
                    self.current = Some(*cluster);
                    Ok(())
                }
                Entry::Delta(d) => match self.current.as_mut() {
                    Some(c) => apply(c, &d),
                    None => Err("a delta before any keyframe".into()),
                },
                _ => Ok(()),
            });
            if let Err(e) = step {
                self.done = true;
                return Some(Err(e));
            }
            return self.current.clone().map(|c| Ok(Arc::new(c)));
        }
    }
}
