//! The night on record: what a source delivered, snapshot by snapshot, and
//! the actions taken meanwhile, in one append-only file that replays.
//!
//! Format (version 3): zstd frames of JSON lines. The first line is a
//! header; then a keyframe (a whole snapshot) every `KEY_EVERY_S` seconds
//! of the source's clock or `KEY_EVERY_BYTES` of deltas (a keyframe that
//! can also be said as a delta follows that delta, `bridged`: read in
//! order it is passed over), and between them deltas — only the nodes and jobs
//! that changed (unchanged ones are the same `Arc` from a source that
//! shares them, else compared by value; a node whose GPU readings alone
//! changed as those readings, [`readings`]), new events, the jobs that left
//! (or the whole job order when it changed otherwise). Audit records are
//! lines of their own, stamped with the source's clock when they were
//! seen. Each keyframe begins a zstd frame of its own and follows a recall
//! line: what the analysis remembered and the health numbers just before
//! it ([`Recall`]), so a jump reads from the keyframe before it, not from
//! the start. An index beside the file (`FILE.idx`, [`IndexLine`]) says
//! where each snapshot line and frame is, so opening reads no more than
//! the header. Why this shape: JSON lines keep it readable with `zstd -dc
//! FILE | jq`, the deltas keep a quiet cluster to a few bytes a second,
//! and zstd with long-distance matching (a 128 MiB window) folds what the
//! deltas still repeat within a frame. The writer flushes a zstd block and
//! syncs the file every second, so a crash loses at most the last second:
//! the reader stops at the first incomplete block and says so. Version 1
//! files (one frame, no recall, no index) and version 2 files (whole
//! nodes only) are read as before; a reader of an older version refuses a
//! newer file, naming its version.

// The layers below under their own names, so `crate::model` and
// `crate::sources` read the same in every crate.
use nightshift_actions as actions;
use nightshift_core::{engine, host, limits, model, protocol, report, text};
use nightshift_sources as sources;

pub mod postmortem;

mod error;
pub use error::RecordingError;
pub mod reader;
pub mod readings;
pub mod replay;
pub mod reuse;
pub mod run;
pub mod stream;
mod writer;

pub use reader::Recording;
pub use writer::Recorder;

use crate::model::audit::Record;
use crate::model::{Cluster, Event, Job, Node, Partition, Quota, Timestamp};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

pub const FORMAT: &str = "nightshift-recording";
/// Version 2: a delta says which jobs left (`jobs_gone`) instead of
/// every job's id whenever one came or went; the reader of version 1
/// refuses it, naming the version. Version 3: a node whose GPU readings
/// alone changed is said as those readings (`readings`); the reader of
/// version 2 refuses it, naming the version.
pub const VERSION: u32 = 3;
/// A keyframe this often (source clock): seeking replays at most this much.
pub const KEY_EVERY_S: i64 = 300;
/// A keyframe, too, once the deltas since the last one pass this many
/// bytes of JSON: a seek parses and applies at most this much (about 50 s
/// of the 10,000-node sim in version 3; a small cluster keeps to
/// `KEY_EVERY_S`). What a seek costs is mostly the snapshots it takes in
/// (the analysis's memory and the health numbers, ~10 ms each at 10,000
/// nodes), so the bound is on their number more than on bytes: 256 MiB,
/// right for version 2's 5 MB a second, was 260 s of version 3's deltas
/// and a 5.6 s jump in the console; 64 MiB, 61 s and 2.2 s (issue 42).
pub const KEY_EVERY_BYTES: u64 = 48 << 20;
/// zstd's window, as a power of two: deltas an hour apart still match.
const WINDOW_LOG: u32 = 27;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub format: String,
    pub version: u32,
    /// The source recorded (`sim`, `slurm`, `kube`).
    pub source: String,
    pub cluster: String,
    /// The source's clock at the first snapshot.
    pub started: Timestamp,
    /// The nightshift that wrote it.
    pub recorder: String,
}

