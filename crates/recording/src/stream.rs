//! A recording read once, start to end, in one pass: each snapshot as the
//! source delivered it and each audit record where it was seen, without
//! an index first. What `report` reads: the file is decompressed and parsed
//! once (an hour of the 10,000-node sim is 4.3 GB of JSON, 24.3 GB before
//! format version 3).
//!
//! Decompressing and parsing are most of the work, and each line parses on
//! its own: a thread decompresses and cuts lines (passing over the lines a
//! reader in order has no use for), two parse them, and the reader applies
//! them in order on a thread of their own, the applier, which makes each
//! snapshot. A reader that hands back each snapshot it is done with
//! (`recycle`) has the next one made from it, only what changed copied.

use super::error::RecordingError;
use super::reader::{Lines, TIMES, parse, read_header};
use super::reuse::{NodePool, same_or_clone};
use super::{Entry, Header, apply_with};
use crate::engine::changed::sync;
use crate::model::audit::Record;
use crate::model::{Cluster, Node, Timestamp};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};

/// One thing of a recording, in the order it was written.
#[derive(Debug, Clone)]
pub enum Item {
    Snapshot(Arc<Cluster>),
    /// An audit record, with the source's clock when it was seen.
    Audit(Timestamp, Box<Record>),
}

/// How a keyframe that follows a delta of the same snapshot begins, and
/// the recall line before a keyframe: a reader going in order passes over
/// both (an empty line handed to a parser says one was passed over).
const BRIDGED: &[u8] = br#"{"kind":"key","bridged":true"#;
const RECALL: &[u8] = br#"{"kind":"recall""#;

/// Parsers: each takes every other line.
const PARSERS: usize = 2;
/// Lines each parser may hold ahead of the reader.
const AHEAD: usize = 1;

/// A line parsed, with its number.
type Parsed = (u64, Result<Entry, RecordingError>);

/// How the file ended, once it is read: why it stopped early, and the
/// lines skipped for their length.
type Ending = (Option<String>, Vec<String>);

/// The recording's items in one pass (see the module).
pub struct Stream {
    path: PathBuf,
    pub header: Header,
    /// The items as the applier makes them; `None` once the reader stops.
    items: Option<Receiver<Item>>,
    /// Snapshots the reader is done with, back to the applier.
    done: Sender<Arc<Cluster>>,
    /// The applier, whose lines skipped come back when it ends.
    applier: Option<std::thread::JoinHandle<Vec<String>>>,
    ending: Receiver<Ending>,
    ended: Option<Ending>,
    skipped: Vec<String>,
}

/// Applies the parsed lines in order on a thread of its own and makes
/// each snapshot: at 10,000 nodes applying a second's readings to the
/// nodes they change is about a third of the report's own work, and the
/// report's thread was the one that bounded it (issue 42, measured with
/// perf).
struct Applier {
    parsed: Vec<Receiver<Parsed>>,
    /// The parser the next line comes from.
    turn: usize,
    current: Option<Cluster>,
    /// A snapshot the reader is done with (see [`Stream::recycle`]): the
    /// next snapshot is made from it.
    spare: Option<Cluster>,
    done: Receiver<Arc<Cluster>>,
    /// The nodes of the snapshots the reader is done with that nothing
    /// holds any more: the next copies of them are made in their memory.
    pool: NodePool,
    skipped: Vec<String>,
}

/// `spare` made equal to `cur`, sharing its records: only what changed
/// between them is cloned, and each node let go is handed to `gone` with
/// its place (see `changed::sync`).
/// Cloning a snapshot took a reference to each of its 110,000 records at
/// 10,000 nodes, and dropping the one before gave them back: together
/// about a sixth of the report's CPU (issue 42, measured with perf).
fn refill(spare: &mut Cluster, cur: &Cluster, gone: impl FnMut(usize, Arc<Node>)) {
    // Every field named: a new one is a compile error here, not a copy
    // that silently keeps an old value.
    let Cluster {
        name,
        source,
        time,
        partitions,
        nodes,
        jobs,
        events,
        quotas,
        history,
        no_job_signal,
        reservations,
    } = spare;
    name.clone_from(&cur.name);
    source.clone_from(&cur.source);
    *time = cur.time;
    // Compared first: the same nearly every second, and a clone allocates
    // each of their strings.
    same_or_clone(partitions, &cur.partitions);
    sync(nodes, &cur.nodes, gone);
    sync(jobs, &cur.jobs, |_, _| {});
    same_or_clone(events, &cur.events);
    same_or_clone(quotas, &cur.quotas);
    same_or_clone(history, &cur.history);
    *no_job_signal = cur.no_job_signal;
    same_or_clone(reservations, &cur.reservations);
}

