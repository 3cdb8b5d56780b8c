//! Stalled gangs: jobs that still say `running` but make no progress.
//!
//! Two rules, each with its evidence:
//! - **a rank on a broken GPU**: a GPU the job holds has a hardware Xid (one
//!   the catalog says needs a drain) since the job started, and the job's
//!   other GPUs do not show real work (their mean SM occupancy is at most
//!   `stall_occupancy_max`, or they report none). The other ranks wait in a
//!   collective that never completes, so the whole gang is stalled from the
//!   Xid's time. Needs one snapshot. A job whose other GPUs still compute
//!   is not called stalled: the incident names it as hit, not as hung.
//! - **the hung-collective signature**: every GPU of the job that reports
//!   both shows utilization ≥ `stall_util_min` and SM occupancy ≤
//!   `stall_occupancy_max` (spinning NCCL kernels) for at least
//!   `stall_window_s`. Needs a history of snapshots: `StallHistory`,
//!   kept by the analyst between snapshots; a one-shot command sees only
//!   the first rule.
//!
//! A stalled job burns its GPUs without progress: `burning_gpu_hours_per_hour`
//! is its GPU count, and its lost work keeps growing.

use super::SiteParams;
use super::health::NodeVerdict;
use super::whatif::gang_closure;
use super::xid::XidCatalog;
use crate::model::{Cluster, EventKind, Timestamp};
use crate::text;
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stall {
    pub job: String,
    /// When it stopped making progress, as far as the evidence says.
    pub since: Timestamp,
    /// The node and GPU that explain it (the broken rank), when one does.
    pub node: String,
    pub gpu: Option<u32>,
    pub gpus: u32,
    /// GPU-hours burnt per hour of wall time while it stays stalled.
    pub burning_gpu_hours_per_hour: f64,
    /// Stalled because another job of its gang is (not by its own GPUs).
    pub via_gang: bool,
    /// The job whose own GPUs show the stall (itself, or its gang's).
    pub cause_job: String,
    /// Stalled by a lost network link, not a broken GPU.
    #[serde(default)]
    pub fabric: bool,
    pub evidence: Vec<String>,
}

/// When each running job first showed the hung-collective signature, on
/// the snapshots' clock. The analyst feeds it every snapshot.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct StallHistory {
    since: FxHashMap<String, Timestamp>,
    /// The latest snapshot time observed.
    pub time: Timestamp,
    #[serde(skip)]
    spins: Spins,
    /// Where each job looked up last time was in the snapshot's jobs: the
    /// next snapshot looks there first (a job moves a few places at a
    /// time), not through all 100,000.
    #[serde(skip)]
    places: FxHashMap<String, usize>,
}

/// Each node's GPUs that hold a job, with whether each shows the
/// signature, as last read: a node that is the same shared record as in
/// the last snapshot is not read again (at 10,000 nodes a snapshot changes
/// about a tenth of the 80,000 GPUs).
#[derive(Debug, Clone, Default)]
struct Spins {
    gpus: crate::engine::changed::PerRecord<crate::model::Node, Vec<JobGpus>>,
    /// Each job's GPUs among those held: how many show the signature and
    /// how many do not (unknown readings count in neither), kept up to
    /// date as nodes change. Looking each GPU's job up instead, whenever
    /// one spins, was a fifth of the report's own thread at 10,000 nodes
    /// (issue 42).
    by_job: FxHashMap<String, (u32, u32)>,
    /// The thresholds they were read with.
    read_with: (f64, f64),
}

/// A node's GPUs held by one job: how many show the signature and how
/// many do not (unknown readings count in neither). A node's part is one
/// of these per job on it, not one per GPU: a job's id is copied and
/// looked up once a node, not eight times (issue 42).
type JobGpus = (String, (u32, u32));

