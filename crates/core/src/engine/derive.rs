//! The one deriver (issue 60): the events nightshift concludes from
//! readings rather than reads — a node state that lasts, a network port
//! that went down or flapped, an NVLink error storm — worked out from the
//! snapshots alone, by this code for every source (the sim, Slurm,
//! Kubernetes, dcgm-exporter of either generation, Prometheus, the node
//! exporter, nightshift's agent). A source gives readings and the events
//! it really emits (an Xid, a Kubernetes `NodeNotReady`); the sim gives
//! no more than a source does.
//!
//! - **A node's state** is an event once it has lasted: a node that goes
//!   down (Slurm's `NOT_RESPONDING`, a Kubernetes `NotReady`) must stay
//!   down [`DOWN_HOLD_S`] before it is one — slurmd answering again two
//!   seconds after a resume is no incident — while a drain, a cordon, a
//!   resume is one at once (nobody flickers those). A node already out of
//!   service when first read is an event at once, dated by its reason's
//!   time: whoever reads the cluster sees it, whether or not it watched
//!   the node go — but one down with no reason waits its hold like a
//!   change (a one-shot read in the flicker tells nothing).
//! - **A port** that reads down, or whose link-downed counter moved
//!   between two readings (it lost its link and got it back).
//! - **An NVLink storm**: a GPU whose NVLink error rate (the analysis's
//!   rates, over the counters' own reading times) stays above
//!   `[engine] nvlink_drain_per_hour` for [`STORM_HOLD_S`]; one event per
//!   storm, dated when the rate first passed the limit.
//!
//! Each event's number is a hash of what it says (node, kind, time), so
//! two processes that derive the same event — the console open since
//! dusk and a one-shot `get incidents` — name its incident the same.

