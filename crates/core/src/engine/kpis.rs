//! The scheduler's health numbers over a window: what a GPU scheduling team
//! is measured by. A `KpiBook` observes snapshots in order (live, or a
//! recording replayed) and answers for any window ending at the last one.
//! Definitions: docs/decision-engine.md, "Scheduler health numbers".

use crate::model::{Cluster, JobState, Timestamp};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};

/// One snapshot, reduced to what the figures need. Recorded as a row
/// ([`SampleRow`]): a recording carries a day of them before each
/// keyframe.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
#[serde(from = "SampleRow", into = "SampleRow")]
struct Sample {
    time: Timestamp,
    gpus: u32,
    allocated: u32,
    /// Σ SM occupancy over GPUs whose occupancy is known, and how many.
    busy: f64,
    busy_known: u32,
    nodes: u32,
    nodes_out: u32,
    /// Some job waiting for capacity could not start although enough GPUs
    /// were free in total in its partition.
    fragmented: bool,
}

/// A sample as a row: time, GPUs, allocated, the occupancy sum's bits
/// (read back to the bit), GPUs reporting it, nodes, nodes out,
/// fragmented.
#[derive(Serialize, serde::Deserialize)]
struct SampleRow(Timestamp, u32, u32, u64, u32, u32, u32, bool);

impl From<Sample> for SampleRow {
    fn from(s: Sample) -> SampleRow {
        SampleRow(
            s.time,
            s.gpus,
            s.allocated,
            s.busy.to_bits(),
            s.busy_known,
            s.nodes,
            s.nodes_out,
            s.fragmented,
        )
    }
}

impl From<SampleRow> for Sample {
    fn from(r: SampleRow) -> Sample {
        Sample {
            time: r.0,
            gpus: r.1,
            allocated: r.2,
            busy: f64::from_bits(r.3),
            busy_known: r.4,
            nodes: r.5,
            nodes_out: r.6,
            fragmented: r.7,
        }
    }
}

/// What is remembered of each job between snapshots.
#[derive(Debug, Clone, Copy, Serialize, serde::Deserialize)]
struct Seen {
    state: JobState,
    restarts: u32,
}

/// How a job changed between two snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Pending before, running now.
    Started,
    /// Running before, ended failed or cancelled now.
    Stopped(JobState),
    /// Sent back to the queue: running before and pending now, or its
    /// restart count went up (requeued or preempted).
    Requeued,
}

/// Each job's state and restart count from one snapshot to the next, and
/// what changed: the one place the health numbers and the post-mortem tell
/// starts, failures and requeues apart.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct JobWatch {
    seen: FxHashMap<String, Seen>,
    /// The last snapshot's jobs: a job that is the same shared record has
    /// not changed, and is not looked up (100,000 a snapshot at 10,000
    /// nodes, where a few dozen change).
    #[serde(skip)]
    last: crate::engine::changed::Held<crate::model::Job>,
}

impl JobWatch {
    /// Takes in the next snapshot; `f` hears of every job that changed.
    /// Jobs that left the data are remembered (their [`state`](Self::state))
    /// until as many have left as are in it.
    pub fn observe(&mut self, c: &Cluster, f: impl FnMut(&crate::model::Job, Change)) {
        self.watch(c, 2 * c.jobs.len() + 1024, f);
    }

    /// The same for a reader that never asks about a job that left (the
    /// health numbers): they are forgotten every 1,024. At 10,000 nodes
    /// about 80,000 jobs start in an hour, and remembering as many as
    /// are in the data doubled the table (to 262,144 places) within
    /// minutes of the console's start (issue 42: memory flat over an
    /// hour).
    pub fn observe_present(&mut self, c: &Cluster, f: impl FnMut(&crate::model::Job, Change)) {
        self.watch(c, c.jobs.len() + 1024, f);
    }

    /// Jobs remembered, those that left included.
    pub fn remembered(&self) -> usize {
        self.seen.len()
    }