/// A node's GPUs that hold a job, counted by job.
fn job_gpus(n: &crate::model::Node, site: &SiteParams) -> Vec<JobGpus> {
    let mut part: Vec<JobGpus> = Vec::new();
    for g in &n.gpus {
        let (Some(job), Some(spins)) = (g.job.as_deref(), spinning(g, site)) else {
            continue;
        };
        let at = match part.iter().position(|(j, _)| j == job) {
            Some(at) => at,
            None => {
                part.push((job.to_string(), (0, 0)));
                part.len() - 1
            }
        };
        if let Some((_, (yes, no))) = part.get_mut(at) {
            let slot = if spins { yes } else { no };
            *slot = slot.saturating_add(1);
        }
    }
    part
}

/// `part`'s GPUs counted into `by_job` (`add`) or out of it.
fn count(by_job: &mut FxHashMap<String, (u32, u32)>, part: &[JobGpus], add: bool) {
    for (job, (yes, no)) in part {
        if !by_job.contains_key(job.as_str()) {
            if !add {
                continue;
            }
            by_job.insert(job.clone(), (0, 0));
        }
        let Some(n) = by_job.get_mut(job.as_str()) else {
            continue;
        };
        if add {
            n.0 = n.0.saturating_add(*yes);
            n.1 = n.1.saturating_add(*no);
        } else {
            n.0 = n.0.saturating_sub(*yes);
            n.1 = n.1.saturating_sub(*no);
        }
        if *n == (0, 0) {
            by_job.remove(job.as_str());
        }
    }
}

impl Spins {
    fn update(&mut self, c: &Cluster, site: &SiteParams) {
        let with = (site.stall_util_min, site.stall_occupancy_max);
        if with != self.read_with {
            *self = Spins {
                read_with: with,
                ..Spins::default()
            };
        }
        let by_job = &mut self.by_job;
        self.gpus.update_each(
            &c.nodes,
            |n| job_gpus(n, site),
            |old, new| {
                // A node read again with its jobs spinning as before (most
                // of them): nothing to count.
                if old == new {
                    return;
                }
                if let Some(old) = old {
                    count(by_job, old, false);
                }
                if let Some(new) = new {
                    count(by_job, new, true);
                }
            },
        );
    }

    /// The jobs with a GPU that shows the signature and none that does
    /// not.
    fn spinning_only(&self) -> impl Iterator<Item = &str> {
        self.by_job
            .iter()
            .filter(|(_, (yes, no))| *yes > 0 && *no == 0)
            .map(|(j, _)| j.as_str())
    }

    /// Whether a GPU of `job` shows it working (read, not spinning).
    fn working(&self, job: &str) -> bool {
        self.by_job.get(job).is_some_and(|(_, no)| *no > 0)
    }
}

/// The jobs of `ids` that hold resources in `c`, every job read: what
/// `running_near` is held to in the tests.
#[cfg(test)]
fn running_of<'c>(
    c: &'c Cluster,
    ids: &rustc_hash::FxHashSet<&str>,
) -> impl Iterator<Item = &'c str> {
    let jobs = if ids.is_empty() { &[][..] } else { &c.jobs[..] };
    jobs.iter()
        .filter(|j| j.state.holds_resources() && ids.contains(j.id.as_str()))
        .map(|j| j.id.as_str())
}

/// The jobs of `ids` that hold resources in `c` (none read when `ids` is
/// empty), each looked for first a few places around where it was (`was`),
/// and all the jobs read only for those not found there. A job found there
/// not holding resources is looked for among all too (a list may hold an
/// id twice). Where each was found goes into `found`.
fn running_near<'c>(
    c: &'c Cluster,
    ids: &rustc_hash::FxHashSet<&str>,
    was: &FxHashMap<String, usize>,
    found: &mut FxHashMap<String, usize>,
) -> Vec<&'c str> {
    const AROUND: usize = 8;
    let mut out = Vec::with_capacity(ids.len());
    let mut rest: rustc_hash::FxHashSet<&str> = rustc_hash::FxHashSet::default();
    for &id in ids {
        let near = was.get(id).and_then(|&p| {
            let end = p.saturating_add(AROUND + 1).min(c.jobs.len());
            (p.saturating_sub(AROUND)..end).find(|&k| c.jobs[k].id == id)
        });
        match near {
            Some(k) if c.jobs[k].state.holds_resources() => {
                out.push(c.jobs[k].id.as_str());
                found.insert(id.to_string(), k);
            }
            _ => {
                rest.insert(id);
            }
        }
    }
    if !rest.is_empty() {
        for (k, j) in c.jobs.iter().enumerate() {
            if j.state.holds_resources() && rest.contains(j.id.as_str()) {
                out.push(j.id.as_str());
                found.insert(j.id.clone(), k);
            }
        }
    }
    out
}

