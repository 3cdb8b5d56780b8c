//! The audit log: append-only JSON lines, written and fsync'd before an
//! action is sent (intent) and after (outcome). It never holds a token.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use crate::model::Step;

pub use crate::model::audit::{Outcome, Record};

#[derive(Debug, Clone)]
pub struct AuditLog {
    pub path: PathBuf,
    /// The key that seals armed steps (`seal`): the site's
    /// (`[actions] armed_key`), else the operator's.
    pub key: Option<PathBuf>,
}

/// Why the audit log could not be written, read or locked: one line for
/// the user, naming the file.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AuditError {
    #[error("cannot create {}: {source}", dir.display())]
    CreateDir {
        dir: PathBuf,
        source: Arc<std::io::Error>,
    },
    #[error("audit record: {0}")]
    Encode(Arc<serde_json::Error>),
    #[error("the audit log {} is a symbolic link: refused (nightshift does not follow one)", .0.display())]
    Symlink(PathBuf),
    #[error("cannot open the audit log {}: {source}", path.display())]
    Open {
        path: PathBuf,
        source: Arc<std::io::Error>,
    },
    #[error("the audit log {} is not a regular file", .0.display())]
    NotAFile(PathBuf),
    #[error("cannot write the audit log {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: Arc<std::io::Error>,
    },
    #[error("cannot sync the audit log {}: {source}", path.display())]
    Sync {
        path: PathBuf,
        source: Arc<std::io::Error>,
    },
    #[error("cannot read the audit log {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: Arc<std::io::Error>,
    },
    #[error("cannot open the audit lock {path:?}: {source}")]
    LockOpen {
        path: std::ffi::OsString,
        source: Arc<std::io::Error>,
    },
    #[error("cannot lock the audit log: {0}")]
    Lock(Arc<std::io::Error>),
    #[error("the audit log's lock {} is held by another process; waited {}s: nothing done", path.display(), waited.as_secs())]
    LockBusy {
        path: PathBuf,
        waited: std::time::Duration,
    },
}

/// Two errors are the same when they say the same.
impl PartialEq for AuditError {
    fn eq(&self, other: &AuditError) -> bool {
        self.to_string() == other.to_string()
    }
}

impl From<AuditError> for String {
    fn from(e: AuditError) -> String {
        e.to_string()
    }
}

fn create_dir_of(path: &Path) -> Result<(), AuditError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| AuditError::CreateDir {
            dir: dir.to_path_buf(),
            source: Arc::new(e),
        })?;
    }
    Ok(())
}

impl AuditLog {
    pub fn new(path: PathBuf) -> AuditLog {
        AuditLog {
            path,
            key: super::seal::default_key_path(),
        }
    }

    /// The same log, its armed steps sealed with the key at `key` (the
    /// site's) when one is given.
    pub fn with_key(mut self, key: Option<PathBuf>) -> AuditLog {
        if key.is_some() {
            self.key = key;
        }
        self
    }

    /// The key armed steps are checked with.
    pub fn seal_key(&self) -> Result<Vec<u8>, super::seal::KeyError> {
        let path = self.key.as_deref().ok_or(super::seal::KeyError::NoPlace)?;
        super::seal::load(path)
    }

    /// The key armed steps are sealed with, made when there is none yet.
    pub fn seal_key_for_arming(&self) -> Result<Vec<u8>, super::seal::KeyError> {
        let path = self.key.as_deref().ok_or(super::seal::KeyError::NoPlace)?;
        super::seal::load_or_create(path)
    }

