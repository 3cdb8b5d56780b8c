//! A Prometheus server as the endpoints' poller asks it: every GPU's
//! series on a small cluster; on a fleet (more GPUs than
//! `prometheus_every_gpu_max`) the fleet path of `prometheus::fleet` —
//! the broken GPUs' nodes each refresh, the aggregates and the spinning
//! GPUs once a minute, those nodes, their jobs' other nodes and the open
//! ones read in full.

use super::{Endpoints, Poll};
use crate::dcgm::Reading;
use crate::dcgm::merge::HostMap;
use crate::dcgm::ports::PortReading;
use crate::model::Cluster;
use crate::prometheus::fleet::{self, HostKey, NodeAggregate};
use crate::prometheus::{PromError, Prometheus};
use crate::{Origin, SourceError};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// A Prometheus server, as polled: every GPU's series (a small cluster),
/// or the fleet path (aggregates, problem nodes, opened nodes).
pub(super) struct PromPoller {
    url: String,
    pub(super) client: Prometheus,
    every_gpu_max: u32,
    stall: (f64, f64),
    /// Answers slower than this are said to be slow.
    slow: Duration,
    last: Vec<Reading>,
    last_ports: Vec<PortReading>,
    /// The fleet path's newest aggregates (empty on the every-series path).
    aggregates: Vec<NodeAggregate>,
    /// The fleet path's full readings, per host asked for.
    full: BTreeMap<HostKey, Vec<Reading>>,
    /// The fleet path's nodes with a spinning GPU, as last asked.
    spinning: BTreeSet<HostKey>,
    /// The fleet path's nodes with a broken GPU, as last asked.
    broken: BTreeSet<HostKey>,
    /// The fleet path's hosts whose weeks of faults were asked (once each).
    history_asked: BTreeSet<HostKey>,
    /// A small cluster's weeks of faults were asked (once).
    every_history_asked: bool,
    /// Refreshes so far (the weeks wait for the second).
    refreshes: u64,
    /// How far back those weeks go (`[engine] repeat_offender`'s window).
    fault_window_s: i64,
    /// GPUs on the server, as the aggregates last said.
    gpus: u64,
    /// Refreshes since the aggregates were last asked for.
    round: u64,
    /// What the first refresh asks: the console's first screen, or a
    /// one-shot command's whole picture or its problems alone.
    pub(super) first: super::First,
}

impl PromPoller {
    pub(super) fn new(url: &str, e: &Endpoints) -> Result<PromPoller, PromError> {
        Ok(PromPoller {
            url: url.to_string(),
            client: Prometheus::new(url, e.timeout)?,
            every_gpu_max: e.prometheus_every_gpu_max,
            stall: (e.stall_util_min, e.stall_occupancy_max),
            slow: (e.timeout / 2).max(Duration::from_secs(1)),
            last: Vec::new(),
            last_ports: Vec::new(),
            aggregates: Vec::new(),
            full: BTreeMap::new(),
            spinning: BTreeSet::new(),
            broken: BTreeSet::new(),
            history_asked: BTreeSet::new(),
            every_history_asked: false,
            refreshes: 0,
            fault_window_s: e.fault_window_s,
            gpus: 0,
            round: 0,
            first: super::First::Console,
        })
    }

    pub(super) async fn poll(
        &mut self,
        base: &Cluster,
        open: &[String],
        hosts: &HostMap,
        out: &mut Poll,
    ) {
        let origin = Origin::Endpoint(self.url.clone());
        let started = std::time::Instant::now();
        let mut warned = Vec::new();
        let answered = self.read(base, open, hosts, &mut warned).await;
        let took = started.elapsed();
        self.ask_fault_history(base, open, hosts, out).await;
        if self.is_fleet() {
            tracing::debug!(
                "prometheus refresh (fleet): {took:?}, {} nodes read per GPU",
                self.full.len()
            );
        } else {
            tracing::debug!(
                "prometheus refresh (every series): {took:?}, {} GPUs",
                self.last.len()
            );
        }
        match answered {
            Ok(()) => out.polled.push((origin.clone(), None)),
            Err(e) => out
                .polled
                .push((origin.clone(), Some(SourceError::from(e)))),
        }
        // The ports' query failing alone is a note: the GPUs stand.
        match self.client.ports().await {
            Ok((ports, warnings)) => {
                self.last_ports = ports;
                warned.extend(warnings);
            }
            Err(e) => out
                .notes
                .push(format!("{}: no network ports: {e}", self.url)),
        }
        let quality = if let Some(w) = warned.first() {
            Some(format!(
                "partial answer: {}",
                w.trim_start_matches("Prometheus warning: ")
            ))
        } else if took > self.slow {
            Some(format!("slow: answered in {:.1} s", took.as_secs_f64()))
        } else {
            None
        };
        out.quality.push((origin, quality));
        out.notes.extend(warned);
        self.fill(out);
    }