    /// `observe`, keeping at most `most` jobs remembered once the
    /// snapshot is in.
    fn watch(&mut self, c: &Cluster, most: usize, mut f: impl FnMut(&crate::model::Job, Change)) {
        let seen = &mut self.seen;
        self.last.update(&c.jobs, |i| {
            let Some(j) = c.jobs.get(i) else {
                return;
            };
            let now = Seen {
                state: j.state,
                restarts: j.restarts.unwrap_or(0),
            };
            // Most jobs do not change between snapshots: no id copied
            // (100,000 jobs a snapshot at 10,000 nodes).
            let b = match seen.get_mut(j.id.as_str()) {
                Some(seen) => std::mem::replace(seen, now),
                None => {
                    seen.insert(j.id.clone(), now);
                    return;
                }
            };
            if b.state == now.state && b.restarts == now.restarts {
                return;
            }
            if b.state.is_pending() && now.state.holds_resources() {
                f(j, Change::Started);
            }
            if b.state.holds_resources()
                && matches!(now.state, JobState::Failed | JobState::Cancelled)
            {
                f(j, Change::Stopped(now.state));
            } else if now.restarts > b.restarts
                || (b.state.holds_resources() && now.state.is_pending())
            {
                f(j, Change::Requeued);
            }
        });
        if self.seen.len() > most {
            let ids: rustc_hash::FxHashSet<&str> = c.jobs.iter().map(|j| j.id.as_str()).collect();
            self.seen.retain(|id, _| ids.contains(id.as_str()));
        }
    }

    /// A job's state in the last snapshot it was in.
    pub fn state(&self, id: &str) -> Option<JobState> {
        self.seen.get(id).map(|s| s.state)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
struct Start {
    time: Timestamp,
    /// One copy of each partition's name for all its starts: a day of
    /// them at 10,000 nodes is about two million (issue 42).
    partition: std::sync::Arc<str>,
    gpus: u32,
    wait_s: i64,
}

/// A job that stopped short: failed, or sent back to the queue.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
struct Loss {
    time: Timestamp,
    failed: bool,
    #[serde(with = "super::exact::option")]
    gpu_hours: Option<f64>,
}

/// A book the analyst feeds and the console reads (`:kpis`).
pub type SharedKpis = std::sync::Arc<std::sync::Mutex<KpiBook>>;

/// Feeds a shared book; a poisoned lock (a panic elsewhere) skips it.
pub fn observe_shared(book: &SharedKpis, c: &Cluster) {
    if let Ok(mut b) = book.lock() {
        b.observe(c);
    }
}

#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct KpiBook {
    samples: VecDeque<Sample>,
    #[serde(skip)]
    sampler: sampler::Sampler,
    jobs: JobWatch,
    starts: VecDeque<Start>,
    losses: VecDeque<Loss>,
    /// Observations older than this are dropped (the longest window).
    keep_s: i64,
    /// The partitions' names the starts share.
    #[serde(skip)]
    partitions: crate::model::Names,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Wait {
    pub group: String,
    pub jobs: usize,
    pub mean_s: Option<f64>,
    pub p95_s: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Kpis {
    pub from: Timestamp,
    pub to: Timestamp,
    /// Seconds of the window with observations behind them.
    pub observed_s: i64,
    pub samples: usize,
    /// Allocated GPUs ÷ GPUs, time-weighted.
    pub gpu_allocated: Option<f64>,
    /// Mean SM occupancy over all GPUs whose occupancy is known.
    pub gpu_sm_occupancy: Option<f64>,
    pub wait_by_partition: Vec<Wait>,
    pub wait_by_size: Vec<Wait>,
    /// Jobs sent back to the queue (requeued, preempted) in the window, and
    /// per hour.
    pub requeues: usize,
    pub requeues_per_hour: Option<f64>,
    pub failures: usize,
    /// Share of the time some job waiting for capacity could not start
    /// although its partition had enough GPUs free in total.
    pub fragmentation: Option<f64>,
    /// GPU-hours of work lost (since each job's checkpoint) by failed jobs
    /// and by requeued ones; `None` where a job's start is unknown.
    pub lost_gpu_hours_failed: Option<f64>,
    pub lost_gpu_hours_requeued: Option<f64>,
    /// Hung jobs still holding their GPUs: their unsaved work is lost when
    /// they are requeued (known to whoever sees the stalls: the report,
    /// the console; `None` where nobody looked).
    pub lost_gpu_hours_hung: Option<f64>,
    /// Node-hours out of service (drained, draining, down, cordoned).
    pub node_hours_out: f64,
    /// 1 − out of service ÷ all node-hours.
    pub node_availability: Option<f64>,
}

/// One snapshot alone as a sample (the book keeps a sampler that reads
/// only what changed).
#[cfg(test)]
fn sample(c: &Cluster) -> Sample {
    sampler::Sampler::default().sample(c)
}

fn percentile(sorted: &[i64], p: f64) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    // Nearest rank.
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

fn waits<'a>(groups: impl Iterator<Item = (String, &'a Start)>) -> Vec<Wait> {
    let mut by: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (g, s) in groups {
        by.entry(g).or_default().push(s.wait_s);
    }
    by.into_iter()
        .map(|(group, mut w)| {
            w.sort_unstable();
            Wait {
                group,
                jobs: w.len(),
                mean_s: (!w.is_empty()).then(|| w.iter().sum::<i64>() as f64 / w.len() as f64),
                p95_s: percentile(&w, 0.95),
            }
        })
        .collect()
}

/// A job size's group: how many GPUs it asks for.
fn size_group(gpus: u32) -> String {
    match gpus {
        0 | 1 => "1 GPU".into(),
        2..=4 => "2-4 GPUs".into(),
        5..=8 => "5-8 GPUs".into(),
        _ => "more than 8 GPUs".into(),
    }
}

impl KpiBook {
    /// A book that keeps `keep_s` seconds of observations.
    pub fn new(keep_s: i64) -> KpiBook {
        KpiBook {
            keep_s,
            ..KpiBook::default()
        }
    }