/// Where a reader in order goes on past a bridged keyframe in a frame of
/// its own (version 3, from the index): by the line number of its recall,
/// the next frame's offset and first line.
struct Frames {
    path: PathBuf,
    then: rustc_hash::FxHashMap<u64, (u64, u64)>,
}

impl Frames {
    /// As the index says, when there is one and it is this recording's.
    fn of(path: &Path, header: &Header) -> Frames {
        let then = super::Recording::indexed(path, header)
            .map(|r| {
                r.marks
                    .iter()
                    .filter(|m| m.bridged && m.line > 1)
                    .filter_map(|m| Some((m.line - 1, (m.then?, m.line + 1))))
                    .collect()
            })
            .unwrap_or_default();
        Frames {
            path: path.to_path_buf(),
            then,
        }
    }
}

/// A line buffer the parsers are done with, back to the reader: a fresh
/// one of megabytes each line was new pages the kernel zeroes, a tenth of
/// the report's CPU at 10,000 nodes (issue 42, measured with perf).
/// Buffers above this size (a keyframe's) are not kept.
const RECYCLE_MAX: usize = 64 << 20;

/// Cuts the stream into lines, handing them to the parsers in turn.
fn cut(
    mut lines: Lines,
    frames: Frames,
    to: Vec<SyncSender<(u64, Vec<u8>)>>,
    recycled: Receiver<Vec<u8>>,
    ending: SyncSender<Ending>,
) {
    let mut turn = 0;
    loop {
        // A bridged keyframe in a frame of its own, with its recall: the
        // reading goes on at the next frame, neither decompressed.
        if let Some(&at) = frames.then.get(&(lines.number + 1))
            && let Ok(mut next) = Lines::open_at(&frames.path, at)
        {
            next.too_long = std::mem::take(&mut lines.too_long);
            let passed = [lines.number + 1, lines.number + 2];
            lines = next;
            let sent = passed.into_iter().all(|n| {
                let ok = to[turn].send((n, Vec::new())).is_ok();
                turn = (turn + 1) % to.len();
                ok
            });
            if !sent {
                break;
            }
            continue;
        }
        // A bridged keyframe and its recall: passed over unread (the
        // parser would pass over them too).
        if lines.pass_over(&[BRIDGED, RECALL]) {
            if to[turn].send((lines.number, Vec::new())).is_err() {
                break;
            }
            turn = (turn + 1) % to.len();
            continue;
        }
        if lines.next_line().is_none() {
            break;
        }
        // The line is handed over, not copied (megabytes each at 10,000
        // nodes); the next is read into a buffer done with, or a new one,
        // with room for a line a half longer than this one (growing a
        // buffer of megabytes is a copy into new pages).
        let size = lines.buf.len().saturating_mul(3) / 2;
        let mut next = recycled
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(size));
        next.reserve(size);
        let l = std::mem::replace(&mut lines.buf, next);
        if to[turn].send((lines.number, l)).is_err() {
            break;
        }
        turn = (turn + 1) % to.len();
    }
    drop(to);
    let _ = ending.send((lines.cut.take(), std::mem::take(&mut lines.too_long)));
}

fn spawn<F: FnOnce() + Send + 'static>(name: &str, f: F) -> Result<(), RecordingError> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map(drop)
        .map_err(|e| RecordingError::Thread(Arc::new(e)))
}