use super::SiteParams;
use super::health::EccBaseline;
use crate::model::{Cluster, Event, EventKind, NodeState, Timestamp};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// How long a node must stay down before it is an event.
pub const DOWN_HOLD_S: i64 = 30;
/// How long an NVLink error rate must stay above the limit.
pub const STORM_HOLD_S: i64 = 10;
/// Derived events kept (the newest).
const KEEP: usize = 1000;
/// Derived events' numbers: ten digits, past any a source gives.
const SEQ_BASE: u64 = 1_000_000_000;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Deriver {
    /// Per node: the state last told (or first read), and a change not
    /// told yet with when it was first read.
    nodes: FxHashMap<String, NodeSeen>,
    /// Per node and port ([`key`]): down at the last reading, and its
    /// link-downed count.
    ports: FxHashMap<String, (bool, Option<u64>)>,
    /// Per node and GPU ([`key`]): since when its NVLink rate is above the
    /// limit, and whether that storm was told.
    storms: FxHashMap<String, (Timestamp, bool)>,
    events: Vec<Event>,
    /// The nodes whose change waits its hold (looked at each snapshot).
    #[serde(default)]
    waiting: rustc_hash::FxHashSet<String>,
    /// The nodes last observed: one that is the same shared record has
    /// not changed and is not looked at again.
    #[serde(skip)]
    held: super::changed::Held<crate::model::Node>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct NodeSeen {
    told: NodeState,
    pending: Option<(NodeState, Timestamp)>,
}

impl Deriver {
    /// Takes in the next snapshot, with the rates as of it.
    pub fn observe(&mut self, c: &Cluster, rates: Option<&EccBaseline>, site: &SiteParams) {
        let mut new = Vec::new();
        // Only the nodes that are not the same shared record as last time
        // can have changed (at 10,000 nodes a snapshot changes about a
        // tenth), and those whose change waits its hold.
        let mut look = Vec::new();
        self.held.update(&c.nodes, |i| look.push(i));
        if !self.waiting.is_empty() {
            for (i, n) in c.nodes.iter().enumerate() {
                if self.waiting.contains(n.name.as_str()) {
                    look.push(i);
                }
            }
            look.sort_unstable();
            look.dedup();
        }
        for n in look.into_iter().filter_map(|i| c.nodes.get(i)) {
            self.node(c, n, &mut new);
            for p in n.ib_ports.iter() {
                let key = key(&n.name, &p.name());
                let down = p.is_down() == Some(true);
                let was = self.ports.get(&key).copied();
                let rose = match (p.link_downed, was.and_then(|(_, l)| l)) {
                    (Some(now), Some(then)) => now > then,
                    _ => false,
                };
                let was_down = was.is_some_and(|(d, _)| d);
                let message = if down && !was_down {
                    Some(format!(
                        "IB port {} is {} (physical {})",
                        p.name(),
                        p.state_word(),
                        p.physical_word()
                    ))
                } else if !down && rose && !was_down {
                    Some(format!(
                        "IB port {} lost its link and got it back: link downed {} times",
                        p.name(),
                        p.link_downed.unwrap_or(0)
                    ))
                } else {
                    None
                };
                if let Some(message) = message {
                    let kind = EventKind::Link {
                        port: p.name(),
                        down,
                    };
                    if !source_told(c, &n.name, None, &kind, c.time) {
                        new.push(event(c, &n.name, None, kind, c.time, message));
                    }
                }
                let count = p.link_downed.or(was.and_then(|(_, l)| l));
                self.ports
                    .insert(key, (down || (was_down && p.is_down().is_none()), count));
            }
        }
        if let Some(rates) = rates {
            self.storms(c, rates, site, &mut new);
        }
        if new.is_empty() {
            return;
        }
        new.sort_by_key(|e| (e.time, e.seq));
        self.events.extend(new);
        if self.events.len() > KEEP {
            let cut = self.events.len() - KEEP;
            self.events.drain(..cut);
        }
    }

    fn node(&mut self, c: &Cluster, n: &crate::model::Node, new: &mut Vec<Event>) {
        let state = n.state;
        let Some(seen) = self.nodes.get_mut(n.name.as_str()) else {
            // First read: out of service already is told now, dated by
            // its reason's time (nobody here saw it go) — but a node down
            // with no reason may be a flicker (slurmd late after a resume:
            // the resume cleared the reason, and slurmctld sets one when
            // it marks a node down for good): it waits its hold.
            let since = n.reason_time.filter(|t| *t <= c.time);
            let lasting =
                state != NodeState::Down || n.reason.as_deref().is_some_and(|r| !r.is_empty());
            let mut seen = NodeSeen {
                told: state,
                pending: None,
            };
            if out_of_service(state) && !lasting {
                seen = NodeSeen {
                    told: NodeState::Up,
                    pending: Some((state, since.unwrap_or(c.time))),
                };
                self.waiting.insert(n.name.clone());
            } else if out_of_service(state) && !told_by_source(c, &n.name, state) {
                new.push(node_event(c, n, "-", since.unwrap_or(c.time)));
            }
            self.nodes.insert(n.name.clone(), seen);
            return;
        };
        if state == seen.told {
            seen.pending = None;
            self.waiting.remove(n.name.as_str());
            return;
        }
        let since = match seen.pending {
            Some((s, t)) if s == state => t,
            _ => c.time,
        };
        let hold = if state == NodeState::Down {
            DOWN_HOLD_S
        } else {
            0
        };
        if c.time - since < hold {
            seen.pending = Some((state, since));
            self.waiting.insert(n.name.clone());
            return;
        }
        let from = seen.told.as_str();
        seen.told = state;
        seen.pending = None;
        self.waiting.remove(n.name.as_str());
        if !told_by_source(c, &n.name, state) {
            new.push(node_event(c, n, from, since));
        }
    }

    fn storms(
        &mut self,
        c: &Cluster,
        rates: &EccBaseline,
        site: &SiteParams,
        new: &mut Vec<Event>,
    ) {
        let limit = site.nvlink_drain_per_hour;
        let above = rates.nvlink_above(limit);
        let keys: std::collections::HashSet<String> = above
            .iter()
            .map(|(n, g, _, _)| key(n, &g.to_string()))
            .collect();
        self.storms.retain(|k, _| keys.contains(k));
        for (node, gpu, rate, time) in above {
            let key = key(node, &gpu.to_string());
            let (since, told) = *self.storms.entry(key.clone()).or_insert((time, false));
            if told || time - since < STORM_HOLD_S {
                continue;
            }
            self.storms.insert(key, (since, true));
            let total = c
                .node(node)
                .and_then(|n| n.gpus.iter().find(|g| g.index == gpu))
                .and_then(|g| g.nvlink.total())
                .unwrap_or(0);
            let message = format!(
                "NVLink error storm: {rate:.0} errors/h on its links (limit {limit:.0}/h), {total} in all"
            );
            let kind = EventKind::NvLink { errors: total };
            if !source_told(c, node, Some(gpu), &kind, since) {
                new.push(event(c, node, Some(gpu), kind, since, message));
            }
        }
    }

    /// The events derived so far, oldest first.
    pub fn events(&self) -> &[Event] {
        &self.events
    }
}

/// The key of a node's port or GPU in the deriver's maps (a string: the
/// memory is recorded as JSON).
fn key(node: &str, part: &str) -> String {
    format!("{node}\t{part}")
}

/// A node state that is an incident's matter (not in service).
fn out_of_service(s: NodeState) -> bool {
    !matches!(s, NodeState::Up | NodeState::Unknown)
}

/// Whether the source itself says the node went so (a Kubernetes
/// `NodeNotReady` event): told once, by the source.
fn told_by_source(c: &Cluster, node: &str, state: NodeState) -> bool {
    c.events.iter().any(|e| {
        e.node == node && matches!(&e.kind, EventKind::NodeState { to, .. } if to == state.as_str())
    })
}

/// Whether the snapshot's own events tell this already (a recording made
/// when the sim still gave them, a source that reports port events):
/// the same kind, node, GPU and port within [`SOURCE_TOLD_S`].
fn source_told(c: &Cluster, node: &str, gpu: Option<u32>, kind: &EventKind, at: Timestamp) -> bool {
    c.events.iter().any(|e| {
        e.node == node
            && e.gpu == gpu
            && (e.time - at).abs() <= SOURCE_TOLD_S
            && match (&e.kind, kind) {
                (EventKind::Link { port: a, down: x }, EventKind::Link { port: b, down: y }) => {
                    a == b && x == y
                }
                (EventKind::NvLink { .. }, EventKind::NvLink { .. }) => true,
                _ => false,
            }
    })
}

/// How near in time a source's own event is taken for the one derived.
const SOURCE_TOLD_S: i64 = 3600;

fn node_event(c: &Cluster, n: &crate::model::Node, from: &str, at: Timestamp) -> Event {
    let kind = EventKind::NodeState {
        from: from.to_string(),
        to: n.state.as_str().to_string(),
    };
    event(
        c,
        &n.name,
        None,
        kind,
        at,
        n.reason.clone().unwrap_or_default(),
    )
}

fn event(
    c: &Cluster,
    node: &str,
    gpu: Option<u32>,
    kind: EventKind,
    time: Timestamp,
    message: String,
) -> Event {
    Event {
        seq: number(node, gpu, &kind, time),
        time,
        node: node.to_string(),
        gpu,
        jobs: c.jobs_at(node, gpu),
        kind,
        message,
    }
}

/// An event's number from what it says: FNV-1a (stable across processes
/// and builds, unlike the standard hasher's random keys), past the
/// numbers sources give.
fn number(node: &str, gpu: Option<u32>, kind: &EventKind, time: Timestamp) -> u64 {
    let what = match kind {
        EventKind::NodeState { to, .. } => format!("node {to}"),
        EventKind::Link { port, down } => format!("link {port} {down}"),
        EventKind::NvLink { .. } => "nvlink".to_string(),
        other => format!("{other:?}"),
    };
    let text = format!("{node}/{gpu:?}/{what}/{time}");
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    SEQ_BASE + h % SEQ_BASE
}

#[cfg(test)]
mod tests;
