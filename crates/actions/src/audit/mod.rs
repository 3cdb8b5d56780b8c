//! The audit log: append-only JSON lines, written and fsync'd before an
//! action is sent (intent) and after (outcome). It never holds a token.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use crate::model::Step;

pub use crate::model::audit::{Outcome, Record};

mod incident;
mod reading;

pub use incident::log_len;
pub use incident::{fault_of, incident_line, watch_faults};
pub use reading::{ArmedSteps, Reading, Window};

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
    /// Owned by another user, or writable by others: anyone who can
    /// change it can forge or delete what nightshift trusts (issue 59).
    #[error("the audit log {} {why}: refused, as ssh refuses a planted authorized_keys (fix: `chown` it to this user or root and `chmod go-w` it, or move it aside)", path.display())]
    Untrusted { path: PathBuf, why: String },
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

    /// Whether a record could be appended now, writing nothing: the live
    /// log opened as [`AuditLog::write`] opens it (made when missing; never
    /// through a link, never waiting on a FIFO, refused when another user
    /// owns it or can write it), and every rotated file read as the
    /// breaker reads them. What `doctor` checks.
    pub fn check_writable(&self) -> Result<(), AuditError> {
        create_dir_of(&self.path)?;
        open_regular(
            OpenOptions::new().create(true).append(true).read(true),
            &self.path,
        )?;
        self.reading_checked().map(|_| ())
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
        for a in reading.armed_by(key.as_ref().ok().map(Vec::as_slice)) {
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
    use std::os::unix::fs::OpenOptionsExt;
    // Made readable by all, writable by its owner alone (whatever the umask
    // would let through, never more).
    let f = no_follow(o.mode(0o644))
        .open(path)
        .map_err(|e| open_error(path, e))?;
    match f.metadata() {
        Ok(m) if m.is_file() => match untrusted(&m) {
            Some(why) => Err(AuditError::Untrusted {
                path: path.to_path_buf(),
                why,
            }),
            None => Ok(f),
        },
        Ok(_) => Err(AuditError::NotAFile(path.to_path_buf())),
        Err(e) => Err(AuditError::Read {
            path: path.to_path_buf(),
            source: Arc::new(e),
        }),
    }
}

/// Why a file nightshift trusts may not be: owned by someone but this
/// user and root, or writable by its group or every user.
pub fn untrusted(m: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if m.uid() != me && m.uid() != 0 {
        return Some(format!(
            "is owned by uid {}, not by this user or root",
            m.uid()
        ));
    }
    if m.mode() & 0o022 != 0 {
        return Some(format!(
            "is writable by {} (mode {:o})",
            if m.mode() & 0o002 != 0 {
                "every user"
            } else {
                "its group"
            },
            m.mode() & 0o7777
        ));
    }
    None
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
    use std::io::BufRead;
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
    // Line by line, each bounded: a file of one endless line (or of
    // gigabytes) is never held whole, only the records it has.
    let mut r = std::io::BufReader::new(&mut f);
    let mut line = Vec::new();
    let mut number = 0usize;
    loop {
        line.clear();
        number += 1;
        let n = std::io::Read::take(&mut r, MAX_LINE + 1)
            .read_until(b'\n', &mut line)
            .map_err(read)?;
        if n == 0 {
            return Ok(());
        }
        if line.last() != Some(&b'\n') && n as u64 > MAX_LINE {
            skip_line(&mut r).map_err(read)?;
            skipped.push(format!(
                "{} line {number}: longer than {MAX_LINE} bytes; skipped",
                path.display()
            ));
            continue;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let why = match std::str::from_utf8(&line) {
            Err(_) => "not UTF-8 (torn mid-character?)".to_string(),
            Ok(text) => match serde_json::from_str::<Record>(text) {
                Ok(rec) => {
                    out.push(rec);
                    continue;
                }
                Err(e) => format!("not a record ({e})"),
            },
        };
        skipped.push(format!("{} line {number}: {why}; skipped", path.display()));
    }
}

/// The longest audit line read: a record is a few KB (a drain naming a
/// gang of thousands of jobs is under 1 MiB).
const MAX_LINE: u64 = 4 << 20;

/// Reads past the rest of a line without keeping it.
fn skip_line(r: &mut impl std::io::BufRead) -> std::io::Result<()> {
    loop {
        let chunk = r.fill_buf()?;
        if chunk.is_empty() {
            return Ok(());
        }
        match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => {
                r.consume(i + 1);
                return Ok(());
            }
            None => {
                let n = chunk.len();
                r.consume(n);
            }
        }
    }
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