    /// The open nodes not yet read in full, read now; false when there
    /// were none.
    pub(super) async fn read_open(
        &mut self,
        base: &Cluster,
        open: &[String],
        hosts: &HostMap,
        out: &mut Poll,
    ) -> bool {
        let keys: BTreeSet<HostKey> = self
            .keys_of(base, open, hosts)
            .into_iter()
            .filter(|k| !self.full.contains_key(k))
            .collect();
        if keys.is_empty() {
            return false;
        }
        match self.read_full(&keys).await {
            Ok((readings, warnings)) => {
                out.notes.extend(warnings);
                self.full.extend(readings);
            }
            Err(e) => out
                .notes
                .push(format!("{}: the opened node's GPUs: {e}", self.url)),
        }
        true
    }

    /// The weeks of hardware faults (`[engine] repeat_offender`'s window),
    /// from the second refresh on (the first screen waits for none of it;
    /// a one-shot command asks at once). A small cluster's every GPU once;
    /// on a fleet, the hosts with a broken GPU and the opened nodes, each
    /// host once — the server reads those hosts' series alone, and a
    /// healthy node's history is what nightshift saw (events, the audit
    /// log, a recording). A failed ask is said once, not repeated.
    async fn ask_fault_history(
        &mut self,
        base: &Cluster,
        open: &[String],
        hosts: &HostMap,
        out: &mut Poll,
    ) {
        self.refreshes += 1;
        if self.refreshes == 1 && self.first == super::First::Console {
            return;
        }
        let now = crate::host::now();
        let (asked, what) = if self.is_fleet() {
            let mut keys = self.broken.clone();
            keys.extend(self.keys_of(base, open, hosts));
            keys.retain(|k| !self.history_asked.contains(k));
            if keys.is_empty() {
                return;
            }
            let asked = self
                .client
                .fault_history_of(now, self.fault_window_s, &keys)
                .await;
            let what = format!("{} host(s)", keys.len());
            self.history_asked.extend(keys);
            (asked, what)
        } else {
            if std::mem::replace(&mut self.every_history_asked, true) {
                return;
            }
            let asked = self.client.fault_history(now, self.fault_window_s).await;
            (asked, "every GPU".to_string())
        };
        match asked {
            Ok(faults) => out.faults.extend(faults),
            Err(e) => out
                .notes
                .push(format!("{}: no fault history of {what}: {e}", self.url)),
        }
    }

    /// The readings (and aggregates) as the newest answers left them.
    pub(super) fn fill(&self, out: &mut Poll) {
        out.readings.extend(self.last.iter().cloned());
        out.readings.extend(self.full.values().flatten().cloned());
        out.ports.extend(self.last_ports.iter().cloned());
        if self.is_fleet() {
            out.aggregates.extend(
                self.aggregates
                    .iter()
                    .filter(|a| !self.full.contains_key(&a.key))
                    .cloned(),
            );
        }
    }

    /// Whether the server holds more GPUs than are read whole each refresh.
    fn is_fleet(&self) -> bool {
        self.gpus > u64::from(self.every_gpu_max)
    }

