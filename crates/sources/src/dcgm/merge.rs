//! Node-endpoint readings into the scheduler's snapshot.

use super::Reading;
use crate::model::{Backfill, Cluster, Event, EventKind, Gpu, LastXid, Node, NodeState, XidSeen};
use std::collections::{BTreeMap, HashMap};

/// Endpoint host name → scheduler node name. Unlisted hosts match a node
/// of the same name, or of the same short name (`gpu01.cluster.local` →
/// `gpu01`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostMap(pub BTreeMap<String, String>);

/// Each node's position by name, for `HostMap::node_for`.
pub fn node_index(c: &Cluster) -> HashMap<&str, usize> {
    c.nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect()
}

impl HostMap {
    pub fn node_for<'a>(&'a self, host: &'a str, known: &HashMap<&str, usize>) -> &'a str {
        if let Some(n) = self.0.get(host) {
            return n;
        }
        if known.contains_key(host) {
            return host;
        }
        let short = host.split('.').next().unwrap_or(host);
        if known.contains_key(short) {
            short
        } else {
            host
        }
    }
}

/// Label on nodes that only a node endpoint knows.
pub use crate::model::ENDPOINT_ONLY;

/// A node only a node endpoint knows (no scheduler names it), marked.
pub fn endpoint_only_node(name: &str, gpu_model: Option<String>) -> Node {
    let mut labels = BTreeMap::new();
    labels.insert(ENDPOINT_ONLY.to_string(), "true".to_string());
    Node {
        name: name.to_string(),
        partitions: Default::default(),
        state: NodeState::Unknown,
        reason: Some("known only to a node endpoint".into()),
        reason_set_by: None,
        reason_time: None,
        boot_time: None,
        fault_reports: Vec::new(),
        back_at: None,
        gpu_model,
        domains: Default::default(),
        ib_ports: Default::default(),
        gpu_summary: None,
        labels: labels.into(),
        gpu_count: 0,
        gpus: Vec::new(),
    }
}

/// What the health watch remembers of one GPU between readings.
#[derive(Debug, Default, Clone)]
struct Seen {
    xid: Option<u32>,
    recent: Vec<u32>,
    dbe_volatile: Option<u64>,
    remap_pending: Option<bool>,
    remap_failed: Option<bool>,
}

/// Turns endpoint readings into incidents, as the sim's own events are: a
/// new non-zero last-Xid gauge (or a new Xid in the windowed counter), a
/// rise in uncorrectable (DBE) errors, a row remap that became pending or
/// failed. The first reading of a GPU that already shows one is an
/// incident too: nobody has seen it yet. Each event names the jobs the
/// scheduler had on that GPU when it was seen.
#[derive(Debug, Clone, Default)]
pub struct HealthWatch {
    seen: HashMap<(String, u32), Seen>,
    events: Vec<Event>,
    seq: u64,
    /// Xids in Prometheus's history, by node name and GPU: an Xid first
    /// read now but reported earlier is dated when it was first seen.
    history: HashMap<(String, u32), Vec<XidSeen>>,
    /// Events read while the scheduler had no jobs to tell (before its
    /// first answer): named once it has (see `name_victims`).
    unnamed: Vec<u64>,
    /// The GPUs' hardware faults in Prometheus's history (by node name):
    /// each merged snapshot carries them (`Cluster::history`).
    pub faults: Vec<crate::model::PastFault>,
}

/// Endpoint incidents kept.
const KEEP_EVENTS: usize = 1000;

