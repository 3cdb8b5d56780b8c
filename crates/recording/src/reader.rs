//! Reading a recording back: states at any time, in order, and the audit.
//!
//! A recording of a big cluster is gigabytes of JSON once decompressed (an
//! hour of the 10,000-node sim: 17.7 GB), so nothing holds it whole: opening
//! reads it once for an index (each snapshot line's kind and time) and the
//! audit records; states are streamed again from the file, parsing only the
//! keyframe before the time asked for and the deltas after it.

use super::error::RecordingError;
use super::{Delta, Entry, FORMAT, Header, VERSION, WINDOW_LOG, apply};
use crate::model::audit::Record;
use crate::model::{Cluster, Timestamp};
use serde::Deserialize;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One snapshot line of the index: a keyframe or a delta, its time, and
/// its line in the decompressed stream (the first line is 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    pub key: bool,
    pub time: Timestamp,
    pub line: u64,
    /// A keyframe's zstd frame (version 2, from the index): its offset in
    /// the file and its first line. Reading starts there, not at the
    /// file's start.
    pub frame: Option<(u64, u64)>,
    /// A keyframe after a delta of the same snapshot: a seek starts from
    /// it, reading in order passes over it.
    pub bridged: bool,
    /// A bridged keyframe in a frame of its own (version 3): where the
    /// next frame begins (see `IndexLine::then`).
    pub then: Option<u64>,
}

/// Snapshot times outside 1970 … 9999 are not a source's clock: such a line
/// is skipped (a report would otherwise walk the decades between them).
pub(super) const TIMES: std::ops::RangeInclusive<Timestamp> = 0..=253_402_300_799;

#[derive(Debug, Clone)]
pub struct Recording {
    pub path: PathBuf,
    pub header: Header,
    /// Every keyframe and delta, in order.
    pub marks: Arc<[Mark]>,
    /// The audit records, each with the source's clock when it was seen.
    audit: Vec<(Timestamp, Record)>,
    /// Why reading stopped early (a crash mid-write cuts the last block).
    pub truncated: Option<String>,
    /// One line each for a line that was skipped (`line N: why`).
    pub skipped: Vec<String>,
}

/// Just enough of a line to index it; the rest is skipped unparsed.
#[derive(Deserialize)]
struct Peek {
    kind: String,
    time: Option<Timestamp>,
    #[serde(default)]
    bridged: bool,
    cluster: Option<PeekCluster>,
}

#[derive(Deserialize)]
struct PeekCluster {
    time: Timestamp,
}

/// The lines of a recording's decompressed stream, and how it ended.
pub(super) struct Lines {
    inner:
        std::io::BufReader<zstd::stream::read::Decoder<'static, std::io::BufReader<std::fs::File>>>,
    pub(super) buf: Vec<u8>,
    /// The number of the line last read (the first is 1).
    pub(super) number: u64,
    /// Lines longer than this are skipped unread (`limits.max_recording_line_bytes`).
    max_line: u64,
    /// The lines skipped for their length.
    pub(super) too_long: Vec<String>,
    /// Set when the stream ends early; the iterator then ends.
    pub(super) cut: Option<String>,
}

impl Lines {
    /// Opens a recording for one pass. It must be a regular file: a FIFO or
    /// a terminal cannot be read twice (indexing, then replaying).
    pub(super) fn open(path: &Path) -> Result<Lines, RecordingError> {
        Lines::open_at(path, (0, 1))
    }

    /// Opens a recording at a zstd frame: `(offset, first line)`.
    pub(super) fn open_at(
        path: &Path,
        (offset, first): (u64, u64),
    ) -> Result<Lines, RecordingError> {
        let cannot_open = |e| RecordingError::Open {
            path: path.to_path_buf(),
            source: Arc::new(e),
        };
        // Looked at before opening: opening a FIFO waits for a writer.
        match std::fs::metadata(path) {
            Ok(m) if m.is_file() => {}
            Ok(_) => return Err(RecordingError::NotAFile(path.to_path_buf())),
            Err(e) => return Err(cannot_open(e)),
        }
        let mut file = std::fs::File::open(path).map_err(cannot_open)?;
        if offset > 0 {
            use std::io::Seek;
            file.seek(std::io::SeekFrom::Start(offset))
                .map_err(cannot_open)?;
        }
        let mut dec =
            zstd::stream::read::Decoder::new(file).map_err(|e| RecordingError::NotZstd {
                path: path.to_path_buf(),
                source: Arc::new(e),
            })?;
        dec.window_log_max(WINDOW_LOG + 1)
            .map_err(|e| RecordingError::Zstd(Arc::new(e)))?;
        Ok(Lines {
            inner: std::io::BufReader::with_capacity(1 << 20, dec),
            buf: Vec::new(),
            number: first.saturating_sub(1),
            max_line: crate::limits::get().max_recording_line_bytes,
            too_long: Vec::new(),
            cut: None,
        })
    }