    /// Appends one record and syncs it to disk before returning.
    pub fn write(&self, rec: &Record) -> Result<(), AuditError> {
        create_dir_of(&self.path)?;
        let mut line = serde_json::to_string(rec).map_err(|e| AuditError::Encode(Arc::new(e)))?;
        line.push('\n');
        let mut f = open_regular(
            OpenOptions::new().create(true).append(true).read(true),
            &self.path,
        )?;
        // A crash mid-write leaves a torn last line: end it first, so that
        // this record is a line of its own and not glued onto it.
        if ends_torn(&mut f) {
            tracing::warn!(
                "audit log {} ended in a torn line (a crash mid-write); it is kept, and closed with a newline",
                self.path.display()
            );
            line.insert(0, '\n');
        }
        f.write_all(line.as_bytes())
            .map_err(|e| AuditError::Write {
                path: self.path.clone(),
                source: Arc::new(e),
            })?;
        f.sync_all().map_err(|e| AuditError::Sync {
            path: self.path.clone(),
            source: Arc::new(e),
        })
    }

    /// Every record that can be read, oldest first, across rotated files
    /// (`<log>.N` … `<log>.1`, then the log: the audit is never truncated,
    /// but a site may rotate it). See [`AuditLog::reading`] for what could
    /// not be read.
    pub fn read(&self) -> Vec<Record> {
        self.reading().records
    }

    /// Every record that can be read, with each line that cannot named
    /// (file and line number: a torn line, invalid UTF-8, not a record) and
    /// the files that cannot be read at all (a symlink, a directory, no
    /// permission). A missing file holds no records and is no error.
    pub fn reading(&self) -> Reading {
        let mut out = Reading::default();
        for p in self.files() {
            match read_path(&p, &mut out.records, &mut out.skipped) {
                Ok(()) => {}
                Err(e) => out.unreadable.push(e),
            }
        }
        out
    }

