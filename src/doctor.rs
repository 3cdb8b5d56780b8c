//! `nightshift doctor`: why nightshift sees nothing, or less than it
//! should — one line per check, each with its verdict and what to do. It
//! reads the configured source and endpoints once, looks at the audit log
//! and the terminal, and changes nothing on the cluster (the audit log's
//! file and lock are made where missing, as the first action would).

use crate::config::Settings;
use crate::sources::SourceConfig;
use crate::sources::SourceError;
use crate::sources::once::OnceError;
use serde::Serialize;
use std::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Ok,
    /// nightshift works, with less than it could see.
    Warn,
    /// nightshift is blind (or cannot act) here until it is fixed.
    Fail,
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: String,
    pub verdict: Verdict,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

fn check(name: &str, verdict: Verdict, detail: String, fix: Option<&str>) -> Check {
    Check {
        name: name.into(),
        verdict,
        detail,
        fix: fix.map(str::to_string),
    }
}

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
    let mut out = Vec::new();
    let started = Instant::now();
    let read = rt.block_on(crate::sources::once::read(
        &settings.source,
        settings.sim_seconds,
    ));
    let took = started.elapsed();
    let cluster = scheduler(&mut out, &settings.source, read, took);
    if let SourceConfig::Slurm(cfg) = &settings.source {
        let t = token(cfg.token.as_deref(), crate::host::now());
        // A refused request with a token that is no good: that is why
        // (slurmrestd 22.05 says only "Unspecified error", HTTP 500).
        if t.verdict == Verdict::Fail
            && let Some(s) = out
                .iter_mut()
                .find(|c| c.name == "scheduler" && c.verdict == Verdict::Fail)
        {
            s.fix = Some(format!("slurmrestd refuses the token: {}", t.detail));
        }
        out.push(t);
        out.push(scontrol(&cfg.scontrol, cfg.slurm_conf.as_deref()));
    }
    if let SourceConfig::Kube(cfg) = &settings.source {
        out.push(kubernetes(rt.block_on(crate::sources::kube::discover(cfg))));
    }
    endpoints(&mut out, settings, &rt, cluster.unwrap_or_default());
    out.push(audit_log(settings));
    out.push(terminal());
    out
}

/// The scheduler read once: how fast, how much, or why not.
fn scheduler(
    out: &mut Vec<Check>,
    cfg: &SourceConfig,
    read: Result<Option<crate::sources::once::Reading>, OnceError>,
    took: std::time::Duration,
) -> Option<crate::model::Cluster> {
    match read {
        Ok(Some(r)) => {
            let c = &r.cluster;
            let gpus: usize = c.nodes.iter().map(|n| n.gpus.len()).sum();
            let slow = took.as_secs_f64() > 5.0;
            out.push(check(
                "scheduler",
                if slow { Verdict::Warn } else { Verdict::Ok },
                format!(
                    "{} answered in {} ms: {} nodes, {} GPUs, {} jobs{}",
                    r.source,
                    took.as_millis(),
                    c.nodes.len(),
                    gpus,
                    c.jobs.len(),
                    if r.warnings.is_empty() {
                        String::new()
                    } else {
                        format!(
                            "; {} record(s) skipped: {}",
                            r.warnings.len(),
                            crate::text::sanitize(&r.warnings[0])
                        )
                    }
                ),
                slow.then_some("a slow scheduler ages the console's data: raise [slurm] interval, or look at slurmrestd's load"),
            ));
            Some(r.cluster)
        }
        Ok(None) => {
            out.push(check(
                "scheduler",
                Verdict::Warn,
                "none configured (--source none): no jobs, no queue, no actions".into(),
                Some("--source slurm|kube|sim, or [source] in the config"),
            ));
            None
        }
        Err(e) => {
            let fix = match (&e, cfg) {
                (OnceError::Source(SourceError::Auth { .. }), SourceConfig::Slurm(_)) => {
                    "a new token: `scontrol token lifespan=86400`, then SLURM_JWT=… (or [slurm] token)"
                }
                (OnceError::Source(SourceError::Auth { .. }), _) => {
                    "the kubeconfig's credentials are refused: `kubectl auth whoami`, renew them"
                }
                (OnceError::Source(SourceError::Unreachable { .. }), SourceConfig::Slurm(_)) => {
                    "is slurmrestd running and listening there? (`systemctl status slurmrestd`, [slurm] url)"
                }
                (OnceError::Source(SourceError::Unreachable { .. }), _) => {
                    "is the API server reachable from here? (`kubectl cluster-info`, --context)"
                }
                (OnceError::Source(SourceError::Timeout { .. }), _) => {
                    "it did not answer in time: raise [slurm] timeout, or look at its load"
                }
                _ => "see the error; `nightshift --log-file F` logs more",
            };
            out.push(check("scheduler", Verdict::Fail, e.to_string(), Some(fix)));
            None
        }
    }
}