    /// The next complete line; `None` at the end or at a cut. A line longer
    /// than the bound is skipped (and named in `too_long`) without being
    /// held.
    pub(super) fn next_line(&mut self) -> Option<&[u8]> {
        use std::io::Read;
        loop {
            if self.cut.is_some() {
                return None;
            }
            self.buf.clear();
            self.number += 1;
            let read = (&mut self.inner)
                .take(self.max_line.saturating_add(1))
                .read_until(b'\n', &mut self.buf);
            match read {
                Ok(0) => return None,
                Ok(_) if self.buf.last() == Some(&b'\n') => return Some(&self.buf),
                Ok(n) if n as u64 > self.max_line => {
                    self.too_long.push(format!(
                        "line {}: longer than limits.max_recording_line_bytes ({}); skipped",
                        self.number, self.max_line
                    ));
                    if let Err(e) = self.skip_rest() {
                        self.cut = Some(format!("stopped at a damaged block: {e}"));
                    }
                }
                Ok(_) => {
                    self.cut = Some("the last line is incomplete (cut off mid-write)".into());
                    return None;
                }
                Err(e) => {
                    self.cut = Some(format!("stopped at a damaged block: {e}"));
                    return None;
                }
            }
        }
    }

    /// Reads past the rest of a line without keeping it; whether its end
    /// was found (not the file's end first).
    fn skip_rest(&mut self) -> std::io::Result<bool> {
        loop {
            let chunk = self.inner.fill_buf()?;
            if chunk.is_empty() {
                return Ok(false);
            }
            if let Some(i) = chunk.iter().position(|b| *b == b'\n') {
                self.inner.consume(i + 1);
                return Ok(true);
            }
            let n = chunk.len();
            self.inner.consume(n);
        }
    }

    /// Passes over the next line without holding it, when it begins with
    /// one of `prefixes` (a line a reader going in order has no use for:
    /// at 10,000 nodes a bridged keyframe is a hundred megabytes, read
    /// into a buffer for nothing); false, and nothing read, otherwise.
    pub(super) fn pass_over(&mut self, prefixes: &[&[u8]]) -> bool {
        if self.cut.is_some() {
            return false;
        }
        // The start of the line not yet in the buffer (at its end): read
        // as any line, the parser passes over it.
        let starts = match self.inner.fill_buf() {
            Ok(chunk) => prefixes.iter().any(|p| chunk.starts_with(p)),
            Err(_) => false,
        };
        if starts {
            self.skip_line();
        }
        starts
    }

    /// Passes over the next line; `None` at the end or at a cut.
    fn skip_line(&mut self) -> Option<()> {
        if self.cut.is_some() {
            return None;
        }
        match self.inner.fill_buf() {
            Ok([]) => return None,
            Ok(_) => {}
            Err(e) => {
                self.cut = Some(format!("stopped at a damaged block: {e}"));
                return None;
            }
        }
        self.number += 1;
        match self.skip_rest() {
            Ok(true) => Some(()),
            Ok(false) => {
                self.cut = Some("the last line is incomplete (cut off mid-write)".into());
                None
            }
            Err(e) => {
                self.cut = Some(format!("stopped at a damaged block: {e}"));
                None
            }
        }
    }

    /// Reads on to line `n` (a mark's), passing over what comes before it
    /// unread.
    fn seek_line(&mut self, n: u64) -> Option<&[u8]> {
        while self.number.saturating_add(1) < n {
            self.skip_line()?;
        }
        if self.number < n {
            self.next_line()?;
        }
        (self.number == n).then_some(self.buf.as_slice())
    }
}

