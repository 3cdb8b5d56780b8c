//! Each node's GPU slots by when they free, indexed per partition and per
//! GPU count for "the earliest node with g free" — and the idle windows
//! before planned starts that shorter jobs backfill into.

use super::{NEVER, Unusable, end_of, hold_s, usable};
use crate::engine::SiteParams;
use crate::model::{Cluster, NodeState, Timestamp};
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One partition's nodes, and per g (index g-1) a min-heap of
/// (time the node has g slots free, node); entries whose time is no longer
/// the node's are stale and skipped.
pub(super) struct PartSlots {
    pub(super) nodes: Vec<usize>,
    pub(super) by_g: Vec<BinaryHeap<Reverse<(Timestamp, usize)>>>,
}

pub(super) struct Slots {
    /// Per node, the times its GPU slots free, ascending.
    free_at: Vec<Vec<Timestamp>>,
    pub(super) parts: Vec<PartSlots>,
    part_of_node: Vec<Vec<usize>>,
    /// Per node, idle windows `[from, to)` of single slots: a slot free at
    /// `from` that a job planned to start at `to` has reserved. Shorter
    /// jobs backfill into them, as Slurm's backfill does.
    gaps: Vec<Vec<(Timestamp, Timestamp)>>,
    /// Per partition, how many gaps its nodes have (0: skip the search).
    gaps_in_part: Vec<usize>,
    /// Per node, the shortest limit of a pending job that could use it:
    /// a shorter gap is never kept.
    min_hold: Vec<Timestamp>,
    /// Gap visits left for this plan. The search is what backfill adds to
    /// the plan's cost; past this budget the remaining jobs get the plain
    /// estimate (an upper bound), so a 100,000-job queue stays within its
    /// time target (see the engine benchmark).
    gap_budget: usize,
}

/// The most start times one job's gap search tries.
const GAP_STARTS_TRIED: usize = 32;
/// Gap visits one plan may make.
const GAP_BUDGET: usize = 2_000_000;

impl Slots {
    fn key(&self, n: usize, g: usize) -> Timestamp {
        self.free_at[n].get(g - 1).copied().unwrap_or(NEVER)
    }

    /// Adds node `n`'s keys to its partitions' sets.
    fn index(&mut self, n: usize) {
        let parts = std::mem::take(&mut self.part_of_node[n]);
        for &p in &parts {
            for g in 1..=self.parts[p].by_g.len() {
                let k = self.key(n, g);
                self.parts[p].by_g[g - 1].push(Reverse((k, n)));
            }
        }
        self.part_of_node[n] = parts;
    }

    /// The `k` nodes where `g` GPUs free soonest, and when all of them are.
    pub(super) fn earliest(
        &mut self,
        p: usize,
        k: usize,
        g: usize,
    ) -> Option<(Timestamp, Vec<usize>)> {
        let gi = g.max(1) - 1;
        if gi >= self.parts[p].by_g.len() {
            return None;
        }
        let mut chosen: Vec<(Timestamp, usize)> = Vec::with_capacity(k);
        while chosen.len() < k {
            let Some(Reverse((t, n))) = self.parts[p].by_g[gi].pop() else {
                break;
            };
            if t == self.key(n, gi + 1) {
                chosen.push((t, n));
            }
        }
        // Put them back: a node that is then taken gets a newer entry, and
        // this one goes stale.
        for &(t, n) in &chosen {
            self.parts[p].by_g[gi].push(Reverse((t, n)));
        }
        if chosen.len() < k {
            return None;
        }
        let start = chosen.iter().map(|(t, _)| *t).max().unwrap_or(NEVER);
        Some((start, chosen.into_iter().map(|(_, n)| n).collect()))
    }

    /// Node `n` gives its `g` soonest-free slots to a job from `start`
    /// until `until`; a slot free before `start` leaves a gap. Only the
    /// keys that change are moved in the sorted sets: usually a few of
    /// the eight.
    /// When every one of `nodes` has `g` slots free (NEVER: one never does).
    pub(super) fn earliest_on(&self, nodes: &[usize], g: usize) -> Timestamp {
        nodes
            .iter()
            .map(|&n| self.key(n, g.max(1)))
            .max()
            .unwrap_or(NEVER)
    }