/// Where a Kubernetes source connects, as whom, and which scheduling
/// kinds the server serves.
fn kubernetes(d: Result<crate::sources::kube::Discovered, SourceError>) -> Check {
    match d {
        Err(e) => check(
            "kubernetes",
            Verdict::Fail,
            e.to_string(),
            Some("`kubectl --context CONTEXT get nodes` with the same kubeconfig"),
        ),
        Ok(d) => {
            let kinds = if d.kinds.is_empty() {
                "no Kueue, Volcano or Topology kinds: pods' own priority and gangs only".to_string()
            } else {
                d.kinds.join(", ")
            };
            check(
                "kubernetes",
                Verdict::Ok,
                format!(
                    "context {} as user {} at {}; {kinds}{}",
                    d.context.as_deref().unwrap_or("(in-cluster)"),
                    d.user.as_deref().unwrap_or("(service account)"),
                    d.url,
                    if d.notes.is_empty() {
                        String::new()
                    } else {
                        format!("; {}", d.notes.join("; "))
                    }
                ),
                None,
            )
        }
    }
}

/// Slurm's JWT: whether it is there and when it expires (its `exp`
/// claim, read without checking its signature: slurmrestd does that).
pub fn token(token: Option<&str>, now: i64) -> Check {
    let Some(t) = token.filter(|t| !t.trim().is_empty()) else {
        return check(
            "slurm token",
            Verdict::Fail,
            "no token: slurmrestd refuses every request".into(),
            Some("`scontrol token lifespan=86400`, then SLURM_JWT=… (or [slurm] token)"),
        );
    };
    let exp = t
        .split('.')
        .nth(1)
        .and_then(base64url)
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v["exp"].as_i64());
    match exp {
        None => check(
            "slurm token",
            Verdict::Warn,
            "not a JWT with an expiry (exp) nightshift can read".into(),
            None,
        ),
        Some(e) if e <= now => check(
            "slurm token",
            Verdict::Fail,
            format!(
                "expired at {} ({} ago)",
                crate::text::datetime(e),
                crate::text::duration(now - e)
            ),
            Some("`scontrol token lifespan=86400`, then SLURM_JWT=…"),
        ),
        Some(e) if e - now < 3600 => check(
            "slurm token",
            Verdict::Warn,
            format!(
                "expires at {} (in {})",
                crate::text::datetime(e),
                crate::text::duration(e - now)
            ),
            Some("renew it before the night: `scontrol token lifespan=86400`"),
        ),
        Some(e) => check(
            "slurm token",
            Verdict::Ok,
            format!(
                "expires at {} (in {})",
                crate::text::datetime(e),
                crate::text::duration(e - now)
            ),
            None,
        ),
    }
}

/// Base64url without padding (a JWT's parts).
fn base64url(s: &str) -> Option<Vec<u8>> {
    let mut bits = 0u32;
    let mut n = 0;
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for ch in s.bytes() {
        let v = match ch {
            b'A'..=b'Z' => ch - b'A',
            b'a'..=b'z' => ch - b'a' + 26,
            b'0'..=b'9' => ch - b'0' + 52,
            b'-' | b'+' => 62,
            b'_' | b'/' => 63,
            b'=' => break,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(v);
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
            bits &= (1 << n) - 1;
        }
    }
    Some(out)
}