/// The header, the first line: refused when it is not a recording's or
/// is of a version newer than this reader.
pub(super) fn read_header(lines: &mut Lines, path: &Path) -> Result<Header, RecordingError> {
    let bad = |why: String| RecordingError::NotOurs {
        path: path.to_path_buf(),
        why,
    };
    let header: Header = match lines.next_line() {
        Some(l) => match serde_json::from_slice::<Entry>(l) {
            Ok(Entry::Header(h)) => h,
            Ok(_) => return Err(RecordingError::NoHeader(path.to_path_buf())),
            Err(e) => return Err(bad(e.to_string())),
        },
        None => {
            return Err(match lines.cut.take() {
                Some(e) => bad(e),
                None => RecordingError::Empty(path.to_path_buf()),
            });
        }
    };
    if header.format != FORMAT || header.version > VERSION {
        return Err(RecordingError::Version {
            path: path.to_path_buf(),
            format: header.format,
            version: header.version,
        });
    }
    Ok(header)
}

/// Whether a line is a snapshot line (keyframe or delta), cheaply: the tag
/// is written first.
fn is_snapshot(line: &[u8]) -> bool {
    line.starts_with(br#"{"kind":"key""#) || line.starts_with(br#"{"kind":"delta""#)
}

impl Recording {
    pub fn open(path: &Path) -> Result<Recording, RecordingError> {
        let mut lines = Lines::open(path)?;
        let header = read_header(&mut lines, path)?;
        if let Some(r) = Recording::indexed(path, &header) {
            return Ok(r);
        }
        Recording::scanned(path, lines, header)
    }

    /// The recording read line by line, its index not used.
    fn scan(path: &Path) -> Result<Recording, RecordingError> {
        let mut lines = Lines::open(path)?;
        let header = read_header(&mut lines, path)?;
        Recording::scanned(path, lines, header)
    }

    fn scanned(path: &Path, mut lines: Lines, header: Header) -> Result<Recording, RecordingError> {
        let mut marks = Vec::new();
        let mut audit = Vec::new();
        let mut skipped = Vec::new();
        while lines.next_line().is_some() {
            let (number, l) = (lines.number, lines.buf.as_slice());
            let why = if is_snapshot(l) {
                match serde_json::from_slice::<Peek>(l) {
                    Ok(p) => {
                        let key = p.kind == "key";
                        let time = if key {
                            p.cluster.map(|c| c.time)
                        } else {
                            p.time
                        };
                        match time {
                            Some(time) if TIMES.contains(&time) => {
                                marks.push(Mark {
                                    key,
                                    time,
                                    line: number,
                                    frame: None,
                                    bridged: p.bridged,
                                    then: None,
                                });
                                continue;
                            }
                            Some(time) => format!("a snapshot time out of range ({time})"),
                            None => "a snapshot line without a time".into(),
                        }
                    }
                    Err(e) => format!("unreadable ({e})"),
                }
            } else {
                match parse(l) {
                    Ok(Entry::Audit { time, record }) => {
                        audit.push((time, *record));
                        continue;
                    }
                    Ok(_) => continue,
                    Err(e) => format!("unreadable ({e})"),
                }
            };
            skipped.push(format!("line {number}: {why}; skipped"));
        }
        let truncated = lines.cut.take();
        skipped.append(&mut lines.too_long);
        skipped.sort_by_key(|w| line_of(w));
        if !marks.iter().any(|m| m.key) {
            return Err(RecordingError::NoSnapshot {
                path: path.to_path_buf(),
                first_skipped: skipped.first().cloned(),
            });
        }
        Ok(Recording {
            path: path.to_path_buf(),
            header,
            marks: marks.into(),
            audit,
            truncated,
            skipped,
        })
    }

    /// The recording as its index says (version 2), when the index is
    /// there and is this recording's: nothing of the recording is read
    /// but its header.
    pub(super) fn indexed(path: &Path, header: &Header) -> Option<Recording> {
        let text = super::read_index(&super::index_path(path))?;
        let mut marks = Vec::new();
        let mut audit = Vec::new();
        let mut lines = text.split(|b| *b == b'\n').filter(|l| !l.is_empty());
        let first: super::IndexLine = serde_json::from_slice(lines.next()?).ok()?;
        if first.header.as_ref() != Some(header) {
            tracing::warn!(
                "{}: its index is another recording's; scanned",
                path.display()
            );
            return None;
        }
        // What the index says up to its last size (what the file held
        // when it was flushed): lines after it may name what the file
        // does not hold.
        let (mut size, mut upto) = (None, (0, 0));
        for l in lines {
            // A line cut by a crash ends the index.
            let Ok(l) = serde_json::from_slice::<super::IndexLine>(l) else {
                break;
            };
            if l.size.is_some() {
                size = l.size;
                upto = (marks.len(), audit.len());
            }
            match (l.t, l.line, l.audit) {
                (Some(time), Some(line), _) if TIMES.contains(&time) => marks.push(Mark {
                    key: l.frame.is_some(),
                    time,
                    line,
                    frame: l.frame,
                    bridged: l.bridged,
                    then: l.then,
                }),
                (_, _, Some((t, r))) => audit.push((t, *r)),
                _ => {}
            }
        }
        marks.truncate(upto.0);
        audit.truncate(upto.1);
        let now = std::fs::metadata(path).ok().map(|m| m.len());
        if size.is_none() || size != now {
            tracing::info!(
                "{}: its index does not cover it ({size:?} of {now:?} bytes); scanned",
                path.display()
            );
            return None;
        }
        if !marks.iter().any(|m| m.key) {
            return None;
        }
        Some(Recording {
            path: path.to_path_buf(),
            header: header.clone(),
            marks: marks.into(),
            audit,
            truncated: None,
            skipped: Vec::new(),
        })
    }

    /// What was wrong with the file, a line each: how it ended early and
    /// the lines skipped (the first 20, then how many more).
    pub fn damage(&self) -> Vec<String> {
        damage_lines(&self.path, self.truncated.as_deref(), &self.skipped)
    }

    /// The first and last snapshot times.
    pub fn span(&self) -> (Timestamp, Timestamp) {
        let lo = self.marks.iter().map(|m| m.time).min().unwrap_or(0);
        let hi = self.marks.iter().map(|m| m.time).max().unwrap_or(0);
        (lo, hi)
    }

    /// A cursor on the snapshot the source had delivered at `t` (the last
    /// one at or before it), replayed from the keyframe before it (an
    /// earlier one when that keyframe cannot be parsed).
    pub fn cursor_at(&self, t: Timestamp) -> Result<Cursor, RecordingError> {
        Ok(self.recalled_at(t, None)?.0)
    }

    /// A cursor at `t` as [`Recording::cursor_at`], and — when `site` is
    /// given and the keyframe it starts from carries one taken with that
    /// site's parameters — what the analysis remembered and the health
    /// numbers just before that keyframe. The cursor then sits on the
    /// keyframe itself, for the caller to step on to `t` feeding them.
    pub fn recalled_at(
        &self,
        t: Timestamp,
        site: Option<&str>,
    ) -> Result<(Cursor, Option<Box<super::Recall>>), RecordingError> {
        match self.recalled_at_marks(t, site) {
            // Its index led nowhere good (a wrong offset, a frame that is
            // not there): the recording itself may be intact, so it is
            // scanned and asked again (issue 59: `--at` failed "stopped
            // at a damaged block" on an intact recording).
            Err(e)
                if self.marks.iter().any(|m| m.frame.is_some())
                    && !matches!(e, RecordingError::BeforeStart { .. }) =>
            {
                tracing::warn!(
                    "recording {}: {e} where its index pointed; scanned instead",
                    self.path.display()
                );
                Recording::scan(&self.path)?.recalled_at_marks(t, site)
            }
            r => r,
        }
    }

    fn recalled_at_marks(
        &self,
        t: Timestamp,
        site: Option<&str>,
    ) -> Result<(Cursor, Option<Box<super::Recall>>), RecordingError> {
        let (lo, _) = self.span();
        if t < lo {
            return Err(RecordingError::BeforeStart { at: t, start: lo });
        }
        let keys = self
            .marks
            .iter()
            .enumerate()
            .filter(|(_, m)| m.key && m.time <= t)
            .map(|(i, _)| i)
            .rev();
        let mut last_error = RecordingError::NoKeyframe;
        for key in keys {
            let mark = self.marks[key];
            let mut lines = Lines::open_at(&self.path, mark.frame.unwrap_or((0, 1)))?;
            // The line before a keyframe of version 2 is its recall.
            let recall = match site {
                Some(site) if mark.line > 1 => lines
                    .seek_line(mark.line - 1)
                    .and_then(|l| recall_of(l, site)),
                _ => None,
            };
            let Some(l) = lines.seek_line(mark.line) else {
                return Err(RecordingError::Cut(
                    lines.cut.unwrap_or_else(|| "the recording changed".into()),
                ));
            };
            let cluster = match parse(l) {
                Ok(Entry::Key { cluster, .. }) => cluster,
                Ok(_) => return Err(RecordingError::IndexDisagrees),
                Err(e) => {
                    last_error = RecordingError::Line {
                        line: mark.line,
                        error: Box::new(e),
                    };
                    tracing::warn!("recording {}: {last_error}; skipped", self.path.display());
                    continue;
                }
            };
            let mut c = Cursor {
                lines,
                marks: self.marks.clone(),
                current: *cluster,
                ahead: None,
                next_mark: key + 1,
            };
            if recall.is_none() {
                while c.next_time_of_mark().is_some_and(|x| x <= t) {
                    c.step()?;
                }
            }
            return Ok((c, recall));
        }
        Err(last_error)
    }

    /// The snapshot the source had delivered at `t`.
    pub fn state_at(&self, t: Timestamp) -> Result<Cluster, RecordingError> {
        Ok(self.cursor_at(t)?.current)
    }

    /// Every snapshot in order, each as the source delivered it.
    pub fn states(&self) -> States {
        States {
            lines: Lines::open(&self.path),
            marks: self.marks.clone(),
            next_mark: 0,
            current: None,
            done: false,
        }
    }

    /// The audit records, each with the source's clock when it was seen.
    pub fn audit(&self) -> Vec<(Timestamp, &Record)> {
        self.audit.iter().map(|(t, r)| (*t, r)).collect()
    }
}

/// The recall on `line`, when it is one and was taken with the site's
/// parameters `site` ([`Memory::site_key`]).
///
/// [`Memory::site_key`]: crate::engine::memory::Memory::site_key
fn recall_of(line: &[u8], site: &str) -> Option<Box<super::Recall>> {
    if !line.starts_with(br#"{"kind":"recall""#) {
        return None;
    }
    match serde_json::from_slice::<super::Recall>(line) {
        Ok(r) if r.site == site => Some(Box::new(r)),
        Ok(r) => {
            tracing::info!(
                "recording: a recall taken with other parameters ({}); read from the start",
                r.site
            );
            None
        }
        Err(e) => {
            tracing::warn!("recording: an unreadable recall ({e}); read from the start");
            None
        }
    }
}

/// A keyframe line without its tag.
#[derive(Deserialize)]
struct KeyLine {
    #[serde(default)]
    bridged: bool,
    cluster: Box<Cluster>,
}

/// A snapshot line. Its struct is read straight from the line (the `kind`
/// tag ignored): serde's tagged-enum path buffers every value first, which
/// cost a third of reading a big recording.
pub(super) fn parse(line: &[u8]) -> Result<Entry, RecordingError> {
    let bad = |e: serde_json::Error| RecordingError::BadLine(Arc::new(e));
    if line.starts_with(br#"{"kind":"delta""#) {
        serde_json::from_slice::<Delta>(line)
            .map(|d| Entry::Delta(Box::new(d)))
            .map_err(bad)
    } else if line.starts_with(br#"{"kind":"recall""#) {
        // Read where a jump wants it (`Recall`), not on the way past.
        Ok(Entry::Recall)
    } else if line.starts_with(br#"{"kind":"key""#) {
        serde_json::from_slice::<KeyLine>(line)
            .map(|k| Entry::Key {
                bridged: k.bridged,
                cluster: k.cluster,
            })
            .map_err(bad)
    } else {
        serde_json::from_slice(line).map_err(bad)
    }
}

/// A position in a recording: the snapshot at it, and the way on.
pub struct Cursor {
    lines: Lines,
    marks: Arc<[Mark]>,
    pub current: Cluster,
    /// The next snapshot entry, read ahead.
    ahead: Option<Entry>,
    /// The index in the marks of the next entry to read.
    next_mark: usize,
}

/// Reads the snapshot entry of the next mark that parses, from `*next`
/// on; a line that the index took for one but that does not parse is
/// skipped, with a warning naming it.
fn read_mark(lines: &mut Lines, marks: &[Mark], next: &mut usize) -> Option<Entry> {
    while let Some(m) = marks.get(*next) {
        *next += 1;
        if m.bridged {
            // The delta before it brought this snapshot.
            continue;
        }
        let l = lines.seek_line(m.line)?;
        match parse(l) {
            Ok(e) => return Some(e),
            Err(e) => tracing::warn!("recording line {}: {e}; skipped", m.line),
        }
    }
    None
}

/// What was wrong with a file, a line each: how it ended early and the
/// lines skipped (the first 20, then how many more).
pub(super) fn damage_lines(
    path: &Path,
    truncated: Option<&str>,
    skipped: &[String],
) -> Vec<String> {
    let name = path.display();
    let mut out: Vec<String> = truncated.iter().map(|t| format!("{name}: {t}")).collect();
    out.extend(skipped.iter().take(20).map(|w| format!("{name} {w}")));
    if skipped.len() > 20 {
        out.push(format!(
            "{name}: and {} more line(s) skipped",
            skipped.len() - 20
        ));
    }
    out
}

/// The line number a `line N: …` warning names.
pub(super) fn line_of(w: &str) -> u64 {
    w.strip_prefix("line ")
        .and_then(|r| r.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

impl Cursor {
    /// The time of the next mark (what the index says comes next).
    pub fn next_time_of_mark(&self) -> Option<Timestamp> {
        self.marks[self.next_mark.min(self.marks.len())..]
            .iter()
            .find(|m| !m.bridged)
            .map(|m| m.time)
    }

    /// The next snapshot entry, read ahead without applying it.
    pub fn peek(&mut self) -> Result<Option<&Entry>, RecordingError> {
        if self.ahead.is_none() {
            self.ahead = read_mark(&mut self.lines, &self.marks, &mut self.next_mark);
        }
        Ok(self.ahead.as_ref())
    }

    /// Applies the next snapshot entry; false at the end.
    pub fn step(&mut self) -> Result<bool, RecordingError> {
        self.peek()?;
        let Some(e) = self.ahead.take() else {
            return Ok(false);
        };
        match e {
            Entry::Key { cluster, .. } => {
                let mut key = *cluster;
                super::share_with(&self.current, &mut key);
                self.current = key;
            }
            Entry::Delta(d) => {
                if let Err(e) = apply(&mut self.current, &d) {
                    tracing::warn!(
                        "recording: a delta at {} does not apply: {e}; skipped",
                        d.time
                    );
                }
            }
            _ => {}
        }
        Ok(true)
    }

    /// Steps on while the next snapshot is at or before `t`, handing each
    /// snapshot stepped to `f`.
    pub fn step_to(
        &mut self,
        t: Timestamp,
        mut f: impl FnMut(&Cluster),
    ) -> Result<(), RecordingError> {
        while self.next_time_of_mark().is_some_and(|x| x <= t) {
            if !self.step()? {
                break;
            }
            f(&self.current);
        }
        Ok(())
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
    lines: Result<Lines, RecordingError>,
    marks: Arc<[Mark]>,
    next_mark: usize,
    current: Option<Cluster>,
    done: bool,
}

impl Iterator for States {
    type Item = Result<Arc<Cluster>, RecordingError>;

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
            let Some(e) = read_mark(lines, &self.marks, &mut self.next_mark) else {
                self.done = true;
                return None;
            };
            let step = match e {
                Entry::Key { cluster, .. } => {
                    let mut key = *cluster;
                    if let Some(prev) = &self.current {
                        super::share_with(prev, &mut key);
                    }
                    self.current = Some(key);
                    Ok(())
                }
                Entry::Delta(d) => match self.current.as_mut() {
                    Some(c) => apply(c, &d),
                    // A delta before any keyframe that could be read.
                    None => continue,
                },
                _ => Ok(()),
            };
            if let Err(e) = step {
                tracing::warn!("recording: a delta does not apply: {e}; skipped");
                continue;
            }
            return self.current.clone().map(|c| Ok(Arc::new(c)));
        }
    }
}