    /// The log and its rotated files, oldest first.
    pub fn files(&self) -> Vec<PathBuf> {
        let mut rotated: Vec<(u32, PathBuf)> = Vec::new();
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let dir = self
            .path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                let f = e.file_name().to_string_lossy().to_string();
                if let Some(n) = f
                    .strip_prefix(&format!("{name}."))
                    .and_then(|k| k.parse::<u32>().ok())
                {
                    rotated.push((n, e.path()));
                }
            }
        }
        rotated.sort_by_key(|(n, _)| std::cmp::Reverse(*n));
        let mut files: Vec<PathBuf> = rotated.into_iter().map(|(_, p)| p).collect();
        files.push(self.path.clone());
        files
    }

    /// Steps armed and still waiting that may be fired: sealed with this
    /// log's key and of a kind nightshift arms (see [`AuditLog::armed_checked`]).
    pub fn armed(&self) -> Vec<crate::model::Armed> {
        self.armed_checked().trusted
    }

    /// Steps armed and still waiting, told apart: those that may be fired,
    /// and those that may not (written by hand, altered, sealed with
    /// another key, of a kind nightshift never arms), each with why; and
    /// the lines of the log that could not be read.
    pub fn armed_checked(&self) -> ArmedSteps {
        let reading = self.reading();
        let key = self.seal_key();
        let mut out = ArmedSteps {
            skipped: reading.skipped.clone(),
            unreadable: reading.unreadable.iter().map(|e| e.to_string()).collect(),
            ..ArmedSteps::default()
        };
        let mut ids = std::collections::HashSet::new();
        for a in reading.armed() {
            match super::seal::trusted(key.as_deref(), a) {
                // One step an id: a second record of an id already taken
                // is not the step (ids are made unique by the arming side).
                Ok(()) if ids.insert(a.id.clone()) => out.trusted.push(a.clone()),
                Ok(()) => out
                    .refused
                    .push((a.clone(), "its id is another step's".into())),
                Err(why) => out.refused.push((a.clone(), why)),
            }
        }
        out
    }

    /// Intents with no outcome: actions interrupted (a dropped SSH session,
    /// a killed process) whose effect nobody saw.
    pub fn unfinished(&self) -> Vec<Record> {
        self.reading().unfinished().into_iter().cloned().collect()
    }

    /// The log read whole, or the first file of it that cannot be read:
    /// the breaker cannot count what it cannot read.
    pub fn reading_checked(&self) -> Result<Reading, AuditError> {
        let reading = self.reading();
        match reading.unreadable.first() {
            Some(e) => Err(e.clone()),
            None => Ok(reading),
        }
    }

    /// Nodes taken out of service (cordon, drain) since `since` (see
    /// [`Reading::nodes_taken_out_since`]). Fails when a file of the log
    /// cannot be read at all: the breaker cannot count what it cannot read,
    /// and the caller refuses to act.
    pub fn nodes_taken_out_since(&self, since: i64) -> Result<u32, AuditError> {
        let reading = self.reading();
        match reading.unreadable.first() {
            Some(e) => Err(e.clone()),
            None => Ok(reading.nodes_taken_out_since(since)),
        }
    }

    /// `<audit log><suffix>`, opened to be locked: never through a link,
    /// never blocking (a FIFO planted there is refused, not waited on), a
    /// regular file only.
    fn lock_file(&self, suffix: &str) -> Result<std::fs::File, AuditError> {
        create_dir_of(&self.path)?;
        let lock_path = self.lock_path(suffix);
        let f = no_follow(OpenOptions::new().create(true).truncate(false).write(true))
            .open(&lock_path)
            .map_err(|e| AuditError::LockOpen {
                path: lock_path.clone().into_os_string(),
                source: Arc::new(e),
            })?;
        match f.metadata() {
            Ok(m) if m.is_file() => Ok(f),
            _ => Err(AuditError::NotAFile(lock_path)),
        }
    }

    fn lock_path(&self, suffix: &str) -> PathBuf {
        let mut p = self.path.clone().into_os_string();
        p.push(suffix);
        PathBuf::from(p)
    }

    /// The lock held while an armed step is sent (`<audit log>.fire`): a
    /// console and `nightshift follow` sharing the log never both send one.
    /// `None` when another nightshift holds it now (it is sending); an
    /// error when it cannot be taken at all (a directory, a link, a FIFO
    /// there): then nothing may be sent.
    pub fn firing(&self) -> Result<Option<std::fs::File>, AuditError> {
        let lock = self.lock_file(".fire")?;
        match lock.try_lock() {
            Ok(()) => Ok(Some(lock)),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(AuditError::Lock(Arc::new(e))),
        }
    }

    /// Runs `f` holding an exclusive lock on `<audit log>.lock`, so that a
    /// policy check and the intent it allows are one step for every
    /// nightshift on this machine sharing the log. The wait for a lock
    /// another process holds is bounded ([`LOCK_WAIT`]) and said.
    pub fn locked<T>(&self, f: impl FnOnce() -> T) -> Result<T, AuditError> {
        let lock = self.lock_file(".lock")?;
        let start = std::time::Instant::now();
        loop {
            match lock.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) if start.elapsed() < LOCK_WAIT => {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(AuditError::LockBusy {
                        path: self.lock_path(".lock"),
                        waited: LOCK_WAIT,
                    });
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(AuditError::Lock(Arc::new(e)));
                }
            }
        }
        let out = f();
        // Dropping the file releases the lock.
        drop(lock);
        Ok(out)
    }
}

/// The longest nightshift waits for the audit log's lock held by another
/// process before it says so and does nothing.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Whether the file's last byte is not a newline (an empty file is fine).
fn ends_torn(f: &mut std::fs::File) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(len) = f.seek(SeekFrom::End(0)) else {
        return false;
    };
    if len == 0 || f.seek(SeekFrom::End(-1)).is_err() {
        return false;
    }
    let mut last = [0u8; 1];
    let torn = f.read_exact(&mut last).is_ok() && last[0] != b'\n';
    let _ = f.seek(SeekFrom::End(0));
    torn
}

/// What [`AuditLog::armed_checked`] found.
#[derive(Debug, Clone, Default)]
pub struct ArmedSteps {
    pub trusted: Vec<crate::model::Armed>,
    /// Steps that will not be fired, with why.
    pub refused: Vec<(crate::model::Armed, String)>,
    /// Lines of the log that are not records (torn, not UTF-8).
    pub skipped: Vec<String>,
    /// Files of the log that could not be read.
    pub unreadable: Vec<String>,
}

