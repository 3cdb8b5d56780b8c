//! The one-shot commands' snapshot (`get`, `why`, `options`, the
//! actions): the scheduler's, with the node endpoints' readings laid over
//! it and Prometheus's fault history — the same picture whichever command
//! asks.

use crate::config::Settings;
use crate::engine::memory::{Memory, Moment};
use crate::model::Cluster;
use crate::sources::once::Reading;

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

/// What a one-shot command reads of a fleet's Prometheus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wanted {
    /// Every question at once: the healthy nodes' aggregates, the broken
    /// and the spinning GPUs' nodes in full.
    Whole,
    /// The incidents alone: the broken GPUs' nodes in full. One reading
    /// cannot call a gang stalled (so neither the spinning GPUs nor a
    /// gang's other nodes are read), and no incident reads a healthy
    /// node's aggregate.
    Incidents,
}

/// The one assembly of a moment on the command line (issue 60; see
/// docs/architecture.md, "One truth path"): the scheduler's reading
/// (`once::read`, or `once::connect` for the commands that act), the node
/// endpoints' readings and Prometheus's fault history laid over it, the
/// audit log's faults in its history, the `[topology]` domains the source
/// does not say, and the memory of the snapshots before (the sim's,
/// watched as it ran) with this one observed. `get`, `why`, `blast`,
/// `options`, every action command and `follow` start from it; the
/// console and the recorder run the same steps continuously.
pub fn moment(
    settings: &Settings,
    reading: Option<Reading>,
    wanted: Wanted,
) -> Result<Moment, String> {
    let (base, memory) = match reading {
        Some(r) => {
            for w in &r.warnings {
                eprintln!("nightshift: warning: {}", crate::text::sanitize(w));
            }
            (r.cluster, r.memory.unwrap_or_default())
        }
        None if settings.endpoints.is_empty() => {
            return Err(
                "--source none needs node endpoints: --dcgm URL, --node-exporter URL or --prometheus URL".into(),
            );
        }
        None => (Cluster::default(), Memory::default()),
    };
    let c = with_endpoints_for(settings, base, wanted)?;
    // Finished as the console's and the recorder's snapshots are.
    let mut assembly = crate::sources::assemble::Assembly::new(settings.topology.clone());
    let (c, notes) = assembly.finish(std::sync::Arc::new(c));
    for n in &notes {
        crate::text::warn(n);
    }
    let c = std::sync::Arc::unwrap_or_clone(c);
    let mut memory = memory;
    memory.observe(&c, &settings.site);
    Ok(Moment { cluster: c, memory })
}

/// `base` (the scheduler's snapshot) with the endpoints' readings, once,
/// and the audit log's faults in its history.
pub fn with_endpoints(settings: &Settings, base: Cluster) -> Result<Cluster, String> {
    with_endpoints_for(settings, base, Wanted::Whole)
}

/// The same, reading of a fleet's Prometheus what `wanted` needs.
pub fn with_endpoints_for(
    settings: &Settings,
    mut base: Cluster,
    wanted: Wanted,
) -> Result<Cluster, String> {
    let names: Vec<&str> = settings
        .cluster
        .iter()
        .map(String::as_str)
        .chain([base.name.as_str()])
        .collect();
    let audited = settings.audit().reading().faults(&names);
    base.history.extend(audited);
    let e = &settings.endpoints;
    if e.is_empty() {
        return Ok(base);
    }
    let mut poll = runtime()?.block_on(async {
        let p = crate::sources::endpoints::Poller::new(e)?;
        let mut p = match wanted {
            Wanted::Whole => p.whole(),
            Wanted::Incidents => p.problems(),
        };
        Ok::<_, String>(p.poll(&base, &[], &e.hosts).await)
    })?;
    for n in &poll.notes {
        eprintln!("nightshift: warning: {}", crate::text::sanitize(n));
    }
    let failed: Vec<String> = poll
        .polled
        .iter()
        .filter_map(|(o, e)| e.as_ref().map(|e| format!("{}: {e}", o.name())))
        .collect();
    // With no scheduler, the endpoints are all the data: if every one
    // failed there is nothing to print, and saying so is an error.
    if !settings.source.has_scheduler() && failed.len() == poll.polled.len() {
        return Err(format!("every source failed: {}", failed.join("; ")));
    }
    for f in &failed {
        crate::text::warn(f);
    }
    for (o, q) in &poll.quality {
        if let Some(q) = q {
            crate::text::warn(&format!("{}: {q}", o.name()));
        }
    }
    // Prometheus's weeks of faults came with the poll.
    let faults =
        crate::sources::endpoints::named(std::mem::take(&mut poll.faults), &base, &e.hosts);
    let latest = crate::sources::endpoints::Latest::from(poll);
    let mut xids = crate::sources::dcgm::merge::HealthWatch::default();
    xids.observe(&latest.readings, &base, &e.hosts);
    xids.faults = faults;
    let now = crate::host::now();
    Ok(crate::sources::endpoints::merged(
        &base, &latest, e, &xids, now,
    ))
}