    /// The same book keeping `keep_s` seconds from the next snapshot on.
    pub fn keeping(mut self, keep_s: i64) -> KpiBook {
        self.keep_s = keep_s;
        self
    }

    /// How many seconds of observations it keeps.
    pub fn keep_s(&self) -> i64 {
        self.keep_s
    }

    /// The time of the newest snapshot taken in.
    pub fn last_time(&self) -> Option<crate::model::Timestamp> {
        self.samples.back().map(|s| s.time)
    }

    /// Takes in the next snapshot (in the source's time order).
    pub fn observe(&mut self, c: &Cluster) {
        match self.samples.back() {
            Some(s) if c.time == s.time => return,
            // Time went back (a replay sought backwards): start over.
            Some(s) if c.time < s.time => *self = KpiBook::new(self.keep_s),
            _ => {}
        }
        let sample = self.sampler.sample(c);
        self.samples.push_back(sample);
        let (starts, losses, names) = (&mut self.starts, &mut self.losses, &mut self.partitions);
        self.jobs.observe_present(c, |j, change| match change {
            Change::Started => {
                if let (Some(start), Some(submit)) = (j.start_time.get(), j.waiting_since()) {
                    starts.push_back(Start {
                        time: start,
                        partition: names.get(&j.partition),
                        gpus: j.gpus_requested().unwrap_or(0),
                        wait_s: (start - submit).max(0),
                    });
                }
            }
            Change::Stopped(JobState::Cancelled) => {}
            Change::Stopped(_) | Change::Requeued => {
                // Work since its checkpoint (or its start) up to when it
                // stopped; unknown when neither is known.
                let gpu_hours = super::restore::lost_gpu_hours(j, j.end_time.unwrap_or(c.time));
                losses.push_back(Loss {
                    time: c.time,
                    failed: change != Change::Requeued,
                    gpu_hours,
                });
            }
        });
        let horizon = c.time - self.keep_s;
        while self.samples.front().is_some_and(|s| s.time < horizon) {
            self.samples.pop_front();
        }
        while self.starts.front().is_some_and(|s| s.time < horizon) {
            self.starts.pop_front();
        }
        while self.losses.front().is_some_and(|s| s.time < horizon) {
            self.losses.pop_front();
        }
    }

