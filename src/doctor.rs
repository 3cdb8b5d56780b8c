//! `nightshift doctor`: why nightshift sees nothing, or less than it
//! should — one line per check, each with its verdict and what to do. It
//! reads the configured source and endpoints once, looks at the audit log
//! and the terminal, and changes nothing on the cluster (the audit log's
//! file and lock are made where missing, as the first action would).

use crate::config::Settings;

pub use crate::protocol::doctor::{Check, Verdict, check};
use std::time::Instant;

/// Every check for `settings`, in order.
pub fn run(settings: &Settings) -> Vec<Check> {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return vec![check(
                "runtime",
                Verdict::Fail,
                format!("cannot start the runtime: {e}"),
                None,
            )];
        }
    };
    let (mut out, cluster) = rt.block_on(crate::sources::doctor::scheduler(
        &settings.source,
        settings.sim_seconds,
        settings.read_only,
    ));
    out.insert(0, config_file(settings));
    endpoints(&mut out, settings, &rt, cluster.unwrap_or_default());
    out.push(audit_log(settings));
    out.push(terminal());
    out
}

/// Which configuration file was read, or where one was looked for.
fn config_file(settings: &Settings) -> Check {
    match &settings.config_file {
        Some(p) => check("config", Verdict::Ok, format!("read {}", p.display()), None),
        None => {
            let looked: Vec<String> = crate::config::FileConfig::looked_in()
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            check(
                "config",
                Verdict::Ok,
                format!("none: the defaults (looked for {})", looked.join(", ")),
                Some("put one there, point NIGHTSHIFT_CONFIG at one, or pass --config FILE"),
            )
        }
    }
}

/// Each node endpoint and Prometheus, once: answering or not, and which
/// families every GPU lacks (what that blinds).
fn endpoints(
    out: &mut Vec<Check>,
    settings: &Settings,
    rt: &tokio::runtime::Runtime,
    base: crate::model::Cluster,
) {
    let e = &settings.endpoints;
    if e.is_empty() {
        return;
    }
    // Prometheus on its own, so that its time is its own (a slow one ages
    // every refresh of the console); the direct endpoints together.
    let mut groups = Vec::new();
    if e.prometheus.is_some() {
        groups.push(crate::sources::endpoints::Endpoints {
            dcgm: Vec::new(),
            node_exporter: Vec::new(),
            ..e.clone()
        });
    }
    if !e.dcgm.is_empty() || !e.node_exporter.is_empty() {
        groups.push(crate::sources::endpoints::Endpoints {
            prometheus: None,
            ..e.clone()
        });
    }
    let mut poll = crate::sources::endpoints::Poll::default();
    for g in &groups {
        let started = Instant::now();
        let polled = rt.block_on(async {
            let mut p = crate::sources::endpoints::Poller::new(g)?.whole();
            Ok::<_, String>(p.poll(&base, &[], &g.hosts).await)
        });
        let took = started.elapsed();
        let polled = match polled {
            Ok(p) => p,
            Err(why) => {
                out.push(check("endpoints", Verdict::Fail, why, None));
                return;
            }
        };
        for (origin, error) in &polled.polled {
            out.push(endpoint_line(&origin.name(), error.as_ref(), took));
        }
        poll.readings.extend(polled.readings);
        poll.polled.extend(polled.polled);
    }
    // A GPU seen (by its labels) with no field nightshift reads: an
    // exporter whose names it does not know.
    let read = |x: &&crate::sources::dcgm::Reading| {
        x.utilization.is_some()
            || x.temperature_c.is_some()
            || x.power_w.is_some()
            || x.memory_used_mib.is_some()
            || x.sm_occupancy.is_some()
            || x.last_xid.is_some()
            || x.nvlink.total().is_some()
            || x.ecc.dbe_aggregate.is_some()
    };
    let r: Vec<&crate::sources::dcgm::Reading> = poll.readings.iter().filter(read).collect();
    if r.is_empty() {
        if poll.polled.iter().any(|(_, e)| e.is_none()) && !e.dcgm.is_empty() {
            out.push(check(
                "GPU readings",
                Verdict::Fail,
                "the endpoints answered with no GPU reading nightshift knows".into(),
                Some("an exporter whose metric names nightshift does not read? `curl URL | grep DCGM_FI` and file an issue"),
            ));
        }
        return;
    }
    let hosts: std::collections::BTreeSet<&str> = r.iter().map(|x| x.host.as_str()).collect();
    let mut missing = Vec::new();
    if r.iter()
        .all(|x| x.last_xid.is_none() && x.recent_xids.is_empty())
    {
        missing.push("no Xid series: GPU faults are seen only through the scheduler");
    }
    if r.iter().all(|x| x.sm_occupancy.is_none()) {
        missing.push("no SM occupancy: hung jobs (stalls) cannot be seen");
    }
    if r.iter().all(|x| x.nvlink.total().is_none()) {
        missing.push("no NVLink counters: link storms cannot be seen");
    }
    let names = generation(&r);
    out.push(check(
        "GPU readings",
        if missing.is_empty() {
            Verdict::Ok
        } else {
            Verdict::Warn
        },
        format!(
            "{} on {}, named as {names}{}",
            count(r.len(), "GPU"),
            count(hosts.len(), "host"),
            if missing.is_empty() {
                String::new()
            } else {
                format!("; {}", missing.join("; "))
            }
        ),
        (!missing.is_empty())
            .then_some("enable those fields in the exporter's counters file (dcgm-exporter -f)"),
    ));
}

