//! The one-shot commands' snapshot (`get`, `why`, `options`, the
//! actions): the scheduler's, with the node endpoints' readings laid over
//! it and Prometheus's fault history — the same picture whichever command
//! asks.

use crate::config::Settings;
use crate::model::Cluster;
use crate::sources::SourceConfig;

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

/// `base` (the scheduler's snapshot) with the endpoints' readings, once,
/// and the audit log's faults in its history.
pub fn with_endpoints(settings: &Settings, mut base: Cluster) -> Result<Cluster, String> {
    let names: Vec<&str> = settings
        .cluster
        .iter()
        .map(String::as_str)
        .chain([base.name.as_str()])
        .collect();
    let audited = crate::actions::audit::AuditLog::new(settings.audit_log.clone())
        .reading()
        .faults(&names);
    base.history.extend(audited);
    let e = &settings.endpoints;
    if e.is_empty() {
        return Ok(base);
    }
    let poll = runtime()?.block_on(async {
        let mut p = crate::sources::endpoints::Poller::new(e)?.whole();
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
    if matches!(settings.source, SourceConfig::None) && failed.len() == poll.polled.len() {
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
    // A fleet's broken hosts' weeks came with the poll.
    let fleet_faults = crate::sources::endpoints::named(poll.faults.clone(), &base, &e.hosts);
    let latest = crate::sources::endpoints::Latest::from(poll);
    let mut xids = crate::sources::dcgm::merge::HealthWatch::default();
    xids.observe(&latest.readings, &base, &e.hosts);
    xids.observe_ports(&latest.ports, &base, &e.hosts);
    if let Some(url) = &e.prometheus {
        xids.faults = prometheus_faults(url, e, &base)?;
    }
    xids.faults.extend(fleet_faults);
    let now = crate::host::now();
    Ok(crate::sources::endpoints::merged(
        &base, &latest, e, &xids, now,
    ))
}

/// The GPUs' hardware faults over the repeat-offender window, from
/// Prometheus, named as the scheduler names its nodes; a server that
/// cannot say is warned about, never fatal.
fn prometheus_faults(
    url: &str,
    e: &crate::sources::endpoints::Endpoints,
    base: &Cluster,
) -> Result<Vec<crate::model::PastFault>, String> {
    let faults = runtime()?.block_on(async {
        let p = crate::sources::prometheus::Prometheus::new(url, e.timeout)
            .map_err(|e| e.to_string())?;
        let small = p
            .gpu_count()
            .await
            .map_or(true, |n| n <= u64::from(e.prometheus_every_gpu_max));
        if !small {
            // A fleet's weeks are not asked (the console says so once).
            return Ok(Vec::new());
        }
        crate::sources::endpoints::fault_history(&p, crate::host::now(), e.fault_window_s, small)
            .await
    });
    match faults {
        Ok(f) => Ok(crate::sources::endpoints::named(f, base, &e.hosts)),
        Err(w) => {
            crate::text::warn(&w);
            Ok(Vec::new())
        }
    }
}
