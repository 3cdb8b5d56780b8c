//! The audit log: append-only JSON lines, written and fsync'd before an
//! action is sent (intent) and after (outcome). It never holds a token.

use serde::{Deserialize, Serialize};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub ok: bool,
    /// The change was seen in the scheduler's state afterwards.
    pub verified: bool,
    pub no_op: bool,
    pub observed: String,
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Shared by an intent and its outcome.
    pub id: String,
    /// `intent` or `outcome`.
    pub phase: String,
    /// Unix seconds, wall clock.
    pub time: i64,
    /// The operating-system user at the keyboard.
    pub operator: String,
    /// Who the scheduler was told we are.
    pub scheduler_user: Option<String>,
    pub host: String,
    pub cluster: String,
    pub source: String,
    pub action: String,
    pub target: String,
    pub reason: Option<String>,
    /// The preview the operator confirmed, in one line.
    pub preview: String,
    pub outcome: Option<Outcome>,
}

/// `$XDG_STATE_HOME/nightshift/audit.jsonl`, else `~/.local/state/…`.
pub fn default_path() -> Option<PathBuf> {
    crate::logging::default_path().map(|p| p.with_file_name("audit.jsonl"))
}

#[derive(Debug, Clone)]
pub struct AuditLog {
    pub path: PathBuf,
}

impl AuditLog {
    pub fn new(path: PathBuf) -> AuditLog {
        AuditLog { path }
    }

    /// Appends one record and syncs it to disk before returning.
    pub fn write(&self, rec: &Record) -> Result<(), String> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let mut line = serde_json::to_string(rec).map_err(|e| format!("audit record: {e}"))?;
        line.push('\n');
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(|e| format!("cannot open the audit log {}: {e}", self.path.display()))?;
        f.write_all(line.as_bytes())
            .map_err(|e| format!("cannot write the audit log {}: {e}", self.path.display()))?;
        f.sync_all()
            .map_err(|e| format!("cannot sync the audit log {}: {e}", self.path.display()))
    }

    /// Every record; lines that do not parse are skipped, not fatal.
    pub fn read(&self) -> Vec<Record> {
        read_path(&self.path)
    }

    /// Intents with no outcome: actions interrupted (a dropped SSH session,
    /// a killed process) whose effect nobody saw.
    pub fn unfinished(&self) -> Vec<Record> {
        let all = self.read();
        let done: std::collections::HashSet<&str> = all
            .iter()
            .filter(|r| r.phase == "outcome")
            .map(|r| r.id.as_str())
            .collect();
        all.iter()
            .filter(|r| r.phase == "intent" && !done.contains(r.id.as_str()))
            .cloned()
            .collect()
    }

    /// Nodes taken out of service (cordon, drain) since `since`.
    pub fn nodes_taken_out_since(&self, since: i64) -> u32 {
        self.read()
            .iter()
            .filter(|r| {
                r.phase == "outcome"
                    && r.time >= since
                    && (r.action == "drain" || r.action == "cordon")
            })
            .filter(|r| r.outcome.as_ref().is_some_and(|o| o.ok && !o.no_op))
            .count() as u32
    }
}

fn read_path(path: &Path) -> Vec<Record> {
    std::fs::read_to_string(path)
        .map(|text| {
            text.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect()
        })
        .unwrap_or_default()
}

pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

pub fn os_user() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".into())
}

pub fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

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