/// Only what changed since the previous snapshot.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Delta {
    pub time: Timestamp,
    /// Changed nodes by position (the node list's names and order are the
    /// same; otherwise a keyframe is written).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<(usize, Arc<Node>)>,
    /// Changed nodes whose GPU readings alone changed, said as those
    /// readings (version 3; see [`readings`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub readings: Vec<readings::NodeReadings>,
    /// Jobs that are new or changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<Arc<Job>>,
    /// Every job id in order, when the order changed otherwise than by
    /// jobs leaving and new ones coming last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_order: Option<Vec<String>>,
    /// The jobs gone since the previous snapshot, the others in the same
    /// order (version 2): the new jobs, in `jobs`, come after them. A
    /// source that drops finished jobs and appends new ones (the sim,
    /// Slurm's list by id) writes this, not 100,000 ids a second.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs_gone: Vec<String>,
    /// Where each of `jobs` is in the snapshot's job list, and where each
    /// of `jobs_gone` was in the previous one's (written since issue 42's
    /// second pass, still version 2: a reader without them reads by id).
    /// A reader replaces those places instead of reading 100,000 jobs'
    /// ids a snapshot; a place that does not hold that id is read by id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs_at: Vec<usize>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs_gone_at: Vec<usize>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<Event>,
    /// The first event sequence number the snapshot still keeps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_from: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<Vec<Partition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quotas: Option<Vec<Quota>>,
    /// The reservations ahead, when they changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservations: Option<Vec<crate::model::Reservation>>,
}

/// One line of a recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Entry {
    Header(Header),
    Key {
        /// A keyframe that follows a delta of the same snapshot (version
        /// 2): there for a seek to start from; read in order, the delta
        /// already brought it and it is passed over unparsed.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        bridged: bool,
        cluster: Box<Cluster>,
    },
    Delta(Box<Delta>),
    /// An audit record (an action's intent or outcome), with the source's
    /// clock when it was seen (the record's own time is the wall clock).
    Audit {
        time: Timestamp,
        record: Box<Record>,
    },
    /// What the analysis remembered and the health numbers just before
    /// the keyframe that follows (version 2): read where a jump wants it
    /// ([`Recall`]), passed over otherwise.
    Recall,
}

/// The line before each keyframe (version 2): the analysis's memory and
/// the health numbers as of the snapshot before it, each having taken in
/// every snapshot since the recording began. A jump, `--replay --at` and
/// the console's seek start from the keyframe before the time asked for
/// and this, not from the recording's start.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Recall {
    /// `recall`.
    pub kind: String,
    /// The keyframe's time.
    pub time: Timestamp,
    /// The site's parameters the memory was taken with
    /// ([`Memory::site_key`]): another site's is not used.
    pub site: String,
    pub memory: crate::engine::memory::Memory,
    pub book: crate::engine::kpis::KpiBook,
}

/// The index beside a recording (`FILE.idx`, version 2), written as the
/// recording is: its header, each snapshot line's time and number, each
/// keyframe's zstd frame (where it starts in the file and its first
/// line), the audit records. Opening reads it, not the recording (an hour
/// at 10,000 nodes is 17.7 GB of JSON to scan); without it, or when it
/// does not match, the recording is scanned as before.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct IndexLine {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<Header>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// A keyframe's frame: its offset in the file and its first line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame: Option<(u64, u64)>,
    /// A keyframe after a delta of the same snapshot (see `Entry::Key`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bridged: bool,
    /// A bridged keyframe's frame holds its recall and itself only
    /// (version 3): where the frame after it begins. Its first line is
    /// the one after the keyframe. A reader going in order goes there
    /// without decompressing the keyframe (at 10,000 nodes, 94 MB of JSON
    /// every 50 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub then: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<(Timestamp, Box<Record>)>,
    /// The recording's size once flushed: an index whose last size is
    /// not the file's (cut by a crash, written to since, edited) is not
    /// used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// The most of an index read: a line per snapshot, so an hour at one a
/// second is well under a megabyte; past this it is not this recording's.
const INDEX_MAX: u64 = 64 << 20;