    pub(super) fn take(&mut self, n: usize, g: usize, start: Timestamp, until: Timestamp) {
        let shortest = self.min_hold[n];
        let opened = self.free_at[n]
            .iter()
            .take(g)
            .filter(|&&f| f < start && start - f >= shortest)
            .map(|&f| (f, start))
            .collect::<Vec<_>>();
        if !opened.is_empty() {
            for &p in &self.part_of_node[n] {
                self.gaps_in_part[p] += opened.len();
            }
            self.gaps[n].extend(opened);
        }
        // The old keys, on the stack for nodes of up to 16 GPUs.
        let mut small = [NEVER; 16];
        let big: Vec<Timestamp>;
        let count = self.free_at[n].len();
        let old: &[Timestamp] = if count <= small.len() {
            small[..count].copy_from_slice(&self.free_at[n]);
            &small[..count]
        } else {
            big = self.free_at[n].clone();
            &big
        };
        let slots = &mut self.free_at[n];
        for s in slots.iter_mut().take(g) {
            *s = until;
        }
        slots.sort_unstable();
        let parts = std::mem::take(&mut self.part_of_node[n]);
        for &p in &parts {
            for gi in 1..=self.parts[p].by_g.len() {
                let was = old.get(gi - 1).copied().unwrap_or(NEVER);
                let now = self.key(n, gi);
                if was != now {
                    self.parts[p].by_g[gi - 1].push(Reverse((now, n)));
                }
            }
        }
        self.part_of_node[n] = parts;
    }
}

impl Slots {
    /// The earliest start before `before` at which `k` nodes of partition
    /// `p` each have `g` gaps spanning `[t, t + hold)`, and those nodes.
    pub(super) fn gap_fit(
        &mut self,
        p: usize,
        k: usize,
        g: usize,
        from: Timestamp,
        before: Timestamp,
        hold: Timestamp,
    ) -> Option<(Timestamp, Vec<usize>)> {
        if self.gaps_in_part[p] == 0 || hold == NEVER {
            return None;
        }
        let cost = self.gaps_in_part[p];
        if cost > self.gap_budget {
            self.gap_budget = 0;
            return None;
        }
        self.gap_budget -= cost;
        let nodes = &self.parts[p].nodes;
        // Start times worth trying: now, and when a window long enough opens.
        let mut starts: Vec<Timestamp> = std::iter::once(from)
            .chain(
                nodes
                    .iter()
                    .flat_map(|&n| self.gaps[n].iter())
                    .filter(|&&(f, to)| f > from && f < before && to - f >= hold)
                    .map(|&(f, _)| f),
            )
            .collect();
        starts.sort_unstable();
        starts.dedup();
        starts.truncate(GAP_STARTS_TRIED);
        for t in starts {
            let end = t.saturating_add(hold);
            let mut fits = Vec::with_capacity(k);
            for &n in nodes {
                let spanning = self.gaps[n]
                    .iter()
                    .filter(|&&(f, to)| f <= t && end <= to)
                    .count();
                if spanning >= g {
                    fits.push(n);
                    if fits.len() == k {
                        return Some((t, fits));
                    }
                }
            }
            self.gap_budget = self.gap_budget.saturating_sub(cost);
            if self.gap_budget == 0 {
                return None;
            }
        }
        None
    }

    /// Whether node `n` has `g` gaps spanning `[start, end)`.
    pub(super) fn gaps_span(&self, n: usize, g: usize, start: Timestamp, end: Timestamp) -> bool {
        self.gaps[n]
            .iter()
            .filter(|&&(f, to)| f <= start && end <= to)
            .count()
            >= g
    }

    /// Node `n` gives `g` of its gaps spanning `[start, end)` to a job:
    /// the tightest first; what is left of each stays a gap.
    pub(super) fn take_gaps(&mut self, n: usize, g: usize, start: Timestamp, end: Timestamp) {
        let gaps = &mut self.gaps[n];
        let mut fitting: Vec<usize> = (0..gaps.len())
            .filter(|&i| gaps[i].0 <= start && end <= gaps[i].1)
            .collect();
        fitting.sort_unstable_by_key(|&i| gaps[i].1);
        fitting.truncate(g);
        fitting.sort_unstable_by(|a, b| b.cmp(a));
        let mut added: isize = -(fitting.len() as isize);
        for i in fitting {
            let (f, to) = gaps.swap_remove(i);
            if f < start {
                gaps.push((f, start));
                added += 1;
            }
            if end < to {
                gaps.push((end, to));
                added += 1;
            }
        }
        for &p in &self.part_of_node[n] {
            self.gaps_in_part[p] = self.gaps_in_part[p].saturating_add_signed(added);
        }
    }
}

