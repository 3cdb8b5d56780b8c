//! Node endpoints beside (or instead of) a scheduler: a task that polls
//! them, and one that lays their readings over the scheduler's snapshots.

use super::dcgm::Reading;
use super::dcgm::merge::{HealthWatch, HostMap, merge};
use super::dcgm::ports::{PortReading, merge_ports};
use super::dcgm::scrape::Scraper;
use super::prometheus::Prometheus;
use super::{Origin, SourceError, Update};
use crate::model::{Backfill, Cluster, HISTORY_SLOTS, HISTORY_STEP};
use crate::sources::error::StartError;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

#[derive(Debug, Clone, Default, PartialEq)]
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
    prometheus: Option<(String, Prometheus)>,
    last_prom: Vec<Reading>,
    last_prom_ports: Vec<PortReading>,
}

/// What one poll found.
#[derive(Debug, Default)]
pub struct Poll {
    /// Every endpoint's newest readings (old ones where a scrape failed).
    pub readings: Vec<Reading>,
    /// Every node exporter's newest network ports.
    pub ports: Vec<PortReading>,
    /// Each endpoint polled this time: answered (`None`) or its error.
    pub polled: Vec<(Origin, Option<SourceError>)>,
    /// Warnings that lose nothing: lines that did not parse, Prometheus
    /// warnings.
    pub notes: Vec<String>,
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
                .map(|u| Prometheus::new(u, e.timeout).map(|p| (u.to_string(), p)))
                .transpose()?,
            last_prom: Vec::new(),
            last_prom_ports: Vec::new(),
        })
    }

    pub async fn poll(&mut self) -> Poll {
        let mut out = Poll::default();
        if let Some(s) = &mut self.scraper {
            let round = s.round().await;
            out.readings.extend(round.readings);
            out.ports.extend(round.ports);
            out.polled.extend(
                round
                    .polled
                    .into_iter()
                    .map(|(u, e)| (Origin::Endpoint(u), e)),
            );
            out.notes
                .extend(round.notes.into_iter().map(|(u, n)| format!("{u}: {n}")));
        }
        if let Some((url, p)) = &self.prometheus {
            let origin = Origin::Endpoint(url.clone());
            match p.query().await {
                Ok((r, warnings)) => {
                    self.last_prom = r;
                    out.notes.extend(warnings);
                    out.polled.push((origin, None));
                }
                Err(e) => out.polled.push((origin, Some(SourceError::from(e)))),
            }
            out.readings.extend(self.last_prom.iter().cloned());
            // The ports' query failing alone is a note: the GPUs stand.
            match p.ports().await {
                Ok((ports, warnings)) => {
                    self.last_prom_ports = ports;
                    out.notes.extend(warnings);
                }
                Err(e) => out.notes.push(format!("{url}: no network ports: {e}")),
            }
            out.ports.extend(self.last_prom_ports.iter().cloned());
        }
        out
    }
}

/// The scheduler's snapshot with the endpoints' readings (GPUs and
/// network ports) laid over it.
pub fn merged(
    base: &Cluster,
    (readings, ports): (&[Reading], &[PortReading]),
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
    merge(&mut c, readings, &e.source_name(), &e.hosts, watch);
    merge_ports(&mut c, ports, &e.hosts);
    c
}

/// The newest round's readings: GPUs and network ports.
type Latest = (Vec<Reading>, Vec<PortReading>);

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
        w2.observe(&l.0, &b, &hosts.hosts);
        w2.observe_ports(&l.1, &b, &hosts.hosts);
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
pub fn spawn(
    mut sched: Option<mpsc::Receiver<Update>>,
    e: Endpoints,
) -> Result<mpsc::Receiver<Update>, StartError> {
    let (tx, rx) = mpsc::channel(16);
    let mut poller = Poller::new(&e)?;
    // The charts' last hour, read once at start beside the first rounds.
    let (btx, mut brx) = mpsc::channel::<Backfill>(1);
    let mut backfill_open = false;
    if let Some((_, p)) = &poller.prometheus {
        let p = p.clone();
        backfill_open = true;
        tokio::spawn(async move {
            let b = p
                .backfill(crate::host::now(), HISTORY_STEP, HISTORY_SLOTS)
                .await;
            let _ = btx.send(b).await;
        });
    } else {
        drop(btx);
    }
    let (htx, mut hrx) = mpsc::channel::<Poll>(2);
    let interval = e.interval;
    tokio::spawn(async move {
        loop {
            let round = poller.poll().await;
            if htx.send(round).await.is_err() {
                return;
            }
            tokio::time::sleep(interval).await;
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
                    Some(Update::Snapshot(c)) => base = c,
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
                    Some(p) => {
                        for n in &p.notes {
                            tracing::warn!("node endpoints: {n}");
                        }
                        latest = Arc::new((p.readings, p.ports));
                        watch = observe(&base, &latest, watch, &e).await;
                        for (origin, err) in p.polled {
                            if tx.send(Update::Status { origin, error: err }).await.is_err() {
                                return;
                            }
                        }
                    }
                    None => return,
                },
            }
            let (b, l, w, e2) = (base.clone(), latest.clone(), watch.clone(), e.clone());
            let merged = tokio::task::spawn_blocking(move || {
                merged(&b, (&l.0, &l.1), &e2, &w, crate::host::now())
            })
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
        };
        let mut out = spawn(Some(srx), e).expect("spawn");
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
                Update::Refresh { .. } | Update::Notice(_) | Update::Playback(_) => {}
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
        };
        let mut out = spawn(Some(srx), e).expect("spawn");
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
