//! Node endpoints beside (or instead of) a scheduler: a task that polls
//! them, and one that lays their readings over the scheduler's snapshots.

use super::dcgm::Reading;
use super::dcgm::merge::{HealthWatch, HostMap, merge};
use super::dcgm::ports::{PortReading, merge_ports};
use super::dcgm::scrape::Scraper;
use super::prometheus::fleet::{self, HostKey, NodeAggregate};
use super::prometheus::{PromError, Prometheus};
use super::{Origin, SourceError, Update};
use crate::model::{Backfill, Cluster, HISTORY_SLOTS, HISTORY_STEP};
use crate::sources::error::StartError;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

#[derive(Debug, Clone, PartialEq)]
pub struct Endpoints {
    /// dcgm-exporter or nightshift-agent `/metrics` URLs.
    pub dcgm: Vec<String>,
    /// Prometheus node exporter `/metrics` URLs (its infiniband collector).
    pub node_exporter: Vec<String>,
    /// A Prometheus-compatible server.
    pub prometheus: Option<String>,
    pub interval: Duration,
    pub timeout: Duration,
    pub hosts: HostMap,
    /// Up to this many GPUs on the Prometheus server, every GPU's series
    /// each refresh; above, the fleet path (`prometheus::fleet`).
    pub prometheus_every_gpu_max: u32,
    /// The engine's stall thresholds (0–1), for the fleet path's filter.
    pub stall_util_min: f64,
    pub stall_occupancy_max: f64,
}

/// `[endpoints] prometheus_every_gpu_max` when unset.
pub const EVERY_GPU_MAX: u32 = 4096;

impl Default for Endpoints {
    fn default() -> Self {
        Endpoints {
            dcgm: Vec::new(),
            node_exporter: Vec::new(),
            prometheus: None,
            interval: Duration::from_secs(10),
            timeout: Duration::from_secs(5),
            hosts: HostMap::default(),
            prometheus_every_gpu_max: EVERY_GPU_MAX,
            stall_util_min: 0.9,
            stall_occupancy_max: 0.05,
        }
    }
}

impl Endpoints {
    pub fn is_empty(&self) -> bool {
        self.dcgm.is_empty() && self.node_exporter.is_empty() && self.prometheus.is_none()
    }

    fn source_name(&self) -> String {
        match (
            &self.prometheus,
            self.dcgm.is_empty() && self.node_exporter.is_empty(),
        ) {
            (Some(p), true) => format!("prometheus {p}"),
            (Some(p), false) => format!("prometheus {p} + dcgm"),
            (None, _) => "dcgm".into(),
        }
    }
}

/// One poll of every endpoint.
pub struct Poller {
    scraper: Option<Scraper>,
    prometheus: Option<PromPoller>,
    /// The scrapers' newest round, for a poll of the opened nodes alone.
    last_scrape: (Vec<Reading>, Vec<PortReading>),
}

/// A Prometheus server, as polled: every GPU's series (a small cluster),
/// or the fleet path (aggregates, problem nodes, opened nodes).
struct PromPoller {
    url: String,
    client: Prometheus,
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
    /// GPUs on the server, as the aggregates last said.
    gpus: u64,
    /// Refreshes since the aggregates were last asked for.
    round: u64,
    /// The first refresh asks every question (a one-shot command).
    whole_first: bool,
}

/// What one poll found.
#[derive(Debug, Default)]
pub struct Poll {
    /// Every endpoint's newest readings (old ones where a scrape failed).
    pub readings: Vec<Reading>,
    /// Every node exporter's newest network ports.
    pub ports: Vec<PortReading>,
    /// Nodes a fleet's Prometheus gave only in aggregate.
    pub aggregates: Vec<NodeAggregate>,
    /// Each endpoint polled this time: answered (`None`) or its error.
    pub polled: Vec<(Origin, Option<SourceError>)>,
    /// Warnings that lose nothing: lines that did not parse, Prometheus
    /// warnings.
    pub notes: Vec<String>,
    /// Per endpoint that answered slowly or in part: what to say in the
    /// header; `None` for one that answered whole and in time.
    pub quality: Vec<(Origin, Option<String>)>,
}