    /// One refresh. Every `fleet::SLOW_ROUNDS` refreshes the aggregates
    /// (they say how many GPUs the server holds: a small cluster is then
    /// read in full each refresh) and the spinning GPUs' nodes; on a
    /// fleet, every refresh the broken GPUs' nodes, and in full those
    /// nodes, their jobs' other nodes and the opened ones. A failed answer
    /// keeps the last.
    ///
    /// The questions are asked one after another, not side by side: on
    /// Debian's Prometheus at 80,000 GPUs the three together cost the
    /// server 4.3–4.6 s of CPU and 2.1–2.2 s of wall time when asked at
    /// once, 1.4 s of each one after another (they read the same series,
    /// and the server's goroutines then contend for them;
    /// docs/performance.md). And a small cluster, once counted, is asked
    /// nothing it does not need.
    async fn read(
        &mut self,
        base: &Cluster,
        open: &[String],
        hosts: &HostMap,
        warned: &mut Vec<String>,
    ) -> Result<(), PromError> {
        // The aggregates one refresh, the spinning GPUs the next: the
        // first screen waits for neither more than it must.
        let first = (self.round == 0).then_some(self.first);
        let slow_round = self.round.is_multiple_of(fleet::SLOW_ROUNDS);
        let spin_round = self.round % fleet::SLOW_ROUNDS == 1 || first == Some(super::First::Whole);
        self.round += 1;
        if first == Some(super::First::Problems) {
            // Only how many GPUs the server holds: a fleet's healthy
            // nodes are not read.
            let body = self.ask(fleet::count_query()).await?;
            let (gpus, w) = fleet::count_from(body)?;
            warned.extend(w);
            self.gpus = gpus;
        } else if slow_round {
            let body = self.ask(fleet::aggregates_query()).await?;
            let (aggregates, w) = fleet::aggregates_from(body)?;
            warned.extend(w);
            self.gpus = aggregates.iter().map(|a| u64::from(a.gpus)).sum();
            self.aggregates = aggregates;
        }
        if !self.is_fleet() {
            let (r, w) = self.client.query().await?;
            warned.extend(w);
            self.last = r;
            self.full.clear();
            self.round = 0;
            return Ok(());
        }
        self.last.clear();
        let broken = self.ask(fleet::broken_query()).await?;
        if spin_round {
            let body = self
                .ask(fleet::spinning_query(self.stall.0, self.stall.1))
                .await?;
            let (spinning, w) = fleet::hosts_from(body)?;
            warned.extend(w);
            self.spinning = spinning;
        }
        let (mut wanted, w) = fleet::hosts_from(broken)?;
        warned.extend(w);
        self.broken = wanted.clone();
        wanted.extend(self.spinning.iter().cloned());
        // Their jobs' other nodes, and the opened ones.
        let problem_nodes: std::collections::HashSet<String> = {
            let known = crate::dcgm::merge::node_index(base);
            wanted
                .iter()
                .map(|k| hosts.node_for(k.host(), &known).to_string())
                .collect()
        };
        let mut more: BTreeSet<&str> = open.iter().map(String::as_str).collect();
        for j in base.jobs.iter().filter(|j| j.state.holds_resources()) {
            if j.nodes.len() > 1 && j.nodes.iter().any(|n| problem_nodes.contains(n)) {
                more.extend(j.nodes.iter().map(String::as_str));
            }
        }
        let more: Vec<String> = more.into_iter().map(str::to_string).collect();
        wanted.extend(self.keys_of(base, &more, hosts));
        let (full, w) = self.read_full(&wanted).await?;
        warned.extend(w);
        self.full = full;
        Ok(())
    }

    /// One instant query's answer.
    async fn ask(&self, query: String) -> Result<crate::prometheus::Answer, PromError> {
        self.client.get_json("query", &[("query", query)]).await
    }

    /// The aggregates' hosts that are these nodes.
    fn keys_of(&self, base: &Cluster, nodes: &[String], hosts: &HostMap) -> BTreeSet<HostKey> {
        if nodes.is_empty() {
            return BTreeSet::new();
        }
        let known = crate::dcgm::merge::node_index(base);
        let wanted: BTreeSet<&str> = nodes.iter().map(String::as_str).collect();
        self.aggregates
            .iter()
            .filter(|a| wanted.contains(hosts.node_for(a.key.host(), &known)))
            .map(|a| a.key.clone())
            .collect()
    }

    /// Every family of these hosts, per host.
    async fn read_full(
        &self,
        keys: &BTreeSet<HostKey>,
    ) -> Result<(BTreeMap<HostKey, Vec<Reading>>, Vec<String>), PromError> {
        let mut out: BTreeMap<HostKey, Vec<Reading>> =
            keys.iter().map(|k| (k.clone(), Vec::new())).collect();
        let by_host: std::collections::HashMap<String, HostKey> = keys
            .iter()
            .map(|k| (k.host().to_string(), k.clone()))
            .collect();
        let mut warned = Vec::new();
        for q in fleet::full_queries(keys) {
            let (readings, w) = self.client.query_with(&q).await?;
            warned.extend(w);
            for r in readings {
                if let Some(k) = by_host.get(&r.host) {
                    out.entry(k.clone()).or_default().push(r);
                }
            }
        }
        Ok((out, warned))
    }
}