/// The index's bytes: a regular file only, never through a link, never
/// waiting on a FIFO, at most [`INDEX_MAX`] (issue 59: a FIFO at
/// `FILE.idx` hung `report`, `--replay` and `--at`; `/dev/zero` took
/// 2 GB). `None`: no index to use, and the recording is scanned.
pub(crate) fn read_index(path: &std::path::Path) -> Option<Vec<u8>> {
    match crate::host::read_regular(path, INDEX_MAX) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            tracing::warn!(
                "{}: {e}: not used, the recording is scanned",
                path.display()
            );
            None
        }
    }
}

/// Where a recording's index is.
pub fn index_path(path: &std::path::Path) -> std::path::PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".idx");
    p.into()
}

impl Entry {
    /// The source-clock time of the entry; `None` for the header.
    pub fn time(&self) -> Option<Timestamp> {
        match self {
            Entry::Header(_) => None,
            Entry::Key { cluster, .. } => Some(cluster.time),
            Entry::Delta(d) => Some(d.time),
            Entry::Audit { time, .. } => Some(*time),
            Entry::Recall => None,
        }
    }
}

fn same<T: PartialEq>(a: &Arc<T>, b: &Arc<T>) -> bool {
    Arc::ptr_eq(a, b) || **a == **b
}

/// What changed from `prev` to `c`; `None` when only a keyframe can say it
/// (another cluster, or nodes came, went or moved).
pub fn delta(prev: &Cluster, c: &Cluster) -> Option<Delta> {
    if prev.name != c.name
        || prev.source != c.source
        || prev.nodes.len() != c.nodes.len()
        || prev
            .nodes
            .iter()
            .zip(&c.nodes)
            .any(|(a, b)| a.name != b.name)
    {
        return None;
    }
    let (mut nodes, mut node_readings) = (Vec::new(), Vec::new());
    for (i, (a, b)) in prev.nodes.iter().zip(&c.nodes).enumerate() {
        if same(a, b) {
            continue;
        }
        match readings::between(i, a, b) {
            Some(r) => node_readings.push(r),
            None => nodes.push((i, b.clone())),
        }
    }
    let before: rustc_hash::FxHashMap<&str, &Arc<Job>> =
        prev.jobs.iter().map(|j| (j.id.as_str(), j)).collect();
    let (jobs_at, jobs): (Vec<usize>, Vec<Arc<Job>>) = c
        .jobs
        .iter()
        .enumerate()
        .filter(|(_, j)| before.get(j.id.as_str()).is_none_or(|b| !same(b, j)))
        .map(|(i, j)| (i, j.clone()))
        .unzip();
    let reordered =
        prev.jobs.len() != c.jobs.len() || prev.jobs.iter().zip(&c.jobs).any(|(a, b)| a.id != b.id);
    let (job_order, gone) = match reordered.then(|| jobs_gone(prev, c, &before)) {
        None => (None, Vec::new()),
        Some(Some(gone)) => (None, gone),
        Some(None) => (
            Some(c.jobs.iter().map(|j| j.id.clone()).collect()),
            Vec::new(),
        ),
    };
    let (jobs_gone_at, jobs_gone) = gone.into_iter().unzip();
    // With a new order, the places are of no use: the order says all.
    let jobs_at = if job_order.is_none() {
        jobs_at
    } else {
        Vec::new()
    };
    let last_seq = prev.events.last().map(|e| e.seq);
    let events = c
        .events
        .iter()
        .filter(|e| last_seq.is_none_or(|s| e.seq > s))
        .cloned()
        .collect();
    let first = |x: &Cluster| x.events.first().map(|e| e.seq);
    Some(Delta {
        time: c.time,
        nodes,
        readings: node_readings,
        jobs,
        job_order,
        jobs_gone,
        jobs_at,
        jobs_gone_at,
        events,
        events_from: (first(prev) != first(c)).then(|| first(c)).flatten(),
        partitions: (prev.partitions != c.partitions).then(|| c.partitions.clone()),
        quotas: (prev.quotas != c.quotas).then(|| c.quotas.clone()),
        reservations: (prev.reservations != c.reservations).then(|| c.reservations.clone()),
    })
}