impl Poller {
    pub fn new(e: &Endpoints) -> Result<Poller, StartError> {
        Ok(Poller {
            scraper: if e.dcgm.is_empty() && e.node_exporter.is_empty() {
                None
            } else {
                let urls = e.dcgm.iter().chain(&e.node_exporter).cloned().collect();
                Some(Scraper::new(urls, e.interval, e.timeout)?)
            },
            prometheus: e
                .prometheus
                .as_deref()
                .map(|u| {
                    Prometheus::new(u, e.timeout).map(|client| PromPoller {
                        url: u.to_string(),
                        client,
                        every_gpu_max: e.prometheus_every_gpu_max,
                        stall: (e.stall_util_min, e.stall_occupancy_max),
                        slow: (e.timeout / 2).max(Duration::from_secs(1)),
                        last: Vec::new(),
                        last_ports: Vec::new(),
                        aggregates: Vec::new(),
                        full: BTreeMap::new(),
                        spinning: BTreeSet::new(),
                        gpus: 0,
                        round: 0,
                        whole_first: false,
                    })
                })
                .transpose()?,
            last_scrape: (Vec::new(), Vec::new()),
        })
    }

    /// For a command that polls once: its poll asks a fleet's Prometheus
    /// every question at once (the console asks the spinning GPUs on its
    /// second refresh, so that the first screen comes sooner).
    pub fn whole(mut self) -> Poller {
        if let Some(p) = &mut self.prometheus {
            p.whole_first = true;
        }
        self
    }

    /// Every endpoint, once. `base` is the scheduler's newest snapshot (a
    /// fleet's problem nodes bring their jobs' other nodes), `open` the
    /// nodes the console has open (read in full on the fleet path).
    pub async fn poll(&mut self, base: &Cluster, open: &[String], hosts: &HostMap) -> Poll {
        let mut out = Poll::default();
        if let Some(s) = &mut self.scraper {
            let round = s.round().await;
            self.last_scrape = (round.readings, round.ports);
            out.polled.extend(
                round
                    .polled
                    .into_iter()
                    .map(|(u, e)| (Origin::Endpoint(u), e)),
            );
            out.notes
                .extend(round.notes.into_iter().map(|(u, n)| format!("{u}: {n}")));
        }
        out.readings.extend(self.last_scrape.0.iter().cloned());
        out.ports.extend(self.last_scrape.1.iter().cloned());
        if let Some(p) = &mut self.prometheus {
            p.poll(base, open, hosts, &mut out).await;
        }
        out
    }

    /// The opened nodes alone, read in full now (the fleet path); the rest
    /// as the last poll left it. `None`: nothing to read (no fleet path,
    /// or those nodes already read in full).
    pub async fn poll_open(
        &mut self,
        base: &Cluster,
        open: &[String],
        hosts: &HostMap,
    ) -> Option<Poll> {
        let p = self.prometheus.as_mut()?;
        let keys = p.keys_of(base, open, hosts);
        let keys: BTreeSet<HostKey> = keys
            .into_iter()
            .filter(|k| !p.full.contains_key(k))
            .collect();
        if keys.is_empty() {
            return None;
        }
        let mut out = Poll::default();
        match p.read_full(&keys).await {
            Ok((readings, warnings)) => {
                out.notes.extend(warnings);
                p.full.extend(readings);
            }
            Err(e) => out
                .notes
                .push(format!("{}: the opened node's GPUs: {e}", p.url)),
        }
        out.readings.extend(self.last_scrape.0.iter().cloned());
        out.ports.extend(self.last_scrape.1.iter().cloned());
        p.fill(&mut out);
        Some(out)
    }
}