/// An endpoint that answered (slow or not) or did not.
fn endpoint_line(
    name: &str,
    error: Option<&crate::sources::SourceError>,
    took: std::time::Duration,
) -> Check {
    let name = format!("endpoint {name}");
    match error {
        // The console refreshes every few seconds: an answer that takes
        // longer than the refresh target (docs/performance.md) ages it.
        None if took > SLOW => check(
            &name,
            Verdict::Warn,
            format!(
                "answered, slowly: {} ms (over {} s, every refresh waits on it)",
                took.as_millis(),
                SLOW.as_secs()
            ),
            Some(
                "look at its load (a Prometheus: its query log, recording rules), or raise [endpoints] interval",
            ),
        ),
        None => check(
            &name,
            Verdict::Ok,
            format!("answered in {} ms", took.as_millis()),
            None,
        ),
        Some(err) => check(
            &name,
            Verdict::Fail,
            err.to_string(),
            Some("is it running, and reachable from here? (curl the URL from this host)"),
        ),
    }
}

/// An answer slower than this is a slow endpoint.
const SLOW: std::time::Duration = std::time::Duration::from_secs(2);

/// Which generation of dcgm-exporter's names the readings came in.
fn generation(r: &[&crate::sources::dcgm::Reading]) -> &'static str {
    use crate::model::MetricNames;
    let seen = r
        .iter()
        .filter_map(|x| x.names)
        .fold(MetricNames::Either, MetricNames::and);
    match seen {
        MetricNames::Legacy => "dcgm-exporter 4.8 and before",
        MetricNames::Dcgm47 => "dcgm-exporter 4.9 and later (DCGM 4.7 names)",
        MetricNames::Mixed => "both generations (a mix of exporters)",
        MetricNames::Either => "names both generations share",
    }
}

/// The audit log: where it is, whether it can be written and locked, and
/// whether its lock holds across hosts.
fn audit_log(settings: &Settings) -> Check {
    let log = settings.audit();
    // The live log, not the oldest rotated file (issue 59).
    let path = log.files().last().cloned().unwrap_or_default();
    let shown = path.display().to_string();
    // Opened as every action opens it: never through a link, never
    // waiting on a FIFO, refused when another user owns it or can write
    // it; and each rotated file read as the breaker reads it.
    if let Err(e) = log.check_writable() {
        return check(
            "audit log",
            Verdict::Fail,
            format!("{shown}: cannot be used ({e}): every action is refused"),
            Some("--audit-log PATH (or [actions] audit_log) somewhere writable"),
        );
    }
    if let Err(e) = log.locked(|| ()) {
        return check(
            "audit log",
            Verdict::Fail,
            format!("{shown}: cannot be locked ({e}): every action is refused"),
            Some("--audit-log PATH on a local filesystem"),
        );
    }
    match network_filesystem(&path) {
        Some(fs) => check(
            "audit log",
            Verdict::Warn,
            format!("{shown}: writable and locked, but on {fs}: a lock may not hold between hosts"),
            Some("two hosts acting on one log: keep it on one host's local disk"),
        ),
        None => check(
            "audit log",
            Verdict::Ok,
            format!("{shown}: writable and locked"),
            None,
        ),
    }
}

/// The network filesystem `path` is on, if it is on one.
fn network_filesystem(path: &std::path::Path) -> Option<&'static str> {
    use std::os::unix::ffi::OsStrExt;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty())?;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid C string and `s` a statfs to fill.
    if unsafe { libc::statfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    #[allow(clippy::unnecessary_cast)]
    match s.f_type as i64 {
        0x6969 => Some("NFS"),
        0xFF53_4D42 | 0x517B => Some("SMB/CIFS"),
        0x0BD0_0BD0 => Some("Lustre"),
        0x4750_4653 => Some("GPFS"),
        0x6573_5546 => Some("a FUSE filesystem"),
        _ => None,
    }
}

/// The terminal the console would draw on.
fn terminal() -> Check {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return check(
            "terminal",
            Verdict::Ok,
            "not a terminal (output redirected): the console needs one; the commands do not".into(),
            None,
        );
    }
    let size = crossterm::terminal::size().ok();
    let colours = if std::env::var_os("NO_COLOR").is_some() {
        "no colour (NO_COLOR)"
    } else if std::env::var("COLORTERM")
        .is_ok_and(|v| v.contains("truecolor") || v.contains("24bit"))
    {
        "true colour"
    } else {
        "256 colours or fewer"
    };
    let paste = match bracketed_paste() {
        Some(true) => "bracketed paste supported",
        Some(false) => {
            "no bracketed paste: a paste arrives as keys (a typed confirmation refuses it)"
        }
        None => "did not say whether it brackets pastes (DECRQM 2004)",
    };
    match size {
        Some((w, h)) if w < 80 || h < 24 => check(
            "terminal",
            Verdict::Warn,
            format!("{w}×{h}, {colours}, {paste}: under 80×24 the console shows less"),
            Some("a larger window"),
        ),
        Some((w, h)) => check(
            "terminal",
            Verdict::Ok,
            format!("{w}×{h}, {colours}, {paste}"),
            None,
        ),
        None => check(
            "terminal",
            Verdict::Warn,
            "its size cannot be read".into(),
            None,
        ),
    }
}