impl Stream {
    pub fn open(path: &Path) -> Result<Stream, RecordingError> {
        let mut lines = Lines::open(path)?;
        let header = read_header(&mut lines, path)?;
        let (mut inputs, mut parsed) = (Vec::new(), Vec::new());
        // As many buffers kept as can be in flight: one a parser reads,
        // one waiting for it. Each is at most `RECYCLE_MAX`.
        let (back, recycled) = sync_channel::<Vec<u8>>(PARSERS * (AHEAD + 1));
        for _ in 0..PARSERS {
            let (tx, rx) = sync_channel::<(u64, Vec<u8>)>(AHEAD);
            let (ptx, prx) = sync_channel::<Parsed>(AHEAD);
            let back = back.clone();
            spawn("recording-parse", move || {
                for (n, mut l) in rx {
                    // A keyframe after a delta of the same snapshot, and
                    // the recall before it: for seeks, passed over here.
                    let e = if l.is_empty() || l.starts_with(BRIDGED) {
                        Ok(Entry::Recall)
                    } else {
                        parse(&l)
                    };
                    if l.capacity() <= RECYCLE_MAX {
                        l.clear();
                        // None wanted (the reader has enough): dropped.
                        let _ = back.try_send(l);
                    }
                    if ptx.send((n, e)).is_err() {
                        return;
                    }
                }
            })?;
            inputs.push(tx);
            parsed.push(prx);
        }
        drop(back);
        let (etx, ending) = sync_channel(1);
        let frames = Frames::of(path, &header);
        spawn("recording-read", move || {
            cut(lines, frames, inputs, recycled, etx)
        })?;
        let (done, done_rx) = channel();
        let applier = Applier {
            parsed,
            turn: 0,
            current: None,
            spare: None,
            done: done_rx,
            pool: NodePool::default(),
            skipped: Vec::new(),
        };
        // One snapshot ahead of the reader, one being made.
        let (itx, items) = sync_channel(1);
        let applier = std::thread::Builder::new()
            .name("recording-apply".into())
            .spawn(move || applier.run(itx))
            .map_err(|e| RecordingError::Thread(Arc::new(e)))?;
        Ok(Stream {
            path: path.to_path_buf(),
            header,
            items: Some(items),
            done,
            applier: Some(applier),
            ending,
            ended: None,
            skipped: Vec::new(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How the file ended; waits for the reader when the stream has not
    /// been read to its end.
    fn ending(&mut self) -> &Ending {
        if self.ended.is_none() {
            // Nothing more is applied, so nothing more parsed: the
            // applier, the parsers and the reader stop.
            self.items = None;
            if let Some(a) = self.applier.take() {
                self.skipped = a.join().unwrap_or_default();
            }
            self.ended = Some(self.ending.recv().unwrap_or_default());
        }
        self.ended.get_or_insert_with(Default::default)
    }

    /// Why reading stopped early (a crash mid-write cuts the last block).
    pub fn truncated(&mut self) -> Option<String> {
        self.ending().0.clone()
    }

    /// What was wrong with the file, a line each (as `Recording::damage`
    /// says it).
    pub fn damage(&mut self) -> Vec<String> {
        let (cut, too_long) = self.ending().clone();
        let mut skipped: Vec<String> = self.skipped.iter().chain(&too_long).cloned().collect();
        skipped.sort_by_key(|w| super::reader::line_of(w));
        super::reader::damage_lines(&self.path, cut.as_deref(), &skipped)
    }

    /// The first line skipped, as the error for a file with no snapshot
    /// names it.
    pub fn first_skipped(&mut self) -> Option<String> {
        let too_long = self.ending().1.first().cloned();
        self.skipped.first().cloned().or(too_long)
    }

    /// A snapshot the reader is done with, handed back: when nothing else
    /// holds it, the next snapshot is made from it (see [`refill`]).
    pub fn recycle(&mut self, done: Arc<Cluster>) {
        // The applier gone: dropped here.
        let _ = self.done.send(done);
    }
}

impl Iterator for Stream {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        self.items.as_ref()?.recv().ok()
    }
}

impl Applier {
    /// Each item in turn to `out`, until the recording ends or the
    /// reader stops; the lines skipped.
    fn run(mut self, out: SyncSender<Item>) -> Vec<String> {
        while let Some(item) = self.next_item() {
            if out.send(item).is_err() {
                break;
            }
        }
        self.skipped
    }

    /// A snapshot the reader is done with: the next is made from it.
    fn recycle(&mut self, done: Arc<Cluster>) {
        match Arc::try_unwrap(done) {
            // An older spare is dropped here: on this thread, which made
            // its records, not on another (dropping on a thread of its own
            // was a second slower in 20 minutes at 10,000 nodes: the
            // GPUs' shared names' counts went from core to core).
            Ok(c) => self.spare = Some(c),
            Err(shared) => drop(shared),
        }
    }

    /// The current snapshot, as a shared one of its own.
    fn emit(&mut self) -> Option<Arc<Cluster>> {
        while let Ok(done) = self.done.try_recv() {
            self.recycle(done);
        }
        let cur = self.current.as_ref()?;
        let c = match self.spare.take() {
            Some(mut spare) => {
                let pool = &mut self.pool;
                refill(&mut spare, cur, |i, n| pool.give(i, n));
                spare
            }
            None => cur.clone(),
        };
        Some(Arc::new(c))
    }

    fn skip(&mut self, line: u64, why: impl std::fmt::Display) {
        self.skipped.push(format!("line {line}: {why}; skipped"));
    }

    /// The next line parsed, in the file's order.
    fn next_parsed(&mut self) -> Option<Parsed> {
        let p = self.parsed.get(self.turn)?.recv().ok()?;
        self.turn = (self.turn + 1) % self.parsed.len();
        Some(p)
    }
}

impl Applier {
    fn next_item(&mut self) -> Option<Item> {
        loop {
            let (n, entry) = self.next_parsed()?;
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    self.skip(n, format!("unreadable ({e})"));
                    continue;
                }
            };
            match entry {
                Entry::Header(_) | Entry::Recall => continue,
                Entry::Audit { time, record } => return Some(Item::Audit(time, record)),
                Entry::Key { cluster, .. } => {
                    if !TIMES.contains(&cluster.time) {
                        self.skip(
                            n,
                            format!("a snapshot time out of range ({})", cluster.time),
                        );
                        continue;
                    }
                    let mut key = *cluster;
                    if let Some(prev) = &self.current {
                        super::share_with(prev, &mut key);
                    }
                    self.current = Some(key);
                }
                Entry::Delta(d) => {
                    if !TIMES.contains(&d.time) {
                        self.skip(n, format!("a snapshot time out of range ({})", d.time));
                        continue;
                    }
                    // A delta before any keyframe that could be read.
                    let Some(c) = self.current.as_mut() else {
                        continue;
                    };
                    if let Err(e) = apply_with(c, &d, &mut self.pool) {
                        tracing::warn!("recording: a delta does not apply: {e}; skipped");
                        continue;
                    }
                }
            }
            return self.emit().map(Item::Snapshot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::sim::{Sim, SimConfig};

    /// A snapshot made from an older one equals the current one, field
    /// for field, and shares its nodes and jobs; the nodes let go are the
    /// older one's that changed.
    #[test]
    fn a_snapshot_refilled_from_an_older_one_is_the_current_one() {
        let mut sim = Sim::new(SimConfig::default()).expect("sim");
        let older = sim.snapshot();
        sim.advance(120);
        let mut cur = sim.snapshot();
        cur.name = "renamed".into();
        cur.no_job_signal = true;
        cur.events.clear();
        let mut spare = older.clone();
        let mut let_go = Vec::new();
        refill(&mut spare, &cur, |_, n| let_go.push(n));
        assert_eq!(spare, cur);
        fn shared<T>(a: &[Arc<T>], b: &[Arc<T>]) -> bool {
            a.iter().zip(b).all(|(x, y)| Arc::ptr_eq(x, y))
        }
        assert!(shared(&spare.nodes, &cur.nodes));
        assert!(shared(&spare.jobs, &cur.jobs));
        let changed = older
            .nodes
            .iter()
            .zip(&cur.nodes)
            .filter(|(a, b)| !Arc::ptr_eq(a, b))
            .count();
        assert!(changed > 0, "the sim changed no node in two minutes");
        assert_eq!(let_go.len(), changed);
    }
}