/// Whether a GPU's readings show the signature. Unknown readings never do.
fn spinning(g: &crate::model::Gpu, site: &SiteParams) -> Option<bool> {
    let (u, o) = (g.utilization?, g.sm_occupancy?);
    Some(u >= site.stall_util_min && o <= site.stall_occupancy_max)
}

impl StallHistory {
    pub fn observe(&mut self, c: &Cluster, site: &SiteParams) {
        if c.time < self.time {
            // A clock that went back (a new source, a replay): start over.
            self.since.clear();
        }
        self.time = c.time;
        self.spins.update(c, site);
        // Only jobs with a spinning GPU can show the signature, and only if
        // none of their GPUs works: a handful, from the counts per job.
        let candidates: rustc_hash::FxHashSet<&str> = self.spins.spinning_only().collect();
        let mut places = FxHashMap::default();
        let mut now: FxHashMap<String, Timestamp> =
            running_near(c, &candidates, &self.places, &mut places)
                .into_iter()
                .map(|id| {
                    (
                        id.to_string(),
                        self.since.get(id).copied().unwrap_or(c.time),
                    )
                })
                .collect();
        // A stalled job whose readings are missing from this snapshot (an
        // exporter between scrapes) keeps its start: the stall's time stays
        // put. Only readings that show it working, or its end, clear it.
        let gone: rustc_hash::FxHashSet<&str> = self
            .since
            .keys()
            .map(String::as_str)
            .filter(|id| !now.contains_key(*id) && !self.spins.working(id))
            .collect();
        for id in running_near(c, &gone, &self.places, &mut places) {
            if let Some(&t) = self.since.get(id) {
                now.insert(id.to_string(), t);
            }
        }
        self.since = now;
        self.places = places;
    }

    /// The jobs showing the signature now, as of the last snapshot.
    pub fn jobs(&self) -> impl Iterator<Item = &str> {
        self.since.keys().map(String::as_str)
    }

    /// Since when job `id` shows the signature, if it does now.
    pub fn since(&self, id: &str) -> Option<Timestamp> {
        self.since.get(id).copied()
    }
}

/// The GPUs each running job of `wanted` holds, from the per-GPU allocation.
fn gpus_by_job<'a>(
    c: &'a Cluster,
    wanted: &rustc_hash::FxHashSet<&str>,
) -> HashMap<&'a str, Vec<&'a crate::model::Gpu>> {
    let running: HashMap<&str, ()> = c
        .jobs
        .iter()
        .filter(|j| j.state.holds_resources() && wanted.contains(j.id.as_str()))
        .map(|j| (j.id.as_str(), ()))
        .collect();
    let mut out: HashMap<&str, Vec<&crate::model::Gpu>> = HashMap::new();
    for (_, g) in c.gpus() {
        if let Some(id) = g.job.as_deref()
            && running.contains_key(id)
        {
            out.entry(id).or_default().push(g);
        }
    }
    out
}

/// What explains a stall: (since, node, GPU, evidence, by the fabric).
type Found = (Timestamp, String, Option<u32>, Vec<String>, bool);