/// The `scontrol` the validation and the REST versions' gaps run, and
/// the cluster it talks to.
fn scontrol(program: &str, slurm_conf: Option<&std::path::Path>) -> Check {
    let found = if program.contains('/') {
        std::path::Path::new(program)
            .is_file()
            .then(|| program.to_string())
    } else {
        std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(program))
                .find(|f| f.is_file())
                .map(|f| f.display().to_string())
        })
    };
    let conf = slurm_conf
        .map(|p| p.display().to_string())
        .or_else(|| std::env::var("SLURM_CONF").ok());
    match (found, conf) {
        (None, _) => check(
            "scontrol",
            Verdict::Warn,
            format!("{program} not found: validation and the calls REST lacks cannot run"),
            Some("install slurm-client here, or [slurm] scontrol = PATH"),
        ),
        (Some(f), Some(c)) if !std::path::Path::new(&c).is_file() => check(
            "scontrol",
            Verdict::Fail,
            format!(
                "{f}, but its SLURM_CONF {c} is not a file: it would ask another cluster, or none"
            ),
            Some("[slurm] slurm_conf = the cluster's slurm.conf"),
        ),
        (Some(f), c) => check(
            "scontrol",
            Verdict::Ok,
            format!(
                "{f}{}",
                c.map_or(String::new(), |c| format!(" with SLURM_CONF={c}"))
            ),
            None,
        ),
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
    let started = Instant::now();
    let poll = rt.block_on(async {
        let mut p = crate::sources::endpoints::Poller::new(e)?.whole();
        Ok::<_, String>(p.poll(&base, &[], &e.hosts).await)
    });
    let took = started.elapsed();
    let poll = match poll {
        Ok(p) => p,
        Err(why) => {
            out.push(check("endpoints", Verdict::Fail, why, None));
            return;
        }
    };
    for (origin, error) in &poll.polled {
        let name = format!("endpoint {}", origin.name());
        out.push(match error {
            None => check(
                &name,
                Verdict::Ok,
                format!("answered (all in {} ms)", took.as_millis()),
                None,
            ),
            Some(err) => check(
                &name,
                Verdict::Fail,
                err.to_string(),
                Some("is it running, and reachable from here? (curl the URL from this host)"),
            ),
        });
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
    out.push(check(
        "GPU readings",
        if missing.is_empty() {
            Verdict::Ok
        } else {
            Verdict::Warn
        },
        format!(
            "{} GPUs on {} hosts{}",
            r.len(),
            hosts.len(),
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

/// The audit log: where it is, whether it can be written and locked, and
/// whether its lock holds across hosts.
fn audit_log(settings: &Settings) -> Check {
    let log = settings.audit();
    let path = log.files().first().cloned().unwrap_or_default();
    let shown = path.display().to_string();
    let writable = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path);
    if let Err(e) = writable {
        return check(
            "audit log",
            Verdict::Fail,
            format!("{shown}: cannot be written ({e}): every action is refused"),
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
    match size {
        Some((w, h)) if w < 80 || h < 24 => check(
            "terminal",
            Verdict::Warn,
            format!("{w}×{h}, {colours}: under 80×24 the console shows less"),
            Some("a larger window"),
        ),
        Some((w, h)) => check("terminal", Verdict::Ok, format!("{w}×{h}, {colours}"), None),
        None => check(
            "terminal",
            Verdict::Warn,
            "its size cannot be read".into(),
            None,
        ),
    }
}

/// The checks as lines: `ok    scheduler  slurm answered…  → fix`.
pub fn table(checks: &[Check]) -> String {
    let width = checks
        .iter()
        .map(|c| c.name.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for c in checks {
        let v = match c.verdict {
            Verdict::Ok => "ok  ",
            Verdict::Warn => "warn",
            Verdict::Fail => "FAIL",
        };
        out.push_str(&format!(
            "{v}  {:width$}  {}\n",
            crate::text::sanitize(&c.name),
            crate::text::sanitize(&c.detail)
        ));
        if let Some(f) = &c.fix {
            out.push_str(&format!(
                "      {:width$}  → {}\n",
                "",
                crate::text::sanitize(f)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(exp: i64) -> String {
        // {"alg":"HS256"} . {"exp":…,"sun":"root"} . signature
        let b64 = |s: &str| {
            const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
            let b = s.as_bytes();
            let mut out = String::new();
            for ch in b.chunks(3) {
                let n =
                    ch.iter().fold(0u32, |a, &x| (a << 8) | u32::from(x)) << (8 * (3 - ch.len()));
                for i in 0..=ch.len() {
                    out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
                }
            }
            out
        };
        format!(
            "{}.{}.c2ln",
            b64(r#"{"alg":"HS256"}"#),
            b64(&format!(r#"{{"exp":{exp},"sun":"root"}}"#))
        )
    }

    #[test]
    fn a_token_is_read_by_its_expiry() {
        let now = 1_800_000_000;
        assert_eq!(token(Some(&jwt(now + 86_400)), now).verdict, Verdict::Ok);
        let soon = token(Some(&jwt(now + 600)), now);
        assert_eq!(soon.verdict, Verdict::Warn, "{soon:?}");
        let gone = token(Some(&jwt(now - 7200)), now);
        assert_eq!(gone.verdict, Verdict::Fail);
        assert!(
            gone.detail.contains("expired at") && gone.detail.contains("2h"),
            "{gone:?}"
        );
        assert_eq!(token(None, now).verdict, Verdict::Fail);
        assert_eq!(token(Some("not-a-jwt"), now).verdict, Verdict::Warn);
    }
}
