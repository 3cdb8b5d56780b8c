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
    gpus: crate::engine::changed::PerRecord<crate::model::Node, Vec<(String, Option<bool>)>>,
    /// Each job's GPUs among those held: how many show the signature and
    /// how many do not (unknown readings count in neither), kept up to
    /// date as nodes change. Looking each GPU's job up instead, whenever
    /// one spins, was a fifth of the report's own thread at 10,000 nodes
    /// (issue 42).
    by_job: FxHashMap<String, (u32, u32)>,
    /// The thresholds they were read with.
    read_with: (f64, f64),
}

/// `part`'s GPUs counted into `by_job` (`add`) or out of it.
fn count(by_job: &mut FxHashMap<String, (u32, u32)>, part: &[(String, Option<bool>)], add: bool) {
    for (job, spins) in part {
        let Some(spins) = spins else {
            continue;
        };
        if !by_job.contains_key(job.as_str()) {
            if !add {
                continue;
            }
            by_job.insert(job.clone(), (0, 0));
        }
        let Some(n) = by_job.get_mut(job.as_str()) else {
            continue;
        };
        let slot = if *spins { &mut n.0 } else { &mut n.1 };
        *slot = if add {
            slot.saturating_add(1)
        } else {
            slot.saturating_sub(1)
        };
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
            |n| {
                n.gpus
                    .iter()
                    .filter_map(|g| Some((g.job.clone()?, spinning(g, site))))
                    .collect()
            },
            |old, new| {
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
mod tests {
    use super::*;
    use crate::engine::fixture::*;
    use crate::engine::health::verdicts;
    use crate::model::LastXid;

    fn verdict_map(v: &[NodeVerdict]) -> HashMap<&str, &NodeVerdict> {
        v.iter().map(|x| (x.node.as_str(), x)).collect()
    }

    fn found(c: &Cluster, h: &StallHistory) -> Vec<Stall> {
        let (cat, site) = (XidCatalog::default(), SiteParams::default());
        let v = verdicts(c, None, &cat, &site);
        stalls(c, &verdict_map(&v), h, &cat, &site)
    }

    #[test]
    fn a_hardware_xid_on_a_rank_stalls_the_whole_gang() {
        let mut c = cluster();
        for n in ["n1", "n2", "n3"] {
            add_node(&mut c, n, "p", 8);
        }
        let a = run(&mut c, "rank0", &["n1"], 8, 600, 7200);
        let b = run(&mut c, "rank1", &["n2"], 8, 600, 7200);
        run(&mut c, "solo", &["n3"], 8, 600, 7200);
        std::sync::Arc::make_mut(&mut c.jobs[a]).gang = Some("g".into());
        std::sync::Arc::make_mut(&mut c.jobs[b]).gang = Some("g".into());
        // The hung-collective look on every GPU: no SM occupancy to speak of.
        for n in &mut c.nodes {
            for g in &mut std::sync::Arc::make_mut(n).gpus {
                g.sm_occupancy = Some(0.01);
            }
        }
        assert!(found(&c, &StallHistory::default()).is_empty());
        std::sync::Arc::make_mut(&mut c.nodes[1]).gpus[3].last_xid = Some(LastXid {
            code: 79,
            time: Some(NOW - 60),
            message: None,
        });
        let s = found(&c, &StallHistory::default());
        let ids: Vec<&str> = s.iter().map(|x| x.job.as_str()).collect();
        assert_eq!(ids, ["rank0", "rank1"], "both ranks, not the solo job");
        let r1 = s.iter().find(|x| x.job == "rank1").expect("rank1");
        assert!(!r1.via_gang);
        assert_eq!(
            (r1.node.as_str(), r1.gpu, r1.since),
            ("n2", Some(3), NOW - 60)
        );
        assert_eq!(r1.burning_gpu_hours_per_hour, 8.0);
        assert!(s.iter().any(|x| x.job == "rank0" && x.via_gang));
        // A job whose GPUs still compute is hit, not hung.
        for n in &mut c.nodes[..2] {
            for g in &mut std::sync::Arc::make_mut(n).gpus {
                g.sm_occupancy = Some(0.7);
            }
        }
        assert!(found(&c, &StallHistory::default()).is_empty());
        for n in &mut c.nodes[..2] {
            for g in &mut std::sync::Arc::make_mut(n).gpus {
                g.sm_occupancy = None;
            }
        }
        assert_eq!(
            found(&c, &StallHistory::default()).len(),
            2,
            "no readings: the Xid decides"
        );
        // An application Xid does not stall a gang: the job dies or goes on.
        std::sync::Arc::make_mut(&mut c.nodes[1]).gpus[3].last_xid = Some(LastXid {
            code: 13,
            time: Some(NOW - 60),
            message: None,
        });
        assert!(found(&c, &StallHistory::default()).is_empty());
        // An Xid from before the job started is not this job's stall.
        std::sync::Arc::make_mut(&mut c.nodes[1]).gpus[3].last_xid = Some(LastXid {
            code: 79,
            time: Some(NOW - 10_000),
            message: None,
        });
        assert!(found(&c, &StallHistory::default()).is_empty());
    }

    #[test]
    fn the_hung_collective_signature_needs_the_whole_window() {
        let mut c = cluster();
        add_node(&mut c, "n1", "p", 8);
        run(&mut c, "spin", &["n1"], 8, 600, 7200);
        let site = SiteParams::default();
        let mut h = StallHistory::default();
        let set = |c: &mut Cluster, occ: f64| {
            for g in &mut std::sync::Arc::make_mut(&mut c.nodes[0]).gpus {
                g.utilization = Some(1.0);
                g.sm_occupancy = Some(occ);
            }
        };
        set(&mut c, 0.01);
        h.observe(&c, &site);
        assert!(found(&c, &h).is_empty(), "one sighting is not a stall");
        c.time += site.stall_window_s as i64 - 1;
        h.observe(&c, &site);
        assert!(found(&c, &h).is_empty());
        c.time += 1;
        h.observe(&c, &site);
        let s = found(&c, &h);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].since, NOW);
        assert!(s[0].evidence[0].contains("100% utilization but 1% SM occupancy"));
        // Real work in between restarts the clock.
        set(&mut c, 0.6);
        c.time += 1;
        h.observe(&c, &site);
        set(&mut c, 0.01);
        c.time += 1;
        h.observe(&c, &site);
        assert!(found(&c, &h).is_empty());
    }

    /// A snapshot without readings (an exporter between scrapes) does not
    /// restart a stall's clock: its time stays put.
    #[test]
    fn missing_readings_keep_a_stalls_start() {
        let mut c = cluster();
        add_node(&mut c, "n1", "p", 8);
        run(&mut c, "spin", &["n1"], 8, 600, 7200);
        let site = SiteParams::default();
        let mut h = StallHistory::default();
        let set = |c: &mut Cluster, r: Option<(f64, f64)>| {
            for g in &mut std::sync::Arc::make_mut(&mut c.nodes[0]).gpus {
                g.utilization = r.map(|x| x.0);
                g.sm_occupancy = r.map(|x| x.1);
            }
        };
        set(&mut c, Some((1.0, 0.01)));
        h.observe(&c, &site);
        c.time += 30;
        set(&mut c, None);
        h.observe(&c, &site);
        assert_eq!(h.since("spin"), Some(NOW), "unknown readings keep it");
        c.time += site.stall_window_s as i64;
        set(&mut c, Some((1.0, 0.01)));
        h.observe(&c, &site);
        let s = found(&c, &h);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].since, NOW, "since the first sighting");
    }

    /// The counts per job kept as nodes change are the counts read afresh
    /// from each snapshot: over the sim's minutes (nodes replaced, jobs
    /// starting and ending) and a snapshot whose nodes came in another
    /// order.
    #[test]
    fn the_counts_per_job_follow_the_snapshots() {
        use crate::sim::{Sim, SimConfig};
        let site = SiteParams::default();
        let fresh = |c: &Cluster| {
            let mut m: FxHashMap<String, (u32, u32)> = FxHashMap::default();
            for g in c.nodes.iter().flat_map(|n| &n.gpus) {
                if let (Some(j), Some(s)) = (&g.job, spinning(g, &site)) {
                    let e = m.entry(j.to_string()).or_default();
                    if s {
                        e.0 += 1;
                    } else {
                        e.1 += 1;
                    }
                }
            }
            m
        };
        let mut sim = Sim::new(SimConfig::default()).expect("sim");
        let mut h = StallHistory::default();
        let mut spun = false;
        for second in 0..400 {
            let mut c = sim.snapshot();
            if second == 200 {
                c.nodes.reverse();
            }
            h.observe(&c, &site);
            assert_eq!(h.spins.by_job, fresh(&c), "at second {second}");
            spun |= h.spins.by_job.values().any(|(yes, _)| *yes > 0);
            sim.advance(1);
        }
        assert!(
            spun,
            "no GPU spun: the counts of spinning GPUs went untried"
        );
    }

    /// Jobs looked up around where they were are the jobs a read of every
    /// job finds: over the sim's minutes (jobs ending and moving up), a
    /// snapshot whose jobs came in reverse order, ids that hold nothing or
    /// are nowhere, and an id listed twice.
    #[test]
    fn jobs_looked_up_near_their_place_are_the_ones_a_full_read_finds() {
        use crate::sim::{Sim, SimConfig};
        let mut sim = Sim::new(SimConfig::default()).expect("sim");
        let mut was: FxHashMap<String, usize> = FxHashMap::default();
        let (mut hits, mut tried, mut moved) = (0, 0, 0);
        for second in 0..400 {
            let mut c = sim.snapshot();
            if second == 200 {
                c.jobs.reverse();
            }
            // The same jobs each second (those whose id ends in an even
            // digit), running or not, and one that is nowhere.
            let even = |id: &str| id.ends_with(['0', '2', '4', '6', '8']);
            if second == 300 {
                // A running job listed twice, its ended copy first where
                // it was: the copy found there holds nothing, the other does.
                let k = c
                    .jobs
                    .iter()
                    .position(|j| even(&j.id) && j.state.holds_resources())
                    .expect("a running job");
                let mut ended = (*c.jobs[k]).clone();
                ended.state = crate::model::JobState::Completed;
                c.jobs.insert(k, std::sync::Arc::new(ended));
            }
            let mut ids: rustc_hash::FxHashSet<&str> = c
                .jobs
                .iter()
                .map(|j| j.id.as_str())
                .filter(|id| even(id))
                .collect();
            ids.insert("no-such-job");
            let mut want: Vec<&str> = running_of(&c, &ids).collect();
            let mut found = FxHashMap::default();
            let mut got = running_near(&c, &ids, &was, &mut found);
            want.sort_unstable();
            want.dedup();
            got.sort_unstable();
            got.dedup();
            assert_eq!(got, want, "at second {second}");
            tried += ids.len();
            hits += ids.iter().filter(|id| was.contains_key(**id)).count();
            moved += found
                .iter()
                .filter(|(id, k)| was.get(*id).is_some_and(|w| w != *k))
                .count();
            was = found;
            sim.advance(1);
        }
        assert!(
            hits * 2 > tried,
            "the places were rarely used: {hits} of {tried}"
        );
        assert!(
            moved > 0,
            "no job changed its place: the look around went untried"
        );
    }
}