impl ArmedSteps {
    /// What a listing of armed steps must say besides them, a line each:
    /// the steps that will not be fired and the lines that were skipped.
    pub fn warnings(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .refused
            .iter()
            .map(|(a, why)| {
                format!(
                    "not sent: the armed {} {} ({}): {why}",
                    a.action.verb(),
                    crate::text::sanitize(a.action.target()),
                    crate::text::sanitize(&a.id)
                )
            })
            .collect();
        out.extend(
            self.skipped
                .iter()
                .map(|s| crate::text::sanitize(s).into_owned()),
        );
        out.extend(
            self.unreadable
                .iter()
                .map(|s| crate::text::sanitize(s).into_owned()),
        );
        out
    }
}

/// What [`AuditLog::reading`] found.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    pub records: Vec<Record>,
    /// One line each: `FILE line N: why` for a line that is not a record.
    pub skipped: Vec<String>,
    /// One line each for a file that could not be read at all.
    pub unreadable: Vec<AuditError>,
}

impl Reading {
    /// Intents with no outcome: actions interrupted (a dropped SSH
    /// session, a killed process) or still in flight in another nightshift.
    pub fn unfinished(&self) -> Vec<&Record> {
        let done: std::collections::HashSet<&str> = self
            .records
            .iter()
            .filter(|r| r.phase == "outcome")
            .map(|r| r.id.as_str())
            .collect();
        self.records
            .iter()
            .filter(|r| r.phase == "intent" && !done.contains(r.id.as_str()))
            .collect()
    }

    /// The hardware faults the log's actions answered: each intent names
    /// the open incident it acted on (`e2 XID 79 on h100-03 GPU 3 (open)`),
    /// so a node's drains and cordons are part of its history. One incident
    /// acted on several times (cordoned, drained after its checkpoint,
    /// validated) is one fault, at its first intent. Only the records of
    /// `clusters` (the names the cluster is audited under): a log shared by
    /// several clusters may name the same node in each.
    pub fn faults(&self, clusters: &[&str]) -> Vec<crate::model::PastFault> {
        let mut seen = std::collections::HashSet::new();
        self.records
            .iter()
            .filter(|r| r.phase == "intent" && clusters.contains(&r.cluster.as_str()))
            .filter_map(|r| {
                // The fault as data (node, GPU, kind, first time): the same
                // in every process, so three incidents of one node from
                // three runs are three faults, one incident acted on three
                // times is one.
                if let Some(f) = &r.fault {
                    let key = format!(
                        "{}\u{0}{:?}\u{0}{:?}\u{0}{}",
                        f.node, f.gpu, f.fault, f.time
                    );
                    return seen.insert(key).then(|| f.clone());
                }
                // Older records: the incident's line, read back.
                let incident = r.incident.as_deref()?;
                // The stage (`(open)`, `(remedied)`) changes; the rest names it.
                let key = incident.rsplit_once(" (").map_or(incident, |(k, _)| k);
                let fault = fault_of_incident(incident, r.time)?;
                seen.insert(key.to_string()).then_some(fault)
            })
            .collect()
    }

    /// Steps armed and not yet fired, refused or cancelled, oldest first.
    pub fn armed(&self) -> Vec<&crate::model::Armed> {
        let ended: std::collections::HashSet<&str> = self
            .records
            .iter()
            .filter(|r| matches!(r.phase.as_str(), "fired" | "refused" | "cancelled"))
            .map(|r| r.id.as_str())
            .collect();
        self.records
            .iter()
            .filter(|r| r.phase == "armed" && !ended.contains(r.id.as_str()))
            .filter_map(|r| r.armed.as_ref())
            .collect()
    }

    /// Nodes taken out of service (cordon, drain) since `since`: every
    /// intent whose outcome did not say it failed to — done, partly done,
    /// or still in flight in another nightshift.
    pub fn nodes_taken_out_since(&self, since: i64) -> u32 {
        self.nodes_taken_out_since_except(since, None)
    }

