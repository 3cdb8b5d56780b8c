//! Node endpoints beside (or instead of) a scheduler: a task that polls
//! them, and one that lays their readings over the scheduler's snapshots.
//! A Prometheus server is polled by `prom_poller` (every series, or the
//! fleet path).

use super::assemble::{Assembly, Outlet};
use super::dcgm::Reading;
use super::dcgm::merge::{HealthWatch, HostMap, merge};
use super::dcgm::ports::{PortReading, merge_ports};
use super::dcgm::scrape::Scraper;
use super::prometheus::fleet::NodeAggregate;
use super::{Origin, SourceError, Update};
use crate::error::StartError;
use crate::model::{Backfill, Cluster, HISTORY_SLOTS, HISTORY_STEP};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

mod prom_poller;
use prom_poller::PromPoller;

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
    /// How far back the GPUs' hardware faults are asked of Prometheus
    /// (`[engine] repeat_offender`'s window), seconds.
    pub fault_window_s: i64,
    /// Tests only: each merge takes this much longer (a merge slow as a
    /// huge fleet's), to show it never holds up the scheduler's status.
    #[cfg(test)]
    pub merge_delay: Duration,
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
            fault_window_s: 30 * 86_400,
            #[cfg(test)]
            merge_delay: Duration::ZERO,
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
    /// A fleet's hosts' weeks of hardware faults, asked this round for the
    /// hosts newly broken or opened (by host, as Prometheus names them).
    pub faults: Vec<crate::model::PastFault>,
}