/// A multi-node job whose node lost its network link since it started (and
/// whose GPUs do not compute): stalled from that moment.
fn link_stall(c: &Cluster, job: &crate::model::Job, started: Timestamp) -> Option<Found> {
    let (t, node, port) = link_lost_since(c, job, started)?;
    Some((
        t,
        node.to_string(),
        None,
        vec![format!(
            "its rank on {node} lost its network link ({port}) at {}: the other ranks wait in a collective that never completes",
            text::clock(t)
        )],
        true,
    ))
}

/// The first network link lost since `started` on a node of a multi-node
/// job: (time, node, port).
fn link_lost_since<'c>(
    c: &'c Cluster,
    job: &crate::model::Job,
    started: Timestamp,
) -> Option<(Timestamp, &'c str, &'c str)> {
    if job.nodes.len() < 2 {
        return None;
    }
    c.events
        .iter()
        .filter(|e| e.time >= started && job.nodes.contains(&e.node))
        .find_map(|e| match &e.kind {
            EventKind::Link { port, .. } => Some((e.time, e.node.as_str(), port.as_str())),
            _ => None,
        })
}

/// Every stalled running job of the snapshot, gangs included, oldest first.
pub fn stalls(
    c: &Cluster,
    verdicts: &HashMap<&str, &NodeVerdict>,
    history: &StallHistory,
    cat: &XidCatalog,
    site: &SiteParams,
) -> Vec<Stall> {
    // Only jobs with a GPU that has a drain verdict, or with the signature
    // in the history, can be stalled: group the GPUs of those alone.
    let wanted = candidates(c, verdicts, history);
    let job_ix: HashMap<&str, usize> = c
        .jobs
        .iter()
        .enumerate()
        .filter(|(_, j)| wanted.contains(j.id.as_str()))
        .map(|(i, j)| (j.id.as_str(), i))
        .collect();
    // Direct stalls: (job index, since, node, gpu, evidence).
    let mut direct: Vec<(usize, Found)> = Vec::new();
    let by_job = gpus_by_job(c, &wanted);
    let mut ids: Vec<&&str> = by_job.keys().collect();
    ids.sort();
    for id in ids {
        let Some(&j) = job_ix.get(*id) else { continue };
        let job = &c.jobs[j];
        let started = job.start_time.unwrap_or(Timestamp::MIN);
        let mut found: Option<Found> = None;
        // Do the job's GPUs still compute? Then a broken rank has not hung it.
        let occ = mean(by_job[*id].iter().filter_map(|g| g.sm_occupancy));
        let still_working = occ.is_some_and(|o| o > site.stall_occupancy_max);
        for g in &by_job[*id] {
            let Some(v) = verdicts.get(&*g.node) else {
                continue;
            };
            if !v
                .gpus
                .iter()
                .any(|gv| gv.gpu == g.index && gv.verdict.action.needs_drain())
            {
                continue;
            }
            // The Xid that broke it: the GPU's events since the job started.
            let xid = xid_since(c, g, started, cat);
            if let Some((t, code)) = xid.filter(|_| !still_working) {
                let evidence = vec![format!(
                    "rank on {} GPU {} hit Xid {code} ({}) at {}: the other ranks wait in a collective that never completes",
                    g.node,
                    g.index,
                    cat.name(code),
                    text::clock(t)
                )];
                if found.as_ref().is_none_or(|f| t < f.0) {
                    found = Some((t, g.node.to_string(), Some(g.index), evidence, false));
                }
            }
        }
        if found.is_none() && !still_working {
            found = link_stall(c, job, started);
        }
        if found.is_none()
            && let Some(since) = history.since(id)
            && c.time - since >= site.stall_window_s as i64
        {
            let gpus = &by_job[*id];
            let util = mean(gpus.iter().filter_map(|g| g.utilization));
            let occ = mean(gpus.iter().filter_map(|g| g.sm_occupancy));
            let node = gpus.first().map_or(String::new(), |g| g.node.to_string());
            found = Some((
                since,
                node,
                None,
                vec![format!(
                    "all {} GPUs at {} utilization but {} SM occupancy for {} (spinning in a collective)",
                    gpus.len(),
                    text::percent(util),
                    text::percent(occ),
                    text::duration(c.time - since)
                )],
                false,
            ));
        }
        if let Some(f) = found {
            direct.push((j, f));
        }
    }
    let mut out: Vec<Stall> = Vec::new();
    let mut done: rustc_hash::FxHashSet<usize> = rustc_hash::FxHashSet::default();
    for (j, (since, node, gpu, evidence, fabric)) in direct {
        for k in gang_closure(c, &[j]) {
            if !done.insert(k) {
                continue;
            }
            let job = &c.jobs[k];
            let gpus = job.gpus_requested().unwrap_or(0);
            let via_gang = k != j;
            let mut ev = evidence.clone();
            if via_gang {
                ev.insert(0, format!("its gang's job {} is stalled", c.jobs[j].id));
            }
            out.push(Stall {
                job: job.id.clone(),
                since,
                node: node.clone(),
                gpu,
                gpus,
                burning_gpu_hours_per_hour: f64::from(gpus),
                via_gang,
                cause_job: c.jobs[j].id.clone(),
                fabric,
                evidence: ev,
            });
        }
    }
    out.sort_by(|a, b| a.since.cmp(&b.since).then(a.job.cmp(&b.job)));
    out
}