    /// The ids of intents whose outcome says they took nothing out: a
    /// no-op, or a first step (the cordon, the drain) that failed.
    fn failed_to_take_out(&self) -> std::collections::HashSet<&str> {
        self.records
            .iter()
            .filter(|r| r.phase == "outcome")
            .filter(|r| {
                r.outcome
                    .as_ref()
                    .is_some_and(|o| o.no_op || !o.steps.first().map_or(o.ok, |s| s.ok))
            })
            .map(|r| r.id.as_str())
            .collect()
    }

    /// The distinct nodes this cluster took out of service within the
    /// window (cordon, drain: every intent whose outcome did not say it
    /// failed to — done, partly done, or in flight), each with its latest
    /// time on the clock it was counted by; a failing domain's remedy
    /// cordons are not counted. Oldest first.
    pub fn taken_out(&self, w: &Window<'_>) -> Vec<(String, i64)> {
        let failed = self.failed_to_take_out();
        let mut latest: std::collections::HashMap<&str, i64> = Default::default();
        for r in &self.records {
            if r.phase != "intent"
                || !(r.action == "drain" || r.action == "cordon")
                || r.domain_remedy
                || failed.contains(r.id.as_str())
                || w.except.is_some_and(|n| r.target == n)
                || !w.clusters.contains(&r.cluster.as_str())
            {
                continue;
            }
            let (t, now) = match r.source_time {
                Some(t) => (t, w.source_now),
                None => (r.time, w.wall_now),
            };
            if t < now - w.span_s || t > now {
                continue;
            }
            let e = latest.entry(r.target.as_str()).or_insert(t);
            *e = (*e).max(t);
        }
        let mut out: Vec<(String, i64)> = latest
            .into_iter()
            .map(|(n, t)| (n.to_string(), t))
            .collect();
        out.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)));
        out
    }

    /// The same, leaving out what was done to `except` (an armed plan's
    /// own cordon of the node it will drain).
    pub fn nodes_taken_out_since_except(&self, since: i64, except: Option<&str>) -> u32 {
        let failed = self.failed_to_take_out();
        self.records
            .iter()
            .filter(|r| {
                r.phase == "intent"
                    && r.time >= since
                    && (r.action == "drain" || r.action == "cordon")
                    && !failed.contains(r.id.as_str())
                    && except.is_none_or(|n| r.target != n)
            })
            .count() as u32
    }
}

/// The circuit breaker's window, one rule for what it counts and what it
/// gates (docs/decision-engine.md): this cluster's records (under any of
/// `clusters`), on the source's clock (`source_now`; wall-clock `wall_now`
/// for records without one), `span_s` long; `except` a node not counted
/// (an armed plan's own cordon).
#[derive(Debug, Clone, Copy)]
pub struct Window<'a> {
    pub clusters: &'a [&'a str],
    pub source_now: i64,
    pub wall_now: i64,
    pub span_s: i64,
    pub except: Option<&'a str>,
}

/// How an intent names the incident it answers: `ID LABEL on NODE[ GPU
/// N] (STAGE)` — read back as a fault of the node's history by
/// `fault_of_incident`.
pub fn incident_line(i: &crate::engine::incidents::Incident) -> String {
    format!(
        "{} {} on {}{} ({})",
        i.id,
        i.label,
        i.node,
        i.gpu.map_or(String::new(), |g| format!(" GPU {g}")),
        i.stage.as_str()
    )
}

/// The hardware fault an incident is, as data: an Xid (`XID 79`), an
/// uncorrectable ECC error or a failed row remap on its node and GPU, at
/// the incident's first time; other incidents (a stall, a link, a domain)
/// are no GPU's fault.
pub fn fault_of(i: &crate::engine::incidents::Incident) -> Option<crate::model::PastFault> {
    use crate::model::Fault;
    let fault = if let Some(x) = i.xid {
        Fault::Xid(x)
    } else if i.label.starts_with("ECC DBE") {
        Fault::Dbe
    } else if i.label.starts_with("REMAP FAIL") {
        Fault::RemapFailed
    } else {
        return None;
    };
    Some(crate::model::PastFault {
        time: i.time,
        node: i.node.clone(),
        gpu: i.gpu,
        fault,
        from: "audit".into(),
    })
}