impl HealthWatch {
    pub fn observe(&mut self, readings: &[Reading], base: &Cluster, hosts: &HostMap) {
        self.name_victims(base);
        let known = node_index(base);
        for r in readings {
            let key = (r.host.clone(), r.index);
            let was = self.seen.get(&key).cloned().unwrap_or_default();
            let mut found: Vec<(EventKind, String)> = Vec::new();
            if let Some(x) = r.last_xid.filter(|x| *x > 0)
                && was.xid != Some(x)
            {
                found.push((
                    EventKind::Xid { code: x },
                    format!("Xid {x} reported by the node endpoint"),
                ));
            }
            for x in &r.recent_xids {
                let already = was.recent.contains(x)
                    || found
                        .iter()
                        .any(|(k, _)| matches!(k, EventKind::Xid { code } if code == x));
                if !already {
                    found.push((
                        EventKind::Xid { code: *x },
                        format!("Xid {x} reported by the node endpoint"),
                    ));
                }
            }
            let dbe_rose = match (r.ecc.dbe_volatile.get(), was.dbe_volatile) {
                (Some(now), Some(then)) => now > then,
                (Some(now), None) => now > 0,
                _ => false,
            };
            let pending_new = r.row_remap_pending == Some(true) && was.remap_pending != Some(true);
            let failed_new = r.row_remap_failed == Some(true) && was.remap_failed != Some(true);
            if dbe_rose || pending_new || failed_new {
                let mut what = Vec::new();
                if dbe_rose {
                    what.push(format!(
                        "uncorrectable ECC errors: {} volatile",
                        r.ecc.dbe_volatile.unwrap_or(0)
                    ));
                }
                if failed_new {
                    what.push("row remap failed".to_string());
                } else if pending_new {
                    what.push("row remap pending".to_string());
                }
                found.push((
                    EventKind::Ecc {
                        dbe: r.ecc.dbe_volatile.get().filter(|_| dbe_rose),
                        sbe: r.ecc.sbe_volatile.get(),
                        remap_pending: r.row_remap_pending,
                        remap_failed: r.row_remap_failed,
                    },
                    format!("{} (node endpoint)", what.join("; ")),
                ));
            }
            let node = hosts.node_for(&r.host, &known).to_string();
            for (kind, message) in found {
                self.seq += 1;
                let mut e = Event {
                    seq: self.seq,
                    time: r.time,
                    jobs: base.jobs_at(&node, Some(r.index)),
                    node: node.clone(),
                    gpu: Some(r.index),
                    kind,
                    message,
                };
                redate(&mut e, &self.history);
                if base.jobs.is_empty() {
                    self.unnamed.push(e.seq);
                }
                self.events.push(e);
            }
            let mut recent = was.recent;
            for x in &r.recent_xids {
                if !recent.contains(x) {
                    recent.push(*x);
                }
            }
            self.seen.insert(
                key,
                Seen {
                    xid: r.last_xid.or(was.xid),
                    recent,
                    dbe_volatile: r.ecc.dbe_volatile.get().or(was.dbe_volatile),
                    remap_pending: r.row_remap_pending.or(was.remap_pending),
                    remap_failed: r.row_remap_failed.or(was.remap_failed),
                },
            );
        }
        if self.events.len() > KEEP_EVENTS {
            let cut = self.events.len() - KEEP_EVENTS;
            self.events.drain(..cut);
        }
    }

    /// Events read before the scheduler's data came (the console polls the
    /// endpoints and the scheduler side by side) name no job: they get the
    /// jobs the scheduler now has on their GPU that had started by then.
    /// Each such event is looked at once, when the jobs come.
    fn name_victims(&mut self, base: &Cluster) {
        if base.jobs.is_empty() || self.unnamed.is_empty() {
            return;
        }
        let unnamed = std::mem::take(&mut self.unnamed);
        for e in self
            .events
            .iter_mut()
            .filter(|e| e.jobs.is_empty() && unnamed.contains(&e.seq))
        {
            e.jobs = base
                .jobs_at(&e.node, e.gpu)
                .into_iter()
                .filter(|j| {
                    base.job(&j.id)
                        .and_then(|j| j.start_time.get())
                        .is_some_and(|t| t <= e.time)
                })
                .collect();
        }
    }

    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// When Xid `code` on `node`'s GPU was first seen: its newest event's
    /// time (an Xid that comes back after another is a new event).
    pub fn first_seen(&self, node: &str, gpu: u32, code: u32) -> Option<crate::model::Timestamp> {
        self.events
            .iter()
            .rev()
            .find(|e| {
                e.node == node
                    && e.gpu == Some(gpu)
                    && matches!(e.kind, EventKind::Xid { code: c } if c == code)
            })
            .map(|e| e.time)
    }