/// The jobs that can be stalled: with a GPU that has a drain verdict, or
/// with the signature in the history.
fn candidates<'c>(
    c: &'c Cluster,
    verdicts: &HashMap<&str, &NodeVerdict>,
    history: &'c StallHistory,
) -> rustc_hash::FxHashSet<&'c str> {
    let mut wanted: rustc_hash::FxHashSet<&str> = rustc_hash::FxHashSet::default();
    for (n, g) in c.gpus() {
        if let Some(id) = g.job.as_deref()
            && verdicts.get(n.name.as_str()).is_some_and(|v| {
                v.gpus
                    .iter()
                    .any(|gv| gv.gpu == g.index && gv.verdict.action.needs_drain())
            })
        {
            wanted.insert(id);
        }
    }
    wanted.extend(history.since.keys().map(String::as_str));
    // Multi-node jobs on a node that lost a network link since they started.
    let lost: rustc_hash::FxHashMap<&str, Timestamp> = c
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Link { .. }))
        .fold(rustc_hash::FxHashMap::default(), |mut m, e| {
            let t = m.entry(e.node.as_str()).or_insert(e.time);
            *t = (*t).max(e.time);
            m
        });
    if !lost.is_empty() {
        for j in c.jobs.iter().filter(|j| {
            j.state.holds_resources()
                && j.nodes.len() > 1
                && j.nodes.iter().any(|n| {
                    lost.get(n.as_str())
                        .is_some_and(|&t| t >= j.start_time.unwrap_or(Timestamp::MIN))
                })
        }) {
            wanted.insert(j.id.as_str());
        }
    }
    wanted
}

/// The first Xid that needs a drain on GPU `g` since `started` (its events,
/// else its last Xid): when, and which.
fn xid_since(
    c: &Cluster,
    g: &crate::model::Gpu,
    started: Timestamp,
    cat: &XidCatalog,
) -> Option<(Timestamp, u32)> {
    c.events
        .iter()
        .filter(|e| *e.node == *g.node && e.gpu == Some(g.index) && e.time >= started)
        .filter_map(|e| match e.kind {
            EventKind::Xid { code } if cat.action_of(code, Some(&e.message)).needs_drain() => {
                Some((e.time, code))
            }
            _ => None,
        })
        .next()
        .or_else(|| {
            g.last_xid
                .as_ref()
                .filter(|x| cat.action_of(x.code, x.message.as_deref()).needs_drain())
                .filter(|x| x.time.is_none_or(|t| t >= started))
                .map(|x| (x.time.unwrap_or(c.time), x.code))
        })
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = v.fold((0.0, 0u32), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| sum / f64::from(n))
}

#[cfg(test)]
mod tests;
