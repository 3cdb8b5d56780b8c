//! The report's one pass over a recording: the health numbers, each job's
//! fate, the analysis's memory, the incidents seen every few minutes and
//! just before each action, and each job as it was just before it stopped
//! — all gathered as the snapshots stream, the file read once (issue 42:
//! it was read three times, twice parsed whole, and a state kept for every
//! job's stop).

use crate::actions::audit::Record;
use crate::engine::SiteParams;
use crate::engine::incidents::{Incident, IncidentKind};
use crate::engine::kpis::{Change, JobWatch, KpiBook};
use crate::engine::memory::Memory;
use crate::engine::restore::{Restore, restore_on};
use crate::engine::xid::XidCatalog;
use crate::model::{Cluster, Job, JobState, Phase, Timestamp};
use crate::stream::{Item, Stream};
use crate::{Header, KEY_EVERY_S, RecordingError};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// How a job stopped short: died (failed, cancelled) or sent back to the
/// queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Stop {
    Ended,
    Requeued,
}

/// A job as the last snapshot before it stopped showed it, and its
/// restore estimate then — worked out only for a job an incident may name
/// (one its events named, or a gang-mate of one, or a stalled gang's), the
/// plan of a what-if being the costly part.
#[derive(Debug, Clone, Default)]
pub(super) struct Before {
    pub job: Option<Arc<Job>>,
    pub restore: Option<Restore>,
}

/// What happened to each job over the recording: its state at the end,
/// and when it died or was sent back to the queue.
#[derive(Default)]
pub(super) struct Fates {
    watch: JobWatch,
    ended: FxHashMap<String, Timestamp>,
    requeued: FxHashMap<String, Timestamp>,
    /// When a requeued job was first seen running again: what happened,
    /// beside what was estimated then (issue 58: the report said "back in
    /// 1d00h" of jobs that ran again within three minutes).
    ran_again: FxHashMap<String, Timestamp>,
}

impl Fates {
    /// Takes in the next snapshot; the jobs that stopped for the first
    /// time (as died or as requeued).
    fn observe(&mut self, c: &Cluster) -> Vec<(String, Stop)> {
        let (ended, requeued, ran_again) =
            (&mut self.ended, &mut self.requeued, &mut self.ran_again);
        let mut first = Vec::new();
        self.watch.observe(c, |j, change| match change {
            Change::Stopped(_) => {
                if !ended.contains_key(j.id.as_str()) {
                    ended.insert(j.id.clone(), j.end_time.unwrap_or(c.time));
                    first.push((j.id.clone(), Stop::Ended));
                }
            }
            Change::Requeued => {
                if !requeued.contains_key(j.id.as_str()) {
                    requeued.insert(j.id.clone(), c.time);
                    first.push((j.id.clone(), Stop::Requeued));
                }
                // Requeued and started again between two snapshots: its
                // restart count went up and it runs.
                if j.state.holds_resources() && !ran_again.contains_key(j.id.as_str()) {
                    ran_again.insert(j.id.clone(), c.time);
                }
            }
            Change::Started => {
                if requeued.contains_key(j.id.as_str()) && !ran_again.contains_key(j.id.as_str()) {
                    ran_again.insert(j.id.clone(), c.time);
                }
            }
        });
        first
    }

    /// When a job sent back to the queue was first seen running again.
    pub(super) fn ran_again(&self, id: &str) -> Option<Timestamp> {
        self.ran_again.get(id).copied()
    }

    /// Its fate, when it stopped (died or requeued), and how.
    pub(super) fn fate(&self, id: &str, stalled: bool) -> (String, Option<(Timestamp, Stop)>) {
        let last = self.watch.state(id);
        let ended = self.ended.get(id).map(|t| (*t, Stop::Ended));
        let requeued = self.requeued.get(id).map(|t| (*t, Stop::Requeued));
        match last {
            Some(JobState::Failed) => ("failed".into(), ended),
            Some(JobState::Cancelled) => ("cancelled".into(), ended),
            _ if requeued.is_some() => ("requeued".into(), requeued),
            Some(JobState::Completed) => ("completed".into(), None),
            Some(s) if s.holds_resources() && stalled => {
                ("stalled, still holding its GPUs".into(), None)
            }
            Some(s) if s.holds_resources() => ("still running".into(), None),
            Some(s) => (s.as_str().into(), None),
            None => ("gone from the data".into(), None),
        }
    }
}

/// The jobs an incident may name: those the events named (an incident's
/// jobs are its event's, then their gangs), and their gangs.
#[derive(Default)]
struct Named {
    jobs: FxHashSet<String>,
    gangs: FxHashSet<String>,
}

impl Named {
    fn observe(&mut self, c: &Cluster) {
        for e in &c.events {
            // The window's events are read every snapshot: an id already
            // named is not copied again.
            for j in &e.jobs {
                if self.jobs.contains(j.id.as_str()) {
                    continue;
                }
                self.jobs.insert(j.id.clone());
                if let Some(g) = c.job(&j.id).and_then(|x| x.gang.as_deref()) {
                    self.gangs.insert(g.to_string());
                }
            }
        }
    }

    /// Whether an incident may name `j`: named by an event, in a named
    /// gang, or stalled (or a gang-mate of a stalled job) as `memory`
    /// saw it.
    fn may_name(&self, j: &Job, c: &Cluster, memory: &Memory) -> bool {
        let in_gang = |g: &str| self.gangs.contains(g);
        if self.jobs.contains(j.id.as_str()) || j.gang.as_deref().is_some_and(in_gang) {
            return true;
        }
        let stalled: Vec<&str> = memory.stalls().jobs().collect();
        stalled.contains(&j.id.as_str())
            || j.gang.as_deref().is_some_and(|g| {
                stalled
                    .iter()
                    .any(|s| c.job(s).and_then(|x| x.gang.as_deref()) == Some(g))
            })
    }
}