/// What a poller's first refresh asks a fleet's Prometheus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum First {
    /// The console's: the aggregates and the broken GPUs; the spinning
    /// GPUs and the weeks of faults on the next refresh.
    Console,
    /// A one-shot command's whole picture: every question at once.
    Whole,
    /// A one-shot command that reads the problems alone: the GPU count,
    /// the broken GPUs and their weeks of faults.
    Problems,
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
                .map(|u| PromPoller::new(u, e))
                .transpose()?,
            last_scrape: (Vec::new(), Vec::new()),
        })
    }

    /// For a command that polls once: its poll asks a fleet's Prometheus
    /// every question at once (the console asks the spinning GPUs on its
    /// second refresh, so that the first screen comes sooner).
    pub fn whole(self) -> Poller {
        self.once(First::Whole)
    }

    /// For a command that polls once and reads only the broken GPUs (the
    /// incidents): a fleet's Prometheus is asked how many GPUs it holds,
    /// which nodes have a broken GPU, and those nodes in full with their
    /// weeks of faults. Not the healthy nodes' aggregates (without them a
    /// gang's other nodes are not named, so not read), nor the spinning
    /// GPUs: one reading cannot call a gang stalled (the engine needs
    /// `stall_window_s` of the signature).
    pub fn problems(self) -> Poller {
        self.once(First::Problems)
    }

    fn once(mut self, first: First) -> Poller {
        if let Some(p) = &mut self.prometheus {
            p.first = first;
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
            out.notes
                .extend(super::dcgm::ports::claimed_twice(&self.last_scrape.1));
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
        let mut out = Poll::default();
        if !p.read_open(base, open, hosts, &mut out).await {
            return None;
        }
        out.readings.extend(self.last_scrape.0.iter().cloned());
        out.ports.extend(self.last_scrape.1.iter().cloned());
        p.fill(&mut out);
        Some(out)
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
    c.history.extend(watch.faults.iter().cloned());
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

/// The charts' last hour from Prometheus, read once after the first round
/// (`first`); `None` without a Prometheus.
fn start_backfill(
    poller: &Poller,
    every_gpu_max: u32,
    first: tokio::sync::oneshot::Receiver<()>,
) -> Option<mpsc::Receiver<Backfill>> {
    let p = poller.prometheus.as_ref()?.client.clone();
    let (btx, brx) = mpsc::channel::<Backfill>(1);
    tokio::spawn(async move {
        let _ = first.await;
        // A fleet's every-GPU hour is too big to ask for: its Xids only.
        // A server that cannot count is asked as before.
        let activity = p
            .gpu_count()
            .await
            .map_or(true, |n| n <= u64::from(every_gpu_max));
        let now = crate::host::now();
        let b = p.backfill(now, HISTORY_STEP, HISTORY_SLOTS, activity).await;
        let _ = btx.send(b).await;
    });
    Some(brx)
}

/// Faults named by host, named as the scheduler names its nodes.
pub fn named(
    mut faults: Vec<crate::model::PastFault>,
    base: &Cluster,
    hosts: &HostMap,
) -> Vec<crate::model::PastFault> {
    if faults.is_empty() {
        return faults;
    }
    let known = super::dcgm::merge::node_index(base);
    for f in &mut faults {
        f.node = hosts.node_for(&f.node, &known).to_string();
    }
    faults
}

/// Polls every `interval`, and the nodes newly opened at once; sends each
/// round, and says when the first is sent.
fn start_polling(
    mut poller: Poller,
    (rounds, first): (mpsc::Sender<Poll>, tokio::sync::oneshot::Sender<()>),
    base: watch::Receiver<Arc<Cluster>>,
    mut open: watch::Receiver<Vec<String>>,
    (interval, hosts): (Duration, HostMap),
) {
    tokio::spawn(async move {
        let mut open_live = true;
        let mut next = tokio::time::Instant::now();
        let mut first = Some(first);
        loop {
            let wake = tokio::select! {
                _ = tokio::time::sleep_until(next) => true,
                changed = open.changed(), if open_live => {
                    open_live = changed.is_ok();
                    false
                }
            };
            let base = base.borrow().clone();
            let nodes = open.borrow().clone();
            let round = if wake {
                next = tokio::time::Instant::now() + interval;
                Some(poller.poll(&base, &nodes, &hosts).await)
            } else {
                poller.poll_open(&base, &nodes, &hosts).await
            };
            if let Some(round) = round
                && rounds.send(round).await.is_err()
            {
                return;
            }
            if let Some(f) = first.take() {
                let _ = f.send(());
            }
        }
    });
}

/// Runs the endpoints beside the scheduler source `sched` (none: `None`)
/// and sends merged snapshots. The scheduler's status messages pass
/// through untouched: an endpoint's answer never makes the scheduler's
/// data look fresh, and a slow merge (a huge fleet's readings) never holds
/// them up — the merge runs beside the loop, one at a time, the newest
/// data merged next — so one slow endpoint never ages another origin's
/// data.
///
/// `open` names the nodes the console has open: on a fleet's Prometheus
/// their GPUs are read in full at once (and each refresh while open).
pub fn spawn(
    sched: Option<mpsc::Receiver<Update>>,
    e: Endpoints,
    open: watch::Receiver<Vec<String>>,
) -> Result<mpsc::Receiver<Update>, StartError> {
    spawn_with(sched, e, open, Assembly::default())
}

/// [`spawn`], each merged snapshot finished by `assembly` (the merge is
/// where the snapshot is made).
pub fn spawn_with(
    mut sched: Option<mpsc::Receiver<Update>>,
    e: Endpoints,
    open: watch::Receiver<Vec<String>>,
    assembly: Assembly,
) -> Result<mpsc::Receiver<Update>, StartError> {
    let (tx, rx) = mpsc::channel(16);
    let mut tx = Outlet::new(tx, assembly);
    let poller = Poller::new(&e)?;
    // The history waits for the first round: on a fleet's server it would
    // compete with the first screen's questions.
    let (first_tx, first_rx) = tokio::sync::oneshot::channel::<()>();
    let mut brx = start_backfill(&poller, e.prometheus_every_gpu_max, first_rx);
    let mut backfill_open = brx.is_some();
    let (htx, mut hrx) = mpsc::channel::<Poll>(2);
    let (base_tx, base_rx) = watch::channel::<Arc<Cluster>>(Arc::default());
    start_polling(
        poller,
        (htx, first_tx),
        base_rx,
        open,
        (e.interval, e.hosts.clone()),
    );
    tokio::spawn(async move {
        let mut base: Arc<Cluster> = Arc::default();
        let mut latest: Arc<Latest> = Arc::default();
        let mut watch = Arc::new(HealthWatch::default());
        let e = Arc::new(e);
        // Waits for the scheduler's first snapshot to name its hosts.
        let mut backfill: Option<Backfill> = None;
        // The merge runs beside the loop; `dirty`: newer data came while
        // it ran, to be merged when it is done.
        let (mtx, mut mrx) = mpsc::channel::<Option<Cluster>>(1);
        let (mut merging, mut dirty) = (false, false);
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
                b = async { match brx.as_mut() { Some(r) => r.recv().await, None => None } }, if backfill_open => {
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
                        let faults = named(std::mem::take(&mut p.faults), &base, &e.hosts);
                        if !faults.is_empty() {
                            Arc::make_mut(&mut watch).faults.extend(faults);
                        }
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
                m = mrx.recv(), if merging => {
                    merging = false;
                    if let Some(Some(c)) = m
                        && tx.send(Update::Snapshot(Arc::new(c))).await.is_err()
                    {
                        return;
                    }
                    if !dirty {
                        continue;
                    }
                }
            }
            dirty = true;
            if merging {
                continue;
            }
            dirty = false;
            merging = true;
            let (b, l, w, e2) = (base.clone(), latest.clone(), watch.clone(), e.clone());
            let mtx = mtx.clone();
            tokio::spawn(async move {
                let merged = tokio::task::spawn_blocking(move || {
                    #[cfg(test)]
                    std::thread::sleep(e2.merge_delay);
                    merged(&b, &l, &e2, &w, crate::host::now())
                })
                .await;
                let c = match merged {
                    Ok(c) => Some(c),
                    Err(err) => {
                        tracing::error!("endpoint merge failed: {err}");
                        None
                    }
                };
                let _ = mtx.send(c).await;
            });
        }
    });
    Ok(rx)
}

#[cfg(test)]
mod tests;
