//! The autopilot's state every process on one audit log shares (issue
//! 61): whether a person paused it (a `paused`/`resumed` record in the
//! audit log, naming who), and the running autopilot's last round (a
//! status file beside the log, rewritten each round), for the consoles.

use crate::audit::{self, AuditError, AuditLog};
use crate::model::audit::Record;
use crate::model::{AutopilotPaused, AutopilotRound, AutopilotStatus, Phase};
use std::path::PathBuf;

/// The status file of `cluster`'s autopilot: beside the audit log.
pub fn status_path(log: &AuditLog, cluster: &str) -> PathBuf {
    let safe: String = cluster
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    let dir = log
        .path
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    dir.join(format!("autopilot-{safe}.json"))
}

/// Pauses (`pause`) or resumes the autopilot of `cluster` for every
/// process on this log: a record naming `operator`, and `why`.
pub fn switch(
    log: &AuditLog,
    pause: bool,
    operator: String,
    cluster: &str,
    why: &str,
) -> Result<(), AuditError> {
    let rec = Record {
        id: audit::new_id(),
        phase: if pause { Phase::Paused } else { Phase::Resumed },
        time: audit::now(),
        operator,
        host: crate::host::name(),
        cluster: cluster.to_string(),
        source: "autopilot".into(),
        action: "autopilot".into(),
        preview: if pause {
            "autopilot paused: no policy sends anything until it is resumed".into()
        } else {
            "autopilot resumed".into()
        },
        note: (!why.is_empty()).then(|| why.to_string()),
        ..Record::default()
    };
    log.write(&rec)
}

/// Who paused `cluster`'s autopilot, from `records` (the last pause not
/// followed by a resume; one with no cluster named holds for all).
pub fn paused_in(records: &[Record], cluster: &str) -> Option<AutopilotPaused> {
    let mut paused = None;
    for r in records
        .iter()
        .filter(|r| r.cluster == cluster || r.cluster.is_empty())
    {
        match r.phase {
            Phase::Paused => {
                paused = Some(AutopilotPaused {
                    by: r.operator.clone(),
                    host: r.host.clone(),
                    at: r.time,
                    why: r.note.clone().unwrap_or_default(),
                })
            }
            Phase::Resumed => paused = None,
            _ => {}
        }
    }
    paused
}

/// Writes the round (to a new file, then renamed over the old one: a
/// reader never sees half of it).
pub fn write_round(log: &AuditLog, round: &AutopilotRound) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = status_path(log, &round.cluster);
    let tmp = path.with_extension(format!("json.{}", std::process::id()));
    let body = serde_json::to_vec(round).map_err(std::io::Error::other)?;
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)?;
    f.write_all(&body)?;
    f.sync_all()?;
    std::fs::rename(&tmp, &path)
}

/// The most of a status file read.
const MAX_STATUS_BYTES: u64 = 1 << 20;

/// The last round written for `cluster`, when there is one a console can
/// trust: a regular file (no link followed, no FIFO waited on) that no
/// other user owns or can write, of at most 1 MiB.
pub fn read_round(log: &AuditLog, cluster: &str) -> Result<Option<AutopilotRound>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let path = status_path(log, cluster);
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let meta = f
        .metadata()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{}: not a regular file", path.display()));
    }
    if let Some(why) = audit::untrusted(&meta) {
        return Err(format!("{}: {why}: not read", path.display()));
    }
    let mut body = Vec::new();
    f.take(MAX_STATUS_BYTES)
        .read_to_end(&mut body)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// What a console shows of the autopilot of `cluster`; the status file's
/// trouble, when it could not be read, beside it.
pub fn status(log: &AuditLog, cluster: &str) -> (AutopilotStatus, Option<String>) {
    let reading = log.reading();
    let paused = paused_in(&reading.records, cluster);
    match read_round(log, cluster) {
        Ok(round) => (AutopilotStatus { round, paused }, None),
        Err(e) => (
            AutopilotStatus {
                round: None,
                paused,
            },
            Some(e),
        ),
    }
}