/// A keyframe read after `prev`: its nodes and jobs that equal `prev`'s
/// are `prev`'s shared records, not second copies. Readers hold one
/// cluster, not two, across a keyframe (at 10,000 nodes each is hundreds
/// of megabytes), and what reads snapshots by shared record (the health
/// numbers, the analysis's memory) sees only what changed.
pub fn share_with(prev: &Cluster, key: &mut Cluster) {
    if prev.nodes.len() == key.nodes.len() {
        for (p, k) in prev.nodes.iter().zip(key.nodes.iter_mut()) {
            if p == k {
                *k = p.clone();
            }
        }
    }
    let before: rustc_hash::FxHashMap<&str, &Arc<Job>> =
        prev.jobs.iter().map(|j| (j.id.as_str(), j)).collect();
    for k in key.jobs.iter_mut() {
        if let Some(p) = before.get(k.id.as_str())
            && *p == k
        {
            *k = Arc::clone(p);
        }
    }
}

/// The jobs of `prev` gone from `c` (each with its place in `prev`), when
/// the jobs that stayed kept their order and the new ones all come after
/// them; `None` otherwise.
fn jobs_gone(
    prev: &Cluster,
    c: &Cluster,
    before: &rustc_hash::FxHashMap<&str, &Arc<Job>>,
) -> Option<Vec<(usize, String)>> {
    let now: rustc_hash::FxHashSet<&str> = c.jobs.iter().map(|j| j.id.as_str()).collect();
    let mut stayed = prev
        .jobs
        .iter()
        .map(|j| j.id.as_str())
        .filter(|id| now.contains(id));
    let mut new_ones = false;
    for j in &c.jobs {
        if before.contains_key(j.id.as_str()) {
            if new_ones || stayed.next() != Some(j.id.as_str()) {
                return None;
            }
        } else {
            new_ones = true;
        }
    }
    if stayed.next().is_some() || now.len() != c.jobs.len() {
        return None;
    }
    Some(
        prev.jobs
            .iter()
            .enumerate()
            .filter(|(_, j)| !now.contains(j.id.as_str()))
            .map(|(i, j)| (i, j.id.clone()))
            .collect(),
    )
}

/// `c` after `d`. Refuses a delta that does not fit (a corrupt file).
pub fn apply(c: &mut Cluster, d: &Delta) -> Result<(), RecordingError> {
    apply_with(c, d, &mut reuse::NodePool::default())
}

/// [`apply`], the nodes whose readings changed copied into `pool`'s
/// copies of them where it has one (see [`reuse`]).
pub fn apply_with(
    c: &mut Cluster,
    d: &Delta,
    pool: &mut reuse::NodePool,
) -> Result<(), RecordingError> {
    c.time = d.time;
    let count = c.nodes.len();
    for (i, n) in &d.nodes {
        let slot = c
            .nodes
            .get_mut(*i)
            .ok_or(RecordingError::DeltaNode { index: *i, count })?;
        *slot = n.clone();
    }
    for r in &d.readings {
        let slot = c
            .nodes
            .get_mut(r.at)
            .ok_or(RecordingError::DeltaNode { index: r.at, count })?;
        let mut node = pool.copy_of(r.at, slot);
        readings::apply_onto(&mut node, r).ok_or(RecordingError::DeltaReadings {
            index: r.at,
            gpus: slot.gpus.len(),
            readings: r.gpus.len(),
        })?;
        *slot = Arc::new(node);
    }
    match &d.job_order {
        Some(order) => {
            let mut by_id: rustc_hash::FxHashMap<&str, &Arc<Job>> =
                c.jobs.iter().map(|j| (j.id.as_str(), j)).collect();
            for j in &d.jobs {
                by_id.insert(j.id.as_str(), j);
            }
            let jobs: Result<Vec<Arc<Job>>, RecordingError> = order
                .iter()
                .map(|id| {
                    by_id
                        .get(id.as_str())
                        .map(|j| Arc::clone(j))
                        .ok_or_else(|| RecordingError::DeltaOrder(id.clone()))
                })
                .collect();
            c.jobs = jobs?;
        }
        None => {
            if !remove_by_place(&mut c.jobs, &d.jobs_gone, &d.jobs_gone_at)
                && !d.jobs_gone.is_empty()
            {
                let gone: rustc_hash::FxHashSet<&str> =
                    d.jobs_gone.iter().map(String::as_str).collect();
                c.jobs.retain(|j| !gone.contains(j.id.as_str()));
            }
            if !replace_by_place(&mut c.jobs, &d.jobs, &d.jobs_at) && !d.jobs.is_empty() {
                replace_by_id(&mut c.jobs, &d.jobs);
            }
        }
    }
    if let Some(from) = d.events_from {
        c.events.retain(|e| e.seq >= from);
    }
    c.events.extend(d.events.iter().cloned());
    if let Some(p) = &d.partitions {
        c.partitions = p.clone();
    }
    if let Some(q) = &d.quotas {
        c.quotas = q.clone();
    }
    if let Some(r) = &d.reservations {
        c.reservations = r.clone();
    }
    Ok(())
}

