//! Node endpoints beside (or instead of) a scheduler: a task that polls
//! them, and one that lays their readings over the scheduler's snapshots.

use super::Update;
use super::dcgm::Reading;
use super::dcgm::merge::{HealthWatch, HostMap, merge};
use super::dcgm::scrape::Scraper;
use super::prometheus::Prometheus;
use crate::model::Cluster;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Endpoints {
    /// dcgm-exporter or nightshift-agent `/metrics` URLs.
    pub dcgm: Vec<String>,
    /// A Prometheus-compatible server.
    pub prometheus: Option<String>,
    pub interval: Duration,
    pub timeout: Duration,
    pub hosts: HostMap,
}

impl Endpoints {
    pub fn is_empty(&self) -> bool {
        self.dcgm.is_empty() && self.prometheus.is_none()
    }

    fn source_name(&self) -> String {
        match (&self.prometheus, self.dcgm.is_empty()) {
            (Some(p), true) => format!("prometheus {p}"),
            (Some(p), false) => format!("prometheus {p} + dcgm"),
            (None, _) => "dcgm".into(),
        }
    }
}

/// One poll of every endpoint.
pub struct Poller {
    scraper: Option<Scraper>,
    prometheus: Option<Prometheus>,
    last_prom: Vec<Reading>,
}

impl Poller {
    pub fn new(e: &Endpoints) -> Result<Poller, String> {
        Ok(Poller {
            scraper: if e.dcgm.is_empty() {
                None
            } else {
                Some(Scraper::new(e.dcgm.clone(), e.interval, e.timeout)?)
            },
            prometheus: e
                .prometheus
                .as_deref()
                .map(|u| Prometheus::new(u, e.timeout))
                .transpose()?,
            last_prom: Vec::new(),
        })
    }

    /// The newest readings of every endpoint, and what went wrong this time.
    pub async fn poll(&mut self) -> (Vec<Reading>, Vec<String>) {
        let mut readings = Vec::new();
        let mut errors = Vec::new();
        if let Some(s) = &mut self.scraper {
            let round = s.round().await;
            readings.extend(round.readings);
            errors.extend(round.errors.into_iter().map(|(_, e)| e));
        }
        if let Some(p) = &self.prometheus {
            match p.query().await {
                Ok((r, warnings)) => {
                    self.last_prom = r;
                    errors.extend(warnings);
                }
                Err(e) => errors.push(e),
            }
            readings.extend(self.last_prom.iter().cloned());
        }
        (readings, errors)
    }
}

/// The scheduler's snapshot with the endpoints' readings laid over it.
pub fn merged(
    base: &Cluster,
    readings: &[Reading],
    e: &Endpoints,
    xids: &HealthWatch,
    now: i64,
) -> Cluster {
    let mut c = base.clone();
    if c.source.is_empty() {
        c.name = "node endpoints".into();
        c.source = "none".into();
    }
    c.time = c.time.max(now);
    merge(&mut c, readings, &e.source_name(), &e.hosts, xids);
    c
}

/// Runs the endpoints beside the scheduler source `sched` (none: `None`)
/// and sends merged snapshots.
pub fn spawn(
    mut sched: Option<mpsc::Receiver<Update>>,
    e: Endpoints,
) -> Result<mpsc::Receiver<Update>, String> {
    let (tx, rx) = mpsc::channel(16);
    let mut poller = Poller::new(&e)?;
    let (htx, mut hrx) = mpsc::channel::<(Vec<Reading>, Vec<String>)>(2);
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
        let mut readings: Vec<Reading> = Vec::new();
        let mut xids = HealthWatch::default();
        loop {
            let sched_open = sched.is_some();
            tokio::select! {
                up = async { match sched.as_mut() { Some(r) => r.recv().await, None => None } }, if sched_open => match up {
                    Some(Update::Snapshot(c)) => base = c,
                    Some(other) => {
                        if tx.send(other).await.is_err() {
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
                    Some((r, errors)) => {
                        readings = r;
                        xids.observe(&readings, &base, &e.hosts);
                        if !errors.is_empty() {
                            let msg = format!("node endpoints: {}", errors.join("; "));
                            if tx.send(Update::Error(msg)).await.is_err() {
                                return;
                            }
                        }
                    }
                    None => return,
                },
            }
            let c = merged(&base, &readings, &e, &xids, super::dcgm::scrape::now());
            if tx.send(Update::Snapshot(Arc::new(c))).await.is_err() {
                return;
            }
        }
    });
    Ok(rx)
}