    /// Learns the Xids of Prometheus's last hour (hosts already named as
    /// nodes): events of those Xids, seen or to be seen, take the time
    /// the history first showed them. The jobs an event names stay those
    /// the scheduler had on the GPU when nightshift read it.
    pub fn learn_history(&mut self, b: &Backfill) {
        for ((node, gpu), g) in &b.gpus {
            if !g.xids.is_empty() {
                self.history.insert((node.clone(), *gpu), g.xids.clone());
            }
        }
        for e in &mut self.events {
            redate(e, &self.history);
        }
    }
}

/// An Xid event dated by the history when the history saw it earlier.
fn redate(e: &mut Event, history: &HashMap<(String, u32), Vec<XidSeen>>) {
    let (EventKind::Xid { code }, Some(gpu)) = (&e.kind, e.gpu) else {
        return;
    };
    let Some(x) = history.get(&(e.node.clone(), gpu)).and_then(|xs| {
        xs.iter()
            .rev()
            .find(|x| x.code == *code && x.first_seen < e.time)
    }) else {
        return;
    };
    e.time = x.first_seen;
    e.message = if x.at_window_start {
        format!(
            "{} (already there when Prometheus's hour began, {})",
            e.message,
            crate::text::clock(x.first_seen)
        )
    } else {
        format!(
            "{} (first seen at {} in Prometheus's history)",
            e.message,
            crate::text::clock(x.first_seen)
        )
    };
}