/// `jobs_gone` taken out of `jobs` by their places, when the delta has
/// them and each place holds that id (only those jobs are read); false,
/// and nothing changed, otherwise.
fn remove_by_place(jobs: &mut Vec<Arc<Job>>, gone: &[String], at: &[usize]) -> bool {
    if gone.is_empty() || gone.len() != at.len() {
        return false;
    }
    let fits = at.windows(2).all(|w| w[0] < w[1])
        && at
            .iter()
            .zip(gone)
            .all(|(&i, id)| jobs.get(i).is_some_and(|j| j.id == *id));
    if !fits {
        return false;
    }
    let mut place = 0usize;
    let mut next = at.iter().peekable();
    jobs.retain(|_| {
        let leaves = next.next_if(|&&i| i == place).is_some();
        place += 1;
        !leaves
    });
    true
}

/// The changed and new jobs put at their places, when the delta has them
/// and they fit: a changed job's place holds its id, the new ones come
/// last in order. False, and nothing changed, otherwise.
fn replace_by_place(jobs: &mut Vec<Arc<Job>>, changed: &[Arc<Job>], at: &[usize]) -> bool {
    if changed.is_empty() || changed.len() != at.len() {
        return false;
    }
    let len = jobs.len();
    let mut new = 0usize;
    let fits = changed.iter().zip(at).all(|(j, &i)| {
        if i < len {
            jobs.get(i).is_some_and(|x| x.id == j.id)
        } else {
            new += 1;
            i == len + new - 1
        }
    });
    if !fits {
        return false;
    }
    for (j, &i) in changed.iter().zip(at) {
        match jobs.get_mut(i) {
            Some(slot) => *slot = j.clone(),
            None => jobs.push(j.clone()),
        }
    }
    true
}

/// The changed jobs put where their ids are, the new ones (not found)
/// last in the delta's order: one pass (a search per changed job was a
/// pass over 100,000 jobs each at 10,000 nodes).
fn replace_by_id(jobs: &mut Vec<Arc<Job>>, changed: &[Arc<Job>]) {
    let mut by_id: rustc_hash::FxHashMap<&str, &Arc<Job>> =
        changed.iter().map(|j| (j.id.as_str(), j)).collect();
    for slot in jobs.iter_mut() {
        if let Some(j) = by_id.remove(slot.id.as_str()) {
            *slot = j.clone();
        }
    }
    let new = changed.iter().filter(|j| by_id.contains_key(j.id.as_str()));
    jobs.extend(new.cloned());
}

/// A time on the command line: Unix seconds, `+90m` from the recording's
/// start, or `HH:MM[:SS]` (UTC) on the day the recording starts (the next
/// day when that is before the start). Read by the protocol's own.
pub fn parse_at(s: &str, started: Timestamp) -> Result<Timestamp, RecordingError> {
    crate::protocol::replay::parse_at(s, started).map_err(|e| match e {
        crate::protocol::replay::AtError::Duration(d) => d.into(),
        crate::protocol::replay::AtError::Unreadable(s) => RecordingError::At(s),
    })
}

#[cfg(test)]
mod tests;