/// Asks the terminal whether it knows bracketed paste (DECRQM for private
/// mode 2004: `CSI ? 2004 $ p`, answered `CSI ? 2004 ; Ps $ y`, Ps 0 when
/// the mode is unknown). `None`: no answer within 300 ms.
fn bracketed_paste() -> Option<bool> {
    use std::io::{IsTerminal, Write};
    if !std::io::stdin().is_terminal() {
        return None;
    }
    // Standard input raw (no line buffering, no echo) while it answers:
    // stdin's own modes, set and restored here.
    // SAFETY: termios is plain data, filled by tcgetattr before any use.
    let mut saved: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: fd 0 is a terminal (checked above); the pointer is valid.
    if unsafe { libc::tcgetattr(0, &mut saved) } != 0 {
        return None;
    }
    let mut raw = saved;
    // SAFETY: a valid termios, then set on fd 0.
    unsafe { libc::cfmakeraw(&mut raw) };
    if unsafe { libc::tcsetattr(0, libc::TCSANOW, &raw) } != 0 {
        return None;
    }
    let mut answer = Vec::new();
    let mut out = std::io::stdout();
    if out
        .write_all(b"\x1b[?2004$p")
        .and_then(|()| out.flush())
        .is_ok()
    {
        let deadline = Instant::now() + std::time::Duration::from_millis(300);
        while !answer.ends_with(b"$y") && answer.len() < 64 {
            let left = deadline.saturating_duration_since(Instant::now());
            let mut fd = libc::pollfd {
                fd: 0,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd, for the duration of the call.
            let ready = unsafe { libc::poll(&mut fd, 1, left.as_millis() as libc::c_int) };
            if ready <= 0 {
                break;
            }
            // fd 0 itself: std's stdin buffers, and poll would not see
            // what its buffer took.
            let mut byte = [0u8; 1];
            // SAFETY: reads at most one byte into a one-byte buffer.
            if unsafe { libc::read(0, byte.as_mut_ptr().cast(), 1) } != 1 {
                break;
            }
            answer.push(byte[0]);
        }
    }
    // SAFETY: restores the modes read above on the same descriptor.
    unsafe { libc::tcsetattr(0, libc::TCSANOW, &saved) };
    let text = String::from_utf8_lossy(&answer);
    let ps = text.split("?2004;").nth(1)?.split('$').next()?;
    Some(ps != "0")
}

/// `n thing` or `n things`.
fn count(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

/// The widest name column: a longer name (an endpoint's URL) goes on a
/// line of its own, so that an 80-column terminal does not wrap every
/// line (issue 63).
const NAME_COLUMN: usize = 18;

/// The checks as lines: `ok    scheduler  slurm answered…  → fix`; the
/// last line counts the failures and warnings and names them, so that
/// what failed is on screen after a long list scrolls by.
pub fn table(checks: &[Check]) -> String {
    let width = checks
        .iter()
        .map(|c| crate::text::width(&c.name))
        .filter(|w| *w <= NAME_COLUMN)
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for c in checks {
        let v = match c.verdict {
            Verdict::Ok => "ok  ",
            Verdict::Warn => "warn",
            Verdict::Fail => "FAIL",
        };
        let name = crate::text::sanitize(&c.name);
        if crate::text::width(&name) > width {
            out.push_str(&format!("{v}  {name}\n"));
            out.push_str(&format!(
                "      {:width$}  {}\n",
                "",
                crate::text::sanitize(&c.detail)
            ));
        } else {
            let pad = width - crate::text::width(&name);
            out.push_str(&format!(
                "{v}  {name}{:pad$}  {}\n",
                "",
                crate::text::sanitize(&c.detail)
            ));
        }
        if let Some(f) = &c.fix {
            out.push_str(&format!(
                "      {:width$}  → {}\n",
                "",
                crate::text::sanitize(f)
            ));
        }
    }
    let named = |v: Verdict| -> Vec<String> {
        checks
            .iter()
            .filter(|c| c.verdict == v)
            .map(|c| crate::text::sanitize(&c.name).into_owned())
            .collect()
    };
    let (failed, warned) = (named(Verdict::Fail), named(Verdict::Warn));
    if !failed.is_empty() || !warned.is_empty() {
        let mut parts = Vec::new();
        if !failed.is_empty() {
            parts.push(format!("{} failed ({})", failed.len(), failed.join(", ")));
        }
        if !warned.is_empty() {
            parts.push(format!(
                "{} to look at ({})",
                warned.len(),
                warned.join(", ")
            ));
        }
        out.push_str(&format!("{}\n", parts.join("; ")));
    }
    out
}