/// Lays endpoint readings over the snapshot. The scheduler's allocation
/// (which job holds a GPU) stays; every reading the endpoint gave replaces
/// the snapshot's; nodes only the endpoint knows are added, marked.
/// Linear in readings: nodes are found through an index, never searched.
/// A reading of a GPU index past `limits.max_gpus_per_node` is dropped.
pub fn merge(
    c: &mut Cluster,
    readings: &[Reading],
    source: &str,
    hosts: &HostMap,
    xids: &HealthWatch,
) {
    let max_gpu = crate::limits::get().max_gpus_per_node;
    let known = node_index(c);
    let mut targets: Vec<(String, &Reading)> = readings
        .iter()
        .filter(|r| r.index < max_gpu)
        .map(|r| (hosts.node_for(&r.host, &known).to_string(), r))
        .collect();
    drop(known);
    // dcgm-exporter on Kubernetes names the pod holding each GPU: that is
    // which job holds it, better than the scheduler's guess (the device
    // plugin does not say which index a pod got).
    let job_of_pod: HashMap<&str, &str> = c
        .jobs
        .iter()
        .flat_map(|j| j.pods.iter().map(move |p| (p.as_str(), j.id.as_str())))
        .collect();
    let mut by_pod: HashMap<(String, u32), Option<String>> = HashMap::new();
    for (name, r) in &targets {
        if let Some(pod) = &r.pod {
            let key = format!("{}/{pod}", r.namespace.as_deref().unwrap_or("default"));
            let job = job_of_pod.get(key.as_str()).map(|j| j.to_string());
            by_pod.insert((name.clone(), r.index), job);
        }
    }
    drop(job_of_pod);
    targets.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.index.cmp(&b.1.index)));
    let mut index: HashMap<String, usize> = c
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.clone(), i))
        .collect();
    for (name, r) in targets {
        let n = match index.get(&name) {
            Some(&n) => n,
            None => {
                c.nodes.push(std::sync::Arc::new(endpoint_only_node(
                    &name,
                    r.model.clone(),
                )));
                index.insert(name.clone(), c.nodes.len() - 1);
                c.nodes.len() - 1
            }
        };
        let node = std::sync::Arc::make_mut(&mut c.nodes[n]);
        let g = match node.gpus.iter().position(|g| g.index == r.index) {
            Some(g) => g,
            None => {
                node.gpus.push(Gpu::unknown(&name, r.index));
                node.gpus.sort_by_key(|g| g.index);
                node.gpu_count = node.gpu_count.max(node.gpus.len() as u32);
                node.gpus
                    .iter()
                    .position(|g| g.index == r.index)
                    .unwrap_or(0)
            }
        };
        if node.gpu_model.is_none() {
            node.gpu_model = r.model.clone();
        }
        apply(&mut node.gpus[g], r, source);
        // An Xid is dated when it was first seen (its event), not at each
        // scrape that still reports it.
        if let Some(x) = node.gpus[g].last_xid.as_mut()
            && let Some(first) = xids.first_seen(&name, r.index, x.code)
        {
            x.time = Some(first);
        }
    }
    // A node whose exporter names pods: each GPU it reports is held by
    // its pod's job, or by none.
    let mapped: std::collections::HashSet<String> = by_pod.keys().map(|(n, _)| n.clone()).collect();
    for node in c
        .nodes
        .iter_mut()
        .filter(|n| mapped.contains(n.name.as_str()))
    {
        let node = std::sync::Arc::make_mut(node);
        for g in node.gpus.iter_mut() {
            if g.reading_source.is_some() {
                g.job = by_pod.get(&(node.name.clone(), g.index)).cloned().flatten();
            }
        }
    }
    // Xid events from the endpoints join the scheduler's incidents.
    let mut events = c.events.clone();
    let base = events.iter().map(|e| e.seq).max().unwrap_or(0);
    events.extend(xids.events().iter().cloned().map(|mut e| {
        e.seq += base;
        e
    }));
    events.sort_by_key(|e| (e.time, e.seq));
    c.events = events;
}

fn apply(g: &mut Gpu, r: &Reading, source: &str) {
    macro_rules! over {
        ($($f:ident),*) => { $( if r.$f.is_some() { g.$f = r.$f.clone(); } )* };
    }
    // Names kept as they are when the reading says the same: a node's
    // copy shares them with the one before.
    for (to, from) in [(&mut g.uuid, &r.uuid), (&mut g.model, &r.model)] {
        if let Some(v) = from
            && to.as_deref() != Some(v.as_str())
        {
            *to = Some(v.as_str().into());
        }
    }
    over!(
        sm_occupancy,
        sm_active,
        utilization,
        temperature_c,
        power_w,
        memory_used_mib,
        row_remap_pending,
        row_remap_failed,
        recovery_action
    );
    if let Some(t) = r.memory_total_mib() {
        g.memory_total_mib = Some(t);
    }
    let e = &r.ecc;
    if e.sbe_volatile.is_some()
        || e.dbe_volatile.is_some()
        || e.sbe_aggregate.is_some()
        || e.dbe_aggregate.is_some()
    {
        g.ecc = *e;
    }
    if r.nvlink.total().is_some() {
        g.nvlink = r.nvlink;
    }
    if !r.nvlink_links.is_empty() {
        g.nvlink_links = r.nvlink_links.clone();
    }
    if let Some(x) = r.last_xid.filter(|x| *x > 0) {
        let same = g.last_xid.as_ref().is_some_and(|l| l.code == x);
        if !same {
            g.last_xid = Some(Box::new(LastXid {
                code: x,
                time: Some(r.time),
                message: None,
            }));
        }
    }
    if g.reading_source.as_deref() != Some(source) {
        g.reading_source = Some(source.into());
    }
    g.reading_time = Some(r.time);
    if r.names.is_some() {
        g.metric_names = r.names;
    }
}