    /// The figures over the `window_s` seconds up to the last snapshot.
    pub fn figures(&self, window_s: i64) -> Option<Kpis> {
        let last = self.samples.back()?;
        let from = last.time - window_s;
        let in_window: Vec<&Sample> = self.samples.iter().filter(|s| s.time >= from).collect();
        // Each sample stands for the time until the next one.
        let mut weight = Vec::with_capacity(in_window.len());
        for w in in_window.windows(2) {
            weight.push((w[1].time - w[0].time) as f64);
        }
        weight.push(0.0);
        let total: f64 = weight.iter().sum();
        let mean = |f: &dyn Fn(&Sample) -> Option<f64>| -> Option<f64> {
            if total <= 0.0 {
                // One snapshot: the figure of that moment.
                return in_window.first().and_then(|s| f(s));
            }
            let mut sum = 0.0;
            let mut w_known = 0.0;
            for (s, w) in in_window.iter().zip(&weight) {
                if let Some(v) = f(s) {
                    sum += v * w;
                    w_known += w;
                }
            }
            (w_known > 0.0).then(|| sum / w_known)
        };
        let allocated = mean(&|s| (s.gpus > 0).then(|| f64::from(s.allocated) / f64::from(s.gpus)));
        let busy = mean(&|s| (s.busy_known > 0).then(|| s.busy / f64::from(s.busy_known)));
        let fragmentation = mean(&|s| Some(if s.fragmented { 1.0 } else { 0.0 }));
        let node_hours_out: f64 = in_window
            .iter()
            .zip(&weight)
            .map(|(s, w)| f64::from(s.nodes_out) * w / 3600.0)
            .sum();
        let node_availability =
            mean(&|s| (s.nodes > 0).then(|| 1.0 - f64::from(s.nodes_out) / f64::from(s.nodes)));
        let starts: Vec<&Start> = self.starts.iter().filter(|s| s.time >= from).collect();
        let losses: Vec<&Loss> = self.losses.iter().filter(|l| l.time >= from).collect();
        let lost = |failed: bool| -> Option<f64> {
            losses
                .iter()
                .filter(|l| l.failed == failed)
                .map(|l| l.gpu_hours)
                .sum::<Option<f64>>()
                // An empty sum is -0.0: print 0.0.
                .map(|h| h + 0.0)
        };
        let requeues = losses.iter().filter(|l| !l.failed).count();
        Some(Kpis {
            from: in_window.first().map_or(last.time, |s| s.time),
            to: last.time,
            observed_s: total as i64,
            samples: in_window.len(),
            gpu_allocated: allocated,
            gpu_sm_occupancy: busy,
            wait_by_partition: waits(starts.iter().map(|s| (s.partition.to_string(), *s))),
            wait_by_size: waits(starts.iter().map(|s| (size_group(s.gpus), *s))),
            requeues,
            requeues_per_hour: (total > 0.0).then(|| requeues as f64 * 3600.0 / total),
            failures: losses.iter().filter(|l| l.failed).count(),
            fragmentation,
            lost_gpu_hours_failed: lost(true),
            lost_gpu_hours_requeued: lost(false),
            lost_gpu_hours_hung: None,
            node_hours_out,
            node_availability,
        })
    }
}

/// The unsaved work of the jobs `base` finds hung on `c`, in GPU-hours:
/// lost when they are requeued (`restore::lost_gpu_hours`). One definition
/// for `:kpis`, `get kpis` and the report (issue 39: the report counted the
/// hung 32-GPU gang, `:kpis` of the same recording did not).
pub fn hung_lost(base: &super::analysis::Base, c: &Cluster) -> f64 {
    base.stalls
        .iter()
        .filter_map(|s| c.job(&s.job))
        .filter_map(|j| super::restore::lost_gpu_hours(j, c.time))
        .sum()
}

mod sampler;
#[cfg(test)]
mod tests;
