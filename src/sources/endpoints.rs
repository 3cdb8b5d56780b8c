//! Node endpoints beside (or instead of) a scheduler: a task that polls
//! them, and one that lays their readings over the scheduler's snapshots.

use super::dcgm::Reading;
use super::dcgm::merge::{HealthWatch, HostMap, merge};
use super::dcgm::scrape::Scraper;
use super::prometheus::Prometheus;
use super::{Origin, SourceError, Update};
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
    prometheus: Option<(String, Prometheus)>,
    last_prom: Vec<Reading>,
}

/// What one poll found.
#[derive(Debug, Default)]
pub struct Poll {
    /// Every endpoint's newest readings (old ones where a scrape failed).
    pub readings: Vec<Reading>,
    /// Each endpoint polled this time: answered (`None`) or its error.
    pub polled: Vec<(Origin, Option<SourceError>)>,
    /// Warnings that lose nothing: lines that did not parse, Prometheus
    /// warnings.
    pub notes: Vec<String>,
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
                .map(|u| Prometheus::new(u, e.timeout).map(|p| (u.to_string(), p)))
                .transpose()?,
            last_prom: Vec::new(),
        })
    }

    pub async fn poll(&mut self) -> Poll {
        let mut out = Poll::default();
        if let Some(s) = &mut self.scraper {
            let round = s.round().await;
            out.readings.extend(round.readings);
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
                Err(e) => out.polled.push((origin, Some(SourceError::Other(e)))),
            }
            out.readings.extend(self.last_prom.iter().cloned());
        }
        out
    }
}

/// The scheduler's snapshot with the endpoints' readings laid over it.
pub fn merged(
    base: &Cluster,
    readings: &[Reading],
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
    c
}

/// Runs the endpoints beside the scheduler source `sched` (none: `None`)
/// and sends merged snapshots. The scheduler's status messages pass
/// through untouched: an endpoint's answer never makes the scheduler's
/// data look fresh.
pub fn spawn(
    mut sched: Option<mpsc::Receiver<Update>>,
    e: Endpoints,
) -> Result<mpsc::Receiver<Update>, String> {
    let (tx, rx) = mpsc::channel(16);
    let mut poller = Poller::new(&e)?;
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
        let mut readings: Arc<Vec<Reading>> = Arc::default();
        let mut watch = Arc::new(HealthWatch::default());
        let e = Arc::new(e);
        loop {
            let sched_open = sched.is_some();
            tokio::select! {
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
                        readings = Arc::new(p.readings);
                        let (b, r, mut w, hosts) =
                            (base.clone(), readings.clone(), watch.clone(), e.clone());
                        // Observing and merging are linear in readings but
                        // big at scale: off the async workers.
                        let observed = tokio::task::spawn_blocking(move || {
                            Arc::make_mut(&mut w).observe(&r, &b, &hosts.hosts);
                            w
                        });
                        match observed.await {
                            Ok(w) => watch = w,
                            Err(err) => tracing::error!("endpoint health watch failed: {err}"),
                        }
                        for (origin, err) in p.polled {
                            if tx.send(Update::Status { origin, error: err }).await.is_err() {
                                return;
                            }
                        }
                    }
                    None => return,
                },
            }
            let (b, r, w, e2) = (base.clone(), readings.clone(), watch.clone(), e.clone());
            let merged = tokio::task::spawn_blocking(move || {
                merged(&b, &r, &e2, &w, super::dcgm::scrape::now())
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