/// The fault an audit record's incident names (`incident_line`), LABEL an Xid (`XID 79`, `XID 48 (+ECC DBE)`), `ECC DBE` or
/// `REMAP FAIL`; other incidents (a stall, a link) are not a GPU's fault.
fn fault_of_incident(incident: &str, time: i64) -> Option<crate::model::PastFault> {
    use crate::model::Fault;
    let (_, rest) = incident.split_once(' ')?;
    let (label, place) = rest.rsplit_once(" on ")?;
    let fault = if let Some(x) = label.strip_prefix("XID ") {
        Fault::Xid(x.split_whitespace().next()?.parse().ok()?)
    } else if label.starts_with("ECC DBE") {
        Fault::Dbe
    } else if label.starts_with("REMAP FAIL") {
        Fault::RemapFailed
    } else {
        return None;
    };
    let place = place.split(" (").next()?;
    let (node, gpu) = match place.split_once(" GPU ") {
        Some((n, g)) => (n, g.trim().parse().ok()),
        None => (place, None),
    };
    Some(crate::model::PastFault {
        time,
        node: node.to_string(),
        gpu,
        fault,
        from: "audit".into(),
    })
}

/// Adds the audit log's faults to each snapshot's history (`Cluster::history`),
/// re-reading the log only when it has grown: the console's history of a
/// node includes what nightshift was used to act on — on this cluster (its
/// name in `[[clusters]]`, `cluster`, or the snapshot's own).
pub fn with_history(
    mut rx: tokio::sync::mpsc::Receiver<crate::sources::Update>,
    log: AuditLog,
    cluster: Option<String>,
) -> tokio::sync::mpsc::Receiver<crate::sources::Update> {
    let (tx, out) = tokio::sync::mpsc::channel(16);
    tokio::spawn(async move {
        let mut seen: Option<(u64, String)> = None;
        let mut faults: Vec<crate::model::PastFault> = Vec::new();
        while let Some(u) = rx.recv().await {
            let u = match u {
                crate::sources::Update::Snapshot(c) => {
                    let now = (log_len(&log), c.name.clone());
                    if seen.as_ref() != Some(&now) {
                        seen = Some(now);
                        let l = log.clone();
                        let names: Vec<String> = cluster.iter().chain([&c.name]).cloned().collect();
                        faults = tokio::task::spawn_blocking(move || {
                            let names: Vec<&str> = names.iter().map(String::as_str).collect();
                            l.reading().faults(&names)
                        })
                        .await
                        .unwrap_or_default();
                    }
                    if faults.is_empty() {
                        crate::sources::Update::Snapshot(c)
                    } else {
                        let mut c = Arc::unwrap_or_clone(c);
                        c.history.extend(faults.iter().cloned());
                        crate::sources::Update::Snapshot(Arc::new(c))
                    }
                }
                other => other,
            };
            if tx.send(u).await.is_err() {
                return;
            }
        }
    });
    out
}

/// The log's length now (0 when it is not there).
pub(crate) fn log_len(log: &AuditLog) -> u64 {
    std::fs::metadata(&log.path).map_or(0, |m| m.len())
}

/// Opens without following a symlink at the last component (a link
/// planted where the audit log should be is refused, never written
/// through) and without blocking (a FIFO planted there would block an
/// open until someone writes it: it is opened at once, then refused as not
/// a regular file).
fn no_follow(o: &mut OpenOptions) -> &mut OpenOptions {
    use std::os::unix::fs::OpenOptionsExt;
    o.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
}