impl PromPoller {
    async fn poll(&mut self, base: &Cluster, open: &[String], hosts: &HostMap, out: &mut Poll) {
        let origin = Origin::Endpoint(self.url.clone());
        let started = std::time::Instant::now();
        let mut warned = Vec::new();
        let answered = self.read(base, open, hosts, &mut warned).await;
        let took = started.elapsed();
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

    /// The readings (and aggregates) as the newest answers left them.
    fn fill(&self, out: &mut Poll) {
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
    async fn read(
        &mut self,
        base: &Cluster,
        open: &[String],
        hosts: &HostMap,
        warned: &mut Vec<String>,
    ) -> Result<(), PromError> {
        // The aggregates one refresh, the spinning GPUs the next: the
        // first screen waits for neither more than it must.
        let slow_round = self.round.is_multiple_of(fleet::SLOW_ROUNDS);
        let spin_round =
            self.round % fleet::SLOW_ROUNDS == 1 || (self.round == 0 && self.whole_first);
        self.round += 1;
        // A fleet (or a server not yet counted) is asked its questions
        // side by side: the server answers them on its cores at once, and
        // the first screen waits for the slowest, not for their sum.
        let maybe_fleet = self.gpus == 0 || self.is_fleet();
        let client = &self.client;
        let ask = |q: String| async move { client.get_json("query", &[("query", q)]).await };
        let stall = self.stall;
        let (aggregates, spinning, broken) = tokio::join!(
            async {
                match slow_round {
                    true => Some(ask(fleet::aggregates_query()).await),
                    false => None,
                }
            },
            async {
                match spin_round && maybe_fleet {
                    true => Some(ask(fleet::spinning_query(stall.0, stall.1)).await),
                    false => None,
                }
            },
            async {
                match maybe_fleet {
                    true => Some(ask(fleet::broken_query()).await),
                    false => None,
                }
            },
        );
        if let Some(body) = aggregates {
            let (aggregates, w) = fleet::aggregates_from(&body?)?;
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
        if let Some(body) = spinning {
            let (spinning, w) = fleet::hosts_from(&body?)?;
            warned.extend(w);
            self.spinning = spinning;
        }
        let Some(body) = broken else {
            // Counted small last time, a fleet now: the next refresh asks.
            return Ok(());
        };
        let (mut wanted, w) = fleet::hosts_from(&body?)?;
        warned.extend(w);
        wanted.extend(self.spinning.iter().cloned());
        // Their jobs' other nodes, and the opened ones.
        let problem_nodes: std::collections::HashSet<String> = {
            let known = super::dcgm::merge::node_index(base);
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

    /// The aggregates' hosts that are these nodes.
    fn keys_of(&self, base: &Cluster, nodes: &[String], hosts: &HostMap) -> BTreeSet<HostKey> {
        if nodes.is_empty() {
            return BTreeSet::new();
        }
        let known = super::dcgm::merge::node_index(base);
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

/// The scheduler's snapshot with the endpoints' readings (GPUs, network
/// ports, a fleet's per-node aggregates) laid over it.
pub fn merged(
    base: &Cluster,
    latest: &Latest,
    e: &Endpoints,
    watch: &HealthWatch,
    now: i64,
) -> Cluster {
    let mut c = base.clone();
    if c.source.is_empty() {
        c.name = "node endpoints".into();
        c.source = "none".into();
    }
    c.time = c.time.max(now);
    merge(&mut c, &latest.readings, &e.source_name(), &e.hosts, watch);
    merge_ports(&mut c, &latest.ports, &e.hosts);
    merge_aggregates(&mut c, &latest.aggregates, &e.source_name(), &e.hosts);
    c
}

/// Nodes a fleet's Prometheus gave only in aggregate: their summary, on
/// nodes none of whose GPUs has a reading of its own; nodes only the
/// endpoint knows are added, marked.
fn merge_aggregates(c: &mut Cluster, aggregates: &[NodeAggregate], source: &str, hosts: &HostMap) {
    if aggregates.is_empty() {
        return;
    }
    let mut index: std::collections::HashMap<String, usize> = c
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.clone(), i))
        .collect();
    // The scheduler's names, once: hosts are matched against them.
    let names: Vec<String> = c.nodes.iter().map(|n| n.name.clone()).collect();
    let known: std::collections::HashMap<&str, usize> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    for a in aggregates {
        let name = hosts.node_for(a.key.host(), &known).to_string();
        let i = match index.get(&name) {
            Some(&i) => i,
            None => {
                let mut n = super::dcgm::merge::endpoint_only_node(&name, None);
                n.gpu_count = a.gpus;
                c.nodes.push(Arc::new(n));
                index.insert(name.clone(), c.nodes.len() - 1);
                c.nodes.len() - 1
            }
        };
        if c.nodes[i].gpus.iter().any(|g| g.reading_time.is_some()) {
            continue;
        }
        Arc::make_mut(&mut c.nodes[i]).gpu_summary = Some(crate::model::GpuSummary {
            gpus: a.gpus,
            utilization: a.utilization,
            sm_occupancy: a.sm_occupancy,
            source: source.to_string(),
            time: a.time,
        });
    }
}

/// The newest round's readings: GPUs, network ports, a fleet's aggregates.
#[derive(Debug, Default)]
pub struct Latest {
    pub readings: Vec<Reading>,
    pub ports: Vec<PortReading>,
    pub aggregates: Vec<NodeAggregate>,
}

impl From<Poll> for Latest {
    fn from(p: Poll) -> Latest {
        Latest {
            readings: p.readings,
            ports: p.ports,
            aggregates: p.aggregates,
        }
    }
}

/// The health watch after a round: observing is linear in readings but big
/// at scale, so off the async workers. A failed observation keeps the
/// watch as it was.
async fn observe(
    base: &Arc<Cluster>,
    latest: &Arc<Latest>,
    watch: Arc<HealthWatch>,
    e: &Arc<Endpoints>,
) -> Arc<HealthWatch> {
    let (b, l, mut w, hosts) = (base.clone(), latest.clone(), watch.clone(), e.clone());
    let observed = tokio::task::spawn_blocking(move || {
        let w2 = Arc::make_mut(&mut w);
        w2.observe(&l.readings, &b, &hosts.hosts);
        w2.observe_ports(&l.ports, &b, &hosts.hosts);
        w
    });
    match observed.await {
        Ok(w) => w,
        Err(err) => {
            tracing::error!("endpoint health watch failed: {err}");
            watch
        }
    }
}

/// Runs the endpoints beside the scheduler source `sched` (none: `None`)
/// and sends merged snapshots. The scheduler's status messages pass
/// through untouched: an endpoint's answer never makes the scheduler's
/// data look fresh.
///
/// `open` names the nodes the console has open: on a fleet's Prometheus
/// their GPUs are read in full at once (and each refresh while open).
pub fn spawn(
    mut sched: Option<mpsc::Receiver<Update>>,
    e: Endpoints,
    mut open: watch::Receiver<Vec<String>>,
) -> Result<mpsc::Receiver<Update>, StartError> {
    let (tx, rx) = mpsc::channel(16);
    let mut poller = Poller::new(&e)?;
    // The charts' last hour, read once at start beside the first rounds.
    let (btx, mut brx) = mpsc::channel::<Backfill>(1);
    let mut backfill_open = false;
    // The history waits for the first round: on a fleet's server it would
    // compete with the first screen's questions.
    let (first_tx, first_rx) = tokio::sync::oneshot::channel::<()>();
    if let Some(p) = &poller.prometheus {
        let p = p.client.clone();
        let every_gpu_max = e.prometheus_every_gpu_max;
        backfill_open = true;
        tokio::spawn(async move {
            let _ = first_rx.await;
            // A fleet's every-GPU hour is too big to ask for: its Xids
            // only. A server that cannot count is asked as before.
            let activity = p
                .gpu_count()
                .await
                .map_or(true, |n| n <= u64::from(every_gpu_max));
            let b = p
                .backfill(crate::host::now(), HISTORY_STEP, HISTORY_SLOTS, activity)
                .await;
            let _ = btx.send(b).await;
        });
    } else {
        drop(btx);
    }
    let (htx, mut hrx) = mpsc::channel::<Poll>(2);
    let (base_tx, base_rx) = watch::channel::<Arc<Cluster>>(Arc::default());
    let interval = e.interval;
    let hosts = e.hosts.clone();
    tokio::spawn(async move {
        let mut open_live = true;
        let mut next = tokio::time::Instant::now();
        let mut first = Some(first_tx);
        loop {
            let wake = tokio::select! {
                _ = tokio::time::sleep_until(next) => true,
                changed = open.changed(), if open_live => {
                    open_live = changed.is_ok();
                    false
                }
            };
            let base = base_rx.borrow().clone();
            let nodes = open.borrow().clone();
            let round = if wake {
                next = tokio::time::Instant::now() + interval;
                Some(poller.poll(&base, &nodes, &hosts).await)
            } else {
                poller.poll_open(&base, &nodes, &hosts).await
            };
            if let Some(round) = round
                && htx.send(round).await.is_err()
            {
                return;
            }
            if let Some(f) = first.take() {
                let _ = f.send(());
            }
        }
    });
    tokio::spawn(async move {
        let mut base: Arc<Cluster> = Arc::default();
        let mut latest: Arc<Latest> = Arc::default();
        let mut watch = Arc::new(HealthWatch::default());
        let e = Arc::new(e);
        // Waits for the scheduler's first snapshot to name its hosts.
        let mut backfill: Option<Backfill> = None;
        loop {
            if backfill.is_some() && (!base.nodes.is_empty() || sched.is_none()) {
                let known = super::dcgm::merge::node_index(&base);
                let b = backfill
                    .take()
                    .map(|b| b.renamed(|h| e.hosts.node_for(h, &known).to_string()));
                drop(known);
                if let Some(b) = b {
                    // Xid events get the time the history first saw them.
                    Arc::make_mut(&mut watch).learn_history(&b);
                    if tx.send(Update::Backfill(Arc::new(b))).await.is_err() {
                        return;
                    }
                }
            }
            let sched_open = sched.is_some();
            tokio::select! {
                b = brx.recv(), if backfill_open => {
                    backfill_open = false;
                    backfill = b;
                    continue;
                }
                up = async { match sched.as_mut() { Some(r) => r.recv().await, None => None } }, if sched_open => match up {
                    Some(Update::Snapshot(c)) => {
                        base = c;
                        base_tx.send_replace(base.clone());
                    }
                    Some(status) => {
                        if tx.send(status).await.is_err() {
                            return;
                        }
                        continue;
                    }
                    None => {
                        sched = None;
                        continue;
                    }
                },
                round = hrx.recv() => match round {
                    Some(mut p) => {
                        for n in &p.notes {
                            tracing::warn!("node endpoints: {n}");
                        }
                        let (polled, quality) = (std::mem::take(&mut p.polled), std::mem::take(&mut p.quality));
                        latest = Arc::new(Latest::from(p));
                        watch = observe(&base, &latest, watch, &e).await;
                        for (origin, err) in polled {
                            if tx.send(Update::Status { origin, error: err }).await.is_err() {
                                return;
                            }
                        }
                        for (origin, note) in quality {
                            if tx.send(Update::Quality { origin, note }).await.is_err() {
                                return;
                            }
                        }
                    }
                    None => return,
                },
            }
            let (b, l, w, e2) = (base.clone(), latest.clone(), watch.clone(), e.clone());
            let merged =
                tokio::task::spawn_blocking(move || merged(&b, &l, &e2, &w, crate::host::now()))
                    .await;
            match merged {
                Ok(c) => {
                    if tx.send(Update::Snapshot(Arc::new(c))).await.is_err() {
                        return;
                    }
                }
                Err(err) => tracing::error!("endpoint merge failed: {err}"),
            }
        }
    });
    Ok(rx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RecoveryAction;
    use crate::sources::testserver::serve;

    /// Endpoint rounds report each endpoint's own status, pass the
    /// scheduler's on untouched (never a fresh one of their own), and lay
    /// the readings, the recovery action included, over the scheduler's
    /// snapshot.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn endpoint_rounds_never_refresh_the_scheduler_and_keep_its_error() {
        let body = "DCGM_FI_DEV_GPU_UTIL{gpu=\"2\",Hostname=\"gpu07\"} 100\n\
                    nightshift_gpu_recovery_action{gpu=\"2\",Hostname=\"gpu07\"} 2\n";
        let good = serve(body.to_string()).await;
        let dead = "http://127.0.0.1:1/metrics".to_string();
        let (stx, srx) = mpsc::channel(8);
        let e = Endpoints {
            dcgm: vec![good.clone(), dead.clone()],
            node_exporter: Vec::new(),
            prometheus: None,
            interval: Duration::from_millis(50),
            timeout: Duration::from_secs(1),
            hosts: HostMap::default(),
            ..Endpoints::default()
        };
        let mut out = spawn(Some(srx), e, crate::sources::nothing_open()).expect("spawn");
        let mut c = Cluster {
            name: "t".into(),
            source: "slurm".into(),
            time: 1000,
            ..Cluster::default()
        };
        crate::engine::fixture::add_node(&mut c, "gpu07", "p", 8);
        stx.send(Update::Snapshot(Arc::new(c))).await.expect("send");
        let timeout = SourceError::Timeout {
            what: "GET /slurm/v0.0.38/nodes".into(),
            secs: 10,
        };
        stx.send(Update::failed(Origin::Scheduler, timeout.clone()))
            .await
            .expect("send");
        let (mut good_ok, mut dead_err, mut sched_err, mut sched_ok) = (0, 0, 0, 0);
        let mut merged: Option<Arc<Cluster>> = None;
        let until = tokio::time::Instant::now() + Duration::from_secs(3);
        while tokio::time::Instant::now() < until && (good_ok < 3 || merged.is_none()) {
            let Ok(Some(u)) = tokio::time::timeout(Duration::from_secs(1), out.recv()).await else {
                continue;
            };
            match u {
                Update::Snapshot(c) => merged = Some(c),
                Update::Backfill(_) => panic!("no Prometheus, no back-fill"),
                Update::Refresh { .. }
                | Update::Notice(_)
                | Update::Playback(_)
                | Update::Quality { .. } => {}
                Update::Status {
                    origin: Origin::Scheduler,
                    error: Some(e),
                } => {
                    assert_eq!(e, timeout, "the scheduler's error as it was");
                    sched_err += 1;
                }
                Update::Status {
                    origin: Origin::Scheduler,
                    error: None,
                } => sched_ok += 1,
                Update::Status {
                    origin: Origin::Endpoint(u),
                    error,
                } => {
                    if u == good && error.is_none() {
                        good_ok += 1;
                    }
                    if u == dead {
                        assert!(
                            matches!(error, Some(SourceError::Unreachable { .. })),
                            "{error:?}"
                        );
                        dead_err += 1;
                    }
                }
            }
        }
        assert!(good_ok >= 3, "the live endpoint answers every round");
        assert!(dead_err >= 1, "the dead one says so, as itself");
        assert_eq!(
            (sched_err, sched_ok),
            (1, 0),
            "the scheduler's status only passes through"
        );
        let merged = merged.expect("a merged snapshot");
        let g = merged
            .node("gpu07")
            .and_then(|n| n.gpus.iter().find(|g| g.index == 2))
            .expect("gpu07/2");
        assert_eq!(g.recovery_action, Some(RecoveryAction::NodeReboot));
        assert_eq!(g.utilization, Some(1.0));
        assert_eq!(
            merged.source, "slurm",
            "the scheduler's snapshot underneath"
        );
    }

    /// A Prometheus answer with warnings (a shard did not answer) is kept
    /// and said: the poll's quality names the warning for the header.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_partial_prometheus_answer_is_kept_and_said() {
        let body = serde_json::json!({"status": "success", "warnings": ["store gateway 2 did not answer"],
        "data": {"resultType": "vector", "result": [
            {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0", "Hostname": "gpu07"}, "value": [1796006000.0, "40"]}
        ]}});
        let url = serve(body.to_string()).await;
        let e = Endpoints {
            prometheus: Some(url.trim_end_matches("/metrics").to_string()),
            ..Endpoints::default()
        };
        let mut p = Poller::new(&e).expect("poller");
        let round = p.poll(&Cluster::default(), &[], &e.hosts).await;
        assert_eq!(round.readings.len(), 1, "the answer stands");
        assert!(
            matches!(round.quality.as_slice(), [(_, Some(q))] if q == "partial answer: store gateway 2 did not answer"),
            "{:?}",
            round.quality
        );
    }

    /// With Prometheus, the charts' hour is read once at start and sent
    /// after the scheduler's first snapshot, its hosts named as the
    /// scheduler names them (`gpu07.cluster.local` is node `gpu07`).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_backfill_waits_for_the_scheduler_and_uses_its_names() {
        let now = crate::host::now();
        let body = serde_json::json!({"status": "success", "data": {"resultType": "matrix", "result": [
            {"metric": {"__name__": "DCGM_FI_PROF_SM_OCCUPANCY", "gpu": "2", "Hostname": "gpu07.cluster.local"},
             "values": [[now as f64, "0.5"]]}
        ]}});
        let url = serve(body.to_string()).await;
        let (stx, srx) = mpsc::channel(8);
        let e = Endpoints {
            dcgm: Vec::new(),
            node_exporter: Vec::new(),
            prometheus: Some(url.trim_end_matches("/metrics").to_string()),
            interval: Duration::from_secs(60),
            timeout: Duration::from_secs(2),
            hosts: HostMap::default(),
            ..Endpoints::default()
        };
        let mut out = spawn(Some(srx), e, crate::sources::nothing_open()).expect("spawn");
        // Nothing named yet: no back-fill before the scheduler's snapshot.
        let early = tokio::time::timeout(Duration::from_millis(500), async {
            loop {
                match out.recv().await {
                    Some(Update::Backfill(b)) => return Some(b),
                    Some(_) => {}
                    None => return None,
                }
            }
        })
        .await;
        assert!(early.is_err(), "{early:?}");
        let mut c = Cluster {
            name: "t".into(),
            source: "slurm".into(),
            time: now,
            ..Cluster::default()
        };
        crate::engine::fixture::add_node(&mut c, "gpu07", "p", 8);
        stx.send(Update::Snapshot(Arc::new(c))).await.expect("send");
        let b = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                match out.recv().await {
                    Some(Update::Backfill(b)) => return b,
                    Some(_) => {}
                    None => panic!("the endpoints stopped"),
                }
            }
        })
        .await
        .expect("a back-fill");
        let g = &b.gpus[&("gpu07".to_string(), 2)];
        assert_eq!(g.occupancy.last(), Some(&Some(50)), "{:?}", g.occupancy);
    }
}