/// Each node's GPU slots, by when they free (from the running jobs'
/// limits), indexed per partition; and the partitions by name.
pub(super) fn slots_of<'c>(
    c: &'c Cluster,
    params: &SiteParams,
    unusable: &Unusable,
) -> (Slots, FxHashMap<&'c str, usize>) {
    let now = c.time;
    let node_ix: FxHashMap<&str, usize> = c
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    let job_ix: FxHashMap<&str, usize> = c
        .jobs
        .iter()
        .enumerate()
        .map(|(i, j)| (j.id.as_str(), i))
        .collect();

    // Slot free times from the running jobs' limits.
    let mut free_at: Vec<Vec<Timestamp>> = Vec::with_capacity(c.nodes.len());
    for n in &c.nodes {
        // A node the scheduler holds back until a known time (its
        // reservation's end) is capacity from then; other nodes out of
        // service never are.
        let from = if usable(n, unusable) {
            now
        } else {
            match n.back_at {
                Some(t) if n.state == NodeState::Reserved && !unusable.contains(&n.name) => {
                    t.max(now)
                }
                _ => {
                    free_at.push(vec![NEVER; n.gpu_count as usize]);
                    continue;
                }
            }
        };
        let mut slots: Vec<Timestamp> = n
            .gpus
            .iter()
            .map(|g| match g.job.as_deref().and_then(|id| job_ix.get(id)) {
                Some(&j) => {
                    let job = &c.jobs[j];
                    let start = job.start_time.unwrap_or(now);
                    end_of(start, hold_s(job, params)).max(from)
                }
                None if g.job.is_some() => now
                    .saturating_add(params.default_time_limit_s as i64)
                    .max(from),
                None => from,
            })
            .collect();
        slots.resize(n.gpu_count as usize, from);
        slots.sort_unstable();
        free_at.push(slots);
    }

    let mut part_of_node = vec![Vec::new(); c.nodes.len()];
    let mut part_ix: FxHashMap<&str, usize> = FxHashMap::default();
    let mut parts = Vec::with_capacity(c.partitions.len());
    for (p, part) in c.partitions.iter().enumerate() {
        part_ix.insert(part.name.as_str(), p);
        let members: Vec<usize> = part
            .nodes
            .iter()
            .filter_map(|n| node_ix.get(n.as_str()).copied())
            .collect();
        let max_g = members.iter().map(|&n| free_at[n].len()).max().unwrap_or(0);
        for &n in &members {
            part_of_node[n].push(p);
        }
        // Room for the stale entries placements leave behind.
        let room = members.len() * 4;
        parts.push(PartSlots {
            nodes: members,
            by_g: vec![BinaryHeap::with_capacity(room); max_g],
        });
    }
    let n_parts = parts.len();
    // The shortest limit of a pending job per partition, then per node:
    // windows shorter than that are never worth keeping.
    let mut part_min = vec![NEVER; n_parts];
    for j in c.jobs.iter().filter(|j| j.state.is_pending()) {
        if let (Some(&p), Some(h)) = (part_ix.get(j.partition.as_str()), hold_s(j, params)) {
            part_min[p] = part_min[p].min(i64::try_from(h).unwrap_or(NEVER));
        }
    }
    let min_hold: Vec<Timestamp> = part_of_node
        .iter()
        .map(|ps| ps.iter().map(|&p| part_min[p]).min().unwrap_or(NEVER))
        .collect();
    let mut slots = Slots {
        min_hold,
        gap_budget: GAP_BUDGET,
        gaps: vec![Vec::new(); free_at.len()],
        free_at,
        parts,
        part_of_node,
        gaps_in_part: vec![0; n_parts],
    };
    for n in 0..c.nodes.len() {
        slots.index(n);
    }
    // A reservation ahead holds its nodes' slots from its start to its
    // end, as a job planned there would: a job whose limit fits before it
    // starts now (a window before it), another after it (issue 58).
    for r in c.reservations.iter().filter(|r| r.start > now) {
        let until = r.end.unwrap_or(NEVER);
        for name in &r.nodes {
            if let Some(&n) = node_ix.get(name.as_str()) {
                let held = slots.free_at[n].iter().filter(|&&f| f < until).count();
                if held > 0 {
                    slots.take(n, held, r.start, until);
                }
            }
        }
    }
    (slots, part_ix)
}