/// Opens `path` as [`no_follow`] does and refuses what is not a regular
/// file (a FIFO, a device, a directory).
fn open_regular(o: &mut OpenOptions, path: &Path) -> Result<std::fs::File, AuditError> {
    let f = no_follow(o).open(path).map_err(|e| open_error(path, e))?;
    match f.metadata() {
        Ok(m) if m.is_file() => Ok(f),
        Ok(_) => Err(AuditError::NotAFile(path.to_path_buf())),
        Err(e) => Err(AuditError::Read {
            path: path.to_path_buf(),
            source: Arc::new(e),
        }),
    }
}

fn open_error(path: &Path, e: std::io::Error) -> AuditError {
    if e.raw_os_error() == Some(libc::ELOOP) {
        AuditError::Symlink(path.to_path_buf())
    } else {
        AuditError::Open {
            path: path.to_path_buf(),
            source: Arc::new(e),
        }
    }
}

/// Reads one file's records line by line from its bytes: a line that is not
/// UTF-8 or not a record (a crash mid-write tears the last one) is skipped
/// and named, and the rest are still read.
fn read_path(
    path: &Path,
    out: &mut Vec<Record>,
    skipped: &mut Vec<String>,
) -> Result<(), AuditError> {
    use std::io::Read;
    let mut f = match open_regular(OpenOptions::new().read(true), path) {
        Ok(f) => f,
        Err(AuditError::Open { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let read = |e| AuditError::Read {
        path: path.to_path_buf(),
        source: Arc::new(e),
    };
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).map_err(read)?;
    for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let why = match std::str::from_utf8(line) {
            Err(_) => "not UTF-8 (torn mid-character?)".to_string(),
            Ok(text) => match serde_json::from_str::<Record>(text) {
                Ok(r) => {
                    out.push(r);
                    continue;
                }
                Err(e) => format!("not a record ({e})"),
            },
        };
        skipped.push(format!("{} line {}: {why}; skipped", path.display(), i + 1));
    }
    Ok(())
}

pub use crate::host::{now, os_user};

/// A record id unique enough for one operator's log.
pub fn new_id() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{}-{}-{nanos}-{}",
        now(),
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Says once, before anything else, which earlier actions never finished:
/// a first line with their count and the newest few, then one line each.
pub fn warn_unfinished(log: &AuditLog) -> Vec<String> {
    let left = log.unfinished();
    if left.is_empty() {
        return Vec::new();
    }
    let one = |r: &Record| {
        format!(
            "{} {} at {} by {}",
            r.action,
            crate::text::sanitize(&r.target),
            crate::text::datetime(r.time),
            crate::text::sanitize(&r.operator)
        )
    };
    let newest: Vec<String> = left.iter().rev().take(3).map(one).collect();
    let more = left.len().saturating_sub(3);
    let mut out = vec![format!(
        "{} earlier action(s) were interrupted — their outcome was never recorded; check the scheduler: {}{}",
        left.len(),
        newest.join("; "),
        if more > 0 {
            format!("; and {more} older (nightshift audit)")
        } else {
            String::new()
        }
    )];
    if left.len() > 1 {
        out.extend(left.iter().map(|r| format!("interrupted: {}", one(r))));
    }
    out
}

#[cfg(test)]
mod incident_tests {
    use super::*;
    use crate::model::Fault;

    #[test]
    fn an_intents_incident_is_a_fault_of_its_node() {
        let f = fault_of_incident("e2 XID 79 on h100-03 GPU 3 (open)", 100).expect("fault");
        assert_eq!(
            (f.node.as_str(), f.gpu, f.fault, f.time),
            ("h100-03", Some(3), Fault::Xid(79), 100)
        );
        let f = fault_of_incident(
            "e5 XID 48 (+ECC DBE, XID 63) on h100-06 GPU 5 (remedied)",
            1,
        )
        .expect("fault");
        assert_eq!(f.fault, Fault::Xid(48));
        let f = fault_of_incident("e7 ECC DBE on gpu-on-x GPU 1 (open)", 1).expect("fault");
        assert_eq!((f.node.as_str(), f.fault), ("gpu-on-x", Fault::Dbe));
        assert!(fault_of_incident("e3 STALL on h100-01 (open)", 1).is_none());
        assert!(fault_of_incident("garbage", 1).is_none());
    }

    /// Repeat offenders are counted by the fault as data (issue 37): three
    /// drains of a100n1 from three command-line runs each recorded "e1 XID
    /// 79 on a100n1 GPU 2" — the label's number restarts in every process —
    /// and were one fault; as data (node, GPU, kind, first time) they are
    /// three, and one incident acted on twice is still one.
    #[test]
    fn faults_are_told_apart_by_their_identity_not_their_label() {
        let at = |id: &str, since: i64| Record {
            id: id.into(),
            phase: "intent".into(),
            time: since + 60,
            operator: "oncall".into(),
            scheduler_user: None,
            host: "h".into(),
            cluster: "lab".into(),
            source: "slurm".into(),
            action: "drain".into(),
            target: "a100n1".into(),
            reason: None,
            preview: "p".into(),
            incident: Some("e1 XID 79 on a100n1 GPU 2 (open)".into()),
            step_of: None,
            source_time: None,
            domain_remedy: false,
            fault: Some(crate::model::PastFault {
                time: since,
                node: "a100n1".into(),
                gpu: Some(2),
                fault: Fault::Xid(79),
                from: "audit".into(),
            }),
            warnings: Vec::new(),
            outcome: None,
            armed: None,
            note: None,
        };
        let reading = Reading {
            records: vec![
                at("a", 1000),
                at("b", 90_000),
                at("c", 200_000),
                at("d", 200_000),
            ],
            ..Reading::default()
        };
        let faults = reading.faults(&["lab"]);
        assert_eq!(faults.len(), 3, "{faults:?}");
        assert_eq!(faults[0].time, 1000, "the fault's own time");
    }

    /// The console's snapshots carry the audit log's faults of their own
    /// cluster (by the name it is audited under), re-read when the log
    /// grows.
    #[test]
    fn snapshots_gain_their_own_clusters_audited_faults() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = AuditLog::new(dir.path().join("audit.jsonl"));
        let intent = |id: &str, cluster: &str, node: &str| Record {
            id: id.into(),
            phase: "intent".into(),
            time: 100,
            operator: "oncall".into(),
            scheduler_user: None,
            host: "h".into(),
            cluster: cluster.into(),
            source: "slurm".into(),
            action: "drain".into(),
            target: node.into(),
            reason: None,
            preview: "p".into(),
            incident: Some(format!("e1 XID 79 on {node} GPU 3 (open)")),
            step_of: None,
            source_time: None,
            domain_remedy: false,
            fault: None,
            warnings: Vec::new(),
            outcome: None,
            armed: None,
            note: None,
        };
        log.write(&intent("a", "west", "gpu01")).expect("write");
        log.write(&intent("b", "east", "gpu02")).expect("write");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("rt");
        rt.block_on(async {
            let (tx, rx) = tokio::sync::mpsc::channel(4);
            let mut out = with_history(rx, log.clone(), Some("west".into()));
            let snapshot = || {
                crate::sources::Update::Snapshot(Arc::new(crate::model::Cluster {
                    name: "slurm-west".into(),
                    ..crate::model::Cluster::default()
                }))
            };
            let history = |u: Option<crate::sources::Update>| match u {
                Some(crate::sources::Update::Snapshot(c)) => {
                    c.history.iter().map(|f| f.node.clone()).collect::<Vec<_>>()
                }
                other => panic!("{other:?}"),
            };
            tx.send(snapshot()).await.expect("send");
            assert_eq!(history(out.recv().await), ["gpu01"]);
            log.write(&intent("c", "slurm-west", "gpu03"))
                .expect("write");
            tx.send(snapshot()).await.expect("send");
            assert_eq!(history(out.recv().await), ["gpu01", "gpu03"]);
        });
    }
}