/// What the one pass gathers.
pub(super) struct Night {
    pub header: Header,
    pub from: Timestamp,
    pub to: Timestamp,
    pub book: KpiBook,
    pub fates: Fates,
    pub end: Arc<Cluster>,
    /// What the analysis remembers at the end (the console's, had it
    /// watched the whole night), every hardware fault of it included.
    pub memory: Memory,
    /// Each incident seen at a look: its first view (a domain's widest).
    pub found: BTreeMap<String, Incident>,
    /// The audit records, each with the source's clock when seen.
    pub audit: Vec<(Timestamp, Record)>,
    pub before: FxHashMap<(String, Stop), Before>,
    pub truncated: Option<String>,
    pub damage: Vec<String>,
}

/// The incidents of `now`, into `found`: each incident's first view; a
/// domain's incident gathers nodes as their links go: its widest view is
/// the one to tell.
fn seen(found: &mut BTreeMap<String, Incident>, now: Vec<Incident>) {
    for i in now {
        let wider = found
            .get(&i.id)
            .is_none_or(|x| i.kind == IncidentKind::Domain && i.nodes.len() > x.nodes.len());
        if wider {
            found.insert(i.id.clone(), i);
        }
    }
}

/// The walk's running state, between snapshots.
struct Walk<'a> {
    site: &'a SiteParams,
    cat: &'a XidCatalog,
    book: KpiBook,
    fates: Fates,
    memory: Memory,
    named: Named,
    /// Looks still to take: each is taken on the last snapshot at or
    /// before it, when the first one after it arrives.
    looks: BTreeSet<Timestamp>,
    found: BTreeMap<String, Incident>,
    before: FxHashMap<(String, Stop), Before>,
    prev: Option<Arc<Cluster>>,
    from: Option<Timestamp>,
    to: Timestamp,
}

impl Walk<'_> {
    /// Takes in the next snapshot; the one before, done with.
    fn snapshot(&mut self, c: Arc<Cluster>) -> Option<Arc<Cluster>> {
        let from = *self.from.get_or_insert(c.time);
        if self.prev.is_none() {
            self.looks.insert(from);
        }
        if let Some(p) = &self.prev {
            // Every look this snapshot passes sees the one before it.
            if self.looks.first().is_some_and(|t| *t < c.time) {
                self.looks = self.looks.split_off(&c.time);
                let incidents = self.memory.incidents(p, self.site, self.cat);
                seen(&mut self.found, incidents);
            }
        }
        self.named.observe(&c);
        let stops = self.fates.observe(&c);
        self.before_stops(stops);
        self.book.observe(&c);
        self.memory.observe(&c, self.site);
        // The next look: the next few minutes' mark after this snapshot.
        let every = KEY_EVERY_S;
        self.looks
            .insert(from.saturating_add(((c.time - from) / every + 1).saturating_mul(every)));
        self.to = self.to.max(c.time);
        self.prev.replace(c)
    }

    /// Each job that stopped, as the snapshot before showed it.
    fn before_stops(&mut self, stops: Vec<(String, Stop)>) {
        let Some(p) = &self.prev else {
            return;
        };
        let mut unusable = None;
        for (id, how) in stops {
            let ix = p.jobs.iter().position(|x| x.id == id);
            let job = ix.map(|i| p.jobs[i].clone());
            let restore = ix
                .filter(|&i| {
                    let j = &p.jobs[i];
                    j.state.holds_resources() && self.named.may_name(j, p, &self.memory)
                })
                .and_then(|i| {
                    let u = unusable
                        .get_or_insert_with(|| self.memory.unusable(p, self.site, self.cat));
                    restore_on(p, u, i, self.site)
                });
            self.before.insert((id, how), Before { job, restore });
        }
    }
}

/// Reads the recording once (see the module).
pub(super) fn walk(
    mut stream: Stream,
    site: &SiteParams,
    cat: &XidCatalog,
) -> Result<Night, RecordingError> {
    let mut w = Walk {
        site,
        cat,
        // Everything is kept: the window is the whole recording.
        book: KpiBook::new(i64::MAX / 4),
        fates: Fates::default(),
        memory: Memory::default(),
        named: Named::default(),
        looks: BTreeSet::new(),
        found: BTreeMap::new(),
        before: FxHashMap::default(),
        prev: None,
        from: None,
        to: Timestamp::MIN,
    };
    let mut audit = Vec::new();
    while let Some(item) = stream.next() {
        match item {
            Item::Snapshot(c) => {
                if let Some(done) = w.snapshot(c) {
                    // Made the next snapshot: its records that stayed are
                    // not copied again.
                    stream.recycle(done);
                }
            }
            Item::Audit(t, r) => {
                // Just before each action (the state then).
                if r.phase == Phase::Intent {
                    w.looks.insert(t);
                }
                audit.push((t, *r));
            }
        }
    }
    // The looks left are at the end: the end's own analysis tells them.
    let (Some(end), Some(from)) = (w.prev, w.from) else {
        let first_skipped = stream.first_skipped();
        return Err(RecordingError::NoSnapshot {
            path: stream.path().to_path_buf(),
            first_skipped,
        });
    };
    Ok(Night {
        header: stream.header.clone(),
        from,
        to: w.to,
        book: w.book,
        fates: w.fates,
        end,
        memory: w.memory,
        found: w.found,
        audit,
        before: w.before,
        truncated: stream.truncated(),
        damage: stream.damage(),
    })
}
